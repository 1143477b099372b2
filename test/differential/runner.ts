// Runs one generated graph through onnxruntime-node (the reference), etna on
// portable kernels and etna lowered to XNNPACK, and lists where they disagree.
//
// Elements whose reference value is ill-conditioned are not compared: the
// reference runs again on inputs nudged by about eight ulps, at random and all
// together (and, when inputs hold denormals, with those flushed to zero, as
// XNNPACK's runtime and some onnxruntime kernels do), and an element that moves by more than a hundred
// times the nudge (or changes between NaN, ±Inf and finite) depends on
// rounding, so engines that sum in another order may differ there
// legitimately. Everywhere else NaN must stay NaN, an infinity must keep its
// sign, and finite values must agree within the graph's tolerance.
import * as ort from 'onnxruntime-node';

import { Module, Tensor } from '../../lib/index.js';
import { constFromProto, toNumbers } from '../../lib/onnx/constant.js';
import { decodeModel, importOnnx, type ImportOnnxResult } from '../../lib/onnx/index.js';
import { onnxModel } from '../onnx/onnx-writer.js';
import { OPSET, Rng, type BuiltGraph, type RuntimeInput, type Tolerance } from './generator.js';

export type Feeds = Record<string, Float32Array>;

export type EnginePath = 'portable' | 'xnnpack';
export const ENGINE_PATHS: readonly EnginePath[] = ['portable', 'xnnpack'];

export type ValueClass = 'nan' | '+inf' | '-inf' | 'finite';

export interface Disagreement {
  path: EnginePath;
  kind: 'error' | 'shape' | 'nonfinite' | 'value';
  output?: string;
  index?: number;
  expected?: number;
  actual?: number;
  detail: string;
}

export function classOf(v: number): ValueClass {
  if (Number.isNaN(v)) return 'nan';
  if (v === Infinity) return '+inf';
  if (v === -Infinity) return '-inf';
  return 'finite';
}

/** What a disagreement is, without where: the shrinker keeps a graph only while it fails the same way. */
export function signature(d: Disagreement): string {
  if (d.kind === 'nonfinite') return `${d.path}/nonfinite/${classOf(d.expected!)}->${classOf(d.actual!)}`;
  return `${d.path}/${d.kind}`;
}

// Special values mixed into inputs: NaN, infinities, signed zero, denormals, and huge and tiny magnitudes.
const SPECIALS = [Number.NaN, Infinity, -Infinity, -0, 0, 1e-40, -1e-40, 1.4e-45, 1e-30, -1e-30, 1e30, -1e30, 3.4e38, -3.4e38, 1e10, -1e10];

function ordinary(rng: Rng): number {
  const roll = rng.next();
  if (roll < 0.75) return rng.uniform(-3, 3);
  if (roll < 0.9) return rng.int(-6, 6) / 2;
  return rng.uniform(-20, 20);
}

/** Input values for a graph: mostly ordinary, and in about half the tensors some special values. */
export function inputValues(inputs: readonly RuntimeInput[], seed: number): Feeds {
  const rng = new Rng(seed);
  const feeds: Feeds = {};
  for (const input of inputs) {
    const count = input.shape.reduce((a, b) => a * b, 1);
    const specialRate = rng.chance(0.5) ? rng.pick([0.05, 0.15, 0.4]) : 0;
    feeds[input.name] = Float32Array.from({ length: count }, () => (rng.chance(specialRate) ? rng.pick(SPECIALS) : ordinary(rng)));
  }
  return feeds;
}

const NUDGE = 1e-6;
const FLT_MIN = 2 ** -126;
const CONDITION_LIMIT = 100;

/**
 * Values that are exact (zeros, infinities, NaN, small integers and halves)
 * stay; every other moves by up to NUDGE relative, each at random or, when
 * `coherent`, all by NUDGE together (random nudges cancel in a long sum, so a
 * Cos of a sum of squares would not move).
 */
