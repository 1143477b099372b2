// Running an example's calls on a module, as the state tests compare them.
import { type Module, Tensor } from '../../lib/index.js';
import type { ExampleCall } from '../../lib/tools/examples/index.js';

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
