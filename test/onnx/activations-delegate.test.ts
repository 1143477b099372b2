// Activations and elementwise operators run inside one XNNPACK delegate call
// with no portable kernel beside it: each one-operator graph is imported with
// lowering, the delegate's node types checked, and its outputs compared with
// onnxruntime on random values and on NaN (both signs), infinities, zeros
// of both signs and tiny and huge magnitudes.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { Module, Tensor } from '../../lib/index.js';
import { importOnnx, importOnnxGraph } from '../../lib/onnx/index.js';
import {
  writeOnnxModel,
  type OnnxAttributeValue,
  type OnnxGraphInitializer,
  type OnnxGraphNode,
} from '../../lib/tools/onnx-emitter/graph-writer.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { payloadNodeTypes } from '../helpers/xnnpack-payload.js';

const SHAPE = [1, 8, 5, 6] as const;
const COUNT = SHAPE.reduce((a, b) => a * b, 1);

interface OpCase {
  readonly name: string;
  readonly nodes: readonly OnnxGraphNode[];
  readonly initializers?: readonly OnnxGraphInitializer[];
  readonly opset?: number;
  /** A second graph input `x2` of the same shape. */
  readonly twoInputs?: boolean;
  /** Node types the delegate must hold (each at least once). */
  readonly holds: readonly NodeUnion[];
}

const unary = (op: string, holds: readonly NodeUnion[], attributes?: Record<string, OnnxAttributeValue>): OpCase => ({
  name: op,
  nodes: [{ op, inputs: ['x'], outputs: ['y'], ...(attributes === undefined ? {} : { attributes }) }],
  holds,
});

const perChannelSlope = Float32Array.from({ length: SHAPE[1] }, (_, c) => 0.05 * c);

