// Dynamic 8-bit quantization: DynamicQuantizeLinear alone (ties of its two
// roundings, an all-zero input, infinities, a scale that underflows), and the
// forms quantized models use it in, DynamicQuantizeLinear -> ConvInteger or
// MatMulInteger -> Cast -> Mul -> Add, with uint8 and int8 weights and one
// zero point or one per output channel or column, compared with onnxruntime
// on portable kernels and on the XNNPACK delegate.
import { describe, expect, it } from 'vitest';

import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { Module, Tensor } from '../../lib/index.js';
import { ONNX_DTYPE_CODES } from '../../lib/onnx/dtype.js';
import { importOnnx, importOnnxGraph } from '../../lib/onnx/index.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { payloadNodeTypes } from '../helpers/xnnpack-payload.js';
import { type Feeds, runEtna, runOrt } from './engines.js';
import { onnxModel, type TestGraph, type TestInitializer, type TestNode } from './onnx-writer.js';

const { float32: FLOAT, uint8: UINT8, int8: INT8, int32: INT32 } = ONNX_DTYPE_CODES;

async function runBoth(
  model: Uint8Array,
  feeds: Feeds,
  xnnpack: boolean,
): Promise<{ etna: Record<string, number[]>; ort: Record<string, number[]> }> {
  return { etna: await runEtna(model, feeds, xnnpack), ort: await runOrt(model, feeds) };
}

/** Same values, NaN for NaN, and with `rtol`, floats within it. */
function expectClose(actual: readonly number[], expected: readonly number[], what: string, rtol = 0): void {
  expect(actual.length, what).toBe(expected.length);
  const scale = Math.max(...expected.map((v) => (Number.isFinite(v) ? Math.abs(v) : 0)), 1e-30);
  expected.forEach((e, i) => {
    const a = actual[i]!;
    if (rtol === 0 || !Number.isFinite(e)) expect(Object.is(a, e) || a === e, `${what}[${i}]: ${a} vs ${e}`).toBe(true);
    else expect(Math.abs(a - e), `${what}[${i}]: ${a} vs ${e}`).toBeLessThanOrEqual(rtol * scale);
  });
}

const PATHS = [
  { name: 'portable kernels', xnnpack: false },
  { name: 'XNNPACK', xnnpack: true },
] as const;

describe('DynamicQuantizeLinear', () => {
  const model = (length: number): Uint8Array =>
    onnxModel(
      {
        nodes: [{ op: 'DynamicQuantizeLinear', inputs: ['x'], outputs: ['y', 'scale', 'zero_point'] }],
        inputs: [{ name: 'x', type: FLOAT, shape: [length] }],
        outputs: [
          { name: 'y', type: UINT8 },
          { name: 'scale', type: FLOAT },
          { name: 'zero_point', type: UINT8 },
        ],
      },
      13,
    );

  const next = seededUniform(5);
  const CASES: readonly { name: string; x: readonly number[] }[] = [
    { name: 'random values', x: Array.from({ length: 37 }, () => next(-3, 5)) },
    { name: 'positive values only (zero point 0)', x: Array.from({ length: 9 }, () => next(0.5, 2)) },
    { name: 'negative values only (zero point 255)', x: Array.from({ length: 9 }, () => next(-2, -0.5)) },
    // Range 255 makes the scale 1: the quotients are the values, and 2.5 and the halves are ties.
    { name: 'ties of both roundings (zero point 2.5 -> 2)', x: [-2.5, 252.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 251.5, -0, 0] },
    { name: 'ties rounding up to even (zero point 3.5 -> 4)', x: [-3.5, 251.5, -2.5, -1.5, 0.5, 250.5, 249.5] },
    { name: 'an all-zero input (scale 1)', x: [0, 0, 0, -0, 0] },
    { name: '+Infinity (scale Infinity, y 0)', x: [Infinity, 1, -1, 0] },
    { name: '-Infinity (zero point NaN -> 255)', x: [-Infinity, 1, -1, 0] },
    { name: 'both infinities', x: [-Infinity, Infinity, 1, 0] },
    { name: 'a range whose scale underflows to 0', x: [0, 1e-45, 0, 0] },
  ];
  for (const path of PATHS) {
    for (const c of CASES) {
      it(`${c.name}: y, scale and zero point as onnxruntime's (${path.name})`, async () => {
        const { etna, ort: expected } = await runBoth(
          model(c.x.length),
          { x: { type: FLOAT, shape: [c.x.length], data: c.x } },
          path.xnnpack,
        );
        for (const name of ['y', 'scale', 'zero_point']) expectClose(etna[name]!, expected[name]!, name);
      });
    }
  }

  it('a NaN makes the scale NaN, the zero point 255 and y all 0', async () => {
    const x = [1, 2, Number.NaN, -1];
    const module = await Module.load(importOnnx(model(x.length)).bytes);
    const out = await module.run('forward', { x: Tensor.float32([x.length], x) });
    await module.dispose();
    expect(Array.from(out.y!.toArray() as ArrayLike<number>, Number)).toEqual([0, 0, 0, 0]);
    expect(Number(out.scale!.toArray()[0])).toBeNaN();
    expect(Number(out.zero_point!.toArray()[0])).toBe(255);
  });
});

