// The native loader accepts every written program and reads back what the
// authoring side planned: method signatures, memory plans, operators, constants.
import { spawnSync } from 'node:child_process';

import { describe, expect, it } from 'vitest';

import { dtypeInfo, type ProgramBuilder, type ExportResult } from '../../lib/export/index.js';
import { buildExample, EXAMPLE_NAMES } from '../../lib/tools/examples/index.js';
import { Program } from '../../lib/program.js';
import type { ProgramDescription } from '../../lib/program-types.js';
import { repoRoot } from '../helpers/testdata.js';
import { reluToBackend, syntheticProgram } from './programs.js';

let addonProblem: string | null | undefined;

// A broken build (e.g. a missing symbol) kills the process that loads it, so
// try it in a child first and fail with a message instead.
function checkAddonLoads(): void {
  if (addonProblem === undefined) {
    const probe = spawnSync(process.execPath, ['-e', `require('node-gyp-build')(${JSON.stringify(repoRoot)})`], {
      cwd: repoRoot,
      encoding: 'utf8',
    });
    addonProblem = probe.status === 0 ? null : (probe.stderr || probe.stdout).trim().split('\n').slice(-3).join(' ');
  }
  if (addonProblem !== null) throw new Error(`the native addon does not load (build it with npm run build:native): ${addonProblem}`);
}

function load(bytes: Uint8Array): ProgramDescription {
  checkAddonLoads();
  return Program.load(bytes).describe();
}

/** Checks describe() against the builder's graphs and plan. */
function expectDescriptionMatches(builder: ProgramBuilder, result: ExportResult, description: ProgramDescription): void {
  expect(description.identifier).toBe('ET12');
  const header =
    result.layout.headerLength === 0
      ? null
      : {
          headerLength: 32,
          programSize: result.layout.programSize,
          segmentBaseOffset: result.layout.segmentBaseOffset,
          segmentDataSize: result.layout.segmentDataSize,
        };
  expect(description.extendedHeader).toEqual(header);
  expect(description.segments).toBe(result.layout.segments.length);
  const graph = builder.programGraph;
  expect(description.methods.map((m) => m.name)).toEqual(graph.methods.map((m) => m.name));
  graph.methods.forEach((method, index) => {
    const described = description.methods[index]!;
    const plan = result.plan.methods[index]!;
    expect(described.memoryPlan, method.name).toEqual([...plan.nonConstBufferSizes]);
    const placement = new Map(plan.placements.map((p) => [p.value, p]));
    const expectTensors = (values: readonly number[], actual: typeof described.inputs, what: string) => {
      expect(actual, `${method.name} ${what}`).toHaveLength(values.length);
      values.forEach((value, i) => {
        const node = method.tensorNode(value);
        const where = placement.get(value);
        expect(actual[i], `${method.name} ${what} ${i}`).toMatchObject({
          kind: 'tensor',
          dtype: node.dtype,
          shape: [...node.shape],
          planned: true,
          memoryId: where?.memoryId,
          memoryOffset: where?.offset,
        });
      });
    };
    expectTensors(method.inputs, described.inputs, 'inputs');
    expectTensors(method.outputs, described.outputs, 'outputs');
    const kernels = method.instructions.filter((i) => i.kind === 'kernel');
    const operators = [
      ...new Set(kernels.map((i) => (i.kind === 'kernel' && i.overload ? `${i.name}.${i.overload}` : (i as { name: string }).name))),
    ];
    expect(described.operators, method.name).toEqual(operators);
    const counts: Record<string, number> = {};
    if (kernels.length > 0) counts.KernelCall = kernels.length;
    const delegateCalls = method.instructions.length - kernels.length;
    if (delegateCalls > 0) counts.DelegateCall = delegateCalls;
    expect(described.instructions, method.name).toEqual(counts);
    const constants = new Set(
      method.values.flatMap((v) => (v.kind === 'tensor' && v.origin.kind === 'constant' ? [v.origin.constant] : [])),
    );
    const constantBytes = [...constants].reduce((sum, c) => sum + c.shape.reduce((n, s) => n * s, 1) * dtypeInfo(c.dtype).byteSize, 0);
    expect(described.constantBytes, method.name).toBe(constantBytes);
  });
}

describe('the native loader reads written programs', () => {
  it.each(EXAMPLE_NAMES)('%s', (name) => {
    const builder = buildExample(name);
    const result = builder.export();
    expectDescriptionMatches(builder, result, load(result.bytes));
  });

  it('a program with initial values, a delegate and named data', () => {
    const builder = syntheticProgram();
    const result = builder.export({ lowering: [reluToBackend] });
    const description = load(result.bytes);
    expectDescriptionMatches(builder, result, description);
    expect(description.namedDataKeys).toBe(3);
    expect(description.delegates).toEqual([{ id: 'TestBackend', location: 'segment', bytes: 'relu payload for 3 args'.length }]);
  });

  it('rejects a written program whose root offset was damaged', () => {
    checkAddonLoads();
    const bytes = buildExample('gru-stream').toPte();
    new DataView(bytes.buffer, bytes.byteOffset).setUint32(0, bytes.byteLength + 64, true);
    expect(() => load(bytes)).toThrow(expect.objectContaining({ code: 'INVALID_PROGRAM' }));
  });
});
