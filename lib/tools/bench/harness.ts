// The `etna bench` harness: each program x configuration runs in its own
// child process so that resident-memory figures do not mix. The same file is
// the child: run with `--worker SPEC_JSON` it measures one configuration and
// prints one JSON line. runBenchmarks runs them all, then the sessions entry
// (sessions.ts); report.ts writes the results and lib/cli/bench.ts is the command.
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import { EtnaError } from '../../errors.js';
import { ProgramBuilder } from '../../export/index.js';
import { Module, Program, type InputValue } from '../../index.js';
import { importOnnx, importOnnxGraph } from '../../onnx/index.js';
import { numel } from '../../shape.js';
import {
  buildExample,
  buildKvDecoder,
  createKvDecoderWeights,
  exampleReference,
  isExampleName,
  KV_DECODER_CONFIG,
  KV_DECODER_LARGE_CONFIG,
  KvDecoderReference,
  kvDecoderSession,
  Llama8da4wReference,
  llama8da4wSession,
  buildLlama8da4w,
  SeededRandom,
  type ExampleCall,
  type ExampleReference,
  type LargeExampleName,
  type ReferenceTensor,
} from '../examples/index.js';
import { builderToOnnx, type OnnxProgram } from '../onnx-emitter/index.js';
import { procStatusBytes, runWorkerChild, serveWorker, withTemporaryDirectory } from './child.js';
import {
  alternateCalls,
  isOnnxGraphName,
  ONNX_GRAPH_NAMES,
  onnxGraphProgram,
  relativeDifference,
  type AlternatedTiming,
} from './onnx-graphs.js';
import {
  availableConfigs,
  etnaRunner,
  isOnnxConfig,
  LARGE_DECODER_NAME,
  loadOnnxTools,
  MATCH_TOLERANCE,
  onnxRunner,
  onnxruntimeAvailable,
  readOnnxProgram,
  scaledError,
  summarize,
  toReference,
  type BenchConfig,
  type BenchResult,
  type LatencyFigures,
  type OnnxManifest,
  type OnnxTools,
  type ProgramArtifacts,
  type Runner,
} from './runner.js';
import type { SessionsResult } from './sessions.js';
import { SILERO_IMPORT_OPTIONS, SILERO_NAME, sileroModelBytes, sileroModelPath, sileroOriginalSession, sileroSession } from './silero.js';

/** What one child process is asked to measure. */
export interface WorkerSpec {
  /** An example name or a .pte path. */
  readonly program: string;
  readonly config: BenchConfig;
  readonly threads: number;
  /** Timed calls per method after warm-up; 0 skips the latency loop. */
  readonly iterations: number;
  readonly warmup: number;
  /** Calls checked against the reference: the example's own session, or a generation run. */
  readonly session: 'reference' | 'generate';
  /** Decode steps of a generation session. */
  readonly decodeSteps?: number;
  /** Files written by the parent (see prepareArtifacts), so the child only loads. */
  readonly artifacts?: ProgramArtifacts;
}

export interface BenchReport {
  /** A row per program, thread count and configuration, then the sessions entry's rows (sessions.ts). */
  results: (BenchResult | SessionsResult)[];
  /** The first of threadCounts: the only one unless several were asked for. */
  threads: number;
  /** Every thread count the programs ran at, in the order asked for. */
  threadCounts: number[];
  node: string;
  cpu: string;
}

// ------------------------------------------------------------------ child side

function argmax(values: ArrayLike<number>, from: number, count: number): number {
  let best = from;
  for (let i = from; i < from + count; i++) if (values[i]! > values[best]!) best = i;
  return best - from;
}

