// Single ONNX operators on cases the differential tester found: NaN,
// infinities and extreme magnitudes as onnxruntime computes them, and
// geometries the XNNPACK delegate refuses.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { Module, Tensor } from '../../lib/index.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { onnxModel, type TestNode } from './onnx-writer.js';

const FLT_MAX = 3.4028234663852886e38;

type Feeds = Record<string, number[]>;

function model(node: Omit<TestNode, 'outputs'>, feeds: Feeds, floats: Record<string, number> = {}): Uint8Array {
  const runtime = Object.keys(feeds);
  return onnxModel({
    nodes: [{ ...node, outputs: ['y'] }],
    inputs: runtime.map((name) => ({ name, type: 1, shape: [feeds[name]!.length] })),
    outputs: [{ name: 'y', type: 1 }],
    initializers: Object.entries(floats).map(([name, v]) => ({ name, dims: [], floats: [v] })),
  });
}

async function etna(bytes: Uint8Array, feeds: Feeds, xnnpack: boolean): Promise<number[]> {
  const module = await Module.load(importOnnx(bytes, { xnnpack }).bytes);
  const [y] = await module.execute(
    'forward',
    Object.values(feeds).map((v) => Tensor.float32([v.length], v)),
  );
  await module.dispose();
  return (y as Tensor).toArray();
}

async function onnxruntime(bytes: Uint8Array, feeds: Feeds): Promise<number[]> {
  const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1 });
  const result = await session.run(
    Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, new ort.Tensor('float32', Float32Array.from(v), [v.length])])),
  );
  await session.release();
  return Array.from(result.y!.data as Float32Array);
}

/** Same NaN and infinity positions, finite values within `rtol`. */
function expectClose(actual: number[], expected: number[], rtol = 1e-6): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((a, i) => {
    const e = expected[i]!;
    if (Number.isNaN(e) || !Number.isFinite(e)) expect(a, `element ${i}`).toBe(e);
    else expect(Math.abs(a - e), `element ${i}: ${a} vs ${e}`).toBeLessThanOrEqual(rtol * Math.abs(e) + 1e-45);
  });
}

