// Several sessions (modules over one Program) share the program's packed
// XNNPACK weights and borrow their activation arena and workspace per call
// from the program's pools; their calls, interleaved or in flight at once,
// give what each session gives when its module is the program's only one.
import { describe, expect, it } from 'vitest';

import { exportExample, KV_DECODER_CONFIG, kvDecoderSession, type ExampleCall } from '../../lib/tools/examples/index.js';
import { buildKvDecoder, createKvDecoderWeights } from '../../lib/tools/examples/kv-decoder.js';
import { Module, Program, Tensor } from '../../lib/index.js';

const bytes = exportExample('kv-decoder', { xnnpack: true });
const SEEDS = [7, 8, 9];
const sessionCalls = (seed: number): ExampleCall[] => kvDecoderSession(KV_DECODER_CONFIG, seed);

function outputsOf(values: unknown[]): number[][] {
  return values.map((value) => Array.from((value as Tensor).data as Float32Array));
}

/** Each session on a module that is alone over its own Program. */
async function aloneOutputs(seeds: number[] = SEEDS): Promise<number[][][][]> {
  const all: number[][][][] = [];
  for (const seed of seeds) {
    const module = await Module.load(Program.load(bytes), { shareMemoryArenas: true });
    const outputs: number[][][] = [];
    for (const call of sessionCalls(seed)) outputs.push(outputsOf(await module.execute(call.method, call.inputs)));
    await module.dispose();
    all.push(outputs);
  }
  return all;
}

