// A paddle2onnx-style MobileNet block imports as one XNNPACK delegate call:
// BatchNormalization folds into the convolutions, and Clip, HardSigmoid,
// HardSwish, GlobalAveragePool, Flatten and Softmax lower to delegate nodes.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { Module, Program, Tensor } from '../../lib/index.js';
import { importOnnx, importOnnxGraph } from '../../lib/onnx/index.js';
import { runCli } from '../helpers/cli.js';
import { payloadGraph } from '../helpers/xnnpack-payload.js';
import { onnxModel, type TestGraph } from './onnx-writer.js';
import { BLOCK_INPUT_SHAPE, mobilenetBlockModel, seededValues } from './mobilenet-block.js';

async function onnxruntimeOutput(
  model: Uint8Array,
  feeds: Record<string, { shape: number[]; data: Float32Array }>,
  output: string,
): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const ortFeeds: Record<string, ort.Tensor> = {};
  for (const [name, t] of Object.entries(feeds)) ortFeeds[name] = new ort.Tensor('float32', t.data, t.shape);
  const result = await session.run(ortFeeds);
  await session.release();
  return result[output]!.data as Float32Array;
}

async function etnaOutput(
  bytes: Uint8Array,
  feeds: Record<string, { shape: number[]; data: Float32Array }>,
  output: string,
): Promise<number[]> {
  const module = await Module.load(bytes);
  const tensors: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(feeds)) tensors[name] = Tensor.float32(t.shape, t.data);
  const result = await module.run('forward', tensors);
  await module.dispose();
  return result[output]!.toArray() as number[];
}

/** Largest difference, relative to the largest reference magnitude. */
function relativeError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  expect(actual.length).toBe(expected.length);
  let peak = 0;
  let diff = 0;
  for (let i = 0; i < expected.length; i++) {
    peak = Math.max(peak, Math.abs(expected[i]!));
    diff = Math.max(diff, Math.abs(actual[i]! - expected[i]!));
  }
  return diff / peak;
}

function instructionCounts(bytes: Uint8Array): { counts: Record<string, number>; operators: string[] } {
  const method = Program.load(bytes)
    .describe()
    .methods.find((m) => m.name === 'forward')!;
  return { counts: method.instructions, operators: method.operators };
}

describe('paddle2onnx-style MobileNet block', () => {
  const model = mobilenetBlockModel();
  const input = {
    x: {
      shape: BLOCK_INPUT_SHAPE,
      data: Float32Array.from(
        seededValues(
          BLOCK_INPUT_SHAPE.reduce((a, b) => a * b, 1),
          42,
        ),
      ),
    },
  };

  it('imports as one delegate call and matches onnxruntime', async () => {
    const imported = importOnnx(model);
    expect(imported.calls).toEqual({ delegate: 1, kernel: 0 });
    const { counts, operators } = instructionCounts(imported.bytes);
    expect(counts.DelegateCall).toBe(1);
    expect(counts.KernelCall ?? 0).toBe(0);
    expect(operators).toEqual([]);
    const expected = await onnxruntimeOutput(model, input, 'prob');
    const actual = await etnaOutput(imported.bytes, input, 'prob');
    expect(relativeError(actual, expected)).toBeLessThan(1e-4);
  });

  it('keeps activations between convolutions channels-last inside the delegate', () => {
    const { builder, exportOptions } = importOnnxGraph(model);
    const { program } = builder.export(exportOptions);
    const graph = payloadGraph(program.delegatePayloads![0]!);
    const types = Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!.nodeType());
    // Only the input is transposed to NHWC; the pooled [1, 1, 1, C] holds the same bytes in both layouts and comes back
    // as a reshape; HardSwish, the SE gate and its Mul stay NHWC.
    expect(types.filter((t) => t === NodeUnion.XNNStaticTranspose)).toHaveLength(1);
    expect(types.filter((t) => t === NodeUnion.XNNGlobalAvgPooling2d)).toHaveLength(2);
    expect(types.filter((t) => t === NodeUnion.XNNConv2d || t === NodeUnion.XNNDepthwiseConv2d)).toHaveLength(4);
  });

  it('reports delegate and kernel calls on the import-onnx summary line', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-mobilenet-'));
    try {
      const modelPath = path.join(dir, 'block.onnx');
      fs.writeFileSync(modelPath, model);
      const lowered = runCli(['import-onnx', modelPath, '-o', path.join(dir, 'block.pte')]);
      expect(lowered.status).toBe(0);
      expect(lowered.stdout).toContain('; 1 delegate calls, 0 kernel calls');
      const portable = runCli(['import-onnx', modelPath, '-o', path.join(dir, 'portable.pte'), '--no-xnnpack']);
      expect(portable.stdout).toMatch(/; 0 delegate calls, [1-9]\d* kernel calls/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('folds batch normalization into the convolutions on portable kernels too', async () => {
    const imported = importOnnx(model, { xnnpack: false });
    expect(imported.calls.delegate).toBe(0);
    const { operators } = instructionCounts(imported.bytes);
    expect(operators.filter((op) => /rsqrt|batch_norm/.test(op))).toEqual([]);
    // Both BatchNormalization nodes disappeared into the convolutions before them.
    expect(imported.nodes.folded).toBe(2);
    const expected = await onnxruntimeOutput(model, input, 'prob');
    const actual = await etnaOutput(imported.bytes, input, 'prob');
    expect(relativeError(actual, expected)).toBeLessThan(1e-4);
  });

  it('turns a batch normalization without a convolution before it into a constant scale and shift', async () => {
    const channels = 3;
    const param = (name: string, seed: number, low: number, high: number) => ({
      name,
      dims: [channels],
      floats: seededValues(channels, seed, low, high),
    });
    const graph: TestGraph = {
      nodes: [
        { op: 'Relu', inputs: ['x'], outputs: ['r'] },
        { op: 'BatchNormalization', inputs: ['r', 'g', 'b', 'm', 'v'], outputs: ['y'], float: { epsilon: 1e-3 } },
      ],
      inputs: [{ name: 'x', type: 1, shape: [1, channels, 4, 5] }],
      outputs: [{ name: 'y', type: 1, shape: [1, channels, 4, 5] }],
      initializers: [param('g', 1, 0.5, 2), param('b', 2, -1, 1), param('m', 3, -1, 1), param('v', 4, 0.1, 3)],
    };
    const bnModel = onnxModel(graph);
    const feeds = { x: { shape: [1, channels, 4, 5], data: Float32Array.from(seededValues(channels * 20, 7, -3, 3)) } };
    const expected = await onnxruntimeOutput(bnModel, feeds, 'y');
    for (const xnnpack of [false, true]) {
      const imported = importOnnx(bnModel, { xnnpack });
      const { operators } = instructionCounts(imported.bytes);
      expect(operators.filter((op) => /rsqrt|batch_norm/.test(op))).toEqual([]);
      if (xnnpack) expect(imported.calls).toEqual({ delegate: 1, kernel: 0 });
      expect(relativeError(await etnaOutput(imported.bytes, feeds, 'y'), expected)).toBeLessThan(1e-5);
    }
  });
});
