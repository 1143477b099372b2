// The harness of `etna bench llm` (the command is lib/cli/bench-llm.ts, its
// tables llm/report.ts): the same seeded Llama at a real model's shape, run by
// etna (.pte, 8da4w), llama.cpp (GGUF, Q4_0, through node-llama-cpp) and
// onnxruntime (ONNX, MatMulNBits) at each thread count, each runtime and
// thread count in its own process. Beside the latencies it measures the
// machine's streaming read bandwidth in the same run (before and after the
// runtimes, the better of the two) and reports each
// decode step's bytes (the linears' weights in that runtime's format plus the
// KV cache read up to the step's position) per second as a fraction of it.
import { cpus, loadavg } from 'node:os';

import { EtnaError } from '../../../errors.js';
import { headDim, type Llama8da4wConfig } from '../../examples/llama-8da4w.js';
import { runWorkerChild } from '../child.js';
import { prepareLlmArtifacts, type LlmArtifacts } from './artifacts.js';
import { measureReadBandwidth, type BandwidthFigures } from './bandwidth.js';
import { LLM_PEER_PACKAGES, LLM_RUNTIMES, llmRuntimeAvailable, type LlmRuntime } from './runners.js';
import { benchTokens, LLM_WORKER_SCRIPT, type LlmRuntimeResult, type LlmWorkerSpec } from './worker.js';

/** Prompt lengths whose prefill is timed. */
export const PREFILL_LENGTHS = [8, 128] as const;

export interface LlmBenchOptions {
  readonly preset: string;
  readonly threads: readonly number[];
  /** Default: every runtime whose package is installed. */
  readonly runtimes?: readonly LlmRuntime[];
  readonly cacheDir?: string;
  readonly prefillRepeats?: number;
  readonly decodeSteps?: number;
  /** Bytes streamed by the bandwidth measurement (default BANDWIDTH_BUFFER_BYTES). */
  readonly bandwidthBytes?: number;
  readonly log?: (line: string) => void;
}

export interface LlmBenchRow extends LlmRuntimeResult {
  /** Bytes one decode step reads: the linears' weights in this runtime's format and the KV cache so far. */
  readonly decodeBytesPerStep: number;
  /** decodeBytesPerStep per decode step (the fastest and the median), over the machine's read bandwidth at the same thread count. */
  readonly bandwidthFraction: { readonly min: number; readonly median: number };
  /** Centered relative RMS difference of the check prompt's log-probabilities from etna's (null without an etna row). */
  readonly differenceFromEtna: number | null;
}

export interface LlmBenchReport {
  readonly preset: string;
  readonly config: Llama8da4wConfig;
  readonly files: LlmArtifacts['bytes'];
  readonly cpu: string;
  /** The load average when the run started: the machine may be shared. */
  readonly loadAverage: number;
  readonly bandwidth: readonly BandwidthFigures[];
  readonly decodeAfter: number;
  readonly decodeSteps: number;
  readonly rows: readonly LlmBenchRow[];
}

/** Bytes per weight of a 4-bit linear in each runtime's format (codes and per-32 scales). */
const WEIGHT_BYTES_PER_PARAM: Record<LlmRuntime, number> = {
  etna: 0.5 + 2 / 32, // int4 codes, bf16 scale
  'llama.cpp': 18 / 32, // Q4_0 block: float16 scale and 16 bytes of codes
  onnxruntime: 0.5 + 4 / 32, // MatMulNBits: int4 codes, float32 scale
};
/** Bytes per KV cache element: etna and the ONNX graph keep float32, llama.cpp float16 by default. */
const KV_BYTES: Record<LlmRuntime, number> = { etna: 4, 'llama.cpp': 2, onnxruntime: 4 };

export function linearParameters(C: Llama8da4wConfig): number {
  const kv = C.kvHeads * headDim(C);
  return C.layers * (2 * C.modelDim * C.modelDim + 2 * C.modelDim * kv + 3 * C.modelDim * C.hiddenDim) + C.vocab * C.modelDim;
}

export function decodeBytesPerStep(runtime: LlmRuntime, C: Llama8da4wConfig, meanPosition: number): number {
  const kv = C.kvHeads * headDim(C);
  return linearParameters(C) * WEIGHT_BYTES_PER_PARAM[runtime] + 2 * C.layers * (meanPosition + 1) * kv * KV_BYTES[runtime];
}

/**
 * How far apart two log-probability vectors are: the RMS of their difference
 * (each centered, so a constant offset does not count) over the RMS of `b`'s
 * centered values. Entries not finite in either (a probability of 0) are left out.
 */