function nudged(feeds: Feeds, seed: number, coherent = false): Feeds {
  const rng = new Rng(seed);
  const out: Feeds = {};
  for (const [name, values] of Object.entries(feeds)) {
    out[name] = values.map((v) =>
      !Number.isFinite(v) || v === 0 || (Math.abs(v) <= 64 && Number.isInteger(2 * v))
        ? v
        : v * (1 + NUDGE * (coherent ? 1 : 2 * rng.next() - 1)),
    );
  }
  return out;
}

/** Denormal inputs replaced by zeros of the same sign, as an engine that flushes denormals sees them. */
function flushed(feeds: Feeds): Feeds {
  const out: Feeds = {};
  for (const [name, values] of Object.entries(feeds)) out[name] = values.map((v) => (Math.abs(v) < FLT_MIN ? v * 0 : v));
  return out;
}

interface OutputValues {
  shape: number[];
  data: Float32Array;
}

type Outputs = Record<string, OutputValues>;

async function runOrt(session: ort.InferenceSession, graph: ModelSpec, feeds: Feeds): Promise<Outputs> {
  const ortFeeds: Record<string, ort.Tensor> = {};
  for (const input of graph.inputs) ortFeeds[input.name] = new ort.Tensor('float32', feeds[input.name]!, input.shape);
  const results = await session.run(ortFeeds);
  const out: Outputs = {};
  for (const name of graph.outputs) out[name] = { shape: [...results[name]!.dims], data: results[name]!.data as Float32Array };
  return out;
}

async function runEtna(model: Uint8Array, feeds: Feeds, xnnpack: boolean): Promise<Outputs> {
  const imported = importOnnx(model, { xnnpack });
  const module = await Module.load(imported.bytes, { numThreads: 1 });
  try {
    const inputs = imported.inputs.map((info) => new Tensor('float32', info.shape, feeds[info.name]!));
    const results = await module.execute('forward', inputs);
    const out: Outputs = {};
    imported.outputs.forEach((info, i) => {
      const value = results[i];
      if (!(value instanceof Tensor) || !value.is('float32')) throw new Error(`output '${info.name}' is not a float32 tensor`);
      out[info.name] = { shape: [...value.shape], data: value.data };
    });
    return out;
  } finally {
    await module.dispose();
  }
}

/** Element positions whose reference value the nudged runs moved too far to compare. */
function unstable(reference: Outputs, nudgedRuns: readonly Outputs[]): Map<string, Set<number>> {
  const map = new Map<string, Set<number>>();
  for (const [name, ref] of Object.entries(reference)) {
    const set = new Set<number>();
    for (const run of nudgedRuns) {
      const moved = run[name]!.data;
      ref.data.forEach((e, i) => {
        const m = moved[i]!;
        if (classOf(e) !== classOf(m)) set.add(i);
        else if (Number.isFinite(e) && Math.abs(m - e) > CONDITION_LIMIT * NUDGE * Math.abs(e)) set.add(i);
      });
    }
    map.set(name, set);
  }
  return map;
}

function compareOutput(
  path: EnginePath,
  name: string,
  expected: OutputValues,
  actual: OutputValues | undefined,
  skip: ReadonlySet<number>,
  tolerance: Tolerance,
): Disagreement | undefined {
  if (actual === undefined) return { path, kind: 'error', output: name, detail: `no output '${name}'` };
  if (expected.shape.join('x') !== actual.shape.join('x')) {
    return { path, kind: 'shape', output: name, detail: `output '${name}' has shape [${actual.shape}], onnxruntime [${expected.shape}]` };
  }
  let worst: Disagreement | undefined;
  let worstExcess = 0;
  for (let i = 0; i < expected.data.length; i++) {
    if (skip.has(i)) continue;
    const e = expected.data[i]!;
    const a = actual.data[i]!;
    const at = { path, output: name, index: i, expected: e, actual: a };
    if (classOf(e) !== classOf(a)) {
      return { ...at, kind: 'nonfinite', detail: `output '${name}'[${i}] is ${a}, onnxruntime ${e}` };
    }
    if (!Number.isFinite(e)) continue;
    // Differences below the smallest normal float are not counted: an engine may flush denormal results to zero.
    const excess = Math.abs(a - e) - Math.max(FLT_MIN, tolerance.atol + tolerance.rtol * Math.abs(e));
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = {
        ...at,
        kind: 'value',
        detail: `output '${name}'[${i}] is ${a}, onnxruntime ${e} (tolerance ${tolerance.atol} + ${tolerance.rtol} x |e|)`,
      };
    }
  }
  return worst;
}

