// Statically quantized convolutions and linears in onnxruntime's QDQ form
// (quantize_static: DequantizeLinear of an 8-bit activation and of int8
// constant weights per tensor or per output channel, an int32 bias, the float
// op, a Relu, QuantizeLinear of the result) run on the XNNPACK delegate as
// 8-bit nodes in one delegate call, and match onnxruntime within one
// quantization step (XNNPACK's Convert multiplies by the reciprocal of the
// scale, onnxruntime divides; both requantize the int32 sums with an fp32
// multiplier and ties to even), NaN and infinities at the float edge as
// onnxruntime quantizes them.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { Datatype, NodeUnion, QuantizedTensorValue, ValueUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { Module, Tensor } from '../../lib/index.js';
import { ONNX_DTYPE_CODES } from '../../lib/onnx/dtype.js';
import { importOnnx, importOnnxGraph } from '../../lib/onnx/index.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { payloadGraph, payloadNodeTypes } from '../helpers/xnnpack-payload.js';
import { onnxModel, type TestGraph, type TestInitializer, type TestNode } from './onnx-writer.js';

const FLOAT = ONNX_DTYPE_CODES.float32;

interface Activation {
  readonly scale: number;
  readonly zeroPoint: number;
  readonly type: 'uint8' | 'int8';
}

/** Q -> DQ of `input` with an activation's parameters, named `name`. */
function quantized(input: string, name: string, a: Activation): { nodes: TestNode[]; initializers: TestInitializer[] } {
  return {
    nodes: [
      { op: 'QuantizeLinear', inputs: [input, `${name}_scale`, `${name}_zero_point`], outputs: [`${name}_q`] },
      { op: 'DequantizeLinear', inputs: [`${name}_q`, `${name}_scale`, `${name}_zero_point`], outputs: [name] },
    ],
    initializers: [
      { name: `${name}_scale`, dims: [], floats: [a.scale] },
      { name: `${name}_zero_point`, dims: [], floats: [a.zeroPoint], int8: a.type },
    ],
  };
}

/** int8 weights (codes in [-127, 127]) with one scale per output channel (or one), and an int32 bias at input scale x weight scale. */
function quantizedWeights(
  name: string,
  seed: number,
  dims: number[],
  channelAxis: number,
  perChannel: boolean,
  inputScale: number,
  withBias: boolean,
) {
  const next = seededUniform(seed);
  const channels = dims[channelAxis]!;
  const codes = Array.from({ length: dims.reduce((a, b) => a * b, 1) }, () => Math.round(next(-127, 127)));
  const scales = Array.from({ length: perChannel ? channels : 1 }, () => next(0.002, 0.01));
  const initializers: TestInitializer[] = [
    { name: `${name}_codes`, dims, floats: codes, int8: 'int8' },
    { name: `${name}_scale`, dims: perChannel ? [channels] : [], floats: scales },
    { name: `${name}_zero_point`, dims: perChannel ? [channels] : [], floats: new Array<number>(scales.length).fill(0), int8: 'int8' },
  ];
  const axis = perChannel ? { int: { axis: channelAxis } } : {};
  const nodes: TestNode[] = [
    { op: 'DequantizeLinear', inputs: [`${name}_codes`, `${name}_scale`, `${name}_zero_point`], outputs: [name], ...axis },
  ];
  if (withBias) {
    const biasScales = Array.from({ length: channels }, (_, c) => Math.fround(inputScale * scales[perChannel ? c : 0]!));
    initializers.push(
      {
        name: `${name}_bias_codes`,
        dims: [channels],
        floats: Array.from({ length: channels }, () => Math.round(next(-3000, 3000))),
        int32: true,
      },
      { name: `${name}_bias_scale`, dims: [channels], floats: biasScales },
      { name: `${name}_bias_zero_point`, dims: [channels], floats: new Array<number>(channels).fill(0), int32: true },
    );
    nodes.push({
      op: 'DequantizeLinear',
      inputs: [`${name}_bias_codes`, `${name}_bias_scale`, `${name}_bias_zero_point`],
      outputs: [`${name}_bias`],
      int: { axis: 0 },
    });
  }
  return { nodes, initializers };
}