export function logitsDistance(a: readonly (number | null)[], b: readonly (number | null)[]): number {
  const pairs: [number, number][] = [];
  a.forEach((x, i) => {
    const y = b[i];
    if (x !== null && y !== null && y !== undefined && Number.isFinite(x) && Number.isFinite(y)) pairs.push([x, y]);
  });
  if (pairs.length === 0) return Infinity;
  const meanA = pairs.reduce((s, [x]) => s + x, 0) / pairs.length;
  const meanB = pairs.reduce((s, [, y]) => s + y, 0) / pairs.length;
  let difference = 0;
  let norm = 0;
  for (const [x, y] of pairs) {
    difference += (x - meanA - (y - meanB)) ** 2;
    norm += (y - meanB) ** 2;
  }
  return Math.sqrt(difference / norm);
}

export async function runLlmBench(options: LlmBenchOptions): Promise<LlmBenchReport> {
  const log = options.log ?? (() => {});
  const runtimes = options.runtimes ?? LLM_RUNTIMES.filter(llmRuntimeAvailable);
  const missing = runtimes.find((runtime) => !llmRuntimeAvailable(runtime));
  if (missing !== undefined) {
    throw new EtnaError('INVALID_INPUT', `${missing} needs the package ${LLM_PEER_PACKAGES[missing]}, which is not installed`);
  }
  const artifacts = await prepareLlmArtifacts(options.preset, {
    ...(options.cacheDir !== undefined && { cacheDir: options.cacheDir }),
    log,
  });
  const C = artifacts.config;
  const loadAverage = loadavg()[0]!;
  // Measured before and after the runtimes, keeping the better: on a shared machine either may catch a busy moment.
  const bandwidth: BandwidthFigures[] = [];
  const measureBandwidth = async (when: string): Promise<void> => {
    for (const threads of options.threads) {
      log(`measuring read bandwidth ${when}, ${threads} thread${threads === 1 ? '' : 's'}`);
      const figures = await measureReadBandwidth(
        threads,
        options.bandwidthBytes === undefined ? {} : { bufferBytes: options.bandwidthBytes },
      );
      const earlier = bandwidth.findIndex((b) => b.threads === threads);
      if (earlier < 0) bandwidth.push(figures);
      else if (figures.bytesPerSecond > bandwidth[earlier]!.bytesPerSecond) bandwidth[earlier] = figures;
    }
  };
  await measureBandwidth('before');
  const decodeAfter = Math.min(...PREFILL_LENGTHS);
  const decodeSteps = options.decodeSteps ?? 64;
  if (decodeAfter + decodeSteps > C.context) {
    throw new EtnaError('INVALID_INPUT', `${decodeSteps} decode steps after ${decodeAfter} tokens run past the context of ${C.context}`);
  }
  const results: LlmRuntimeResult[] = [];
  for (const threads of options.threads) {
    for (const runtime of runtimes) {
      log(`${runtime}, ${threads} thread${threads === 1 ? '' : 's'}`);
      const spec: LlmWorkerSpec = {
        runtime,
        threads,
        path: { etna: artifacts.pte, 'llama.cpp': artifacts.gguf, onnxruntime: artifacts.onnx }[runtime],
        config: C,
        prefillLengths: PREFILL_LENGTHS.filter((length) => length <= C.prefillLength),
        prefillRepeats: options.prefillRepeats ?? 5,
        decodeAfter,
        decodeSteps,
        checkTokens: benchTokens(8, C.vocab, 3),
      };
      results.push(await runWorkerChild<LlmRuntimeResult>(LLM_WORKER_SCRIPT, spec, `${runtime} (${threads} threads)`));
    }
  }
  await measureBandwidth('after');
  const meanPosition = decodeAfter + (decodeSteps - 1) / 2;
  const rows = results.map((result): LlmBenchRow => {
    const bytes = decodeBytesPerStep(result.runtime, C, meanPosition);
    const machine = bandwidth.find((b) => b.threads === result.threads)!;
    const etna = results.find((r) => r.runtime === 'etna' && r.threads === result.threads);
    return {
      ...result,
      decodeBytesPerStep: bytes,
      bandwidthFraction: {
        min: bytes / (result.decode.minMs / 1000) / machine.bytesPerSecond,
        median: bytes / (result.decode.medianMs / 1000) / machine.bytesPerSecond,
      },
      differenceFromEtna: etna === undefined ? null : logitsDistance(result.checkLogProbs, etna.checkLogProbs),
    };
  });
  return {
    preset: artifacts.preset,
    config: C,
    files: artifacts.bytes,
    cpu: cpus()[0]?.model ?? 'unknown',
    loadAverage,
    bandwidth,
    decodeAfter,
    decodeSteps,
    rows,
  };
}
