// 2-D MaxPool and AveragePool between convolutions run on the XNNPACK
// delegate (one pooling node) when the aten pool means the same as the ONNX
// one; other windows keep the portable gather and still match onnxruntime.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { Module, Tensor } from '../../lib/index.js';
import { importOnnx, importOnnxGraph } from '../../lib/onnx/index.js';
import { relativeDifference } from '../../lib/tools/bench/onnx-graphs.js';
import { writeOnnxModel, type OnnxAttributeValue, type OnnxGraphNode } from '../../lib/tools/onnx-emitter/graph-writer.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { payloadNodeTypes } from '../helpers/xnnpack-payload.js';

const INPUT = [1, 8, 12, 48] as const;

/**
 * Conv 3x3 + HardSwish, the pool, then the classifier tail paddle2onnx writes:
 * GlobalAveragePool, a Shape/Cast/Slice/Concat reshape, MatMul and Softmax.
 */
function pooledClassifier(pool: { op: 'MaxPool' | 'AveragePool'; attributes: Record<string, OnnxAttributeValue> }): Uint8Array {
  const next = seededUniform(5);
  const floats = (n: number, scale: number): Float32Array => Float32Array.from({ length: n }, () => next(-scale, scale));
  const nodes: OnnxGraphNode[] = [
    { op: 'Conv', inputs: ['x', 'w'], outputs: ['conv'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } },
    { op: 'HardSwish', inputs: ['conv'], outputs: ['act'] },
    { op: pool.op, inputs: ['act'], outputs: ['pooled'], attributes: pool.attributes },
    { op: 'GlobalAveragePool', inputs: ['pooled'], outputs: ['gap'] },
    { op: 'Shape', inputs: ['gap'], outputs: ['shape'] },
    { op: 'Cast', inputs: ['shape'], outputs: ['shape32'], attributes: { to: { int: 6 } } },
    { op: 'Slice', inputs: ['shape32', 'zero', 'one', 'zero'], outputs: ['batch32'] },
    { op: 'Cast', inputs: ['batch32'], outputs: ['batch'], attributes: { to: { int: 7 } } },
    { op: 'Concat', inputs: ['batch', 'minusOne'], outputs: ['flatShape'], attributes: { axis: { int: 0 } } },
    { op: 'Reshape', inputs: ['gap', 'flatShape'], outputs: ['flat'] },
    { op: 'MatMul', inputs: ['flat', 'fc'], outputs: ['logits'] },
    { op: 'Softmax', inputs: ['logits'], outputs: ['prob'], attributes: { axis: { int: 1 } } },
  ];
  return writeOnnxModel(
    {
      nodes,
      inputs: [{ name: 'x', shape: INPUT }],
      outputs: [{ name: 'prob', shape: [1, 2] }],
      initializers: [
        { name: 'w', dims: [16, 8, 3, 3], float32: floats(16 * 8 * 9, 0.2) },
        { name: 'fc', dims: [16, 2], float32: floats(32, 1) },
        { name: 'zero', dims: [1], int64: [0] },
        { name: 'one', dims: [1], int64: [1] },
        { name: 'minusOne', dims: [1], int64: [-1] },
      ],
    },
    14,
  );
}

async function compareWithOnnxruntime(model: Uint8Array): Promise<number> {
  const next = seededUniform(9);
  const data = Float32Array.from({ length: INPUT.reduce((a, b) => a * b, 1) }, () => next(-1, 1));
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const expected = (await session.run({ x: new ort.Tensor('float32', data, [...INPUT]) })).prob!.data as Float32Array;
  await session.release();
  const module = await Module.load(importOnnx(model).bytes);
  const actual = (await module.run('forward', { x: Tensor.float32([...INPUT], data) })).prob!.toArray() as number[];
  await module.dispose();
  return relativeDifference(actual, expected);
}

const DELEGATED = [
  {
    name: 'MaxPool 2x2 stride 2',
    op: 'MaxPool',
    attributes: { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] } },
    node: NodeUnion.XNNMaxPooling2d,
  },
  {
    name: 'MaxPool 3x3 stride 2, pads 1',
    op: 'MaxPool',
    attributes: { kernel_shape: { ints: [3, 3] }, strides: { ints: [2, 2] }, pads: { ints: [1, 1, 1, 1] } },
    node: NodeUnion.XNNMaxPooling2d,
  },
  {
    name: 'MaxPool 3x3 stride 2 with ceil_mode (a partial last window)',
    op: 'MaxPool',
    attributes: { kernel_shape: { ints: [3, 3] }, strides: { ints: [2, 2] }, ceil_mode: { int: 1 } },
    node: NodeUnion.XNNMaxPooling2d,
  },
  {
    name: 'MaxPool 2x2 stride 3x2 with ceil_mode and pads 1',
    op: 'MaxPool',
    attributes: { kernel_shape: { ints: [2, 2] }, strides: { ints: [3, 2] }, pads: { ints: [1, 1, 1, 1] }, ceil_mode: { int: 1 } },
    node: NodeUnion.XNNMaxPooling2d,
  },
  {
    name: 'AveragePool 3x2 stride 3x2',
    op: 'AveragePool',
    attributes: { kernel_shape: { ints: [3, 2] }, strides: { ints: [3, 2] } },
    node: NodeUnion.XNNAvgPooling2d,
  },
  {
    name: 'AveragePool 3x3, pads 1 left out of the count',
    op: 'AveragePool',
    attributes: { kernel_shape: { ints: [3, 3] }, strides: { ints: [1, 1] }, pads: { ints: [1, 1, 1, 1] } },
    node: NodeUnion.XNNAvgPooling2d,
  },
] as const;

const PORTABLE = [
  {
    name: 'AveragePool with pads counted',
    op: 'AveragePool',
    attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] }, count_include_pad: { int: 1 } },
  },
  {
    name: 'MaxPool with asymmetric pads',
    op: 'MaxPool',
    attributes: { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] }, pads: { ints: [0, 0, 1, 1] } },
  },
  {
    name: 'AveragePool with ceil_mode',
    op: 'AveragePool',
    attributes: { kernel_shape: { ints: [3, 3] }, strides: { ints: [2, 2] }, ceil_mode: { int: 1 } },
  },
] as const;

describe('2-D pooling on the XNNPACK delegate', () => {
  for (const pool of DELEGATED) {
    it(`${pool.name}: one delegate call, no kernel, one pooling node, matches onnxruntime`, async () => {
      const model = pooledClassifier(pool);
      const imported = importOnnx(model);
      expect(imported.calls).toEqual({ delegate: 1, kernel: 0 });
      const { builder, exportOptions } = importOnnxGraph(model);
      const types = payloadNodeTypes(builder.export(exportOptions).program.delegatePayloads![0]!);
      expect(types.filter((t) => t === pool.node)).toHaveLength(1);
      expect(await compareWithOnnxruntime(model)).toBeLessThan(1e-5);
    });
  }

  for (const pool of PORTABLE) {
    it(`${pool.name}: stays a portable gather and matches onnxruntime`, async () => {
      const model = pooledClassifier(pool);
      expect(importOnnx(model).calls.kernel).toBeGreaterThan(0);
      expect(await compareWithOnnxruntime(model)).toBeLessThan(1e-5);
    });
  }
});
