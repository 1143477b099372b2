// paddle2onnx-style graphs as bench programs: a MobileNetV3-style classifier
// (1x3x48x192), a DBNet-style detector (1x3x320x320) and an SVTR-style
// recogniser (1x3x48x320, conv stem and attention blocks), written with seeded
// weights, imported onto the XNNPACK delegate, and run beside onnxruntime-node
// on the same ONNX bytes and the same input. Besides the harness's per-config
// rows, `compareOnnxGraph` times both runtimes in one process, alternating
// calls, and reports the p50 ratio, the output difference relative to the
// largest output magnitude, and the program's delegate and kernel calls.
import { performance } from 'node:perf_hooks';
import type * as Ort from 'onnxruntime-node';

import { Module, Tensor } from '../../index.js';
import { importOnnx, importOnnxGraph } from '../../onnx/index.js';
import type { ProgramBuilder } from '../../export/index.js';
import { numel } from '../../shape.js';
import type { ExampleCall, ReferenceTensor } from '../examples/index.js';
import {
  CLASSIFIER_INPUT_SHAPE,
  DETECTOR_INPUT_SHAPE,
  RECOGNIZER_INPUT_SHAPE,
  dbnetDetector,
  mobilenetV3Classifier,
  seededUniform,
  svtrRecognizer,
} from '../onnx-emitter/paddle-style.js';

interface OnnxGraphBench {
  readonly model: () => Uint8Array;
  readonly inputShape: readonly number[];
  readonly output: string;
}

const GRAPHS: Readonly<Record<string, OnnxGraphBench>> = {
  'mobilenetv3-cls': { model: mobilenetV3Classifier, inputShape: CLASSIFIER_INPUT_SHAPE, output: 'prob' },
  'dbnet-det': { model: dbnetDetector, inputShape: DETECTOR_INPUT_SHAPE, output: 'maps' },
  'svtr-rec': { model: svtrRecognizer, inputShape: RECOGNIZER_INPUT_SHAPE, output: 'probs' },
};

export const ONNX_GRAPH_NAMES: readonly string[] = Object.keys(GRAPHS);

export function isOnnxGraphName(name: string): boolean {
  return Object.hasOwn(GRAPHS, name);
}

function graphOf(name: string): OnnxGraphBench {
  const graph = GRAPHS[name];
  if (graph === undefined) throw new Error(`${name} is not an ONNX graph bench`);
  return graph;
}

/** The input every run of `name` gets: uniform in [-1, 1) from a fixed seed. */
function graphInput(name: string): ReferenceTensor {
  const { inputShape } = graphOf(name);
  const next = seededUniform(3);
  const data = Float32Array.from({ length: numel(inputShape) }, () => next(-1, 1));
  return { dtype: 'float32', shape: [...inputShape], data };
}

type Runner = { execute(method: string, inputs: readonly ReferenceTensor[]): Promise<ReferenceTensor[]>; release(): Promise<void> };

