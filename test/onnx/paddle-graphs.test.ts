// The paddle2onnx-style graphs `etna bench` times: a MobileNetV3-style
// classifier, a DBNet-style detector (FPN with nearest Resize, Concat, Add,
// ConvTranspose head) and an SVTR-style recogniser (AveragePool, decomposed
// LayerNorm, attention) import as few delegate calls with no portable kernel,
// keep activations channels-last, and match onnxruntime.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { Module, Tensor } from '../../lib/index.js';
import { importOnnx, importOnnxGraph } from '../../lib/onnx/index.js';
import { builderToOnnx } from '../../lib/tools/onnx-emitter/index.js';
import { compareOnnxGraph, ONNX_GRAPH_NAMES, relativeDifference } from '../../lib/tools/bench/onnx-graphs.js';
import { isBuiltInProgram } from '../../lib/tools/bench/harness.js';
import {
  CLASSIFIER_INPUT_SHAPE,
  DETECTOR_INPUT_SHAPE,
  RECOGNIZER_INPUT_SHAPE,
  dbnetDetector,
  mobilenetV3Classifier,
  seededUniform,
  svtrRecognizer,
} from '../../lib/tools/onnx-emitter/paddle-style.js';
import { payloadNodeTypes } from '../helpers/xnnpack-payload.js';

const GRAPHS = [
  { name: 'MobileNetV3-style classifier', build: mobilenetV3Classifier, shape: CLASSIFIER_INPUT_SHAPE, output: 'prob' },
  { name: 'DBNet-style detector', build: dbnetDetector, shape: DETECTOR_INPUT_SHAPE, output: 'maps' },
  { name: 'SVTR-style recogniser', build: svtrRecognizer, shape: RECOGNIZER_INPUT_SHAPE, output: 'probs' },
] as const;

describe('paddle2onnx-style graphs', () => {
  for (const graph of GRAPHS) {
    const rewritten = 'the imported graph written back as ONNX (HardSwish, Clip, Resize, ConvTranspose)';
    it(`${graph.name}: ${rewritten} matches the original on onnxruntime`, async () => {
      const model = graph.build();
      const [folded] = builderToOnnx(importOnnxGraph(model).builder).methods;
      const next = seededUniform(4);
      const input = new ort.Tensor(
        'float32',
        Float32Array.from({ length: graph.shape.reduce((a, b) => a * b, 1) }, () => next(-1, 1)),
        [...graph.shape],
      );
      const outputs: Float32Array[] = [];
      for (const bytes of [model, folded!.bytes]) {
        const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1 });
        const result = await session.run({ [session.inputNames[0]!]: input });
        outputs.push(result[session.outputNames[0]!]!.data as Float32Array);
        await session.release();
      }
      const [original, written] = outputs as [Float32Array, Float32Array];
      expect(written.length).toBe(original.length);
      expect(relativeDifference(written, original)).toBeLessThan(1e-5);
    });

    it(`${graph.name}: at most 3 delegate calls, no portable kernel, matches onnxruntime`, async () => {
      const model = graph.build();
      const imported = importOnnx(model);
      expect(imported.calls.delegate).toBeGreaterThanOrEqual(1);
      expect(imported.calls.delegate).toBeLessThanOrEqual(3);
      expect(imported.calls.kernel).toBe(0);

      const next = seededUniform(3);
      const data = Float32Array.from({ length: graph.shape.reduce((a, b) => a * b, 1) }, () => next(-1, 1));
      const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
      const expected = (await session.run({ x: new ort.Tensor('float32', data, [...graph.shape]) }))[graph.output]!.data as Float32Array;
      await session.release();
      const module = await Module.load(imported.bytes);
      const actual = (await module.run('forward', { x: Tensor.float32([...graph.shape], data) }))[graph.output]!.toArray() as number[];
      await module.dispose();
      expect(actual.length).toBe(expected.length);
      expect(relativeDifference(actual, expected)).toBeLessThan(1e-4);
    });
  }

  /** The node types of the one delegate payload `model` imports to. */
  const delegateNodeTypes = (model: Uint8Array): NodeUnion[] => {
    const { builder, exportOptions } = importOnnxGraph(model);
    const { program } = builder.export(exportOptions);
    expect(program.delegatePayloads).toHaveLength(1);
    return payloadNodeTypes(program.delegatePayloads![0]!);
  };

  it('keeps the detector channels-last from input to output: Resize, Add, Concat and ConvTranspose included', () => {
    const types = delegateNodeTypes(dbnetDetector());
    // Only the input is transposed; the one-channel map comes back to NCHW as a reshape (the same bytes).
    expect(types.filter((t) => t === NodeUnion.XNNStaticTranspose)).toHaveLength(1);
    expect(types.filter((t) => t === NodeUnion.XNNConvTranspose2d)).toHaveLength(2);
    expect(types.filter((t) => t === NodeUnion.XNNConcatenate4)).toHaveLength(1);
  });

  it("runs the recogniser's AveragePool and the LayerNorm means as delegate nodes", () => {
    const types = delegateNodeTypes(svtrRecognizer());
    expect(types.filter((t) => t === NodeUnion.XNNAvgPooling2d)).toHaveLength(1);
    // Nine linear layers, and two means in each of five decomposed LayerNorms (a unit-weight sum, then a divide).
    expect(types.filter((t) => t === NodeUnion.XNNFullyConnected)).toHaveLength(9 + 10);
    expect(types.filter((t) => t === NodeUnion.XNNBatchMatrixMultiply)).toHaveLength(4);
    expect(types.filter((t) => t === NodeUnion.XNNSoftmax)).toHaveLength(3);
  });

  it('are built-in bench programs, compared with onnxruntime in one process', async () => {
    expect(ONNX_GRAPH_NAMES).toEqual(['mobilenetv3-cls', 'dbnet-det', 'svtr-rec']);
    for (const name of ONNX_GRAPH_NAMES) expect(isBuiltInProgram(name)).toBe(true);
    const comparison = await compareOnnxGraph(ort, 'mobilenetv3-cls', { iterations: 2, warmup: 1, threads: 1 });
    expect(comparison.calls).toEqual({ delegate: 1, kernel: 0 });
    expect(comparison.relativeError).toBeLessThan(1e-4);
    expect(comparison.ratio).toBeCloseTo(comparison.etnaP50Ms / comparison.onnxruntimeP50Ms, 10);
  });
});