/** Deterministic inputs for a method of a program without a reference: random floats, zero integers. */
function syntheticCalls(program: Program): ExampleCall[] {
  const random = new SeededRandom(17);
  return program.describe().methods.map((method) => ({
    method: method.name,
    inputs: method.inputs.map((input) => {
      const shape = input.shape ?? [];
      const count = numel(shape);
      if (input.kind !== 'tensor') throw new Error(`${method.name}: only tensor inputs can be generated, got ${input.kind}`);
      if (input.dtype === 'float32') return { dtype: 'float32', shape, data: random.uniform(count, 1) } as ReferenceTensor;
      if (input.dtype === 'int64') return { dtype: 'int64', shape, data: new BigInt64Array(count) } as ReferenceTensor;
      throw new Error(`${method.name}: inputs of dtype ${input.dtype} cannot be generated`);
    }),
  }));
}

/** Prefill of the first 8 tokens, then greedy decoding: each next token is the reference's argmax. */
function generationSession(steps: number): {
  calls: ExampleCall[];
  next: (logits: ReferenceTensor, call: number) => ExampleCall | undefined;
} {
  const random = new SeededRandom(23);
  const { prefillLength, vocab } = KV_DECODER_CONFIG;
  const prompt = Array.from({ length: prefillLength }, () => BigInt(random.integer(vocab)));
  const first: ExampleCall[] = [
    { method: 'reset', inputs: [] },
    {
      method: 'prefill',
      inputs: [
        { dtype: 'int64', shape: [1, prefillLength], data: BigInt64Array.from(prompt) },
        { dtype: 'int64', shape: [1], data: BigInt64Array.of(0n) },
      ],
    },
  ];
  const next = (logits: ReferenceTensor, decoded: number): ExampleCall | undefined => {
    if (decoded >= steps) return undefined;
    const values = logits.data as Float32Array;
    const vocab = logits.shape[logits.shape.length - 1]!;
    const token = argmax(values, values.length - vocab, vocab);
    return {
      method: 'decode',
      inputs: [
        { dtype: 'int64', shape: [1, 1], data: BigInt64Array.of(BigInt(token)) },
        { dtype: 'int64', shape: [1], data: BigInt64Array.of(BigInt(prefillLength + decoded)) },
      ],
    };
  };
  return { calls: first, next };
}

// ------------------------------------------------------------------ built-in programs

/**
 * The export_llama-style Llama. Its 8da4w linears, 4-bit embedding and
 * llama:: kernels have no ONNX form, so it runs on etna only.
 */
export const LLAMA_NAME: LargeExampleName = 'llama-8da4w';

/** Whether the ONNX emitter can write the program for onnxruntime. */
export function hasOnnxForm(program: string): boolean {
  return program !== LLAMA_NAME;
}

/** A program the harness can build in memory: the examples, the larger decoder, an imported model. */
interface BuiltInProgram {
  build(): ProgramBuilder;
  /** The program etna runs, when it is not the lowered build (see programBytes). */
  pte?(): Uint8Array;
  reference: ExampleReference | undefined;
  calls(): ExampleCall[];
  /** The source model as its users run it on onnxruntime, for programs imported from ONNX. */
  original?(ort: OnnxTools[0], threads: number): Promise<Pick<Runner, 'execute' | 'release'>>;
}

export function isBuiltInProgram(name: string): boolean {
  return isExampleName(name) || name === LARGE_DECODER_NAME || name === LLAMA_NAME || name === SILERO_NAME || isOnnxGraphName(name);
}

function builtInProgram(name: string): BuiltInProgram | undefined {
  if (isExampleName(name)) {
    const reference = exampleReference(name);
    return { build: () => buildExample(name), reference, calls: () => reference.session() };
  }
  if (name === LARGE_DECODER_NAME) {
    const weights = createKvDecoderWeights(KV_DECODER_LARGE_CONFIG);
    return {
      build: () => buildKvDecoder(weights),
      reference: new KvDecoderReference(weights),
      calls: () => kvDecoderSession(KV_DECODER_LARGE_CONFIG),
    };
  }
  if (name === LLAMA_NAME) {
    // Lowered however it is built: its linears only mean something in the delegate.
    return { build: () => buildLlama8da4w(), reference: new Llama8da4wReference(), calls: () => llama8da4wSession() };
  }
  if (isOnnxGraphName(name)) return onnxGraphProgram(name);
  if (name === SILERO_NAME) {
    return {
      // The graph as imported, not yet exported, is what onnxruntime-folded runs.
      build: () => importOnnxGraph(sileroModelBytes(), SILERO_IMPORT_OPTIONS).builder,
      pte: () => importOnnx(sileroModelBytes(), SILERO_IMPORT_OPTIONS).bytes,
      reference: undefined,
      calls: sileroSession,
      original: sileroOriginalSession,
    };
  }
  return undefined;
}

