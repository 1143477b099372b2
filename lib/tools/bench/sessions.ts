// The `sessions` entry of `etna bench`: a server keeps one stateful session
// per stream. kv-decoder-large, lowered to XNNPACK, with N sessions in one
// process: for etna one Program and N Modules over it (packed weights and
// constants shared, each module its own state); for onnxruntime one runner per
// stream (an InferenceSession per method, as the other onnxruntime rows run).
// The default counts come with one more row per runtime: 64 sessions at 2
// threads each, which shows what each runtime's thread pools add to the
// process. Each configuration and session count runs in its own child
// process; run with `--worker SPEC_JSON` this file is that child.
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import { Program } from '../../index.js';
import {
  createKvDecoderWeights,
  int64Tensor,
  KV_DECODER_LARGE_CONFIG,
  KvDecoderReference,
  SeededRandom,
  type ExampleCall,
  type ReferenceTensor,
} from '../examples/index.js';
import type { OnnxProgram } from '../onnx-emitter/index.js';
import { procStatusBytes, runWorkerChild, serveWorker } from './child.js';
import {
  etnaRunner,
  LARGE_DECODER_NAME,
  loadOnnxTools,
  MATCH_TOLERANCE,
  onnxRunner,
  readOnnxProgram,
  scaledError,
  summarize,
  type BenchResult,
  type OnnxTools,
  type ProgramArtifacts,
  type Runner,
} from './runner.js';

/** Session counts of the entry, unless the caller asks for others. */
export const SESSION_COUNTS: readonly number[] = [1, 16, 64];

/** The row the default counts add: many sessions, each allowed two threads. */
export const THREADED_SESSIONS = { sessions: 64, threads: 2 } as const;

export const SESSIONS_CONFIGS = ['etna-sessions', 'onnxruntime-sessions'] as const;
export type SessionsConfig = (typeof SESSIONS_CONFIGS)[number];

/** Decode steps of every session: --quick runs fewer. */
export function sessionDecodeSteps(quick: boolean): number {
  return quick ? 2 : 8;
}

/**
 * A row of the sessions entry: the fields of the other rows, over all N
 * sessions of one process. `steadyRssBytes` is resident memory once every
 * session has loaded and run; `sessionLatency` has each method's milliseconds
 * per call over all sessions' calls (`decode`: per decode step); `latency` is
 * empty (there is no separate timed loop); `plannedBytes` adds up every
 * module's arenas.
 */
export interface SessionsResult extends Omit<BenchResult, 'config'> {
  config: SessionsConfig;
  sessions: number;
  decodeSteps: number;
  /** Threads each session may compute on (numThreads, intraOpNumThreads). */
  threads: number;
  /** Threads the process gained from loading and running the sessions (/proc/self/task). */
  addedThreads: number;
}

/** What one child process is asked to measure. */
interface SessionsSpec {
  readonly config: SessionsConfig;
  readonly sessions: number;
  readonly decodeSteps: number;
  readonly threads: number;
  readonly artifacts: ProgramArtifacts;
}

// ------------------------------------------------------------------ child side

/** Streams differ: stream s sends the prompt and tokens of variant s % VARIANTS. */
const VARIANTS = 4;

/** One stream's calls: reset, prefill of a full chunk, then `steps` decode steps. */
function streamCalls(variant: number, steps: number): ExampleCall[] {
  const C = KV_DECODER_LARGE_CONFIG;
  const random = new SeededRandom(1000 + variant);
  const prompt = Array.from({ length: C.prefillLength }, () => random.integer(C.vocab));
  const calls: ExampleCall[] = [
    { method: 'reset', inputs: [] },
    { method: 'prefill', inputs: [int64Tensor([1, C.prefillLength], prompt), int64Tensor([1], [0])] },
  ];
  for (let step = 0; step < steps; step++) {
    calls.push({ method: 'decode', inputs: [int64Tensor([1, 1], [random.integer(C.vocab)]), int64Tensor([1], [C.prefillLength + step])] });
  }
  return calls;
}

/** What the reference gives for every call of every variant. */
function expectedOutputs(variants: readonly ExampleCall[][]): ReferenceTensor[][][] {
  const reference = new KvDecoderReference(createKvDecoderWeights(KV_DECODER_LARGE_CONFIG));
  return variants.map((calls) => calls.map((call) => reference.execute(call.method, call.inputs)));
}

/** N runners; for onnxruntime, over models the caller has read (as the other rows read them before the baseline). */
async function loadSessions(spec: SessionsSpec, onnx: { tools: OnnxTools; program: OnnxProgram } | undefined): Promise<Runner[]> {
  const runners: Runner[] = [];
  if (onnx === undefined) {
    const program = Program.load(spec.artifacts.pte);
    for (let s = 0; s < spec.sessions; s++) runners.push(await etnaRunner(program, 'etna-shared', spec.threads));
  } else {
    for (let s = 0; s < spec.sessions; s++) runners.push(await onnxRunner(onnx.tools, onnx.program, spec.threads));
  }
  return runners;
}

