// Several sessions (modules over one Program) share the program's packed
// XNNPACK weights; their calls, interleaved or in flight at once, give what
// each session gives when its module is the program's only one.
import { describe, expect, it } from 'vitest';

import { exportExample, KV_DECODER_CONFIG, kvDecoderSession, type ExampleCall } from '../lib/tools/examples/index.js';
import { Module, Program, Tensor } from '../lib/index.js';

const bytes = exportExample('kv-decoder', { xnnpack: true });
const SEEDS = [7, 8, 9];
const sessionCalls = (seed: number): ExampleCall[] => kvDecoderSession(KV_DECODER_CONFIG, seed);

function outputsOf(values: unknown[]): number[][] {
  return values.map((value) => Array.from((value as Tensor).data as Float32Array));
}

/** Each session on a module that is alone over its own Program. */
async function aloneOutputs(): Promise<number[][][][]> {
  const all: number[][][][] = [];
  for (const seed of SEEDS) {
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
    const pending = modules.map((module, i) =>
      sessionCalls(SEEDS[i]!).map((call) => module.execute(call.method, call.inputs)),
    );
    const got = await Promise.all(pending.map(async (calls) => (await Promise.all(calls)).map(outputsOf)));
    expect(got).toEqual(expected);
    for (const module of modules) expect(module.memoryReport().sharedPackedWeightBytes).toBeGreaterThan(0);
    await Promise.all(modules.map((module) => module.dispose()));
  });
});
