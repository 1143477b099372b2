// Reads .pte bytes back for the export tests: the extended header parsed by
// hand, the FlatBuffer through the generated reader (not through the writer).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import * as flatbuffers from 'flatbuffers';

import { ExecutionPlan, KernelTypes, Program, Tensor } from '../../lib/generated/program/program_generated.js';
import { repoRoot } from '../helpers/testdata.js';

export interface ExtendedHeader {
  magic: string;
  length: number;
  programSize: number;
  segmentBaseOffset: number;
  segmentDataSize: number | undefined;
}

export function readExtendedHeader(bytes: Uint8Array): ExtendedHeader | null {
  const magic = new TextDecoder().decode(bytes.subarray(8, 12));
  if (magic !== 'eh00') return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const length = view.getUint32(12, true);
  return {
    magic,
    length,
    programSize: Number(view.getBigUint64(16, true)),
    segmentBaseOffset: Number(view.getBigUint64(24, true)),
    segmentDataSize: length >= 32 ? Number(view.getBigUint64(32, true)) : undefined,
  };
}

export function rootOffset(bytes: Uint8Array): number {
  return new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
}

export function readProgram(bytes: Uint8Array): Program {
  return Program.getRootAsProgram(new flatbuffers.ByteBuffer(bytes));
}

export function methodByName(program: Program, name: string): ExecutionPlan {
  for (let i = 0; i < program.executionPlanLength(); i++) {
    const plan = program.executionPlan(i)!;
    if (plan.name() === name) return plan;
  }
  throw new Error(`no method ${name}`);
}

export function methodNames(program: Program): string[] {
  return Array.from({ length: program.executionPlanLength() }, (_, i) => program.executionPlan(i)!.name()!);
}

export function tensorAt(plan: ExecutionPlan, index: number): Tensor | null {
  const value = plan.values(index)!;
  if (value.valType() !== KernelTypes.Tensor) return null;
  return value.val(new Tensor()) as Tensor;
}

export function bufferSizes(plan: ExecutionPlan): number[] {
  return Array.from({ length: plan.nonConstBufferSizesLength() }, (_, i) => Number(plan.nonConstBufferSizes(i)!));
}

/** Bytes of segment `index` in the file. */
export function segmentBytes(bytes: Uint8Array, program: Program, index: number): Uint8Array {
  const header = readExtendedHeader(bytes);
  if (header === null) throw new Error('file has no extended header, so no segment data');
  const segment = program.segments(index)!;
  const start = header.segmentBaseOffset + Number(segment.offset());
  return bytes.subarray(start, start + Number(segment.size()));
}

export function operatorKeys(plan: ExecutionPlan): string[] {
  return Array.from({ length: plan.operatorsLength() }, (_, i) => {
    const op = plan.operators(i)!;
    return op.overload() ? `${op.name()}.${op.overload()}` : op.name()!;
  });
}

/** Decodes a program with flatc against schema/program.fbs and returns the JSON. */
export function decodeWithFlatc(bytes: Uint8Array): Record<string, unknown> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-export-'));
  try {
    const file = path.join(dir, 'program.pte');
    fs.writeFileSync(file, bytes);
    const result = spawnSync(
      'flatc',
      ['--json', '--strict-json', '--raw-binary', '-o', dir, path.join(repoRoot, 'schema/program.fbs'), '--', file],
      {
        encoding: 'utf8',
      },
    );
    if (result.error) throw new Error(`could not run flatc: ${result.error.message}`);
    if (result.status !== 0) throw new Error(`flatc failed (${result.status}): ${result.stderr}`);
    return JSON.parse(fs.readFileSync(path.join(dir, 'program.json'), 'utf8')) as Record<string, unknown>;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