interface ProductCase {
  readonly name: string;
  readonly weightType: 'uint8' | 'int8';
  /** One zero point, or one per output channel (ConvInteger) or column (MatMulInteger). */
  readonly perChannel: boolean;
}

const PRODUCT_CASES: readonly ProductCase[] = [
  { name: 'uint8 weights, one zero point', weightType: 'uint8', perChannel: false },
  { name: 'int8 weights, one zero point', weightType: 'int8', perChannel: false },
  { name: 'uint8 weights, a zero point per channel', weightType: 'uint8', perChannel: true },
  { name: 'int8 weights, a zero point per channel', weightType: 'int8', perChannel: true },
];

/** Quantized weights with their zero points, each weight within 100 of its channel's zero point (so w - zp fits int8). */
function quantizedWeights(
  seed: number,
  channels: number,
  perChannel: number,
  type: 'uint8' | 'int8',
  perChannelZeroPoints: boolean,
  channelDim: 0 | 1,
) {
  const next = seededUniform(seed);
  const [low, high] = type === 'uint8' ? [100, 155] : [-27, 27];
  const zeroPoints = Array.from({ length: perChannelZeroPoints ? channels : 1 }, () => Math.round(next(low, high)));
  const zeroPointOf = (index: number): number => {
    if (!perChannelZeroPoints) return zeroPoints[0]!;
    return zeroPoints[channelDim === 0 ? Math.floor(index / perChannel) : index % channels]!;
  };
  const weights = Array.from({ length: channels * perChannel }, (_, i) => zeroPointOf(i) + Math.round(next(-100, 100)));
  const centered = weights.map((w, i) => w - zeroPointOf(i));
  return { weights, zeroPoints, centered };
}

/**
 * DynamicQuantizeLinear -> `product` -> Cast -> Mul by x_scale * w_scale -> Add bias, with the int32
 * result also an output. onnxruntime's ConvInteger takes one weight zero point only; per channel,
 * the reference is the same graph with the centered weights as int8 and zero point 0.
 */
