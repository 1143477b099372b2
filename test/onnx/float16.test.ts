// float16 models: weights widened to float32 at import, every op computed in
// float32, float16 graph inputs and outputs converted at the program's edges
// (the program's boundary keeps float16), compared with onnxruntime within
// float16 tolerance.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { float16ToNumber, numberToFloat16 } from '../../lib/dtypes.js';
import { Module, Tensor } from '../../lib/index.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { Lcg } from '../../lib/random.js';
import { onnxModel, type TestGraph } from './onnx-writer.js';

const F16 = 10;
const seeded = (count: number, seed: number, scale = 1): number[] => {
  const random = new Lcg(seed);
  return Array.from({ length: count }, () => random.signed(scale));
};

/** Values of onnxruntime float16 data (a Uint16Array of bit patterns, or a Float16Array where the runtime has one). */
function halfValues(data: unknown): number[] {
  if (data instanceof Uint16Array) return Array.from(data, float16ToNumber);
  return Array.from(data as ArrayLike<number>, Number);
}

/** Within float16 rounding of the larger magnitude (a few units in the last place), or a small absolute slack near zero. */
function expectHalfClose(actual: readonly number[], expected: readonly number[]): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((a, i) => {
    const e = expected[i]!;
    expect(Math.abs(a - e), `element ${i}: ${a} vs ${e}`).toBeLessThanOrEqual(4 * 2 ** -11 * Math.max(Math.abs(e), 1));
  });
}

describe('float16 bit patterns', () => {
  it('round to nearest even and keep -0, ±Inf, NaN, subnormals and the largest finite value', () => {
    expect(numberToFloat16(1)).toBe(0x3c00);
    expect(numberToFloat16(-2)).toBe(0xc000);
    expect(numberToFloat16(-0)).toBe(0x8000);
    expect(numberToFloat16(65504)).toBe(0x7bff);
    expect(numberToFloat16(65520)).toBe(0x7c00);
    expect(numberToFloat16(-Infinity)).toBe(0xfc00);
    expect(numberToFloat16(2 ** -24)).toBe(0x0001);
    expect(numberToFloat16(1 + 2 ** -11)).toBe(0x3c00); // a tie goes to the even mantissa
    expect(numberToFloat16(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(Number.isNaN(float16ToNumber(numberToFloat16(NaN)))).toBe(true);
    expect(Object.is(float16ToNumber(0x8000), -0)).toBe(true);
    expect(float16ToNumber(0x7bff)).toBe(65504);
    expect(float16ToNumber(0x0001)).toBe(2 ** -24);
    expect(float16ToNumber(0xfc00)).toBe(-Infinity);
    for (let bits = 0; bits < 0x7c00; bits += 37) expect(numberToFloat16(float16ToNumber(bits))).toBe(bits);
  });
});

describe('float16 models compute in float32 with float16 at the edges', () => {
  // y = sigmoid(relu(x @ w + b) * 0.5), everything float16: inputs, weights, a Constant node and the output.
  const HALF_GRAPH: TestGraph = {
    nodes: [
      { op: 'MatMul', inputs: ['x', 'w'], outputs: ['mm'] },
      { op: 'Add', inputs: ['mm', 'b'], outputs: ['biased'] },
      { op: 'Relu', inputs: ['biased'], outputs: ['r'] },
      { op: 'Constant', inputs: [], outputs: ['half'], tensors: { value: { name: 'half', dims: [], floats: [0.5], float16: true } } },
      { op: 'Mul', inputs: ['r', 'half'], outputs: ['scaled'] },
      { op: 'Sigmoid', inputs: ['scaled'], outputs: ['y'] },
    ],
    inputs: [{ name: 'x', type: F16, shape: [2, 8] }],
    outputs: [{ name: 'y', type: F16, shape: [2, 3] }],
    initializers: [
      { name: 'w', dims: [8, 3], floats: seeded(24, 5), float16: true },
      { name: 'b', dims: [3], floats: [0.25, -0.5, 1], float16: true },
    ],
  };

  it('float16 inputs and outputs stay float16 at the program boundary and match onnxruntime', async () => {
    const bytes = onnxModel(HALF_GRAPH);
    const imported = importOnnx(bytes);
    expect(imported.inputs).toEqual([{ name: 'x', dtype: 'float16', shape: [2, 8] }]);
    expect(imported.outputs).toEqual([{ name: 'y', dtype: 'float16', shape: [2, 3] }]);
    const x = Uint16Array.from(seeded(16, 9, 2), numberToFloat16);
    const module = await Module.load(imported.bytes);
    const [y] = (await module.execute('forward', [new Tensor('float16', [2, 8], x)])) as Tensor[];
    module.dispose();
    expect(y!.dtype).toBe('float16');
    const session = await ort.InferenceSession.create(bytes);
    const expected = (await session.run({ x: new ort.Tensor('float16', x, [2, 8]) })).y!;
    await session.release();
    expect(expected.type).toBe('float16');
    const values = halfValues(expected.data);
    // The graph is not degenerate: some rows pass the Relu.
    expect(values.filter((v) => v > 0.55).length).toBeGreaterThan(1);
    expectHalfClose(Array.from(y!.data as Uint16Array, float16ToNumber), values);
  });

  // What converters write for a float16 model with float32 edges: Casts around
  // a float16 body, here appended after the nodes that read them.
  const CAST_EDGES: TestGraph = {
    nodes: [
      { op: 'Conv', inputs: ['x16', 'w', 'b'], outputs: ['conv'], ints: { pads: [1, 1, 1, 1] } },
      { op: 'Relu', inputs: ['conv'], outputs: ['r16'] },
      { op: 'Cast', inputs: ['r16'], outputs: ['y'], name: 'graph_output_cast', int: { to: 1 } },
      { op: 'Cast', inputs: ['x'], outputs: ['x16'], name: 'graph_input_cast', int: { to: F16 } },
    ],
    inputs: [{ name: 'x', type: 1, shape: [1, 2, 5, 5] }],
    outputs: [{ name: 'y', type: 1, shape: [1, 3, 5, 5] }],
    initializers: [
      { name: 'w', dims: [3, 2, 3, 3], floats: seeded(54, 11, 0.5), float16: true },
      { name: 'b', dims: [3], floats: [0.1, -0.2, 0.3], float16: true },
    ],
  };

  for (const xnnpack of [true, false]) {
    it(`float32 edges around a float16 conv (${xnnpack ? 'XNNPACK' : 'portable'}) match onnxruntime`, async () => {
      const bytes = onnxModel(CAST_EDGES);
      const imported = importOnnx(bytes, { xnnpack });
      expect(imported.inputs).toEqual([{ name: 'x', dtype: 'float32', shape: [1, 2, 5, 5] }]);
      expect(imported.outputs).toEqual([{ name: 'y', dtype: 'float32', shape: [1, 3, 5, 5] }]);
      // Computed in float32, the conv reaches the delegate.
      if (xnnpack) expect(imported.calls.delegate).toBeGreaterThan(0);
      const x = Float32Array.from(seeded(50, 13, 3));
      const module = await Module.load(imported.bytes);
      const [y] = (await module.execute('forward', [new Tensor('float32', [1, 2, 5, 5], x)])) as Tensor[];
      module.dispose();
      const session = await ort.InferenceSession.create(bytes);
      const expected = Array.from((await session.run({ x: new ort.Tensor('float32', x, [1, 2, 5, 5]) })).y!.data as Float32Array);
      await session.release();
      expect(expected.some((v) => v > 0.5)).toBe(true);
      expectHalfClose(Array.from(y!.data as Float32Array), expected);
    });
  }
});
