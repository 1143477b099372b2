// What used to split an imported model's XNNPACK delegate call into several:
// a kernel the delegate cannot run whose result only something later reads
// (it now runs after the delegate call), ReduceMean along the middle or with
// dims dropped, and Slice with a negative step or a reflecting Pad (a gather
// of a few runs, now slices and a Concatenate). Each graph is one delegate
// call, with onnxruntime's values.
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
import { delegateNodeTypes, expectSameBits, float32Bits } from './engines.js';

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

  it("ReduceMax stays one portable kernel, so a subnormal maximum is onnxruntime's (XNNPACK would flush it to 0)", async () => {
    const model = modelOf([ABS, reduce('ReduceMax', undefined, 0)], [1, 4]);
    expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 1 });
    const { etna, onnxruntime } = await float32Bits(model, { x: { shape: [1, 4], data: Float32Array.of(0, -1e-45, 0, 0) } });
    expect(etna[0]).toBe(1); // the bits of 1e-45
    expectSameBits(etna, onnxruntime);
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
