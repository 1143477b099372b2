// The corpus's static quantization tool (lib/tools/bench/qdq-quantize.ts) on a
// small opset-9 float network: Conv -> BatchNormalization -> Clip(0, 6) ->
// depthwise Conv -> Relu -> GlobalAveragePool -> Flatten -> MatMul. Its QDQ
// form (BN folded, Clip's attributes upgraded to inputs, int8 activations,
// per-channel weights, int32 biases) runs in onnxruntime, and etna imports it
// as one delegate call of 8-bit nodes that matches onnxruntime.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { Module, Tensor } from '../../lib/index.js';
import { constFromProto, toNumbers } from '../../lib/onnx/constant.js';
import { importOnnx, importOnnxGraph, readOnnxModel } from '../../lib/onnx/index.js';
import { relativeDifference } from '../../lib/tools/bench/onnx-graphs.js';
import { quantizeStatic } from '../../lib/tools/bench/qdq-quantize.js';
import { writeOnnxModel } from '../../lib/tools/onnx-emitter/graph-writer.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { payloadNodeTypes } from '../helpers/xnnpack-payload.js';

const SHAPE = [1, 3, 16, 16];

function floatNetwork(): Uint8Array {
  const next = seededUniform(12);
  const floats = (n: number, low: number, high: number): Float32Array => Float32Array.from({ length: n }, () => next(low, high));
  return writeOnnxModel(
    {
      nodes: [
        { op: 'Conv', inputs: ['x', 'w1'], outputs: ['c1'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } },
        { op: 'BatchNormalization', inputs: ['c1', 'gamma', 'beta', 'mean', 'variance'], outputs: ['n1'] },
        { op: 'Clip', inputs: ['n1'], outputs: ['a1'], attributes: { min: { float: 0 }, max: { float: 6 } } },
        {
          op: 'Conv',
          inputs: ['a1', 'w2', 'b2'],
          outputs: ['c2'],
          attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] }, group: { int: 8 }, strides: { ints: [2, 2] } },
        },
        { op: 'Relu', inputs: ['c2'], outputs: ['a2'] },
        { op: 'GlobalAveragePool', inputs: ['a2'], outputs: ['pooled'] },
        { op: 'Flatten', inputs: ['pooled'], outputs: ['flat'] },
        { op: 'MatMul', inputs: ['flat', 'fc'], outputs: ['y'] },
      ],
      inputs: [{ name: 'x', shape: SHAPE }],
      outputs: [{ name: 'y', shape: [1, 4] }],
      initializers: [
        { name: 'w1', dims: [8, 3, 3, 3], float32: floats(216, -0.5, 0.5) },
        { name: 'gamma', dims: [8], float32: floats(8, 0.5, 1.5) },
        { name: 'beta', dims: [8], float32: floats(8, -0.2, 0.2) },
        { name: 'mean', dims: [8], float32: floats(8, -0.1, 0.1) },
        { name: 'variance', dims: [8], float32: floats(8, 0.5, 1) },
        { name: 'w2', dims: [8, 1, 3, 3], float32: floats(72, -0.5, 0.5) },
        { name: 'b2', dims: [8], float32: floats(8, -0.1, 0.1) },
        { name: 'fc', dims: [8, 4], float32: floats(32, -1, 1) },
      ],
    },
    9,
  );
}