/** x -> Q/DQ -> Conv 3x3 (+ bias) -> Relu -> Q/DQ -> Conv 1x1 stride 2 -> Q/DQ -> y. */
function convolutions(type: 'uint8' | 'int8', perChannel: boolean): TestGraph {
  const input: Activation = type === 'uint8' ? { scale: 2 / 255, zeroPoint: 128, type } : { scale: 2 / 255, zeroPoint: 0, type };
  const hidden: Activation = type === 'uint8' ? { scale: 0.011, zeroPoint: 0, type } : { scale: 0.011, zeroPoint: -128, type };
  const out: Activation = type === 'uint8' ? { scale: 0.007, zeroPoint: 131, type } : { scale: 0.007, zeroPoint: 3, type };
  const parts = [
    quantized('x', 'xq', input),
    quantizedWeights('w1', 3, [6, 4, 3, 3], 0, perChannel, input.scale, true),
    quantized('relu1', 'h', hidden),
    quantizedWeights('w2', 4, [5, 6, 1, 1], 0, perChannel, hidden.scale, true),
    quantized('conv2', 'y', out),
  ];
  const nodes: TestNode[] = [
    ...parts[0]!.nodes,
    ...parts[1]!.nodes,
    { op: 'Conv', inputs: ['xq', 'w1', 'w1_bias'], outputs: ['conv1'], ints: { kernel_shape: [3, 3], pads: [1, 1, 1, 1] } },
    { op: 'Relu', inputs: ['conv1'], outputs: ['relu1'] },
    ...parts[2]!.nodes,
    ...parts[3]!.nodes,
    { op: 'Conv', inputs: ['h', 'w2', 'w2_bias'], outputs: ['conv2'], ints: { kernel_shape: [1, 1], strides: [2, 2] } },
    ...parts[4]!.nodes,
  ];
  return {
    nodes,
    inputs: [{ name: 'x', type: FLOAT, shape: [1, 4, 8, 8] }],
    outputs: [{ name: 'y', type: FLOAT }],
    initializers: parts.flatMap((p) => p.initializers),
  };
}

/** x [3, 16] -> Q/DQ -> Gemm (transB, bias) -> Relu -> Q/DQ -> MatMul -> Q/DQ -> y [3, 5]. */
function linears(type: 'uint8' | 'int8', perChannel: boolean): TestGraph {
  const input: Activation = type === 'uint8' ? { scale: 2 / 255, zeroPoint: 127, type } : { scale: 2 / 255, zeroPoint: -1, type };
  const hidden: Activation = type === 'uint8' ? { scale: 0.009, zeroPoint: 0, type } : { scale: 0.009, zeroPoint: -128, type };
  const out: Activation = type === 'uint8' ? { scale: 0.005, zeroPoint: 120, type } : { scale: 0.005, zeroPoint: -7, type };
  const parts = [
    quantized('x', 'xq', input),
    quantizedWeights('w1', 5, [12, 16], 0, perChannel, input.scale, true),
    quantized('relu1', 'h', hidden),
    quantizedWeights('w2', 6, [12, 5], 1, perChannel, hidden.scale, false),
    quantized('product2', 'y', out),
  ];
  const nodes: TestNode[] = [
    ...parts[0]!.nodes,
    ...parts[1]!.nodes,
    { op: 'Gemm', inputs: ['xq', 'w1', 'w1_bias'], outputs: ['gemm1'], int: { transB: 1 } },
    { op: 'Relu', inputs: ['gemm1'], outputs: ['relu1'] },
    ...parts[2]!.nodes,
    ...parts[3]!.nodes,
    { op: 'MatMul', inputs: ['h', 'w2'], outputs: ['product2'] },
    ...parts[4]!.nodes,
  ];
  return {
    nodes,
    inputs: [{ name: 'x', type: FLOAT, shape: [3, 16] }],
    outputs: [{ name: 'y', type: FLOAT }],
    initializers: parts.flatMap((p) => p.initializers),
  };
}

const CASES = [
  { name: 'convolutions', build: convolutions, shape: [1, 4, 8, 8], outScale: 0.007, node: NodeUnion.XNNConv2d },
  { name: 'Gemm and MatMul', build: linears, shape: [3, 16], outScale: 0.005, node: NodeUnion.XNNFullyConnected },
] as const;

