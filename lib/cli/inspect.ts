// `etna inspect FILE [--json]`: what a program holds, without running it, or
// the tensors of an external data file.
import fs from 'node:fs';

import type { NativeCpuInfo } from '../binding.js';
import { formatBytes, table } from '../format.js';
import { native } from '../native.js';
import { Program } from '../program.js';
import type { ProgramDescription, ValueDescription } from '../program-types.js';
import { type Command, type CommandSpec, UsageError } from './command.js';
import { isExternalData, readExternalData, type ExternalDataDescription } from './external-data.js';
import { formatValue } from './format.js';

export interface InspectIO {
  name: string;
  kind: string;
  dtype?: string;
  shape?: number[];
  dynamism?: string;
  planned?: boolean;
}

function ioJson(value: ValueDescription): InspectIO {
  if (value.kind !== 'tensor') return { name: value.name, kind: value.kind };
  return { name: value.name, kind: 'tensor', dtype: value.dtype, shape: value.shape, dynamism: value.dynamism, planned: value.planned };
}

/** The JSON document `etna inspect --json` prints (docs/cli.md). */
export function inspectJson(file: string, description: ProgramDescription): object {
  const header = description.extendedHeader;
  return {
    file,
    identifier: description.identifier,
    extendedHeader: header
      ? { headerLength: header.headerLength, programSize: header.programSize, segmentBaseOffset: header.segmentBaseOffset }
      : null,
    segments: description.segments,
    namedDataKeys: description.namedDataKeys,
    constants: description.constants,
    delegates: description.delegates,
    methods: description.methods.map((method) => ({
      name: method.name,
      inputs: method.inputs.map(ioJson),
      outputs: method.outputs.map(ioJson),
      operators: method.operators,
      delegates: method.delegates,
      instructions: method.instructions,
      memoryPlan: method.memoryPlan,
      constantBytes: method.constantBytes,
      state: method.state,
    })),
  };
}

export function inspectText(file: string, fileSize: number, description: ProgramDescription): string {
  const header = description.extendedHeader;
  const headerText = header
    ? `${header.headerLength} bytes, program ${formatBytes(header.programSize)}, segments at byte ${header.segmentBaseOffset}`
    : 'none';
  const lines = [
    `${file}: ExecuTorch program (${description.identifier}), ${formatBytes(fileSize)}`,
    `  extended header: ${headerText}`,
    `  segments: ${description.segments}, named data keys: ${description.namedDataKeys}, constants: ${description.constants.count} ` +
      `(${formatBytes(description.constants.bytes)})`,
  ];
  for (const delegate of description.delegates) {
    lines.push(`  delegate ${delegate.id}: ${formatBytes(delegate.bytes)} ${delegate.location}`);
  }
  for (const method of description.methods) {
    const arenas = method.memoryPlan
      .slice(1)
      .map((bytes, i) => `arena ${i + 1}: ${formatBytes(bytes)}`)
      .join(', ');
    const instructions = Object.entries(method.instructions)
      .map(([kind, count]) => `${kind} x${count}`)
      .join(', ');
    lines.push('', `method ${method.name}`);
    lines.push(
      table([
        ['  inputs', method.inputs.map(formatValue).join(', ') || '(none)'],
        ['  outputs', method.outputs.map(formatValue).join(', ') || '(none)'],
        ['  operators', method.operators.join(', ') || '(none)'],
        ['  delegates', method.delegates.join(', ') || '(none)'],
        ['  instructions', instructions || '(none)'],
        ['  memory plan', arenas || '(nothing planned)'],
        ['  constants', formatBytes(method.constantBytes)],
        ...method.state.map((t, i) => [
          i === 0 ? '  state (mem_id 2)' : '',
          `${t.name ?? `values[${t.value}]`} ${t.dtype}[${t.shape.join('x')}] at ${t.offset}, ${formatBytes(t.bytes)}`,
        ]),
      ]),
    );
  }
  return lines.join('\n');
}

/** The first bytes of `file`, or nothing when it cannot be read (Program.load then says why). */
function fileStart(file: string): Uint8Array {
  const start = new Uint8Array(8);
  try {
    const fd = fs.openSync(file, 'r');
    try {
      return start.subarray(0, fs.readSync(fd, start, 0, start.length, 0));
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return new Uint8Array(0);
  }
}

export function externalDataText(file: string, fileSize: number, description: ExternalDataDescription): string {
  const rows = description.tensors.map((tensor) => [
    `  ${tensor.key}`,
    tensor.dtype === null ? '(no layout)' : `${tensor.dtype}[${tensor.shape!.join('x')}]`,
    formatBytes(tensor.bytes),
  ]);
  return [
    `${file}: external data (${description.identifier}), ${formatBytes(fileSize)}, ${description.tensors.length} tensors in ` +
      `${description.segments} segments`,
    ...(rows.length > 0 ? [table(rows)] : []),
  ].join('\n');
}

/** `etna inspect --cpu`: the CPU's vector features and each kernel family's path, a line each. */
export function cpuText(info: NativeCpuInfo): string {
  return [
    `cpu: ${info.arch}, features: ${info.features.join(' ') || '(none)'}`,
    table(Object.entries(info.paths).map(([family, path]) => [`  ${family}`, path])),
  ].join('\n');
}

const INSPECT_SPEC: CommandSpec = {
  name: 'inspect',
  synopsis: '[FILE]',
  brief: "describe a .pte program (methods, IO, operators, memory plan), list a .ptd file's tensors, or the CPU's kernels",
  summary:
    'Verifies a .pte program without running it and describes its methods, inputs, outputs,\n' +
    'operators, delegates and memory plans; for a .ptd external data file, lists its tensors.\n' +
    "With --cpu (and no FILE), reports the CPU's vector features and the path each kernel family runs on.",
  options: [
    { name: 'json', help: 'print one JSON object' },
    { name: 'cpu', help: "report the CPU's features and kernel paths instead of a file" },
  ],
};

function runInspectCpu(json: boolean): number {
  const info = native().cpuInfo();
  console.log(json ? JSON.stringify(info, null, 2) : cpuText(info));
  return 0;
}

export function runInspect(file: string, json: boolean): number {
  if (isExternalData(fileStart(file))) {
    const bytes = new Uint8Array(fs.readFileSync(file));
    const description = readExternalData(bytes);
    console.log(json ? JSON.stringify({ file, ...description }, null, 2) : externalDataText(file, bytes.length, description));
    return 0;
  }
  const program = Program.load(file);
  const description = program.describe();
  console.log(json ? JSON.stringify(inspectJson(file, description), null, 2) : inspectText(file, program.handle.fileSize, description));
  return 0;
}

export const INSPECT: Command = {
  spec: INSPECT_SPEC,
  run: (args) => {
    const file = args.positionals[0];
    if (args.flag('cpu')) {
      if (file !== undefined) throw new UsageError('--cpu takes no FILE');
      return runInspectCpu(args.flag('json'));
    }
    if (file === undefined) throw new UsageError('expected a FILE (or --cpu)');
    return runInspect(file, args.flag('json'));
  },
};