/** The .pte etna runs: linear layers, convolutions and arithmetic lowered to XNNPACK, as a user would ship it. */
function programBytes(builtIn: BuiltInProgram): Uint8Array {
  return builtIn.pte?.() ?? builtIn.build().toPte({ xnnpack: true });
}

/** Configurations of one program: CONFIGS (or those asked for), plus onnxruntime on the folded graph of an imported model. */
function configsFor(program: string, requested: readonly BenchConfig[] | undefined): BenchConfig[] {
  const imported = program === SILERO_NAME || isOnnxGraphName(program);
  const all: readonly BenchConfig[] = requested ?? [
    ...availableConfigs(),
    ...(imported && onnxruntimeAvailable() ? (['onnxruntime-folded'] as const) : []),
  ];
  if (!isBuiltInProgram(program) || !hasOnnxForm(program)) return all.filter((config) => !isOnnxConfig(config));
  return all.filter((config) => config !== 'onnxruntime-folded' || imported);
}

/** Writes a built-in program as .pte and as ONNX models into `dir`; children then load files like a user would. */
export function prepareArtifacts(program: string, dir: string): ProgramArtifacts {
  const builtIn = builtInProgram(program);
  if (builtIn === undefined) throw new Error(`${program} is not a built-in program`);
  const pte = join(dir, `${program}.pte`);
  writeFileSync(pte, programBytes(builtIn));
  if (!hasOnnxForm(program)) return { pte };
  const onnx = builderToOnnx(builtIn.build());
  const manifest: OnnxManifest = {
    methods: onnx.methods.map(({ bytes, ...model }) => {
      const file = join(dir, `${program}.${model.method}.onnx`);
      writeFileSync(file, bytes);
      return { ...model, file };
    }),
    state: onnx.state.map((buffer) => ({
      ...buffer,
      init: buffer.init === undefined ? null : Buffer.from(buffer.init).toString('base64'),
    })),
  };
  const onnxManifest = join(dir, `${program}.onnx.json`);
  writeFileSync(onnxManifest, JSON.stringify(manifest));
  return { pte, onnxManifest };
}

/**
 * The calls of a child's checked session and, with a reference, its expected
 * outputs. Computed before the measured window, so the reference's own
 * allocations do not count in the runtime's resident memory.
 */
function plannedSession(
  spec: WorkerSpec,
  builtIn: BuiltInProgram | undefined,
): { calls: ExampleCall[]; expected: ReferenceTensor[][] | undefined } {
  const reference = builtIn?.reference;
  if (spec.session === 'generate') {
    if (reference === undefined) throw new Error(`a generation session needs a reference, and ${spec.program} has none`);
    const generation = generationSession(spec.decodeSteps ?? 32);
    const calls = generation.calls;
    const expected: ReferenceTensor[][] = [];
    let decoded = 0;
    // Greedy decoding: each next token is the reference's argmax, so the session grows as it is computed.
    for (let i = 0; i < calls.length; i++) {
      const want = reference.execute(calls[i]!.method, calls[i]!.inputs);
      expected.push(want);
      const next = want.length > 0 ? generation.next(want[0]!, decoded) : undefined;
      if (next !== undefined) {
        calls.push(next);
        decoded++;
      }
    }
    return { calls, expected };
  }
  const calls = builtIn !== undefined ? builtIn.calls() : syntheticCalls(Program.load(resolve(spec.program)));
  return { calls, expected: reference === undefined ? undefined : calls.map((call) => reference.execute(call.method, call.inputs)) };
}

