// What every measuring child of `etna bench` shares: the configurations, the
// runtimes under test behind one interface, the figures a row reports and
// how they are computed, and the ONNX form of a built-in program as the
// parent writes it out.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

import { Module, type InputValue, type Program, type Tensor, type Value } from '../../index.js';
import type { LargeExampleName, ReferenceTensor } from '../examples/index.js';
import type { OnnxMethodModel, OnnxProgram, OnnxStateBuffer } from '../onnx-emitter/index.js';

export const CONFIGS = ['etna-shared', 'etna-unshared', 'onnxruntime'] as const;
/**
 * A program imported from ONNX adds `onnxruntime-folded`: its imported graph
 * written back as ONNX. Its `onnxruntime` runs the original file.
 */
export type BenchConfig = (typeof CONFIGS)[number] | 'onnxruntime-folded';

export const isOnnxConfig = (config: BenchConfig): boolean => config === 'onnxruntime' || config === 'onnxruntime-folded';

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

/** A built-in program written out: its .pte, and its ONNX models with a manifest. */
export interface ProgramArtifacts {
  readonly pte: string;
  /** Absent for programs without an ONNX form. */
  readonly onnxManifest?: string;
}

/** The ONNX manifest of ProgramArtifacts: each method's model file, and the state buffers' initial values in base64. */
export interface OnnxManifest {
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
  /** Threads the runtime computed on (numThreads, intraOpNumThreads). */
  threads: number;
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

/** Largest |a - b| tolerated per unit of scale, as in the examples' own tests. */
export const MATCH_TOLERANCE = 1e-4;

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

/** A runtime under test, seen through one interface. */
export interface Runner {
  execute(method: string, inputs: readonly ReferenceTensor[]): Promise<ReferenceTensor[]>;
  plannedBytes: number | null;
  packedWeightBytes: number | null;
  stateful: boolean;
  release(): Promise<void>;
}

export function toReference(values: readonly Value[]): ReferenceTensor[] {
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

type OnnxExport = typeof import('../onnx-emitter/index.js');
export type OnnxTools = [Parameters<OnnxExport['OrtProgramRunner']['create']>[0], OnnxExport];

export async function loadOnnxTools(): Promise<OnnxTools> {
  const [ort, tools] = await Promise.all([import('onnxruntime-node'), import('../onnx-emitter/index.js')]);
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

export function readOnnxProgram(manifestPath: string | undefined): OnnxProgram {
  if (manifestPath === undefined) throw new Error('this program has no ONNX form (its artifacts hold no ONNX manifest)');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as OnnxManifest;
  return {
    methods: manifest.methods.map(({ file, ...model }) => ({ ...model, bytes: new Uint8Array(readFileSync(file)) })),
    state: manifest.state.map((buffer) => ({
      ...buffer,
      init: buffer.init === null ? undefined : new Uint8Array(Buffer.from(buffer.init, 'base64')),
    })),
  };
}

/**
 * kv-decoder's architecture at KV_DECODER_LARGE_CONFIG's size, where weights
 * and KV cache are those of a small real decoder. The sessions entry runs it too.
 */
export const LARGE_DECODER_NAME: LargeExampleName = 'kv-decoder-large';