export interface GraphResult {
  /** onnxruntime refused the graph: a generator mistake, not a finding. */
  invalid?: string;
  disagreements: Disagreement[];
  /** Elements compared and elements skipped as ill-conditioned, over every output and path. */
  compared: number;
  skipped: number;
}

/** What the comparison needs to know about a model besides its bytes. */
export interface ModelSpec {
  inputs: readonly RuntimeInput[];
  outputs: readonly string[];
  tolerance: Tolerance;
}

/** Runs one graph with the given inputs through the three engines and compares etna's paths with onnxruntime. */
export async function checkGraph(graph: BuiltGraph, feeds: Feeds, paths: readonly EnginePath[] = ENGINE_PATHS): Promise<GraphResult> {
  return checkModel(onnxModel(graph.graph, OPSET), graph, feeds, paths);
}

export async function checkModel(
  model: Uint8Array,
  spec: ModelSpec,
  feeds: Feeds,
  paths: readonly EnginePath[] = ENGINE_PATHS,
): Promise<GraphResult> {
  let session: ort.InferenceSession;
  let reference: Outputs;
  let nudgedRuns: Outputs[];
  try {
    session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3 });
  } catch (error) {
    return { invalid: (error as Error).message.split('\n')[0], disagreements: [], compared: 0, skipped: 0 };
  }
  try {
    reference = await runOrt(session, spec, feeds);
    nudgedRuns = [
      await runOrt(session, spec, nudged(feeds, 1)),
      await runOrt(session, spec, nudged(feeds, 2)),
      await runOrt(session, spec, nudged(feeds, 3, true)),
    ];
    if (Object.values(feeds).some((values) => values.some((v) => v !== 0 && Math.abs(v) < FLT_MIN)))
      nudgedRuns.push(await runOrt(session, spec, flushed(feeds)));
  } catch (error) {
    return { invalid: (error as Error).message.split('\n')[0], disagreements: [], compared: 0, skipped: 0 };
  } finally {
    await session.release();
  }
  const skip = unstable(reference, nudgedRuns);
  const disagreements: Disagreement[] = [];
  let compared = 0;
  let skipped = 0;
  for (const path of paths) {
    let actual: Outputs;
    try {
      actual = await runEtna(model, feeds, path === 'xnnpack');
    } catch (error) {
      disagreements.push({ path, kind: 'error', detail: (error as Error).message.split('\n')[0]! });
      continue;
    }
    for (const name of spec.outputs) {
      const s = skip.get(name)!;
      compared += reference[name]!.data.length - s.size;
      skipped += s.size;
      const d = compareOutput(path, name, reference[name]!, actual[name], s, spec.tolerance);
      if (d !== undefined) disagreements.push(d);
    }
  }
  return { disagreements, compared, skipped };
}

export const isDenormal = (v: number): boolean => v !== 0 && Math.abs(v) < FLT_MIN;

/** Every float32 value a graph computes (and its inputs), by name, as etna's portable kernels and as onnxruntime compute them. */
export interface GraphValues {
  values: Map<string, Float32Array>;
  reference: Map<string, Float32Array>;
  nodes: { opType: string; inputs: string[]; outputs: string[] }[];
}