describe('static quantization of a float network (the corpus tool)', () => {
  it('writes the QDQ form: Q/DQ around every product, BatchNormalization folded, opset 13', async () => {
    const model = readOnnxModel(await quantizeStatic(ort, floatNetwork(), { x: SHAPE }));
    const ops = model.graph.nodes.map((n) => n.opType);
    expect(model.opsets.get('')).toBe(13);
    expect(ops).not.toContain('BatchNormalization');
    // x, the two convolutions' results (after Clip and Relu), the MatMul's input and its result (a graph output).
    expect(ops.filter((op) => op === 'QuantizeLinear').length).toBe(5);
    // Weights and biases (3 + 1), one activation per product, one shared by float readers of each quantized result.
    expect(ops.filter((op) => op === 'DequantizeLinear').length).toBeGreaterThanOrEqual(7);
  });

  it('imports as one delegate call of 8-bit nodes and matches onnxruntime on both paths', async () => {
    const bytes = await quantizeStatic(ort, floatNetwork(), { x: SHAPE });
    expect(importOnnx(bytes).calls).toEqual({ delegate: 1, kernel: 0 });
    const { builder, exportOptions } = importOnnxGraph(bytes);
    const types = payloadNodeTypes(builder.export(exportOptions).program.delegatePayloads![0]!);
    expect(types.filter((t) => t === NodeUnion.XNNConv2d)).toHaveLength(2);
    expect(types.filter((t) => t === NodeUnion.XNNFullyConnected)).toHaveLength(1);

    const next = seededUniform(3);
    const x = Float32Array.from({ length: SHAPE.reduce((a, b) => a * b, 1) }, () => next(-1, 1));
    const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1 });
    const expected = (await session.run({ x: new ort.Tensor('float32', x, SHAPE) })).y!.data as Float32Array;
    await session.release();
    for (const xnnpack of [true, false]) {
      const module = await Module.load(importOnnx(bytes, { xnnpack }).bytes);
      const actual = (await module.run('forward', { x: Tensor.float32(SHAPE, Array.from(x)) })).y!.toArray() as Float32Array;
      await module.dispose();
      expect(relativeDifference(actual, expected), xnnpack ? 'XNNPACK' : 'portable').toBeLessThanOrEqual(1e-6);
    }
  });

  // One 1x1 Conv of two output channels over an opset-9 graph whose Squeeze keeps its axes as an attribute.
  const CONV_SHAPE = [1, 2, 4, 4];
  function convNetwork(weights: number[], before: 'none' | 'overflow'): Uint8Array {
    const overflow = [
      { op: 'Mul', inputs: ['x', 'big'], outputs: ['x1'] },
      { op: 'Mul', inputs: ['x1', 'big'], outputs: ['x2'] },
    ];
    return writeOnnxModel(
      {
        nodes: [
          ...(before === 'overflow' ? overflow : []),
          { op: 'Conv', inputs: [before === 'overflow' ? 'x2' : 'x', 'w'], outputs: ['c'], attributes: { kernel_shape: { ints: [1, 1] } } },
          { op: 'ReduceMean', inputs: ['c'], outputs: ['m'], attributes: { axes: { ints: [2, 3] }, keepdims: { int: 1 } } },
          { op: 'Squeeze', inputs: ['m'], outputs: ['y'], attributes: { axes: { ints: [2, 3] } } },
        ],
        inputs: [{ name: 'x', shape: CONV_SHAPE }],
        outputs: [{ name: 'y', shape: [1, 2] }],
        initializers: [
          { name: 'w', dims: [2, 2, 1, 1], float32: Float32Array.from(weights) },
          { name: 'big', dims: [], float32: Float32Array.from([1e30]) },
        ],
      },
      9,
    );
  }

  it('gives a channel whose weights are all below float32 normal range the scale 1, as quantize_static does', async () => {
    // 1e-40 is a float32 subnormal: scale 1e-40 / 127 would be too, which XNNPACK rejects.
    const bytes = await quantizeStatic(ort, convNetwork([1e-40, -1e-40, 0.5, -0.25], 'none'), { x: CONV_SHAPE });
    const model = readOnnxModel(bytes);
    const scale = model.graph.initializers.find((t) => t.name === 'c_weight_scale')!;
    expect(toNumbers(constFromProto(scale, 'scale'))).toEqual([1, Math.fround(0.5 / 127)]);
    expect(model.graph.nodes.find((n) => n.opType === 'Squeeze')!.inputs).toHaveLength(2);

    const next = seededUniform(5);
    const x = Float32Array.from({ length: 32 }, () => next(-1, 1));
    const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1 });
    const expected = (await session.run({ x: new ort.Tensor('float32', x, CONV_SHAPE) })).y!.data as Float32Array;
    await session.release();
    const module = await Module.load(importOnnx(bytes).bytes);
    const actual = (await module.run('forward', { x: Tensor.float32(CONV_SHAPE, Array.from(x)) })).y!.toArray() as Float32Array;
    await module.dispose();
    expect(relativeDifference(actual, expected)).toBeLessThanOrEqual(1e-6);
  });

  it('rejects a product input whose calibration range reached infinity, naming the tensor', async () => {
    await expect(quantizeStatic(ort, convNetwork([1, 0, 0, 1], 'overflow'), { x: CONV_SHAPE })).rejects.toMatchObject({
      code: 'INVALID_INPUT',
      message: expect.stringMatching(/tensor 'x2' reached (-)?Infinity in calibration/),
    });
  });
});