export async function runWorker(spec: WorkerSpec): Promise<BenchResult> {
  const gc = (globalThis as { gc?: () => void }).gc;
  const builtIn = builtInProgram(spec.program);
  if (builtIn === undefined && isOnnxConfig(spec.config))
    throw new Error(`${spec.config} runs the built-in programs only, not ` + `${spec.program}`);
  // Build (and load the runtime's library) first, and time only the load, as a user loading a file would see it.
  const onnxTools = isOnnxConfig(spec.config) ? await loadOnnxTools() : undefined;
  const original = spec.config === 'onnxruntime' ? builtIn?.original : undefined;
  // The ONNX models' bytes are read before the load is timed, as etna's program is built or mapped before it.
  let onnx: OnnxProgram | undefined;
  if (onnxTools !== undefined && builtIn !== undefined && original === undefined) {
    onnx = spec.artifacts?.onnxManifest !== undefined ? readOnnxProgram(spec.artifacts.onnxManifest) : builderToOnnx(builtIn.build());
  }
  let source: string | Uint8Array = resolve(spec.program);
  if (builtIn !== undefined) source = spec.artifacts !== undefined ? spec.artifacts.pte : programBytes(builtIn);
  const { calls, expected } = plannedSession(spec, builtIn);
  gc?.();
  const baselineRssBytes = procStatusBytes('VmRSS');
  const start = performance.now();
  let runner: Runner;
  if (onnxTools !== undefined && original !== undefined) {
    runner = { ...(await original(onnxTools[0], spec.threads)), plannedBytes: null, packedWeightBytes: null, stateful: true };
  } else if (onnxTools !== undefined && onnx !== undefined) {
    runner = await onnxRunner(onnxTools, onnx, spec.threads);
  } else {
    runner = await etnaRunner(source, spec.config, spec.threads);
  }
  const loadMs = performance.now() - start;
  onnx = undefined;

  let maxError = 0;
  const sessionSamples: Record<string, number[]> = {};
  const outputs: number[][] = [];
  for (const [i, call] of calls.entries()) {
    const t0 = performance.now();
    const got = await runner.execute(call.method, call.inputs);
    (sessionSamples[call.method] ??= []).push(performance.now() - t0);
    const want = expected?.[i];
    if (want !== undefined) {
      want.forEach((tensor, k) => (maxError = Math.max(maxError, scaledError(got[k]?.data ?? [], tensor.data))));
    } else {
      for (const tensor of got) outputs.push(Array.from(tensor.data as ArrayLike<number | bigint>, Number));
    }
  }

  const latency: Record<string, LatencyFigures> = {};
  if (spec.iterations > 0) {
    // One representative call per method, from the checked session.
    const representative = new Map<string, ExampleCall>();
    for (const call of calls) if (!representative.has(call.method)) representative.set(call.method, call);
    for (const [method, call] of representative) {
      for (let i = 0; i < spec.warmup; i++) await runner.execute(method, call.inputs);
      const samples: number[] = [];
      for (let i = 0; i < spec.iterations; i++) {
        const t0 = performance.now();
        await runner.execute(method, call.inputs);
        samples.push(performance.now() - t0);
      }
      latency[method] = summarize(samples);
    }
  }
  gc?.();
  const steadyRssBytes = procStatusBytes('VmRSS');
  // The kernel folds RSS into VmHWM lazily, so it can trail a fresh VmRSS by a few pages.
  const peakRssBytes = Math.max(procStatusBytes('VmHWM'), steadyRssBytes);
  const result: BenchResult = {
    program: builtIn !== undefined ? spec.program : basename(spec.program),
    config: spec.config,
    threads: spec.threads,
    plannedBytes: runner.plannedBytes,
    peakRssBytes,
    steadyRssBytes,
    baselineRssBytes,
    packedWeightBytes: runner.packedWeightBytes,
    loadMs,
    latency,
    outputsMatch: expected !== undefined ? maxError <= MATCH_TOLERANCE : true,
    maxError,
    stateful: runner.stateful,
    sessionLatency: Object.fromEntries(Object.entries(sessionSamples).map(([method, samples]) => [method, summarize(samples)])),
  };
  if (expected === undefined) result.outputs = outputs;
  await runner.release();
  return result;
}

