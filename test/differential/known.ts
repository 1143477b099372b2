// Known disagreements (known-disagreements.json) and saved regressions
// (regressions/*.onnx with a .json beside each).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import type { Tolerance } from './generator.js';
import {
  classOf,
  graphValues,
  isDenormal,
  type Disagreement,
  type EnginePath,
  type Feeds,
  type GraphValues,
  type ModelSpec,
  type ValueClass,
} from './runner.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const KNOWN_FILE = path.join(here, 'known-disagreements.json');
export const REGRESSION_DIR = path.join(here, 'regressions');

/** One reviewed class of disagreement: every field given must match; `reason` says why it is left. */
export interface KnownDisagreement {
  id: string;
  reason: string;
  path?: EnginePath;
  kind?: Disagreement['kind'];
  expected?: ValueClass;
  actual?: ValueClass;
  /** The graph contains one of these operators. */
  ops?: string[];
  /** Some input value has at least this magnitude (infinities included). */
  inputsOver?: number;
  /** Every input value is finite (true) or some is NaN or infinite (false). */
  inputsFinite?: boolean;
  /** A denormal appears in the inputs or in a value computed on the way. */
  denormals?: boolean;
  /** Some node of this operator (or of one of these) reads a first input in [low, high]. */
  inputIn?: { op: string | string[]; low: number; high: number };
  /**
   * A Floor, Ceil, Round or Sign reads a value close to (not on) where its
   * result jumps, or a Log, Sqrt, Reciprocal or Pow one close to 0, on etna's
   * portable kernels or on onnxruntime.
   */
  nearJump?: boolean;
  /**
   * A value disagreement within the graph's tolerance carried through the
   * products and quotients it computes: a computed value may be off by atol,
   * so multiplied by w (a Mul, a PRelu's slope, a Div's 1 / divisor) it may be
   * off by atol |w|, and as a divisor v it leaves the quotient off by atol / |v|
   * relative (raised to a power p, by |p| atol / |v|: v / |p| counts as the
   * divisor). The largest |w| and smallest |v| in the graph set the allowance.
   */
  scaledError?: boolean;
  /** Some value computed on the way is NaN. */
  nanInside?: boolean;
}

const JUMP_RELATIVE = 1e-4;

/** Distance from v to the nearest point where the op's result jumps (or has a singularity). */
function distanceToJump(op: string, v: number): number | undefined {
  if (!Number.isFinite(v)) return undefined;
  if (op === 'Floor' || op === 'Ceil') return Math.abs(v - Math.round(v));
  if (op === 'Round') return Math.abs(Math.abs(v - Math.floor(v)) - 0.5);
  if (op === 'Sign' || op === 'Log' || op === 'Sqrt' || op === 'Reciprocal' || op === 'Pow') return Math.abs(v);
  return undefined;
}

/** Comparisons jump where their operands meet (Where's condition is one). */
const COMPARISONS = new Set(['Greater', 'Less', 'Equal', 'GreaterOrEqual', 'LessOrEqual']);

function nearJump(inside: GraphValues): boolean {
  // A value exactly on the jump on one engine may be off it on the other (a sum of softmax rows is 6 or 6.0000005).
  const near = (v: number, d: number | undefined): boolean => d !== undefined && d > 0 && d <= JUMP_RELATIVE * Math.max(1, Math.abs(v));
  return inside.nodes.some((n) =>
    [inside.values, inside.reference].some((map) => {
      const values = map.get(n.inputs[0] ?? '') ?? [];
      if (!COMPARISONS.has(n.opType)) return values.some((v) => near(v, distanceToJump(n.opType, v)));
      // Any value against any of the other operand's: the graph-wide test the other rules make too.
      const others = (map.get(n.inputs[1] ?? '') ?? []).filter(Number.isFinite);
      return values.some((v) => Number.isFinite(v) && others.some((t) => near(v, Math.abs(v - t))));
    }),
  );
}

const largestMagnitude = (values: Iterable<number>): number => {
  let largest = 0;
  for (const v of values) if (Number.isFinite(v) && Math.abs(v) > largest) largest = Math.abs(v);
  return largest;
};