function quantizedGraph(
  product: TestNode,
  weights: TestInitializer,
  zeroPoints: TestInitializer,
  inputShape: number[],
  bias: TestInitializer,
  weightScale: number,
): TestGraph {
  return {
    nodes: [
      { op: 'DynamicQuantizeLinear', inputs: ['x'], outputs: ['xq', 'x_scale', 'x_zero_point'] },
      { op: 'Mul', inputs: ['x_scale', 'w_scale'], outputs: ['scale'] },
      { ...product, inputs: ['xq', 'w', 'x_zero_point', 'w_zero_point'], outputs: ['integer'] },
      { op: 'Cast', inputs: ['integer'], outputs: ['integer_float'], int: { to: FLOAT } },
      { op: 'Mul', inputs: ['integer_float', 'scale'], outputs: ['scaled'] },
      { op: 'Add', inputs: ['scaled', 'bias'], outputs: ['y'] },
    ],
    inputs: [{ name: 'x', type: FLOAT, shape: inputShape }],
    outputs: [
      { name: 'y', type: FLOAT },
      { name: 'integer', type: INT32 },
    ],
    initializers: [weights, zeroPoints, bias, { name: 'w_scale', dims: [], floats: [weightScale] }],
  };
}

function productTests(
  op: string,
  build: (c: ProductCase, reference: boolean) => TestGraph,
  inputShape: number[],
  delegateNode: NodeUnion,
): void {
  describe(`DynamicQuantizeLinear -> ${op} -> Cast -> Mul -> Add`, () => {
    const next = seededUniform(17);
    const x = Array.from({ length: inputShape.reduce((a, b) => a * b, 1) }, () => next(-2, 3));
    for (const path of PATHS) {
      for (const c of PRODUCT_CASES) {
        it(`${c.name}: the int32 result and the rescaled one as onnxruntime's (${path.name})`, async () => {
          const model = onnxModel(build(c, false), 13);
          const reference = onnxModel(build(c, true), 13);
          const feeds: Feeds = { x: { type: FLOAT, shape: inputShape, data: x } };
          const etna = await runEtna(model, feeds, path.xnnpack);
          const expected = await runOrt(reference, feeds);
          expectClose(etna.integer!, expected.integer!, 'integer');
          expectClose(etna.y!, expected.y!, 'y', 1e-6);
        });
      }
    }

    it('runs its float32 product on the delegate and converts nothing to 8 bits when only the product reads the quantized input', () => {
      const model = onnxModel({ ...build(PRODUCT_CASES[0]!, false), outputs: [{ name: 'y', type: FLOAT }] }, 13);
      const { builder, exportOptions } = importOnnxGraph(model);
      const exported = builder.export(exportOptions);
      const types = exported.program.delegatePayloads!.flatMap((payload) => payloadNodeTypes(payload));
      expect(types).toContain(delegateNode);
      const main = builder.programGraph.methods[0]!;
      const integerTensors = main.instructions.flatMap((instruction) =>
        main
          .instructionOperands(instruction)
          .map((index) => main.values[index]!)
          .filter((value) => value.kind === 'tensor' && (value.dtype === 'uint8' || value.dtype === 'int32')),
      );
      expect(integerTensors).toEqual([]);
    });
  });
}

// Convolution: x [1, 4, 7, 7], w [5, 4, 3, 3], pads 1, stride 2.
const CONV_OUT = 5;
const CONV_IN = 4;
const CONV_TAPS = CONV_IN * 9;
productTests(
  'ConvInteger',
  (c, reference) => {
    const { weights, zeroPoints, centered } = quantizedWeights(3, CONV_OUT, CONV_TAPS, c.weightType, c.perChannel, 0);
    const perChannelReference = reference && c.perChannel;
    const nextBias = seededUniform(9);
    return quantizedGraph(
      { op: 'ConvInteger', inputs: [], outputs: [], ints: { kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [2, 2] } },
      {
        name: 'w',
        dims: [CONV_OUT, CONV_IN, 3, 3],
        floats: perChannelReference ? centered : weights,
        int8: perChannelReference ? 'int8' : c.weightType,
      },
      {
        name: 'w_zero_point',
        dims: perChannelReference || !c.perChannel ? [] : [CONV_OUT],
        floats: perChannelReference ? [0] : zeroPoints,
        int8: perChannelReference ? 'int8' : c.weightType,
      },
      [1, CONV_IN, 7, 7],
      { name: 'bias', dims: [1, CONV_OUT, 1, 1], floats: Array.from({ length: CONV_OUT }, () => nextBias(-1, 1)) },
      0.0123,
    );
  },
  [1, CONV_IN, 7, 7],
  NodeUnion.XNNConv2d,
);