describe('sessions over one Program', () => {
  it('share packed weights, reported as shared while more than one module uses them', async () => {
    const program = Program.load(bytes);
    const first = await Module.load(program, { shareMemoryArenas: true });
    const alone = first.memoryReport();
    expect(alone.packedWeightBytes).toBeGreaterThan(0);
    expect(alone.sharedPackedWeightBytes).toBe(0);

    const second = await Module.load(program, { shareMemoryArenas: true });
    for (const module of [first, second]) {
      const report = module.memoryReport();
      expect(report.packedWeightBytes).toBe(alone.packedWeightBytes);
      expect(report.sharedPackedWeightBytes).toBe(alone.packedWeightBytes);
    }
    await first.dispose();
    expect(second.memoryReport().sharedPackedWeightBytes).toBe(0);
    expect(second.memoryReport().packedWeightBytes).toBe(alone.packedWeightBytes);
    await second.dispose();
  });

  it('interleaved calls give the outputs of modules loaded alone', async () => {
    const expected = await aloneOutputs();
    const program = Program.load(bytes);
    const modules = await Promise.all(SEEDS.map(() => Module.load(program, { shareMemoryArenas: true })));
    const sessions = SEEDS.map(sessionCalls);
    const got: number[][][][] = SEEDS.map(() => []);
    for (let step = 0; step < sessions[0]!.length; step++) {
      for (const [i, module] of modules.entries()) {
        const call = sessions[i]![step]!;
        got[i]!.push(outputsOf(await module.execute(call.method, call.inputs)));
      }
    }
    expect(got).toEqual(expected);
    await Promise.all(modules.map((module) => module.dispose()));
  });

  it('calls in flight at once give the outputs of modules loaded alone', async () => {
    const expected = await aloneOutputs();
    const program = Program.load(bytes);
    const modules = await Promise.all(SEEDS.map(() => Module.load(program, { shareMemoryArenas: true })));
    // Every call of every session is issued before any completes; each
    // module runs its own calls in order, the modules' calls run in parallel.
    const pending = modules.map((module, i) => sessionCalls(SEEDS[i]!).map((call) => module.execute(call.method, call.inputs)));
    const got = await Promise.all(pending.map(async (calls) => (await Promise.all(calls)).map(outputsOf)));
    expect(got).toEqual(expected);
    for (const module of modules) expect(module.memoryReport().sharedPackedWeightBytes).toBeGreaterThan(0);
    await Promise.all(modules.map((module) => module.dispose()));
  });

  it('eight sessions with every call in flight at once give the outputs of lone modules', async () => {
    const seeds = [11, 12, 13, 14, 15, 16, 17, 18];
    const expected = await aloneOutputs(seeds);
    const program = Program.load(bytes);
    const modules = await Promise.all(seeds.map(() => Module.load(program, { shareMemoryArenas: true })));
    const got = await Promise.all(
      modules.map(async (module, i) =>
        (await Promise.all(sessionCalls(seeds[i]!).map((call) => module.execute(call.method, call.inputs)))).map(outputsOf),
      ),
    );
    expect(got).toEqual(expected);
    await Promise.all(modules.map((module) => module.dispose()));
  });

  it('borrow their activation arena and workspace per call and own only their state', async () => {
    const program = Program.load(bytes);
    const module = await Module.load(program, { shareMemoryArenas: true });
    const report = module.memoryReport();
    const activations = report.arenas.find((arena) => arena.memoryId === 1)!;
    const state = report.arenas.find((arena) => arena.memoryId === 2)!;
    expect(activations.pooled).toBe(true);
    expect(state.pooled).toBe(false);
    expect(report.pooledArenaBytes).toBe(activations.bytes);
    expect(report.pooledWorkspaceBytes).toBe(report.workspaceBytes);
    expect(report.pooledWorkspaceBytes).toBeGreaterThan(0);
    expect(report.plannedBytes).toBe(activations.bytes + state.bytes);
    // Alone, its weights are its own; with a second module they become shared.
    expect(report.ownedBytes).toBe(state.bytes + report.packedWeightBytes);
    expect(report.sharedBytes).toBe(report.pooledArenaBytes + report.pooledWorkspaceBytes);
    const second = await Module.load(program, { shareMemoryArenas: true });
    const both = module.memoryReport();
    expect(both.ownedBytes).toBe(state.bytes);
    expect(both.sharedBytes).toBe(both.packedWeightBytes + both.pooledArenaBytes + both.pooledWorkspaceBytes);
    await Promise.all([module.dispose(), second.dispose()]);
  });

  it('reserve their state at load and cost its pages only as calls write them', async () => {
    // Eight layers: an 8 MiB state, of which at most the first huge page is touched at load.
    const deep = buildKvDecoder(createKvDecoderWeights({ ...KV_DECODER_CONFIG, layers: 8 })).export({ xnnpack: true }).bytes;
    const module = await Module.load(Program.load(deep), { shareMemoryArenas: true });
    const atLoad = module.memoryReport();
    const state = atLoad.arenas.find((arena) => arena.memoryId === 2)!;
    expect(state.bytes).toBeGreaterThanOrEqual(8 * 2 ** 20);
    expect(atLoad.untouchedBytes).toBeGreaterThan(state.bytes / 2);
    expect(atLoad.untouchedBytes).toBeLessThanOrEqual(state.bytes);
    await module.execute('prefill', [Tensor.int64([1, 8], [1, 2, 3, 4, 5, 6, 7, 8]), Tensor.int64([1], [0])]);
    const afterPrefill = module.memoryReport();
    expect(afterPrefill.untouchedBytes).toBeLessThan(atLoad.untouchedBytes);
    expect(afterPrefill.ownedBytes).toBe(atLoad.ownedBytes);
    await module.dispose();
  });

  it("'state' and unshared modules keep their own arenas and workspaces", async () => {
    const program = Program.load(bytes);
    for (const shareMemoryArenas of ['state', false] as const) {
      const module = await Module.load(program, { shareMemoryArenas });
      for (const call of sessionCalls(7).slice(0, 4)) await module.execute(call.method, call.inputs);
      const report = module.memoryReport();
      expect(report.arenas.length).toBeGreaterThan(0);
      for (const arena of report.arenas) expect(arena.pooled).toBe(false);
      expect(report.pooledArenaBytes).toBe(0);
      expect(report.pooledWorkspaceBytes).toBe(0);
      expect(report.workspaceBytes).toBeGreaterThan(0);
      expect(report.ownedBytes).toBe(
        report.plannedBytes + report.workspaceBytes + report.packedWeightBytes - report.sharedPackedWeightBytes,
      );
      await module.dispose();
    }
  });

  it('a call failing among calls in flight leaves the other sessions their lone outputs', async () => {
    const expected = await aloneOutputs();
    const program = Program.load(bytes);
    const modules = await Promise.all(SEEDS.map(() => Module.load(program, { shareMemoryArenas: true })));
    const failing = await Module.load(program, { shareMemoryArenas: true });
    const decode = sessionCalls(7)[3]!;
    const outOfRange = [decode.inputs[0]!, Tensor.int64([1], [100000])];
    const pending = modules.map((module, i) =>
      Promise.all(sessionCalls(SEEDS[i]!).map((call) => module.execute(call.method, call.inputs))),
    );
    const failures = [0, 1, 2].map(() => failing.execute('decode', outOfRange));
    for (const failure of failures) await expect(failure).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    expect((await Promise.all(pending)).map((outputs) => outputs.map(outputsOf))).toEqual(expected);
    // The failing session still runs, from its own state.
    for (const call of sessionCalls(7).slice(0, 4)) await failing.execute(call.method, call.inputs);
    await Promise.all([...modules, failing].map((module) => module.dispose()));
  });

  it('disposing a session while others run leaves them their lone outputs', async () => {
    const expected = await aloneOutputs();
    const program = Program.load(bytes);
    const modules = await Promise.all(SEEDS.map(() => Module.load(program, { shareMemoryArenas: true })));
    const leaving = await Module.load(program, { shareMemoryArenas: true });
    const leavingCalls = sessionCalls(21).map((call) => leaving.execute(call.method, call.inputs));
    const pending = modules.map((module, i) =>
      Promise.all(sessionCalls(SEEDS[i]!).map((call) => module.execute(call.method, call.inputs))),
    );
    const disposed = leaving.dispose();
    await Promise.all([disposed, ...leavingCalls]);
    await expect(leaving.execute('reset', [])).rejects.toMatchObject({ code: 'DISPOSED' });
    expect((await Promise.all(pending)).map((outputs) => outputs.map(outputsOf))).toEqual(expected);
    // A session made after it borrows what it gave back and gets its lone outputs.
    const later = await Module.load(program, { shareMemoryArenas: true });
    const got: number[][][] = [];
    for (const call of sessionCalls(SEEDS[0]!)) got.push(outputsOf(await later.execute(call.method, call.inputs)));
    expect(got).toEqual(expected[0]);
    await Promise.all([...modules, later].map((module) => module.dispose()));
  });
});
