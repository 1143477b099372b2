// The ONNX emitter writes each method of an authored program as its own
// model; onnxruntime-node, run one session per method with the state passed
// in and out, reproduces the TypeScript references.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { buildExample, EXAMPLE_NAMES, exampleReference, ProgramBuilder } from '../lib/export/index.js';
import { builderToOnnx, OrtProgramRunner } from '../lib/export/onnx/index.js';

function maxError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!) / Math.max(1, Math.abs(expected[i]!)));
  return worst;
}

describe('ONNX emitter on onnxruntime-node', () => {
  for (const name of EXAMPLE_NAMES) {
    it(`${name}: every call of the reference session matches within 1e-4`, async () => {
      const runner = await OrtProgramRunner.create(ort, builderToOnnx(buildExample(name)));
      const reference = exampleReference(name);
      let worst = 0;
      for (const call of reference.session()) {
        const want = reference.execute(call.method, call.inputs);
        const got = await runner.execute(call.method, call.inputs);
        expect(got.map((t) => t.shape)).toEqual(want.map((t) => [...t.shape]));
        want.forEach((w, i) => (worst = Math.max(worst, maxError(got[i]!.data as Float32Array, w.data as Float32Array))));
      }
      expect(worst).toBeLessThan(1e-4);
      await runner.release();
    });
  }

  it('kv-decoder: the caches are explicit state inputs and outputs of prefill and decode; reset only writes them', () => {
    const onnx = builderToOnnx(buildExample('kv-decoder'));
    const method = (n: string) => onnx.methods.find((m) => m.method === n)!;
    const caches = onnx.state.map((s) => s.name);
    expect(caches).toHaveLength(4);
    for (const n of ['prefill', 'decode']) {
      expect(method(n).stateInputs.map((s) => s.buffer).sort()).toEqual([...caches].sort());
      expect(method(n).stateOutputs.map((s) => s.buffer).sort()).toEqual([...caches].sort());
      expect(method(n).inputs.map((i) => i.dtype)).toEqual(['int64', 'int64']);
    }
    expect(method('reset').stateInputs).toEqual([]);
    expect(method('reset').stateOutputs).toHaveLength(4);
    // Each session carries its own copy of the weights it uses.
    expect(method('decode').initializerBytes).toBeGreaterThan(500_000);
  });

  it('state carried between calls changes the result: decode after prefill differs from decode after reset', async () => {
    const runner = await OrtProgramRunner.create(ort, builderToOnnx(buildExample('kv-decoder')));
    const reference = exampleReference('kv-decoder');
    const [reset, prefill, , decode] = reference.session();
    await runner.execute(reset!.method, reset!.inputs);
    await runner.execute(prefill!.method, prefill!.inputs);
    const afterPrefill = (await runner.execute(decode!.method, decode!.inputs))[0]!.data as Float32Array;
    runner.resetState();
    const fresh = (await runner.execute(decode!.method, decode!.inputs))[0]!.data as Float32Array;
    expect(maxError(afterPrefill, fresh)).toBeGreaterThan(1e-3);
    await runner.release();
  });

  it('names the method and operator it cannot translate', () => {
    const program = new ProgramBuilder();
    const weight = program.constant('w', 'float32', [1, 1, 1, 1], [1]);
    program.method('convolve', (m) => m.output(m.conv2d(m.input('x', 'float32', [1, 1, 2, 2]), weight)));
    expect(() => builderToOnnx(program)).toThrow(/convolve.*convolution/);
  });
});