function varint(value: number): number[] {
  const out: number[] = [];
  let v = value;
  while (v > 127) {
    out.push((v & 127) | 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

function lengthDelimited(field: number, payload: ArrayLike<number>): number[] {
  return [...varint(field * 8 + 2), ...varint(payload.length), ...Array.from(payload)];
}

/**
 * The model with more graph outputs, named only (onnxruntime infers their
 * types). A protobuf parser merges a repeated embedded message field into the
 * one before it, so ModelProto.graph (7) holding only GraphProto.output (12)
 * entries, appended to the bytes, adds those outputs to the graph.
 */
function withOutputs(model: Uint8Array, names: readonly string[]): Uint8Array {
  const encoder = new TextEncoder();
  const graph = names.flatMap((name) => lengthDelimited(12, lengthDelimited(1, encoder.encode(name))));
  const extra = lengthDelimited(7, graph);
  const out = new Uint8Array(model.length + extra.length);
  out.set(model);
  out.set(extra, model.length);
  return out;
}

/** Every float32 value onnxruntime computes on the way, by name (the model run again with each made an output). */
async function referenceValues(
  model: Uint8Array,
  inputs: readonly RuntimeInput[],
  names: readonly string[],
  feeds: Feeds,
): Promise<Map<string, Float32Array>> {
  const session = await ort.InferenceSession.create(withOutputs(model, names), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    logSeverityLevel: 3,
  });
  try {
    const ortFeeds: Record<string, ort.Tensor> = {};
    for (const input of inputs) ortFeeds[input.name] = new ort.Tensor('float32', feeds[input.name]!, input.shape);
    const results = await session.run(ortFeeds);
    const values = new Map<string, Float32Array>();
    for (const [name, tensor] of Object.entries(results)) if (tensor.type === 'float32') values.set(name, tensor.data as Float32Array);
    return values;
  } finally {
    await session.release();
  }
}

export async function graphValues(model: Uint8Array, feeds: Feeds): Promise<GraphValues> {
  const graph = decodeModel(model).graph;
  const outputs = new Set(graph.outputs.map((o) => o.name));
  const computed = graph.nodes.flatMap((n) => n.outputs).filter((name) => name !== '' && !outputs.has(name));
  let debugOutputs = computed;
  // Values the importer's rewrites fold away (a Mul into a Conv, say) cannot be returned; those are left out.
  let imported: ImportOnnxResult | undefined;
  while (imported === undefined) {
    try {
      imported = importOnnx(model, { xnnpack: false, debugOutputs });
    } catch (error) {
      const missing = /debug output '([^']*)' is not a value/.exec((error as Error).message)?.[1];
      if (missing === undefined) throw error;
      debugOutputs = debugOutputs.filter((name) => name !== missing);
    }
  }
  // What both engines read as given: the feeds and the initializers (a comparison's threshold).
  const given = new Map<string, Float32Array>(Object.entries(feeds));
  for (const proto of graph.initializers) {
    const constant = constFromProto(proto, proto.name);
    if (constant.dtype === 'float32') given.set(proto.name, Float32Array.from(toNumbers(constant)));
  }
  const module = await Module.load(imported.bytes, { numThreads: 1 });
  const values = new Map(given);
  try {
    const results = await module.execute(
      'forward',
      imported.inputs.map((info) => new Tensor('float32', info.shape, feeds[info.name]!)),
    );
    imported.outputs.forEach((info, i) => {
      const value = results[i];
      if (value instanceof Tensor && value.is('float32')) values.set(info.name, value.data);
    });
  } finally {
    await module.dispose();
  }
  const inputs = imported.inputs.map((info) => ({ name: info.name, shape: [...info.shape] }));
  const reference = new Map([...given, ...(await referenceValues(model, inputs, computed, feeds))]);
  return { values, reference, nodes: graph.nodes.map((n) => ({ opType: n.opType, inputs: n.inputs, outputs: n.outputs })) };
}