async function outputs(model: Uint8Array, x: Float32Array, shape: readonly number[], xnnpack: boolean) {
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const expected = (await session.run({ x: new ort.Tensor('float32', x, [...shape]) })).y!.data as Float32Array;
  await session.release();
  const module = await Module.load(importOnnx(model, { xnnpack }).bytes);
  const actual = (await module.run('forward', { x: Tensor.float32([...shape], Array.from(x)) })).y!.toArray() as Float32Array;
  await module.dispose();
  return { expected, actual };
}

/** How many outputs differ, and by at most how many quantization steps. */
function steps(actual: Float32Array, expected: Float32Array, scale: number): { differing: number; most: number } {
  let differing = 0;
  let most = 0;
  for (let i = 0; i < expected.length; i++) {
    const step = Math.round(Math.abs(actual[i]! - expected[i]!) / scale);
    if (step > 0) differing++;
    most = Math.max(most, step);
  }
  return { differing, most };
}

describe('statically quantized products', () => {
  it('quantize NaN to the lowest code and infinities to the ends at the float edge, as onnxruntime (both paths)', async () => {
    for (const c of CASES) {
      const model = onnxModel(c.build('uint8', true), 13);
      const next = seededUniform(42);
      const x = Float32Array.from({ length: c.shape.reduce((a, b) => a * b, 1) }, () => next(-1.2, 1.2));
      [x[0], x[2], x[5], x[18]] = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, Number.NaN];
      for (const xnnpack of [true, false]) {
        const { expected, actual } = await outputs(model, x, c.shape, xnnpack);
        expect(Array.from(actual), `${c.name} (${xnnpack ? 'XNNPACK' : 'portable kernels'})`).toEqual(Array.from(expected));
      }
    }
  });

  for (const c of CASES) {
    for (const type of ['uint8', 'int8'] as const) {
      for (const perChannel of [false, true]) {
        const label = `${c.name}, ${type} activations, ${perChannel ? 'per-channel' : 'per-tensor'} weights`;
        it(`${label}: one delegate call of 8-bit nodes`, () => {
          const model = onnxModel(c.build(type, perChannel), 13);
          const imported = importOnnx(model);
          expect(imported.calls).toEqual({ delegate: 1, kernel: 0 });
          const { builder, exportOptions } = importOnnxGraph(model);
          const payload = builder.export(exportOptions).program.delegatePayloads![0]!;
          const types = payloadNodeTypes(payload);
          expect(types.filter((t) => t === c.node)).toHaveLength(2);
          expect(types).toContain(NodeUnion.XNNConvert);
          // Activations qint8 (uint8 ones shifted by -128), filters qcint8, biases qcint32.
          const graph = payloadGraph(payload);
          const datatypes = new Set(
            Array.from({ length: graph.valuesLength() }, (_, i) => {
              const value = graph.values(i)!;
              if (value.valueType() !== ValueUnion.QuantizedTensorValue) return undefined;
              return (value.value(new QuantizedTensorValue()) as QuantizedTensorValue).tensorValue()!.datatype();
            }),
          );
          expect(datatypes).toContain(Datatype.qint8);
          expect(datatypes).toContain(Datatype.qcint8);
          if (c.node === NodeUnion.XNNConv2d) expect(datatypes).toContain(Datatype.qcint32);
        });
        for (const xnnpack of [true, false]) {
          it(`${label}: within one step of onnxruntime (${xnnpack ? 'XNNPACK' : 'portable kernels'})`, async () => {
            const model = onnxModel(c.build(type, perChannel), 13);
            const next = seededUniform(40);
            const x = Float32Array.from({ length: c.shape.reduce((a, b) => a * b, 1) }, () => next(-1.2, 1.2));
            const { expected, actual } = await outputs(model, x, c.shape, xnnpack);
            const { differing, most } = steps(actual, expected, c.outScale);
            expect(most, `${differing} of ${expected.length} differ`).toBeLessThanOrEqual(1);
          });
        }
      }
    }
  }
});