/** One method of a program timed beside onnxruntime in one process. */
export interface MethodComparison extends AlternatedTiming {
  program: string;
  method: string;
  /** Threads each runtime computed on. */
  threads: number;
  /** Largest output difference over the largest onnxruntime output magnitude, on the first call. */
  relativeError: number;
}

/**
 * Each method of a built-in program (its first call in the session) on etna
 * and on onnxruntime (the emitter's ONNX form) in this process, calls
 * alternating. Both compute on the calling thread (etna through executeSync),
 * so the ratio is the work and the per-call cost, not the event-loop hop the
 * per-configuration rows include. Both see the same call sequence, so their
 * state agrees when each method's first call is compared.
 */
export async function compareMethods(
  name: string,
  options: { iterations: number; warmup: number; threads: number },
): Promise<MethodComparison[]> {
  const builtIn = builtInProgram(name);
  if (builtIn === undefined || !hasOnnxForm(name)) throw new Error(`${name} has no ONNX form to compare`);
  const module = await Module.load(programBytes(builtIn), { shareMemoryArenas: true, numThreads: options.threads });
  const ort = await onnxRunner(await loadOnnxTools(), builderToOnnx(builtIn.build()), options.threads);
  try {
    const firstCalls = new Map<string, ExampleCall>();
    for (const call of builtIn.calls()) if (!firstCalls.has(call.method)) firstCalls.set(call.method, call);
    const rows: MethodComparison[] = [];
    for (const [method, call] of firstCalls) {
      const etnaCall = (): ReferenceTensor[] => toReference(module.executeSync(method, call.inputs as unknown as InputValue[]));
      const ortCall = (): Promise<ReferenceTensor[]> => ort.execute(method, call.inputs);
      const etnaOutputs = etnaCall();
      const ortOutputs = await ortCall();
      const numbers = (t: ReferenceTensor | undefined): number[] => Array.from((t?.data ?? []) as ArrayLike<number | bigint>, Number);
      const relativeError = Math.max(0, ...etnaOutputs.map((t, k) => relativeDifference(numbers(t), numbers(ortOutputs[k]))));
      rows.push({ program: name, method, threads: options.threads, relativeError, ...(await alternateCalls(etnaCall, ortCall, options)) });
    }
    return rows;
  } finally {
    await ort.release();
    await module.dispose();
  }
}

// ------------------------------------------------------------------ parent side

const SELF = fileURLToPath(import.meta.url);

/** Runs one configuration in a fresh node process. */
export function runInChild(spec: WorkerSpec): Promise<BenchResult> {
  return runWorkerChild<BenchResult>(SELF, spec, `${spec.program} ${spec.config}`);
}

