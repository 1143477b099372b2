// Running an example's calls on a module, as the state tests compare them.
import { expect } from 'vitest';

import { type Module, Tensor } from '../../lib/index.js';
import type { ExampleCall } from '../../lib/tools/examples/index.js';
import { argmax, worstDifference } from './logits.js';

/** Each call's float outputs, in order: what a session of the example gives. */
export async function outputsOf(module: Module, calls: readonly ExampleCall[]): Promise<number[][][]> {
  const outputs: number[][][] = [];
  for (const call of calls) {
    const values = await module.execute(call.method, call.inputs);
    outputs.push(values.map((value) => Array.from((value as Tensor).data as Float32Array)));
  }
  return outputs;
}

/** The prefill method's logits for `tokens` from position 0 (the two-method Llama layout). */
export async function prefillLogits(module: Module, tokens: readonly number[]): Promise<Float32Array> {
  const [out] = await module.execute('prefill', [Tensor.int64([1, tokens.length], [...tokens]), Tensor.int64([1], [0])]);
  return (out as Tensor).data as Float32Array;
}

/** The decode method's logits for `token` at `position`. */
export async function decodeLogits(module: Module, token: number, position: number): Promise<Float32Array> {
  const [out] = await module.execute('decode', [Tensor.int64([1, 1], [token]), Tensor.int64([1], [position])]);
  return (out as Tensor).data as Float32Array;
}

/**
 * `steps` greedy decode steps from `token` at `position` on the program and
 * on `reference`, each step's greedy token checked equal; each step's worst
 * logit difference.
 */
export async function greedyDecodeDifferences(
  module: Module,
  reference: { decode(token: number, position: number): Float32Array },
  token: number,
  position: number,
  steps: number,
): Promise<number[]> {
  const differences: number[] = [];
  for (let step = 0; step < steps; step++) {
    const want = reference.decode(token, position + step);
    const got = await decodeLogits(module, token, position + step);
    differences.push(worstDifference(got, want));
    expect(argmax(got), `step ${step}`).toBe(argmax(want));
    token = argmax(got);
  }
  return differences;
}
