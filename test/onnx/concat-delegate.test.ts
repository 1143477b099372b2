// Concat of any number of inputs, on any axis, stays inside one XNNPACK
// delegate call: more inputs than one Concatenate node takes become several
// nodes, and a concatenation between convolutions runs channels-last. Values
// are onnxruntime's, bit for bit (NaN payloads, infinities and zeros of both signs included).
import { describe, expect, it } from 'vitest';

import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { writeOnnxModel, type OnnxGraphInitializer, type OnnxGraphNode } from '../../lib/tools/onnx-emitter/graph-writer.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { delegateNodeTypes, expectCloseBits, expectSameBits, float32Bits, type Float32Feeds } from './engines.js';

const BASE = [2, 3, 4, 5] as const;
const CONCATENATE_TYPES: ReadonlySet<NodeUnion> = new Set([
  NodeUnion.XNNConcatenate2,
  NodeUnion.XNNConcatenate3,
  NodeUnion.XNNConcatenate4,
  NodeUnion.XNNConcatenate5,
]);

/** Input i of a concatenation along `axis`: 1 to 3 elements along it. */
function inputShape(axis: number, i: number): number[] {
  const shape: number[] = [...BASE];
  shape[axis < 0 ? axis + BASE.length : axis] = 1 + (i % 3);
  return shape;
}

/** Random values; the first elements of each input are zeros of both signs, infinities and NaNs (one with a payload). */
function feedsOf(shapes: readonly number[][], seed: number): Float32Feeds {
  const next = seededUniform(seed);
  return Object.fromEntries(
    shapes.map((shape, i) => {
      const data = Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => next(-2, 2));
      data.set([-0, 0, NaN, Infinity, -Infinity, NaN].slice(0, data.length));
      if (data.length > 5) new DataView(data.buffer).setUint32(20, 0xffc00123, true);
      return [`x${i}`, { shape, data }];
    }),
  );
}

