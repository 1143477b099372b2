// Running an example's calls on a module, as the state tests compare them.
import type { Module, Tensor } from '../../lib/index.js';
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
