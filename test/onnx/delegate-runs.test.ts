// What used to split an imported model's XNNPACK delegate call into several:
// a kernel the delegate cannot run whose result only something later reads
// (it now runs after the delegate call), ReduceMean along the middle or with
// dims dropped, ReduceMax, and Slice with a negative step or a reflecting Pad
// (a gather of a few runs, now slices and a Concatenate). Each graph is one
// delegate call, with onnxruntime's values.
import { describe, expect, it } from 'vitest';

import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { importOnnx } from '../../lib/onnx/index.js';
import {
  writeOnnxModel,
  type OnnxAttributeValue,
  type OnnxGraphInitializer,
  type OnnxGraphNode,
} from '../../lib/tools/onnx-emitter/graph-writer.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { delegateNodeTypes, expectSameBits, float32Bits, runEtna } from './engines.js';

function inputOf(shape: readonly number[], seed: number, specials: readonly number[] = []): { shape: number[]; data: Float32Array } {
  const next = seededUniform(seed);
  const data = Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => next(-2, 2));
  data.set(specials.slice(0, data.length));
  return { shape: [...shape], data };
}

/** One input `x` of `shape` into `nodes`, whose last output is `y`. */
function modelOf(nodes: readonly OnnxGraphNode[], shape: readonly number[]): Uint8Array {
  return writeOnnxModel({ nodes, inputs: [{ name: 'x', shape }], outputs: [{ name: 'y' }], initializers: [] }, 17);
}

const reduce = (op: string, axes: readonly number[] | undefined, keepdims: number): OnnxGraphNode => {
  const attributes: Record<string, OnnxAttributeValue> = { keepdims: { int: keepdims } };
  if (axes !== undefined) attributes.axes = { ints: [...axes] };
  return { op, inputs: ['a'], outputs: ['y'], attributes };
};

// Abs first gives each graph a node before the one under test; it is exact in both runtimes.
const ABS: OnnxGraphNode = { op: 'Abs', inputs: ['x'], outputs: ['a'] };
const NEG: OnnxGraphNode = { op: 'Neg', inputs: ['x'], outputs: ['a'] };