/** How far a computed value's absolute error atol can grow through the graph's products and quotients. */
function errorScales(inside: GraphValues): { factor: number; divisor: number } {
  const computed = new Set(inside.nodes.filter((n) => n.opType !== 'Constant').flatMap((n) => n.outputs));
  const both = (name: string | undefined): number[] =>
    name === undefined ? [] : [...(inside.values.get(name) ?? []), ...(inside.reference.get(name) ?? [])];
  let factor = 1;
  let divisor = Infinity;
  for (const n of inside.nodes) {
    const [a, b] = n.inputs;
    if ((n.opType === 'Mul' || n.opType === 'PRelu') && computed.has(a ?? '')) factor = Math.max(factor, largestMagnitude(both(b)));
    if (n.opType === 'Mul' && computed.has(b ?? '')) factor = Math.max(factor, largestMagnitude(both(a)));
    // x^p of a computed x is off by |p| atol / |x| relative: what a divisor |x| / |p| leaves.
    const exponent = n.opType === 'Pow' && computed.has(a ?? '') ? largestMagnitude(both(b)) : 0;
    const bases = exponent > 0 ? both(a).filter((v) => v !== 0 && Number.isFinite(v)) : [];
    if (bases.length > 0) divisor = Math.min(divisor, Math.min(...bases.map(Math.abs)) / exponent);
    const divisorName = n.opType === 'Div' ? b : n.opType === 'Reciprocal' ? a : undefined;
    const divisors = both(divisorName).filter((v) => v !== 0 && Number.isFinite(v));
    if (divisors.length === 0) continue;
    const smallest = Math.min(...divisors.map(Math.abs));
    if (n.opType === 'Div' && computed.has(a ?? '')) factor = Math.max(factor, 1 / smallest);
    if (computed.has(divisorName ?? '')) divisor = Math.min(divisor, smallest);
  }
  return { factor, divisor };
}

function withinScaledError(d: Disagreement, tolerance: Tolerance, inside: GraphValues): boolean {
  if (d.kind !== 'value' || d.expected === undefined || d.actual === undefined) return false;
  const { factor, divisor } = errorScales(inside);
  const relative = tolerance.rtol + tolerance.atol / divisor;
  return Math.abs(d.actual - d.expected) <= tolerance.atol * factor + relative * Math.abs(d.expected);
}

/** What a disagreement is matched against besides itself: the graph's operators and inputs, and the model to look inside when an entry asks. */
export interface MatchContext {
  ops: readonly string[];
  feeds: Feeds;
  model: Uint8Array;
  tolerance: Tolerance;
}

export function readKnown(): KnownDisagreement[] {
  const entries = JSON.parse(fs.readFileSync(KNOWN_FILE, 'utf8')) as KnownDisagreement[];
  for (const entry of entries) {
    if (typeof entry.id !== 'string' || typeof entry.reason !== 'string' || entry.reason.length < 20) {
      throw new Error(`${KNOWN_FILE}: entry ${JSON.stringify(entry)} needs an id and a reason`);
    }
  }
  return entries;
}