export async function runSessionsWorker(spec: SessionsSpec): Promise<SessionsResult> {
  const gc = (globalThis as { gc?: () => void }).gc;
  const variants = Array.from({ length: Math.min(VARIANTS, spec.sessions) }, (_, v) => streamCalls(v, spec.decodeSteps));
  const expected = expectedOutputs(variants);
  const etna = spec.config === 'etna-sessions';
  let onnx = etna ? undefined : { tools: await loadOnnxTools(), program: readOnnxProgram(spec.artifacts.onnxManifest) };
  // Started now, so that libuv's threads are in the baseline: threads added are the runtime's own.
  await readFile('/proc/self/status');
  gc?.();
  const baselineRssBytes = procStatusBytes('VmRSS');
  const baselineThreads = readdirSync('/proc/self/task').length;
  const start = performance.now();
  const runners = await loadSessions(spec, onnx);
  const loadMs = performance.now() - start;
  onnx = undefined;

  // Round-robin, one call at a time, as a server interleaves its streams:
  // every session resets, then every session prefills, then decode step by step.
  const samples: Record<string, number[]> = {};
  let maxError = 0;
  for (let call = 0; call < variants[0]!.length; call++) {
    for (const [s, runner] of runners.entries()) {
      const variant = s % variants.length;
      const { method, inputs } = variants[variant]![call]!;
      const t0 = performance.now();
      const got = await runner.execute(method, inputs);
      (samples[method] ??= []).push(performance.now() - t0);
      expected[variant]![call]!.forEach((tensor, k) => (maxError = Math.max(maxError, scaledError(got[k]?.data ?? [], tensor.data))));
    }
  }
  const addedThreads = readdirSync('/proc/self/task').length - baselineThreads;
  gc?.();
  const steadyRssBytes = procStatusBytes('VmRSS');
  const peakRssBytes = Math.max(procStatusBytes('VmHWM'), steadyRssBytes);
  const result: SessionsResult = {
    program: LARGE_DECODER_NAME,
    config: spec.config,
    sessions: spec.sessions,
    decodeSteps: spec.decodeSteps,
    threads: spec.threads,
    addedThreads,
    plannedBytes: etna ? runners.reduce((sum, runner) => sum + (runner.plannedBytes ?? 0), 0) : null,
    peakRssBytes,
    steadyRssBytes,
    baselineRssBytes,
    packedWeightBytes: etna ? runners[0]!.packedWeightBytes : null,
    loadMs,
    latency: {},
    outputsMatch: maxError <= MATCH_TOLERANCE,
    maxError,
    stateful: true,
    sessionLatency: Object.fromEntries(Object.entries(samples).map(([method, values]) => [method, summarize(values)])),
  };
  for (const runner of runners) await runner.release();
  return result;
}

// ------------------------------------------------------------------ parent side

const SELF = fileURLToPath(import.meta.url);

export interface SessionsOptions {
  readonly counts: readonly number[];
  readonly configs: readonly SessionsConfig[];
  readonly quick: boolean;
  readonly threads: number;
  /** kv-decoder-large written out (harness.ts prepareArtifacts). */
  readonly artifacts: ProgramArtifacts;
  /** Called before each child starts. */
  readonly onStart?: (label: string) => void;
}

/** The session counts and thread counts the entry runs: the counts asked for, and with the default counts THREADED_SESSIONS. */
export function sessionsRuns(counts: readonly number[], threads: number): { sessions: number; threads: number }[] {
  const runs = counts.map((sessions) => ({ sessions, threads }));
  const defaultCounts = counts.length === SESSION_COUNTS.length && counts.every((count, i) => count === SESSION_COUNTS[i]);
  if (defaultCounts && threads !== THREADED_SESSIONS.threads) runs.push({ ...THREADED_SESSIONS });
  return runs;
}

/** One child per configuration and session count, one after another. */
export async function runSessionsBenchmarks(options: SessionsOptions): Promise<SessionsResult[]> {
  const results: SessionsResult[] = [];
  for (const config of options.configs) {
    for (const { sessions, threads } of sessionsRuns(options.counts, options.threads)) {
      const label = `${LARGE_DECODER_NAME} ${config} x${sessions}${threads === options.threads ? '' : ` at ${threads} threads`}`;
      options.onStart?.(label);
      const spec: SessionsSpec = {
        config,
        sessions,
        decodeSteps: sessionDecodeSteps(options.quick),
        threads,
        artifacts: options.artifacts,
      };
      results.push(await runWorkerChild<SessionsResult>(SELF, spec, label));
    }
  }
  return results;
}

serveWorker(SELF, runSessionsWorker);