describe('delegate calls of imported models', () => {
  it('a Greater only the final Where reads runs after the one delegate call', async () => {
    const shape = [2, 3, 8];
    const model = writeOnnxModel(
      {
        nodes: [
          { op: 'Mul', inputs: ['x', 'two'], outputs: ['a'] },
          { op: 'Greater', inputs: ['a', 'half'], outputs: ['c'] },
          { op: 'Add', inputs: ['a', 'one'], outputs: ['b'] },
          { op: 'Abs', inputs: ['b'], outputs: ['d'] },
          { op: 'Neg', inputs: ['d'], outputs: ['e'] },
          { op: 'Where', inputs: ['c', 'e', 'a'], outputs: ['y'] },
        ],
        inputs: [{ name: 'x', shape }],
        outputs: [{ name: 'y', shape }],
        initializers: [
          { name: 'two', dims: [], float32: Float32Array.of(2) },
          { name: 'half', dims: [], float32: Float32Array.of(0.5) },
          { name: 'one', dims: [], float32: Float32Array.of(1) },
        ],
      },
      17,
    );
    // The compare and the where stay portable kernels, both after the delegate call.
    expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 2 });
    const x = inputOf(shape, 1, [-0, 0, NaN, Infinity, -Infinity, 0.25, 0.26]);
    const { etna, onnxruntime } = await float32Bits(model, { x });
    expectSameBits(etna, onnxruntime);
  });

  const MEANS: readonly { name: string; shape: number[]; axes: number[]; keepdims: number; bits: boolean }[] = [
    { name: 'along the middle of [1, 37, 6]', shape: [1, 37, 6], axes: [1], keepdims: 1, bits: true },
    { name: 'along the middle, dims dropped', shape: [1, 37, 6], axes: [1], keepdims: 0, bits: true },
    { name: 'along two middle dims of [1, 5, 4, 6]', shape: [1, 5, 4, 6], axes: [1, 2], keepdims: 1, bits: true },
    { name: 'along dim 0 of [9, 4]', shape: [9, 4], axes: [0], keepdims: 0, bits: true },
    { name: 'along the last dim, dims dropped', shape: [3, 4, 10], axes: [2], keepdims: 0, bits: false },
    { name: 'along the last two dims, kept', shape: [2, 3, 4, 5], axes: [2, 3], keepdims: 1, bits: false },
    { name: 'over a dim of one, dropped', shape: [1, 1], axes: [1], keepdims: 0, bits: true },
  ];
  for (const c of MEANS) {
    it(`ReduceMean ${c.name}: one delegate call, ${c.bits ? "onnxruntime's bits" : 'within 1e-6 of onnxruntime'}`, async () => {
      const model = modelOf([ABS, reduce('ReduceMean', c.axes, c.keepdims)], c.shape);
      expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
      const x = inputOf(c.shape, 2, [Infinity, 3e38, 3e38]);
      const { etna, onnxruntime } = await float32Bits(model, { x });
      if (c.bits) {
        expectSameBits(etna, onnxruntime);
        return;
      }
      const actual = new Float32Array(etna.buffer, etna.byteOffset, etna.length);
      new Float32Array(onnxruntime.buffer, onnxruntime.byteOffset, onnxruntime.length).forEach((e, i) => {
        if (Number.isFinite(e)) expect(Math.abs(actual[i]! - e), `element ${i}`).toBeLessThanOrEqual(1e-6 * Math.abs(e));
        else expect(actual[i], `element ${i}`).toBe(e);
      });
    });
  }

  const MAXIMA: readonly { name: string; shape: number[]; axes?: number[]; keepdims: number }[] = [
    { name: 'over every dim, to a scalar', shape: [1, 1, 5, 32], keepdims: 0 },
    { name: 'over every dim, kept', shape: [2, 3, 4], keepdims: 1 },
    { name: 'along dim 1', shape: [2, 7, 3, 5], axes: [1], keepdims: 1 },
    { name: 'along the last dim, dropped', shape: [4, 9], axes: [1], keepdims: 0 },
    { name: 'along two middle dims', shape: [2, 3, 4, 5], axes: [1, 2], keepdims: 0 },
  ];
  for (const c of MAXIMA) {
    it(`ReduceMax ${c.name}: one delegate call, onnxruntime's bits; NaN as etna's portable kernel gives it`, async () => {
      // Neg first: the maxima are then of negated values, infinities among them.
      const model = modelOf([NEG, reduce('ReduceMax', c.axes, c.keepdims)], c.shape);
      expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
      expect(delegateNodeTypes(model)).toContain(NodeUnion.XNNMaxPooling2d);
      const x = inputOf(c.shape, 3, [-Infinity, Infinity, 1e-30]);
      const { etna, onnxruntime } = await float32Bits(model, { x });
      expectSameBits(etna, onnxruntime);
      // onnxruntime keeps or drops a NaN depending on where it sits; etna keeps it on both paths.
      const nan = inputOf(c.shape, 4, [0.5, NaN]);
      const feeds = { x: { type: 1, shape: nan.shape, data: nan.data } };
      const [delegated, portable] = await Promise.all([runEtna(model, feeds, true), runEtna(model, feeds, false)]);
      expect(delegated.y).toEqual(portable.y);
    });
  }

  it('ReduceMax of a convolution: pooled as the delegate holds it, channels-last, with no transpose back', async () => {
    const next = seededUniform(8);
    const shape = [1, 3, 9, 7];
    const model = writeOnnxModel(
      {
        nodes: [
          { op: 'Conv', inputs: ['x', 'w'], outputs: ['a'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } },
          reduce('ReduceMax', undefined, 0),
        ],
        inputs: [{ name: 'x', shape }],
        outputs: [{ name: 'y' }],
        initializers: [{ name: 'w', dims: [5, 3, 3, 3], float32: Float32Array.from({ length: 135 }, () => next(-0.5, 0.5)) }],
      },
      17,
    );
    expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
    // The input's transpose into channels-last is the only one.
    expect(delegateNodeTypes(model).filter((type) => type === NodeUnion.XNNStaticTranspose)).toHaveLength(1);
    const { etna, onnxruntime } = await float32Bits(model, { x: inputOf(shape, 9) });
    const [actual, expected] = [etna, onnxruntime].map((bits) => new Float32Array(bits.buffer, bits.byteOffset, bits.length)[0]!);
    expect(Math.abs(actual! - expected!)).toBeLessThanOrEqual(1e-5 * Math.abs(expected!));
  });

  const GATHERS: readonly { name: string; shape: number[]; node: OnnxGraphNode; delegated: boolean }[] = [
    {
      name: 'Slice with step -1 (a flip of 4)',
      shape: [1, 3, 8],
      node: { op: 'Slice', inputs: ['a', 'starts', 'ends', 'axes', 'steps'], outputs: ['y'] },
      delegated: true,
    },
    {
      name: 'Pad, reflecting 2 on each side (5 runs)',
      shape: [1, 2, 8],
      node: { op: 'Pad', inputs: ['a', 'pads'], outputs: ['y'], attributes: { mode: { string: 'reflect' } } },
      delegated: true,
    },
    {
      name: 'Pad, reflecting 3 on each side (7 runs: more than one Concatenate joins)',
      shape: [1, 2, 8],
      node: { op: 'Pad', inputs: ['a', 'wide'], outputs: ['y'], attributes: { mode: { string: 'reflect' } } },
      delegated: false,
    },
  ];
  for (const c of GATHERS) {
    it(`${c.name}: ${c.delegated ? 'slices and a Concatenate in one delegate call' : 'one portable kernel'}, onnxruntime's bits`, async () => {
      const ints = (name: string, values: number[]): OnnxGraphInitializer => ({ name, dims: [values.length], int64: values });
      const model = writeOnnxModel(
        {
          nodes: [ABS, c.node],
          inputs: [{ name: 'x', shape: c.shape }],
          outputs: [{ name: 'y' }],
          initializers: [
            ints('starts', [4]),
            ints('ends', [0]),
            ints('axes', [2]),
            ints('steps', [-1]),
            ints('pads', [0, 0, 2, 0, 0, 2]),
            ints('wide', [0, 0, 3, 0, 0, 3]),
          ],
        },
        17,
      );
      expect(importOnnx(model).calls).toEqual(c.delegated ? { delegate: 1, kernel: 0 } : { delegate: 1, kernel: 1 });
      if (c.delegated) expect(delegateNodeTypes(model)).toContain(NodeUnion.XNNStaticSlice);
      const x = inputOf(c.shape, 5, [-0, NaN, Infinity, -Infinity]);
      const { etna, onnxruntime } = await float32Bits(model, { x });
      expectSameBits(etna, onnxruntime);
    });
  }
});