/** The known entry a disagreement falls under, if any. */
export async function matchKnown(
  known: readonly KnownDisagreement[],
  d: Disagreement,
  context: MatchContext,
): Promise<KnownDisagreement | undefined> {
  const { ops, feeds } = context;
  const largest = Math.max(0, ...Object.values(feeds).map((values) => values.reduce((m, v) => (Math.abs(v) > m ? Math.abs(v) : m), 0)));
  let inside: GraphValues | undefined;
  for (const k of known) {
    const matches =
      (k.path === undefined || k.path === d.path) &&
      (k.inputsOver === undefined || largest >= k.inputsOver) &&
      (k.inputsFinite === undefined || k.inputsFinite === Object.values(feeds).every((values) => values.every(Number.isFinite))) &&
      (k.kind === undefined || k.kind === d.kind) &&
      (k.expected === undefined || (d.expected !== undefined && classOf(d.expected) === k.expected)) &&
      (k.actual === undefined || (d.actual !== undefined && classOf(d.actual) === k.actual)) &&
      (k.ops === undefined || k.ops.some((op) => ops.includes(op)));
    if (!matches) continue;
    // Looking inside the graph costs a run: only for an entry that asks.
    if (
      k.denormals === undefined &&
      k.inputIn === undefined &&
      k.nearJump === undefined &&
      k.nanInside === undefined &&
      k.scaledError === undefined
    )
      return k;
    inside ??= await graphValues(context.model, feeds);
    const all = [...inside.values.values()];
    if (k.nearJump !== undefined && k.nearJump !== nearJump(inside)) continue;
    if (k.denormals !== undefined && k.denormals !== all.some((values) => values.some(isDenormal))) continue;
    if (k.nanInside !== undefined && k.nanInside !== all.some((values) => values.some(Number.isNaN))) continue;
    if (k.scaledError !== undefined && k.scaledError !== withinScaledError(d, context.tolerance, inside)) continue;
    const range = k.inputIn;
    const values = inside.values;
    if (
      range !== undefined &&
      !inside.nodes.some(
        (n) =>
          [range.op].flat().includes(n.opType) && (values.get(n.inputs[0] ?? '')?.some((v) => v >= range.low && v <= range.high) ?? false),
      )
    )
      continue;
    return k;
  }
  return undefined;
}

/** A saved failing graph: its inputs, what disagreed when it was found, and the known entry it fell under, if any. */
export interface Regression {
  ops: string[];
  inputs: { name: string; shape: number[]; values: (number | string)[] }[];
  outputs: string[];
  tolerance: Tolerance;
  disagreement: Disagreement;
  known?: string;
  found: string;
}

// JSON has no NaN, infinities or -0: those are written as strings.
function encode(v: number): number | string {
  if (Number.isNaN(v) || !Number.isFinite(v) || Object.is(v, -0)) return Object.is(v, -0) ? '-0' : String(v);
  return v;
}

function decode(v: number | string): number {
  return typeof v === 'number' ? v : Number(v);
}

export function saveRegression(
  name: string,
  model: Uint8Array,
  regression: Omit<Regression, 'inputs'> & { inputs: { name: string; shape: number[] }[] },
  feeds: Feeds,
): string {
  fs.mkdirSync(REGRESSION_DIR, { recursive: true });
  const inputs = regression.inputs.map((i) => ({ name: i.name, shape: i.shape, values: Array.from(feeds[i.name]!, encode) }));
  const disagreement = {
    ...regression.disagreement,
    expected: regression.disagreement.expected === undefined ? undefined : encode(regression.disagreement.expected),
    actual: regression.disagreement.actual === undefined ? undefined : encode(regression.disagreement.actual),
  };
  fs.writeFileSync(path.join(REGRESSION_DIR, `${name}.onnx`), model);
  fs.writeFileSync(path.join(REGRESSION_DIR, `${name}.json`), `${JSON.stringify({ ...regression, inputs, disagreement }, null, 1)}\n`);
  return path.join(REGRESSION_DIR, `${name}.onnx`);
}

export interface LoadedRegression {
  name: string;
  model: Uint8Array;
  spec: ModelSpec;
  feeds: Feeds;
  regression: Regression;
}

export function loadRegressions(): LoadedRegression[] {
  if (!fs.existsSync(REGRESSION_DIR)) return [];
  return fs
    .readdirSync(REGRESSION_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => {
      const name = file.slice(0, -'.json'.length);
      const regression = JSON.parse(fs.readFileSync(path.join(REGRESSION_DIR, file), 'utf8')) as Regression;
      const modelFile = path.join(REGRESSION_DIR, `${name}.onnx`);
      if (!fs.existsSync(modelFile)) throw new Error(`regression ${name}: ${modelFile} is missing`);
      const feeds: Feeds = Object.fromEntries(regression.inputs.map((i) => [i.name, Float32Array.from(i.values, decode)]));
      return {
        name,
        model: new Uint8Array(fs.readFileSync(modelFile)),
        spec: {
          inputs: regression.inputs.map((i) => ({ name: i.name, shape: i.shape })),
          outputs: regression.outputs,
          tolerance: regression.tolerance,
        },
        feeds,
        regression,
      };
    });
}