describe('Concat on the XNNPACK delegate', () => {
  for (const count of [2, 3, 4, 5, 6, 7]) {
    for (const axis of [0, 1, 2, 3, -1, -2, -3, -4]) {
      it(`${count} inputs along axis ${axis}: one delegate call, no portable kernel, the values onnxruntime gives`, async () => {
        const shapes = Array.from({ length: count }, (_, i) => inputShape(axis, i));
        const total = shapes.reduce((sum, shape) => sum + shape[axis < 0 ? axis + 4 : axis]!, 0);
        const outShape: number[] = [...BASE];
        outShape[axis < 0 ? axis + 4 : axis] = total;
        // Abs before the Concat gives the run a compute node; it keeps NaN and turns -0 into +0 in both runtimes.
        const nodes: OnnxGraphNode[] = [
          ...shapes.map((_, i) => ({ op: 'Abs', inputs: [`x${i}`], outputs: [`a${i}`] })),
          { op: 'Concat', inputs: shapes.map((_, i) => `a${i}`), outputs: ['y'], attributes: { axis: { int: axis } } },
        ];
        const model = writeOnnxModel(
          {
            nodes,
            inputs: shapes.map((shape, i) => ({ name: `x${i}`, shape })),
            outputs: [{ name: 'y', shape: outShape }],
            initializers: [],
          },
          17,
        );
        expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
        const concatenations = delegateNodeTypes(model).filter((type) => CONCATENATE_TYPES.has(type));
        // Up to 5 inputs one node; 6 or 7 two (a group joined first, then the rest with it).
        expect(concatenations).toHaveLength(count <= 5 ? 1 : 2);
        const { etna, onnxruntime } = await float32Bits(model, feedsOf(shapes, 10 * count + axis));
        expectSameBits(etna, onnxruntime);
      });
    }
  }

  it('Concat of 12 inputs: each input copied at most twice, the result exact', async () => {
    const shapes = Array.from({ length: 12 }, (_, i) => inputShape(2, i));
    const model = writeOnnxModel(
      {
        nodes: [
          { op: 'Concat', inputs: shapes.map((_, i) => `x${i}`), outputs: ['c'], attributes: { axis: { int: 2 } } },
          { op: 'Abs', inputs: ['c'], outputs: ['y'] },
        ],
        inputs: shapes.map((shape, i) => ({ name: `x${i}`, shape })),
        outputs: [{ name: 'y' }],
        initializers: [],
      },
      17,
    );
    expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
    // 12 inputs: the last 5, then the 4 before them joined first; the first 3 then join both groups.
    const concatenations = delegateNodeTypes(model).filter((type) => CONCATENATE_TYPES.has(type));
    expect(concatenations).toEqual([NodeUnion.XNNConcatenate5, NodeUnion.XNNConcatenate4, NodeUnion.XNNConcatenate5]);
    const { etna, onnxruntime } = await float32Bits(model, feedsOf(shapes, 3));
    expectSameBits(etna, onnxruntime);
  });

  it('7 convolutions joined along the channels: channels-last throughout, one delegate call', async () => {
    const next = seededUniform(17);
    const floats = (n: number): Float32Array => Float32Array.from({ length: n }, () => next(-0.5, 0.5));
    const branches = 7;
    const nodes: OnnxGraphNode[] = [];
    const initializers: OnnxGraphInitializer[] = [];
    for (let i = 0; i < branches; i++) {
      const out = 1 + (i % 3);
      initializers.push({ name: `w${i}`, dims: [out, 3, 3, 3], float32: floats(out * 27) });
      nodes.push({
        op: 'Conv',
        inputs: ['x', `w${i}`],
        outputs: [`b${i}`],
        attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } },
      });
    }
    const channels = Array.from({ length: branches }, (_, i) => 1 + (i % 3)).reduce((a, b) => a + b, 0);
    initializers.push({ name: 'w', dims: [4, channels, 1, 1], float32: floats(4 * channels) });
    nodes.push(
      { op: 'Concat', inputs: Array.from({ length: branches }, (_, i) => `b${i}`), outputs: ['c'], attributes: { axis: { int: 1 } } },
      { op: 'Conv', inputs: ['c', 'w'], outputs: ['y'], attributes: { kernel_shape: { ints: [1, 1] } } },
    );
    const model = writeOnnxModel(
      { nodes, inputs: [{ name: 'x', shape: [1, 3, 8, 8] }], outputs: [{ name: 'y', shape: [1, 4, 8, 8] }], initializers },
      17,
    );
    expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
    const types = delegateNodeTypes(model);
    // One transpose into channels-last, one out of it: the concatenations join NHWC values on their last dim.
    expect(types.filter((type) => type === NodeUnion.XNNStaticTranspose)).toHaveLength(2);
    expect(types.filter((type) => CONCATENATE_TYPES.has(type))).toHaveLength(2);
    // The convolutions sum in their own order: values within 1e-4 (relative).
    const x = feedsOf([[1, 3, 8, 8]], 5).x0!;
    x.data.set([0.5, -0.5, 0.25, 0.75, -0.75, 1]);
    const { etna, onnxruntime } = await float32Bits(model, { x });
    expectCloseBits(etna, onnxruntime, 1e-4);
  });

  it('a Pad between convolutions (channels and pixels, as converted TensorFlow models pad) stays channels-last', async () => {
    const next = seededUniform(23);
    const floats = (n: number): Float32Array => Float32Array.from({ length: n }, () => next(-0.5, 0.5));
    const model = writeOnnxModel(
      {
        nodes: [
          { op: 'Conv', inputs: ['x', 'w0'], outputs: ['a'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } },
          { op: 'Pad', inputs: ['a', 'pads'], outputs: ['p'] },
          { op: 'Conv', inputs: ['p', 'w1'], outputs: ['y'], attributes: { kernel_shape: { ints: [1, 1] } } },
        ],
        inputs: [{ name: 'x', shape: [1, 3, 8, 8] }],
        outputs: [{ name: 'y', shape: [1, 2, 11, 9] }],
        initializers: [
          { name: 'w0', dims: [4, 3, 3, 3], float32: floats(108) },
          { name: 'w1', dims: [2, 6, 1, 1], float32: floats(12) },
          // NCHW: 2 channels before, 1 row before and 2 after, 1 column after.
          { name: 'pads', dims: [8], int64: [0, 2, 1, 0, 0, 0, 2, 1] },
        ],
      },
      17,
    );
    expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
    const types = delegateNodeTypes(model);
    // Into channels-last at the input and out of it at the output only: the pad moves to NHWC's dims.
    expect(types.filter((type) => type === NodeUnion.XNNStaticTranspose)).toHaveLength(2);
    expect(types.filter((type) => type === NodeUnion.XNNStaticConstantPad)).toHaveLength(1);
    const x = feedsOf([[1, 3, 8, 8]], 6).x0!;
    x.data.set([0.5, -0.5, 0.25, 0.75, -0.75, 1]);
    const { etna, onnxruntime } = await float32Bits(model, { x });
    expectCloseBits(etna, onnxruntime, 1e-4);
  });
});
