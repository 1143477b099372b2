// `etna bench llm`: the same seeded Llama at a real model's shape, run by
// etna (.pte, 8da4w), llama.cpp (GGUF, Q4_0, through node-llama-cpp) and
// onnxruntime (ONNX, MatMulNBits) at each thread count, each runtime and
// thread count in its own process. Beside the latencies it measures the
// machine's streaming read bandwidth in the same run (before and after the
// runtimes, the better of the two) and reports each
// decode step's bytes (the linears' weights in that runtime's format plus the
// KV cache read up to the step's position) per second as a fraction of it.
import { cpus, loadavg } from 'node:os';
import { writeFileSync } from 'node:fs';

import { EtnaError } from '../../errors.js';
import { runWorkerChild } from '../bench.js';
import type { Command } from '../../cli/command.js';
import { formatBytes, table } from '../../cli/format.js';
import { headDim, LLAMA_8DA4W_PRESET_NAMES, type Llama8da4wConfig } from '../examples/llama-8da4w.js';
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
  if (missing !== undefined) throw new EtnaError('INVALID_INPUT', `${missing} needs the package ${LLM_PEER_PACKAGES[missing]}, which is not installed`);
  const artifacts = await prepareLlmArtifacts(options.preset, { ...(options.cacheDir !== undefined && { cacheDir: options.cacheDir }), log });
  const C = artifacts.config;
  const loadAverage = loadavg()[0]!;
  // Measured before and after the runtimes, keeping the better: on a shared machine either may catch a busy moment.
  const bandwidth: BandwidthFigures[] = [];
  const measureBandwidth = async (when: string): Promise<void> => {
    for (const threads of options.threads) {
      log(`measuring read bandwidth ${when}, ${threads} thread${threads === 1 ? '' : 's'}`);
      const figures = await measureReadBandwidth(threads, options.bandwidthBytes === undefined ? {} : { bufferBytes: options.bandwidthBytes });
      const earlier = bandwidth.findIndex((b) => b.threads === threads);
      if (earlier < 0) bandwidth.push(figures);
      else if (figures.bytesPerSecond > bandwidth[earlier]!.bytesPerSecond) bandwidth[earlier] = figures;
    }
  };
  await measureBandwidth('before');
  const decodeAfter = Math.min(...PREFILL_LENGTHS);
  const decodeSteps = options.decodeSteps ?? 64;
  if (decodeAfter + decodeSteps > C.context) throw new EtnaError('INVALID_INPUT', `${decodeSteps} decode steps after ${decodeAfter} tokens run past the context of ${C.context}`);
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
  return { preset: artifacts.preset, config: C, files: artifacts.bytes, cpu: cpus()[0]?.model ?? 'unknown', loadAverage, bandwidth, decodeAfter, decodeSteps, rows };
}

const ms = (value: number): string => (value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2));
const range = (t: { minMs: number; medianMs: number }): string => `${ms(t.minMs)} / ${ms(t.medianMs)}`;

/** The report's rows: header first. */
export function llmTableRows(report: LlmBenchReport): string[][] {
  const lengths = Object.keys(report.rows[0]?.prefill ?? {});
  const header = ['runtime', 'threads', 'load ms', 'RSS after load', ...lengths.map((n) => `prefill ${n} ms (min / median)`), 'decode ms/token (min / median)', 'decode GB/s (min / median)', 'of read bandwidth (min / median)', 'log-probs vs etna'];
  const rows = report.rows.map((r) => [
    r.runtime,
    String(r.threads),
    ms(r.loadMs),
    formatBytes(r.rssAfterLoadBytes),
    ...lengths.map((n) => (r.prefill[n] === undefined ? '-' : range(r.prefill[n]!))),
    range(r.decode),
    `${(r.decodeBytesPerStep / r.decode.minMs / 1e6).toFixed(1)} / ${(r.decodeBytesPerStep / r.decode.medianMs / 1e6).toFixed(1)}`,
    `${(r.bandwidthFraction.min * 100).toFixed(0)}% / ${(r.bandwidthFraction.median * 100).toFixed(0)}%`,
    r.differenceFromEtna === null ? '-' : r.differenceFromEtna.toFixed(3),
  ]);
  return [header, ...rows];
}

