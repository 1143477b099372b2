// The three runtimes `etna bench llm` compares, each behind one interface:
// a prefill from an empty cache that returns the last position's
// log-probabilities, and decode steps that continue from it. Each is driven
// the way its users drive it: etna through its prefill/decode methods,
// llama.cpp through node-llama-cpp's context sequence (CPU only, its prebuilt
// binary, never a build), onnxruntime with the cache passed in and out.
import { createRequire } from 'node:module';

import { EtnaError } from '../../../errors.js';
import { Module, Tensor } from '../../../index.js';
import { headDim, type Llama8da4wConfig } from '../../examples/llama-8da4w.js';
import { ONNX_LLAMA_NAMES } from './onnx-llama.js';

export const LLM_RUNTIMES = ['etna', 'llama.cpp', 'onnxruntime'] as const;
export type LlmRuntime = (typeof LLM_RUNTIMES)[number];

/** The package each peer runtime comes in: dev dependencies, which an installed etna may lack. */
export const LLM_PEER_PACKAGES: Readonly<Record<LlmRuntime, string | undefined>> = {
  etna: undefined,
  'llama.cpp': 'node-llama-cpp',
  onnxruntime: 'onnxruntime-node',
};

export function llmRuntimeAvailable(runtime: LlmRuntime): boolean {
  const name = LLM_PEER_PACKAGES[runtime];
  if (name === undefined) return true;
  try {
    createRequire(import.meta.url).resolve(name);
    return true;
  } catch {
    return false;
  }
}

export interface LlmRunner {
  /**
   * Runs `tokens` from position 0 on an empty cache. With `output`, returns
   * the last position's log-probabilities (log-softmax of the logits);
   * without, the runtime still computes the logits but nothing is copied out.
   */
  prefill(tokens: readonly number[], output: boolean): Promise<Float32Array | undefined>;
  /** One token at the next position; `output` as for prefill. */
  decode(token: number, output: boolean): Promise<Float32Array | undefined>;
  dispose(): Promise<void>;
}

/** log-softmax of `logits`, in double precision. */
export function logSoftmax(logits: ArrayLike<number>): Float32Array {
  let peak = -Infinity;
  for (let i = 0; i < logits.length; i++) peak = Math.max(peak, logits[i]!);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - peak);
  const offset = peak + Math.log(sum);
  return Float32Array.from({ length: logits.length }, (_, i) => logits[i]! - offset);
}

/** Loads a model file into a runner: what the load time measures. */
export type LlmLoader = (path: string, config: Llama8da4wConfig, threads: number) => Promise<LlmRunner>;

async function etnaRunner(path: string, config: Llama8da4wConfig, threads: number): Promise<LlmRunner> {
  // Mapped, as llama.cpp maps its GGUF: the pages packing read go back after the load.
  const module = await Module.load(path, { shareMemoryArenas: true, numThreads: threads, mmap: true });
  let position = 0;
  const lastRow = (logits: Tensor): Float32Array => {
    const data = logits.data as Float32Array;
    return logSoftmax(data.subarray(data.length - config.vocab));
  };
  return {
    async prefill(tokens, output) {
      // No reset: a prefill from position 0 writes the cache rows it attends to, and nothing later is read.
      const [logits] = await module.execute('prefill', [Tensor.int64([1, tokens.length], tokens), Tensor.int64([1], [0])]);
      position = tokens.length;
      return output ? lastRow(logits as Tensor) : undefined;
    },
    async decode(token, output) {
      const [logits] = await module.execute('decode', [Tensor.int64([1, 1], [token]), Tensor.int64([1], [position])]);
      position++;
      return output ? lastRow(logits as Tensor) : undefined;
    },
    dispose: () => module.dispose(),
  };
}

async function llamaCppLoader(): Promise<LlmLoader> {
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  // `build: 'never'`: only the prebuilt CPU binary; no download, no compile.
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error, progressLogs: false });
  return (path, config, threads) => llamaCppRunner(llama, path, config, threads);
}

type Llama = Awaited<ReturnType<typeof import('node-llama-cpp')['getLlama']>>;