function progressBar(done: number, total: number, label: string): void {
  if (!process.stderr.isTTY && done < total) {
    process.stderr.write(`[${done}/${total}] ${label}\n`);
    return;
  }
  const width = 24;
  const filled = Math.round((done / total) * width);
  const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} ${label}`;
  process.stderr.write(process.stderr.isTTY ? `\r${line.padEnd(79)}${done === total ? '\n' : ''}` : `${line}\n`);
}

export interface BenchOptions {
  files: readonly string[];
  examples?: readonly string[];
  configs?: readonly BenchConfig[];
  quick: boolean;
  /** One thread count, or several: every program and configuration runs at each. */
  threads: number | readonly number[];
  iterations?: number;
  warmup?: number;
  progress?: boolean;
  /** Session counts of the sessions entry; by default SESSION_COUNTS when neither files nor examples are given, else none. */
  sessions?: readonly number[];
}

export async function runBenchmarks(options: BenchOptions): Promise<BenchReport> {
  const examples =
    options.examples ??
    (options.files.length > 0
      ? []
      : [
          'kv-decoder',
          LARGE_DECODER_NAME,
          LLAMA_NAME,
          'gru-stream',
          'encoder-decoder',
          ...(sileroModelPath() !== undefined ? [SILERO_NAME] : []),
          ...ONNX_GRAPH_NAMES,
        ]);
  const iterations = options.iterations ?? (options.quick ? 50 : 300);
  const warmup = options.warmup ?? (options.quick ? 5 : 30);
  const threadCounts = typeof options.threads === 'number' ? [options.threads] : [...options.threads];
  if (threadCounts.length === 0) throw new EtnaError('INVALID_INPUT', 'bench needs at least one thread count');
  // Per program, every configuration at one thread count, then at the next: runtimes and thread counts
  // take turns within minutes of each other, so a busy spell on the machine does not fall on one alone.
  const specs: WorkerSpec[] = [];
  for (const program of [...examples, ...options.files]) {
    for (const threads of threadCounts) {
      for (const config of configsFor(program, options.configs)) {
        specs.push({ program, config, threads, iterations, warmup, session: 'reference' });
      }
    }
  }
  // The sessions entry has its own 2-thread row; it runs at the first count only.
  const sessionThreads = threadCounts[0]!;
  const sessionsEntry = await import('./sessions.js');
  const chosen = options.files.length > 0 || options.examples !== undefined;
  const sessionCounts = options.sessions ?? (chosen ? [] : sessionsEntry.SESSION_COUNTS);
  const sessionConfigs = sessionsEntry.SESSIONS_CONFIGS.filter((config) => config !== 'onnxruntime-sessions' || onnxruntimeAvailable());
  const total = specs.length + sessionsEntry.sessionsRuns(sessionCounts, sessionThreads).length * sessionConfigs.length;
  const { results, sessions } = await withTemporaryDirectory(async (dir) => {
    const artifacts = new Map<string, ProgramArtifacts>();
    const artifactsOf = (program: string): ProgramArtifacts => {
      if (!artifacts.has(program)) artifacts.set(program, prepareArtifacts(program, dir));
      return artifacts.get(program)!;
    };
    const collected: BenchResult[] = [];
    for (const [i, spec] of specs.entries()) {
      const label = `${spec.program} ${spec.config}${threadCounts.length > 1 ? ` ${spec.threads}t` : ''}`;
      if (options.progress !== false) progressBar(i, total, label);
      collected.push(await runInChild({ ...spec, artifacts: isBuiltInProgram(spec.program) ? artifactsOf(spec.program) : undefined }));
    }
    let started = specs.length;
    const sessionRows =
      sessionCounts.length === 0
        ? []
        : await sessionsEntry.runSessionsBenchmarks({
            counts: sessionCounts,
            configs: sessionConfigs,
            quick: options.quick,
            threads: sessionThreads,
            artifacts: artifactsOf(LARGE_DECODER_NAME),
            onStart: (label) => {
              if (options.progress !== false) progressBar(started++, total, label);
            },
          });
    return { results: collected, sessions: sessionRows };
  });
  if (options.progress !== false) progressBar(total, total, 'done');
  // Programs without a reference are checked against etna-shared's outputs.
  for (const result of results) {
    if (result.outputs === undefined) continue;
    const baseline = results.find(
      (r) => r.program === result.program && r.config === 'etna-shared' && r.threads === result.threads,
    )?.outputs;
    if (baseline === undefined) continue;
    result.maxError = Math.max(0, ...result.outputs.map((values, k) => scaledError(values, baseline[k] ?? [])));
    result.outputsMatch = result.outputs.length === baseline.length && result.maxError <= MATCH_TOLERANCE;
  }
  for (const result of results) delete result.outputs;
  return {
    results: [...results, ...sessions],
    threads: threadCounts[0]!,
    threadCounts,
    node: process.version,
    cpu: `${cpus()[0]?.model.trim() ?? 'unknown'} (${cpus().length} cores)`,
  };
}

serveWorker(SELF, runWorker);
