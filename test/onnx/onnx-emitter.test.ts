// The ONNX emitter writes each method of an authored program as its own
// model; onnxruntime-node, run one session per method with the state passed
// in and out, reproduces the TypeScript references.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { ProgramBuilder } from '../../lib/export/index.js';
import { buildExample, EXAMPLE_NAMES, exampleReference, SeededRandom } from '../../lib/tools/examples/index.js';
import { Module, Tensor } from '../../lib/index.js';
import { builderToOnnx, OrtProgramRunner } from '../../lib/tools/onnx-emitter/index.js';

function maxError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++)
    worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!) / Math.max(1, Math.abs(expected[i]!)));
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
      expect(
        method(n)
          .stateInputs.map((s) => s.buffer)
          .sort(),
      ).toEqual([...caches].sort());
      expect(
        method(n)
          .stateOutputs.map((s) => s.buffer)
          .sort(),
      ).toEqual([...caches].sort());
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

  it('translates convolution, constant padding, index_select, mean, full and clone the way etna runs them', async () => {
    const build = (): ProgramBuilder => {
      const program = new ProgramBuilder();
      const random = new SeededRandom(5);
      const weight = program.constant('w', 'float32', [3, 2, 3], random.uniform(18, 0.5));
      const bias = program.constant('b', 'float32', [3], random.uniform(3, 0.5));
      const order = program.constant('order', 'int64', [4], [3, 0, 2, 1]);
      program.method('forward', (m) => {
        const tensor = (shape: number[]) => m.graph.addTensor('float32', shape);
        const padded = tensor([1, 2, 11]);
        m.kernel('aten::constant_pad_nd.out', [m.input('x', 'float32', [1, 2, 8]), { intList: [2, 1] }, { double: 0.5 }, padded]);
        const convolved = tensor([1, 3, 5]);
        m.kernel('aten::convolution.out', [
          padded,
          weight,
          bias,
          { intList: [2] },
          { intList: [0] },
          { intList: [1] },
          { bool: false },
          { intList: [0] },
          { int: 1 },
          convolved,
        ]);
        const picked = tensor([1, 3, 4]);
        m.kernel('aten::index_select.out', [convolved, { int: 2 }, order, picked]);
        const mean = tensor([1, 3, 1]);
        m.kernel('aten::mean.out', [picked, { intList: [2] }, { bool: true }, null, mean]);
        const filled = tensor([1, 3, 1]);
        m.kernel('aten::full.out', [{ intList: [1, 3, 1] }, { double: 2 }, filled]);
        const copy = tensor([1, 3, 1]);
        m.kernel('aten::clone.out', [mean, null, copy]);
        m.output(m.add(copy, filled), picked);
      });
      return program;
    };
    const x = new SeededRandom(9).uniform(16, 1);
    const module = await Module.load(build().toPte());
    const want = module.executeSync('forward', [new Tensor('float32', [1, 2, 8], x)]) as Tensor[];
    const runner = await OrtProgramRunner.create(ort, builderToOnnx(build()));
    const got = await runner.execute('forward', [{ dtype: 'float32', shape: [1, 2, 8], data: x }]);
    expect(got.map((t) => t.shape)).toEqual([
      [1, 3, 1],
      [1, 3, 4],
    ]);
    got.forEach((t, i) => expect(maxError(t.data as Float32Array, want[i]!.data as Float32Array)).toBeLessThan(1e-6));
    await runner.release();
    await module.dispose();
  });

  it('names the method and operator it cannot translate', () => {
    const program = new ProgramBuilder();
    program.method('error_function', (m) => {
      const out = m.graph.addTensor('float32', [1, 4]);
      m.kernel('aten::erf.out', [m.input('x', 'float32', [1, 4]), out]);
      m.output(out);
    });
    expect(() => builderToOnnx(program)).toThrow(/error_function.*erf/);
  });
});