async function llamaCppRunner(llama: Llama, path: string, config: Llama8da4wConfig, threads: number): Promise<LlmRunner> {
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  const context = await model.createContext({ contextSize: config.context, batchSize: config.prefillLength, threads, sequences: 1 });
  const sequence = context.getSequence();
  // Greedy choice when only timing (what llama.cpp's own loop does with the logits); the full distribution when checking.
  const next = (output: boolean) => ({
    generateNext: output
      ? { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } }
      : { token: true, options: { temperature: 0 } },
  });
  const logProbabilities = (probabilities: Map<number, number> | undefined): Float32Array => {
    if (probabilities === undefined) throw new EtnaError('INTERNAL', 'llama.cpp returned no probabilities');
    const out = new Float32Array(config.vocab).fill(-Infinity);
    for (const [token, p] of probabilities) out[token] = Math.log(p);
    return out;
  };
  const evaluate = async (tokens: readonly number[], output: boolean): Promise<Float32Array | undefined> => {
    const last = (token: number): [number, ReturnType<typeof next>] => [token, next(output)];
    const items = tokens.map((token, i) => (i === tokens.length - 1 ? last(token) : token));
    const results = await sequence.controlledEvaluate(items as Parameters<typeof sequence.controlledEvaluate>[0]);
    return output ? logProbabilities(results.at(-1)?.next.probabilities) : undefined;
  };
  return {
    async prefill(tokens, output) {
      await sequence.clearHistory();
      return evaluate(tokens, output);
    },
    decode: (token, output) => evaluate([token], output),
    async dispose() {
      await context.dispose();
      await model.dispose();
    },
  };
}

type Ort = typeof import('onnxruntime-node');

async function onnxruntimeLoader(): Promise<LlmLoader> {
  const imported = await import('onnxruntime-node');
  // onnxruntime-node is CommonJS: its exports may arrive on `default`.
  const ort = (imported as unknown as { default?: Ort }).default ?? imported;
  return (path, config, threads) => onnxruntimeRunner(ort, path, config, threads);
}

async function onnxruntimeRunner(ort: Ort, path: string, config: Llama8da4wConfig, threads: number): Promise<LlmRunner> {
  const session = await ort.InferenceSession.create(path, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const N = ONNX_LLAMA_NAMES;
  const hd = headDim(config);
  const emptyCache = (): Record<string, InstanceType<typeof ort.Tensor>> => {
    const feeds: Record<string, InstanceType<typeof ort.Tensor>> = {};
    for (let l = 0; l < config.layers; l++) {
      feeds[N.pastKey(l)] = new ort.Tensor('float32', new Float32Array(0), [1, config.kvHeads, 0, hd]);
      feeds[N.pastValue(l)] = new ort.Tensor('float32', new Float32Array(0), [1, config.kvHeads, 0, hd]);
    }
    return feeds;
  };
  let cache = emptyCache();
  let length = 0;
  const run = async (tokens: readonly number[], output: boolean): Promise<Float32Array | undefined> => {
    length += tokens.length;
    const results = await session.run({
      ...cache,
      [N.inputIds]: new ort.Tensor('int64', BigInt64Array.from(tokens, BigInt), [1, tokens.length]),
      [N.attentionMask]: new ort.Tensor('int64', new BigInt64Array(length).fill(1n), [1, length]),
    });
    const nextCache: typeof cache = {};
    for (let l = 0; l < config.layers; l++) {
      nextCache[N.pastKey(l)] = results[N.presentKey(l)]!;
      nextCache[N.pastValue(l)] = results[N.presentValue(l)]!;
    }
    cache = nextCache;
    return output ? logSoftmax(results[N.logits]!.data as Float32Array) : undefined;
  };
  return {
    prefill(tokens, output) {
      cache = emptyCache();
      length = 0;
      return run(tokens, output);
    },
    decode: (token, output) => run([token], output),
    dispose: () => session.release(),
  };
}

/**
 * Loads `runtime`'s library (node-llama-cpp also picks its binary here) and
 * returns what loads a model file (its .pte, .gguf or .onnx) with it, so the
 * load time counts the model, not the library.
 */
export function prepareLlmLoader(runtime: LlmRuntime): Promise<LlmLoader> {
  switch (runtime) {
    case 'etna':
      return Promise.resolve(etnaRunner);
    case 'llama.cpp':
      return llamaCppLoader();
    case 'onnxruntime':
      return onnxruntimeLoader();
  }
}
