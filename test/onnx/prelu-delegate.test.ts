// PRelu with any constant slopes (one, one per channel, along any dims, or
// one per element; positive, negative, -0, infinite, NaN) runs as one PReLU
// node inside a single XNNPACK delegate call, with the bits onnxruntime gives:
// -0 stays -0 (it is not below 0), NaN keeps its bits, infinities scale,
// subnormals are kept.
import { describe, expect, it } from 'vitest';

import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { writeOnnxModel, type OnnxGraphInitializer, type OnnxGraphNode } from '../../lib/tools/onnx-emitter/graph-writer.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { delegateNodeTypes, expectCloseBits, expectSameBits, float32Bits } from './engines.js';

/** Random values in [-3, 3], the edge cases spread over the tensor so every slope meets some. */
function inputData(count: number, seed: number): Float32Array {
  const next = seededUniform(seed);
  const data = Float32Array.from({ length: count }, () => next(-3, 3));
  // Subnormals too: XNNPACK's kernels would flush them (and products that underflow to them) to 0.
  const edges = [-0, 0, NaN, -Infinity, Infinity, -1e-30, 3e38, -3e38, -0, -3e-45, -1e-38, 2e-45];
  const bits = new DataView(data.buffer);
  for (let i = 0; i < count; i += 7) {
    data[i] = edges[(i / 7) % edges.length]!;
    // NaN with its sign bit set and one with a payload: both pass through as they are.
    if (i % 21 === 0) bits.setUint32(i * 4, i % 42 === 0 ? 0xffc00000 : 0x7fc00123, true);
  }
  return data;
}

/** Slopes in [0.05, 1] times the signs `sign(k)` gives; `special` puts -0, infinities and NaN first. */
function slopes(count: number, seed: number, sign: (k: number) => number, special = false): Float32Array {
  const next = seededUniform(seed);
  const values = Float32Array.from({ length: count }, (_, k) => next(0.05, 1) * sign(k));
  if (special) values.set([-0, Infinity, NaN, -Infinity, 0].slice(0, count));
  return values;
}

/**
 * Convolutions sum in their own order, so a PReLU between them is compared
 * by value (its bits are checked on its own above), on finite inputs.
 */
async function expectCloseAround(model: Uint8Array, shape: number[], seed: number): Promise<void> {
  const data = inputData(
    shape.reduce((a, b) => a * b, 1),
    seed,
  ).map((v) => (Number.isFinite(v) && Math.abs(v) < 10 ? v : -0.25));
  const { etna, onnxruntime } = await float32Bits(model, { x: { shape, data } });
  expectCloseBits(etna, onnxruntime, 1e-5);
}

const negative = (): number => -1;
const positive = (): number => 1;
const mixed = (k: number): number => (k % 2 === 0 ? -1 : 1);

interface SlopeCase {
  readonly name: string;
  readonly input: readonly number[];
  readonly slope: readonly number[];
  readonly sign: (k: number) => number;
  readonly special?: boolean;
}

const SLOPES: readonly SlopeCase[] = [
  { name: 'one negative slope, rank 0', input: [2, 3, 4, 5], slope: [], sign: negative },
  { name: 'one positive slope, [1]', input: [2, 3, 4, 5], slope: [1], sign: positive },
  { name: 'one slope per channel, negative', input: [2, 3, 4, 5], slope: [3, 1, 1], sign: negative },
  { name: 'one slope per channel, mixed, with -0, infinities and NaN', input: [1, 8, 3, 5], slope: [8, 1, 1], sign: mixed, special: true },
  { name: 'one slope per channel, positive, rank 4', input: [2, 3, 4, 5], slope: [1, 3, 1, 1], sign: positive },
  { name: 'along the last dim, mixed', input: [2, 3, 4, 5], slope: [5], sign: mixed },
  { name: 'along the last dim of a matrix, positive', input: [6, 7], slope: [7], sign: positive },
  { name: 'per channel of [N, C, L], negative', input: [2, 6, 9], slope: [6, 1], sign: negative },
  { name: 'per channel of [N, C, L], positive', input: [1, 6, 9], slope: [6, 1], sign: positive },
  { name: 'along H of NCHW, mixed', input: [2, 3, 4, 5], slope: [4, 1], sign: mixed },
  { name: 'along C and W of NCHW, mixed, with the specials', input: [2, 3, 4, 5], slope: [3, 1, 5], sign: mixed, special: true },
  { name: 'one per element of C, H, W, negative', input: [2, 3, 4, 5], slope: [3, 4, 5], sign: negative },
  { name: 'one per element, mixed', input: [2, 3, 4, 5], slope: [2, 3, 4, 5], sign: mixed },
  { name: 'along the batch dim, negative', input: [2, 3, 4, 5], slope: [2, 1, 1, 1], sign: negative },
  { name: 'per channel of a rank-5 tensor, mixed', input: [1, 4, 2, 3, 5], slope: [4, 1, 1, 1], sign: mixed },
  { name: 'per channel of a rank-6 tensor, mixed', input: [1, 3, 2, 2, 2, 3], slope: [3, 1, 1, 1, 1], sign: mixed },
];