export function formatLlmReport(report: LlmBenchReport): string {
  const C = report.config;
  const lines = [
    `${report.preset}: ${C.layers} layers, d=${C.modelDim}, ${C.heads} query / ${C.kvHeads} KV heads, hidden ${C.hiddenDim}, vocab ${C.vocab}, context ${C.context}`,
    `files: .pte ${formatBytes(report.files.pte)}, .gguf ${formatBytes(report.files.gguf)}, .onnx ${formatBytes(report.files.onnx)}`,
    `cpu: ${report.cpu}; load average ${report.loadAverage.toFixed(1)} at the start`,
    `read bandwidth: ${report.bandwidth.map((b) => `${(b.bytesPerSecond / 1e9).toFixed(1)} GB/s at ${b.threads} thread${b.threads === 1 ? '' : 's'}`).join(', ')}`,
    `decode: ${report.decodeSteps} steps after a ${report.decodeAfter}-token prompt; RSS: above the process's own with the runtime's library loaded`,
    '',
    table(llmTableRows(report)),
  ];
  return lines.join('\n');
}

export function formatLlmMarkdown(report: LlmBenchReport): string {
  const [header, ...rows] = llmTableRows(report);
  return [`| ${header!.join(' | ')} |`, `|${header!.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');
}

function parseThreads(text: string | undefined): number[] {
  if (text === undefined) return [1, 2];
  const values = text.split(',').map((part) => Number(part));
  if (values.some((v) => !Number.isInteger(v) || v < 1)) throw new EtnaError('INVALID_INPUT', `--threads takes a list of integers >= 1 (like 1,2), got '${text}'`);
  return values;
}

function parseRuntimes(text: string): LlmRuntime[] {
  return text.split(',').map((name) => {
    if (!(LLM_RUNTIMES as readonly string[]).includes(name)) throw new EtnaError('INVALID_INPUT', `--runtimes takes names from ${LLM_RUNTIMES.join(', ')}, got '${name}'`);
    return name as LlmRuntime;
  });
}

export const BENCH_LLM: Command = {
  spec: {
    name: 'bench llm',
    synopsis: '',
    positionals: { min: 0, max: 0 },
    brief: 'compare etna, llama.cpp and onnxruntime on one Llama at a real size',
    summary:
      'Writes the llama-8da4w example at a preset size three ways from the same seeded weights (.pte 8da4w, GGUF Q4_0, ONNX MatMulNBits),\n' +
      'then times load, prefill and decode in each runtime, with resident memory and decode bandwidth against the measured read bandwidth.',
    options: [
      { name: 'preset', value: 'NAME', help: `model size: ${LLAMA_8DA4W_PRESET_NAMES.join(', ')} (default stories110m)` },
      { name: 'threads', value: 'N,N...', help: 'thread counts to run each runtime at (default 1,2)' },
      { name: 'runtimes', value: 'NAME,...', help: `runtimes to run (default: those of ${LLM_RUNTIMES.join(', ')} that are installed)` },
      { name: 'decode-steps', value: 'N', help: 'timed decode steps (default 64)' },
      { name: 'repeats', value: 'N', help: 'timed runs of each prefill length (default 5)' },
      { name: 'cache', value: 'DIR', help: 'folder for the written model files (default bench/cache/llm)' },
      { name: 'json', value: 'OUT', help: 'also write the report as JSON to OUT' },
      { name: 'md', value: 'OUT', help: 'also write the table as Markdown to OUT' },
    ],
  },
  run: async (args) => {
    const runtimes = args.string('runtimes');
    const report = await runLlmBench({
      preset: args.string('preset') ?? 'stories110m',
      threads: parseThreads(args.string('threads')),
      ...(runtimes !== undefined && { runtimes: parseRuntimes(runtimes) }),
      decodeSteps: args.integer('decode-steps', 64, 1),
      prefillRepeats: args.integer('repeats', 5, 1),
      ...(args.string('cache') !== undefined && { cacheDir: args.string('cache') }),
      log: (line) => process.stderr.write(`${line}\n`),
    });
    console.log(formatLlmReport(report));
    const json = args.string('json');
    if (json !== undefined) writeFileSync(json, `${JSON.stringify({ ...report, rows: report.rows.map(({ checkLogProbs: _, ...row }) => row) }, null, 2)}\n`);
    const md = args.string('md');
    if (md !== undefined) writeFileSync(md, `${formatLlmMarkdown(report)}\n`);
    return 0;
  },
};