const CASES: readonly OpCase[] = [
  {
    name: 'PRelu, one slope per channel',
    nodes: [{ op: 'PRelu', inputs: ['x', 's'], outputs: ['y'] }],
    initializers: [{ name: 's', dims: [SHAPE[1], 1, 1], float32: perChannelSlope }],
    holds: [NodeUnion.XNNPReLU],
  },
  {
    name: 'PRelu, one slope',
    nodes: [{ op: 'PRelu', inputs: ['x', 's'], outputs: ['y'] }],
    initializers: [{ name: 's', dims: [1], float32: Float32Array.of(0.3) }],
    holds: [NodeUnion.XNNPReLU],
  },
  // The edge cases sit in channel 0, so its slope is the one that meets -0, NaN and the infinities.
  {
    name: 'PRelu, negative slopes per channel (-0 stays -0)',
    nodes: [{ op: 'PRelu', inputs: ['x', 's'], outputs: ['y'] }],
    initializers: [{ name: 's', dims: [SHAPE[1], 1, 1], float32: perChannelSlope.map((s, c) => (c % 2 === 0 ? -0.5 - s : s)) }],
    holds: [NodeUnion.XNNPReLU],
  },
  {
    name: 'PRelu, one negative slope',
    nodes: [{ op: 'PRelu', inputs: ['x', 's'], outputs: ['y'] }],
    initializers: [{ name: 's', dims: [1], float32: Float32Array.of(-0.25) }],
    holds: [NodeUnion.XNNPReLU],
  },
  {
    name: 'PRelu, slopes -0, infinite and NaN',
    nodes: [{ op: 'PRelu', inputs: ['x', 's'], outputs: ['y'] }],
    initializers: [{ name: 's', dims: [SHAPE[1], 1, 1], float32: perChannelSlope.map((s, c) => [Infinity, -0, NaN, -Infinity][c] ?? s) }],
    holds: [NodeUnion.XNNPReLU],
  },
  {
    name: 'PRelu, negative slopes along the last dim',
    nodes: [{ op: 'PRelu', inputs: ['x', 's'], outputs: ['y'] }],
    initializers: [{ name: 's', dims: [SHAPE[3]], float32: Float32Array.from({ length: SHAPE[3] }, (_, i) => -0.5 + 0.2 * i) }],
    holds: [NodeUnion.XNNPReLU],
  },
  unary('LeakyRelu', [NodeUnion.XNNLeakyReLU], { alpha: { float: 0.1 } }),
  unary('Elu', [NodeUnion.XNNELU], { alpha: { float: 0.7 } }),
  unary('Selu', [NodeUnion.XNNELU]),
  unary('Softplus', [NodeUnion.XNNExp, NodeUnion.XNNLog]),
  { ...unary('Mish', [NodeUnion.XNNTanh, NodeUnion.XNNLog]), opset: 18 },
  { ...unary('Gelu', [NodeUnion.XNNGelu]), opset: 20 },
  { ...unary('Gelu', [NodeUnion.XNNTanh], { approximate: { string: 'tanh' } }), name: 'Gelu, tanh approximation', opset: 20 },
  unary('Tanh', [NodeUnion.XNNTanh]),
  unary('Sigmoid', [NodeUnion.XNNSigmoid]),
  unary('HardSigmoid', [NodeUnion.XNNMultiply]),
  unary('HardSwish', [NodeUnion.XNNHardswish]),
  {
    name: 'Swish (x * Sigmoid(x))',
    nodes: [
      { op: 'Sigmoid', inputs: ['x'], outputs: ['s'] },
      { op: 'Mul', inputs: ['x', 's'], outputs: ['y'] },
    ],
    holds: [NodeUnion.XNNSigmoid, NodeUnion.XNNMultiply],
  },
  {
    name: 'Clip',
    nodes: [{ op: 'Clip', inputs: ['x', 'low', 'high'], outputs: ['y'] }],
    initializers: [
      { name: 'low', dims: [], float32: Float32Array.of(-0.5) },
      { name: 'high', dims: [], float32: Float32Array.of(2) },
    ],
    holds: [NodeUnion.XNNClamp],
  },
  { name: 'Max', nodes: [{ op: 'Max', inputs: ['x', 'x2'], outputs: ['y'] }], twoInputs: true, holds: [NodeUnion.XNNMaximum] },
  { name: 'Min', nodes: [{ op: 'Min', inputs: ['x', 'x2'], outputs: ['y'] }], twoInputs: true, holds: [NodeUnion.XNNMinimum] },
  unary('Abs', [NodeUnion.XNNAbs]),
  unary('Neg', [NodeUnion.XNNNegate]),
  unary('Sqrt', [NodeUnion.XNNSquareRoot]),
  unary('Exp', [NodeUnion.XNNExp]),
  unary('Log', [NodeUnion.XNNLog]),
  unary('Sin', [NodeUnion.XNNSin]),
  unary('Cos', [NodeUnion.XNNCos]),
  unary('Reciprocal', [NodeUnion.XNNDiv]),
  {
    name: 'Pow by 3',
    nodes: [{ op: 'Pow', inputs: ['x', 'e'], outputs: ['y'] }],
    initializers: [{ name: 'e', dims: [], float32: Float32Array.of(3) }],
    holds: [NodeUnion.XNNSquare, NodeUnion.XNNMultiply],
  },
];

function graphOf(op: OpCase): Uint8Array {
  return writeOnnxModel(
    {
      nodes: op.nodes,
      inputs: [{ name: 'x', shape: SHAPE }, ...(op.twoInputs ? [{ name: 'x2', shape: SHAPE }] : [])],
      outputs: [{ name: 'y', shape: SHAPE }],
      initializers: op.initializers ?? [],
    },
    op.opset ?? 17,
  );
}

/** Random values in [-4, 4]; with `specials`, the first elements are the edge cases. */
function inputData(seed: number, specials: boolean): Float32Array {
  const next = seededUniform(seed);
  const data = Float32Array.from({ length: COUNT }, () => next(-4, 4));
  if (specials) {
    const edges = [NaN, Infinity, -Infinity, 0, -0, 1e-30, -1e-30, 1e-3, -1e-3, 100, -100, 3e38, -3e38];
    data.set(edges);
    // NaN with its sign bit set (what 0/0 makes on x86).
    new DataView(data.buffer).setUint32(edges.length * 4, 0xffc00000, true);
  }
  return data;
}