describe('PRelu on the XNNPACK delegate', () => {
  SLOPES.forEach((c, n) => {
    it(`${c.name}: one PReLU node in one delegate call, onnxruntime's bits`, async () => {
      const count = c.slope.reduce((a, b) => a * b, 1);
      const initializers: OnnxGraphInitializer[] = [{ name: 's', dims: [...c.slope], float32: slopes(count, 50 + n, c.sign, c.special) }];
      const model = writeOnnxModel(
        {
          nodes: [{ op: 'PRelu', inputs: ['x', 's'], outputs: ['y'] }],
          inputs: [{ name: 'x', shape: c.input }],
          outputs: [{ name: 'y', shape: c.input }],
          initializers,
        },
        17,
      );
      expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
      expect(delegateNodeTypes(model).filter((type) => type === NodeUnion.XNNPReLU)).toHaveLength(1);
      const x = {
        shape: [...c.input],
        data: inputData(
          c.input.reduce((a, b) => a * b, 1),
          7 + n,
        ),
      };
      const { etna, onnxruntime } = await float32Bits(model, { x });
      expectSameBits(etna, onnxruntime);
    });
  });

  it('slopes along W between convolutions: channels-last throughout, the slopes moved with the layout', async () => {
    const next = seededUniform(21);
    const floats = (length: number): Float32Array => Float32Array.from({ length }, () => next(-0.5, 0.5));
    const shape = [1, 4, 6, 7];
    const model = writeOnnxModel(
      {
        nodes: [
          { op: 'Conv', inputs: ['x', 'w1'], outputs: ['a'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } },
          { op: 'PRelu', inputs: ['a', 's'], outputs: ['b'] },
          { op: 'Conv', inputs: ['b', 'w2'], outputs: ['y'], attributes: { kernel_shape: { ints: [1, 1] } } },
        ],
        inputs: [{ name: 'x', shape }],
        outputs: [{ name: 'y', shape }],
        initializers: [
          { name: 'w1', dims: [4, 4, 3, 3], float32: floats(144) },
          { name: 's', dims: [4, 1, 7], float32: slopes(28, 5, mixed) },
          { name: 'w2', dims: [4, 4, 1, 1], float32: floats(16) },
        ],
      },
      17,
    );
    expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
    const types = delegateNodeTypes(model);
    // One transpose in and one out: the PReLU sits between the convolutions.
    expect(types.filter((t) => t === NodeUnion.XNNStaticTranspose)).toHaveLength(2);
    const prelu = types.indexOf(NodeUnion.XNNPReLU);
    expect([types[prelu - 1], types[prelu + 1]]).toEqual([NodeUnion.XNNConv2d, NodeUnion.XNNConv2d]);
    await expectCloseAround(model, shape, 3);
  });

  it('PRelu per channel of [N, C, L] between 1-D convolutions: one delegate call', async () => {
    const next = seededUniform(31);
    const floats = (length: number): Float32Array => Float32Array.from({ length }, () => next(-0.5, 0.5));
    const conv = (input: string, weight: string, output: string, k: number): OnnxGraphNode => ({
      op: 'Conv',
      inputs: [input, weight],
      outputs: [output],
      attributes: { kernel_shape: { ints: [k] }, pads: { ints: [k >> 1, k >> 1] } },
    });
    const model = writeOnnxModel(
      {
        nodes: [conv('x', 'w1', 'a', 3), { op: 'PRelu', inputs: ['a', 's'], outputs: ['b'] }, conv('b', 'w2', 'y', 1)],
        inputs: [{ name: 'x', shape: [1, 5, 16] }],
        outputs: [{ name: 'y', shape: [1, 5, 16] }],
        initializers: [
          { name: 'w1', dims: [5, 5, 3], float32: floats(75) },
          { name: 's', dims: [5, 1], float32: slopes(5, 9, negative) },
          { name: 'w2', dims: [5, 5, 1], float32: floats(25) },
        ],
      },
      17,
    );
    expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
    expect(delegateNodeTypes(model)).toContain(NodeUnion.XNNPReLU);
    await expectCloseAround(model, [1, 5, 16], 4);
  });
});