// Matrix product: x [2, 3, 6] times w [6, 4].
const MATMUL_K = 6;
const MATMUL_N = 4;
productTests(
  'MatMulInteger',
  (c) => {
    const { weights, zeroPoints } = quantizedWeights(4, MATMUL_N, MATMUL_K, c.weightType, c.perChannel, 1);
    const nextBias = seededUniform(10);
    return quantizedGraph(
      { op: 'MatMulInteger', inputs: [], outputs: [] },
      { name: 'w', dims: [MATMUL_K, MATMUL_N], floats: weights, int8: c.weightType },
      { name: 'w_zero_point', dims: c.perChannel ? [MATMUL_N] : [], floats: zeroPoints, int8: c.weightType },
      [2, 3, MATMUL_K],
      { name: 'bias', dims: [MATMUL_N], floats: Array.from({ length: MATMUL_N }, () => nextBias(-1, 1)) },
      0.0071,
    );
  },
  [2, 3, MATMUL_K],
  NodeUnion.XNNFullyConnected,
);

describe('ConvInteger and MatMulInteger on 8-bit graph inputs', () => {
  it('int8 x with its own zero point and int8 weights', async () => {
    const model = onnxModel(
      {
        nodes: [{ op: 'ConvInteger', inputs: ['x', 'w', 'x_zero_point', 'w_zero_point'], outputs: ['y'], ints: { kernel_shape: [2, 2] } }],
        inputs: [{ name: 'x', type: INT8, shape: [1, 2, 3, 3] }],
        outputs: [{ name: 'y', type: INT32 }],
        initializers: [
          {
            name: 'w',
            dims: [3, 2, 2, 2],
            floats: [5, -7, 12, 0, -128, 127, 3, -3, 1, 2, 3, 4, -5, -6, -7, -8, 9, 10, 11, 12, 13, -14, 15, -16],
            int8: 'int8',
          },
          { name: 'x_zero_point', dims: [], floats: [-3], int8: 'int8' },
          { name: 'w_zero_point', dims: [], floats: [2], int8: 'int8' },
        ],
      },
      13,
    );
    const x = [-128, 127, 0, 5, -5, 100, -100, 1, -1, 7, 8, -9, 10, -11, 12, -13, 14, -15];
    for (const path of PATHS) {
      const { etna, ort: expected } = await runBoth(model, { x: { type: INT8, shape: [1, 2, 3, 3], data: x } }, path.xnnpack);
      expectClose(etna.y!, expected.y!, `y (${path.name})`);
    }
  });

  it('uint8 A without zero points times uint8 B with one per column', async () => {
    const model = onnxModel(
      {
        nodes: [{ op: 'MatMulInteger', inputs: ['a', 'b', '', 'b_zero_point'], outputs: ['y'] }],
        inputs: [{ name: 'a', type: UINT8, shape: [3, 4] }],
        outputs: [{ name: 'y', type: INT32 }],
        initializers: [
          { name: 'b', dims: [4, 2], floats: [0, 255, 17, 200, 128, 1, 99, 254], int8: 'uint8' },
          { name: 'b_zero_point', dims: [2], floats: [128, 3], int8: 'uint8' },
        ],
      },
      13,
    );
    const a = [0, 255, 1, 254, 128, 127, 3, 250, 60, 70, 80, 90];
    for (const path of PATHS) {
      const { etna, ort: expected } = await runBoth(model, { a: { type: UINT8, shape: [3, 4], data: a } }, path.xnnpack);
      expectClose(etna.y!, expected.y!, `y (${path.name})`);
    }
  });
});