async function ortSession(
  ort: typeof Ort,
  name: string,
  threads: number,
): Promise<{ run(input: ReferenceTensor): Promise<Float32Array>; release(): Promise<void> }> {
  const graph = graphOf(name);
  const session = await ort.InferenceSession.create(graph.model(), {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  return {
    run: async (input) => {
      const outputs = await session.run({ x: new ort.Tensor('float32', input.data as Float32Array, [...input.shape]) });
      return outputs[graph.output]!.data as Float32Array;
    },
    release: () => session.release(),
  };
}

/** The bench harness's view of a graph: what etna runs, the calls, and the original model on onnxruntime. */
export function onnxGraphProgram(name: string): {
  build(): ProgramBuilder;
  pte(): Uint8Array;
  reference: undefined;
  calls(): ExampleCall[];
  original(ort: typeof Ort, threads: number): Promise<Runner>;
} {
  const graph = graphOf(name);
  return {
    build: () => importOnnxGraph(graph.model()).builder,
    pte: () => importOnnx(graph.model()).bytes,
    reference: undefined,
    calls: () => [{ method: 'forward', inputs: [graphInput(name)] }],
    original: async (ort, threads) => {
      const session = await ortSession(ort, name, threads);
      return {
        execute: async (_method, inputs) => [{ dtype: 'float32', shape: [], data: await session.run(inputs[0]!) }],
        release: () => session.release(),
      };
    },
  };
}

export interface OnnxGraphComparison extends AlternatedTiming {
  program: string;
  /** Threads each runtime computed on. */
  threads: number;
  /** Largest output difference over the largest onnxruntime output magnitude. */
  relativeError: number;
  calls: { delegate: number; kernel: number };
}

/**
 * Largest |actual - expected| over the largest |expected| (the difference
 * itself when expected is all zeros); Infinity when lengths differ.
 */
export function relativeDifference(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  if (actual.length !== expected.length) return Number.POSITIVE_INFINITY;
  let peak = 0;
  let diff = 0;
  for (let i = 0; i < expected.length; i++) {
    peak = Math.max(peak, Math.abs(expected[i]!));
    diff = Math.max(diff, Math.abs(actual[i]! - expected[i]!));
  }
  return peak === 0 ? diff : diff / peak;
}

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/** Per-call p50 and fastest call of two runtimes timed alternately, so both see the same machine load. */
export interface AlternatedTiming {
  etnaP50Ms: number;
  onnxruntimeP50Ms: number;
  /** etna p50 / onnxruntime p50. */
  ratio: number;
  /** Fastest calls: on a loaded machine, closer to the cost of the work itself. */
  etnaMinMs: number;
  onnxruntimeMinMs: number;
}

/** Calls `etna` then `onnxruntime`, `warmup + iterations` times, timing each call after the warm-up. */
export async function alternateCalls(
  etna: () => unknown,
  onnxruntime: () => Promise<unknown>,
  options: { iterations: number; warmup: number },
): Promise<AlternatedTiming> {
  const etnaSamples: number[] = [];
  const ortSamples: number[] = [];
  for (let i = 0; i < options.warmup + options.iterations; i++) {
    let t0 = performance.now();
    await etna();
    const etnaMs = performance.now() - t0;
    t0 = performance.now();
    await onnxruntime();
    const ortMs = performance.now() - t0;
    if (i >= options.warmup) {
      etnaSamples.push(etnaMs);
      ortSamples.push(ortMs);
    }
  }
  const etnaP50Ms = median(etnaSamples);
  const onnxruntimeP50Ms = median(ortSamples);
  return {
    etnaP50Ms,
    onnxruntimeP50Ms,
    ratio: etnaP50Ms / onnxruntimeP50Ms,
    etnaMinMs: Math.min(...etnaSamples),
    onnxruntimeMinMs: Math.min(...ortSamples),
  };
}

/**
 * Both runtimes in this process on one thread each, on the calling thread,
 * calls alternating so both see the same machine load; each allocates its
 * outputs per call.
 */
export async function compareOnnxGraph(
  ort: typeof Ort,
  name: string,
  options: { iterations: number; warmup: number; threads: number },
): Promise<OnnxGraphComparison> {
  const graph = graphOf(name);
  const imported = importOnnx(graph.model());
  const input = graphInput(name);
  const module = await Module.load(imported.bytes, { numThreads: options.threads });
  const session = await ortSession(ort, name, options.threads);
  try {
    // onnxruntime-node runs a session on the calling thread, wrapping the caller's array; etna does the same here.
    const x = new Tensor('float32', [...input.shape], input.data as Float32Array);
    const etnaRun = async (): Promise<ArrayLike<number>> => (module.executeSync('forward', [x])[0] as Tensor).data as Float32Array;
    const relativeError = relativeDifference(await etnaRun(), await session.run(input));
    const timing = await alternateCalls(etnaRun, () => session.run(input), options);
    return {
      program: name,
      threads: options.threads,
      ...timing,
      relativeError,
      calls: imported.calls,
    };
  } finally {
    await session.release();
    await module.dispose();
  }
}