describe('special values through the importer', () => {
  it('Max and Min let NaN win from either operand', async () => {
    const feeds = { a: [1, NaN, 2, NaN], b: [NaN, 1, 1, NaN] };
    const max = model({ op: 'Max', inputs: ['a', 'b'] }, feeds);
    const min = model({ op: 'Min', inputs: ['a', 'b'] }, feeds);
    expect(await etna(max, feeds, false)).toEqual([NaN, NaN, 2, NaN]);
    expect(await etna(min, feeds, false)).toEqual([NaN, NaN, 1, NaN]);
    expect(await onnxruntime(max, feeds)).toEqual([NaN, NaN, 2, NaN]);
  });

  it('Sign keeps NaN', async () => {
    const feeds = { x: [NaN, 3, -2, 0, -Infinity] };
    const bytes = model({ op: 'Sign', inputs: ['x'] }, feeds);
    expect(await etna(bytes, feeds, false)).toEqual([NaN, 1, -1, 0, -1]);
    expect(await onnxruntime(bytes, feeds)).toEqual([NaN, 1, -1, 0, -1]);
  });

  it('Clip without a bound clamps infinities to the largest finite float32', async () => {
    const feeds = { x: [Infinity, -Infinity, 0, -5] };
    const unbounded = model({ op: 'Clip', inputs: ['x'] }, feeds);
    const lowOnly = model({ op: 'Clip', inputs: ['x', 'low'] }, feeds, { low: -1 });
    for (const xnnpack of [false, true]) {
      expect(await etna(unbounded, feeds, xnnpack)).toEqual([FLT_MAX, -FLT_MAX, 0, -5]);
      expect(await etna(lowOnly, feeds, xnnpack)).toEqual([FLT_MAX, -1, 0, -1]);
    }
    expect(await onnxruntime(lowOnly, feeds)).toEqual([FLT_MAX, -1, 0, -1]);
  });

  it('Clip with equal bounds runs when lowered to XNNPACK', async () => {
    const feeds = { x: [3, -3, 0.5] };
    const bytes = model({ op: 'Clip', inputs: ['x', 'low', 'high'] }, feeds, { low: 0.5, high: 0.5 });
    expect(await etna(bytes, feeds, true)).toEqual([0.5, 0.5, 0.5]);
  });

  it('Softplus returns x for large x and keeps tiny results for very negative x', async () => {
    const feeds = { x: [100, 89, -100, -20, 0, Infinity, -Infinity, NaN, 1e-8, 2.5] };
    const bytes = model({ op: 'Softplus', inputs: ['x'] }, feeds);
    const expected = await onnxruntime(bytes, feeds);
    expect(expected.slice(0, 2)).toEqual([100, 89]);
    expectClose(await etna(bytes, feeds, false), expected);
  });

  it('ReduceLogSumExp gives the infinity of a row that holds one', async () => {
    const feeds = { x: [1, Infinity, -Infinity, -Infinity, 1, 2] };
    const reshaped = onnxModel({
      nodes: [
        { op: 'Reshape', inputs: ['x', 'rows'], outputs: ['m'] },
        { op: 'ReduceLogSumExp', inputs: ['m'], outputs: ['y'], ints: { axes: [1] }, int: { keepdims: 0 } },
      ],
      inputs: [{ name: 'x', type: 1, shape: [6] }],
      outputs: [{ name: 'y', type: 1 }],
      initializers: [{ name: 'rows', dims: [2], floats: [], int64s: [3, 2] }],
    });
    const expected = await onnxruntime(reshaped, feeds);
    expectClose(expected, [Infinity, -Infinity, 2.3132617], 1e-6);
    for (const xnnpack of [false, true]) expectClose(await etna(reshaped, feeds, xnnpack), expected);
  });

  it('Elu keeps -0 as -0 and Selu turns it into +0, as onnxruntime does', async () => {
    const feeds = { x: [-0, 0, -1, 2, NaN] };
    for (const op of ['Elu', 'Selu']) {
      const bytes = onnxModel({
        nodes: [
          { op, inputs: ['x'], outputs: ['e'] },
          { op: 'Reciprocal', inputs: ['e'], outputs: ['y'] },
        ],
        inputs: [{ name: 'x', type: 1, shape: [5] }],
        outputs: [{ name: 'y', type: 1 }],
      });
      const expected = await onnxruntime(bytes, feeds);
      expect(expected.slice(0, 2)).toEqual(op === 'Elu' ? [-Infinity, Infinity] : [Infinity, Infinity]);
      expectClose(await etna(bytes, feeds, false), expected);
    }
  });

  it('PRelu scales only negative inputs, so an infinite slope leaves 0 alone', async () => {
    const feeds = { x: [0, -0, -2, 3, NaN], slope: [-Infinity, Infinity, Infinity, NaN, 2] };
    const bytes = model({ op: 'PRelu', inputs: ['x', 'slope'] }, feeds);
    expect(await onnxruntime(bytes, feeds)).toEqual([0, -0, -Infinity, 3, NaN]);
    expect(await etna(bytes, feeds, false)).toEqual([0, -0, -Infinity, 3, NaN]);
  });

  it('Pow with a run-time exponent follows C pow for negative bases, zeros, ones and infinities', async () => {
    const feeds = {
      base: [-1, -2, -2, -2, 0, Infinity, NaN, 1, -1, -1, 2, 3, -0.5, 0, 0, -Infinity, -Infinity, -Infinity, -0, -0, -0, -0],
      exponent: [0, 3, 2, 0.5, 0, 0, 0, NaN, Infinity, -Infinity, 10, -2, Infinity, 2, -1, -0.5, 0.5, 3, -1, -2, 3, -0.5],
    };
    const bytes = model({ op: 'Pow', inputs: ['base', 'exponent'] }, feeds);
    const expected = await onnxruntime(bytes, feeds);
    expect(expected).toEqual([
      1,
      -8,
      4,
      NaN,
      1,
      1,
      1,
      1,
      1,
      1,
      1024,
      Math.fround(1 / 9),
      0,
      0,
      Infinity,
      0,
      Infinity,
      -Infinity,
      -Infinity,
      Infinity,
      -0,
      Infinity,
    ]);
    expectClose(await etna(bytes, feeds, false), expected, 1e-6);
  });

  it('MaxPool and AveragePool with a 1x1 window stay portable, which XNNPACK refuses', async () => {
    const x = Array.from({ length: 16 }, (_, i) => i - 5);
    for (const op of ['MaxPool', 'AveragePool']) {
      const bytes = onnxModel({
        nodes: [{ op, inputs: ['x'], outputs: ['y'], ints: { kernel_shape: [1, 1], strides: [1, 2] } }],
        inputs: [{ name: 'x', type: 1, shape: [1, 1, 4, 4] }],
        outputs: [{ name: 'y', type: 1 }],
      });
      const imported = importOnnx(bytes);
      expect(imported.calls.delegate).toBe(0);
      const module = await Module.load(imported.bytes);
      const [y] = await module.execute('forward', [Tensor.float32([1, 1, 4, 4], x)]);
      await module.dispose();
      expect((y as Tensor).toArray()).toEqual([-5, -3, -1, 1, 3, 5, 7, 9]);
    }
  });

  it('a dilated MaxPool window that reads only padding gives the lowest float, as onnxruntime does', async () => {
    // Width 1, pad 1 each side, taps 2 apart: the one window reads positions -1 and 1.
    const feeds = { x: [5] };
    const bytes = onnxModel({
      nodes: [
        { op: 'Reshape', inputs: ['x', 'shape'], outputs: ['x4'] },
        {
          op: 'MaxPool',
          inputs: ['x4'],
          outputs: ['y'],
          ints: { kernel_shape: [1, 2], strides: [1, 2], dilations: [1, 2], pads: [0, 1, 0, 1] },
        },
      ],
      inputs: [{ name: 'x', type: 1, shape: [1] }],
      outputs: [{ name: 'y', type: 1 }],
      initializers: [{ name: 'shape', dims: [4], floats: [], int64s: [1, 1, 1, 1] }],
    });
    const expected = await onnxruntime(bytes, feeds);
    expect(expected).toEqual([-FLT_MAX]);
    for (const xnnpack of [false, true]) expect(await etna(bytes, feeds, xnnpack)).toEqual(expected);
  });
});