async function run(model: Uint8Array, feeds: Record<string, Float32Array>): Promise<{ etna: Float32Array; onnxruntime: Float32Array }> {
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const expected = (
    await session.run(Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, new ort.Tensor('float32', v, [...SHAPE])])))
  ).y!.data as Float32Array;
  await session.release();
  const module = await Module.load(importOnnx(model).bytes);
  const inputs = Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, Tensor.float32([...SHAPE], v)]));
  const actual = Float32Array.from((await module.run('forward', inputs)).y!.toArray() as number[]);
  await module.dispose();
  return { etna: actual, onnxruntime: expected };
}

/**
 * NaN where onnxruntime has NaN, infinities equal, zeros of the same sign
 * where both give zero, others within `rtol` (or 1e-6 absolute: onnxruntime's
 * alpha * (exp(x) - 1) is 0 for x = -1e-30, XNNPACK's ELU alpha * x).
 */
function expectSame(actual: Float32Array, expected: Float32Array, input: Float32Array, rtol = 1e-5): void {
  expect(actual.length).toBe(expected.length);
  expected.forEach((e, i) => {
    const a = actual[i]!;
    const where = `element ${i} (x = ${input[i]}): ${a} vs ${e}`;
    if (Number.isNaN(e) || !Number.isFinite(e) || (e === 0 && a === 0)) expect(Object.is(a, e), where).toBe(true);
    else expect(Math.abs(a - e), where).toBeLessThanOrEqual(rtol * Math.abs(e) + 1e-6);
  });
}

describe('activations and elementwise operators on the XNNPACK delegate', () => {
  for (const op of CASES) {
    it(`${op.name}: one delegate call, no portable kernel, same values as onnxruntime`, async () => {
      const model = graphOf(op);
      expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
      const { builder, exportOptions } = importOnnxGraph(model);
      const types = payloadNodeTypes(builder.export(exportOptions).program.delegatePayloads![0]!);
      for (const type of op.holds) expect(types, NodeUnion[type]).toContain(type);

      for (const specials of [false, true]) {
        const x = inputData(3, specials);
        const feeds: Record<string, Float32Array> = { x };
        // The second operand of Max and Min takes the specials at other positions.
        if (op.twoInputs) feeds.x2 = inputData(4, specials).reverse();
        const { etna, onnxruntime } = await run(model, feeds);
        expectSame(etna, onnxruntime, x);
      }
    });
  }

  it('PRelu between convolutions runs channels-last: no transpose beside it', async () => {
    const next = seededUniform(11);
    const floats = (n: number): Float32Array => Float32Array.from({ length: n }, () => next(-0.5, 0.5));
    const model = writeOnnxModel(
      {
        nodes: [
          { op: 'Conv', inputs: ['x', 'w1'], outputs: ['a'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } },
          { op: 'PRelu', inputs: ['a', 's'], outputs: ['b'] },
          { op: 'Conv', inputs: ['b', 'w2'], outputs: ['y'], attributes: { kernel_shape: { ints: [1, 1] } } },
        ],
        inputs: [{ name: 'x', shape: SHAPE }],
        outputs: [{ name: 'y', shape: SHAPE }],
        initializers: [
          { name: 'w1', dims: [8, 8, 3, 3], float32: floats(8 * 8 * 9) },
          { name: 's', dims: [8, 1, 1], float32: perChannelSlope },
          { name: 'w2', dims: [8, 8, 1, 1], float32: floats(64) },
        ],
      },
      17,
    );
    expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
    const { builder, exportOptions } = importOnnxGraph(model);
    const types = payloadNodeTypes(builder.export(exportOptions).program.delegatePayloads![0]!);
    // One transpose in (NCHW to NHWC) and one out; the activation sits between the convolutions.
    expect(types.filter((t) => t === NodeUnion.XNNStaticTranspose)).toHaveLength(2);
    const prelu = types.indexOf(NodeUnion.XNNPReLU);
    expect(types[prelu - 1]).toBe(NodeUnion.XNNConv2d);
    expect(types[prelu + 1]).toBe(NodeUnion.XNNConv2d);
    for (const specials of [false, true]) {
      const x = inputData(12, specials);
      const { etna, onnxruntime } = await run(model, { x });
      expectSame(etna, onnxruntime, x, 1e-4);
    }
  });
});
