// The pieces random graphs are made of: the seeded generator, the values and
// recipes, and the builder that collects nodes while a recipe's steps run.
import { Mulberry32 } from '../../lib/random.js';
import type { TestGraph, TestInitializer, TestNode, TestValue } from '../onnx/onnx-writer.js';

/** The sampler's seeded generator (mulberry32), with the draws the graph generator needs. */
export class Rng extends Mulberry32 {
  /** An integer in [low, high]. */
  int(low: number, high: number): number {
    return low + Math.floor(this.next() * (high - low + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** A uniform float rounded to float32. */
  override uniform(low: number, high: number): number {
    return Math.fround(super.uniform(low, high));
  }

  seed(): number {
    return Math.floor(this.next() * 2 ** 31);
  }

  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(0, i);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }
}

/** Thrown by a builder when its operator cannot follow the given shape. */
export class Unbuildable extends Error {}

export interface Value {
  name: string;
  shape: number[];
}

/** How far etna may stray from onnxruntime after one operator: |a - e| <= atol * scale + rtol * |e|. */
export interface Tolerance {
  rtol: number;
  atol: number;
}

export interface Step {
  op: string;
  seed: number;
}

export interface Recipe {
  /** Shape of the first graph input, which the first step reads. */
  inputShape: number[];
  steps: Step[];
  /** Seed of the runtime input values. */
  valueSeed: number;
  /** Steps whose output is a graph output too (the last step's always is). */
  extraOutputs: number[];
}

export interface RuntimeInput {
  name: string;
  shape: number[];
}

export interface BuiltGraph {
  graph: TestGraph;
  inputs: RuntimeInput[];
  outputs: string[];
  /** The operator of each step, in order. */
  ops: string[];
  tolerance: Tolerance;
}

export const OPSET = 17;

export const size = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

export function broadcast(a: readonly number[], b: readonly number[]): number[] {
  const rank = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) throw new Unbuildable(`[${a}] and [${b}] do not broadcast`);
    out.push(da === 1 ? db : da);
  }
  return out;
}

/** Collects nodes, inputs and initializers while steps build. */
export class GraphBuilder {
  readonly nodes: TestNode[] = [];
  readonly inputs: TestValue[] = [];
  readonly runtime: RuntimeInput[] = [];
  readonly initializers: TestInitializer[] = [];
  readonly sideOutputs: Value[] = [];
  private counter = 0;

  fresh(prefix: string): string {
    return `${prefix}${this.counter++}`;
  }

  input(shape: readonly number[]): Value {
    const name = `in${this.runtime.length}`;
    this.inputs.push({ name, type: 1, shape: [...shape] });
    this.runtime.push({ name, shape: [...shape] });
    return { name, shape: [...shape] };
  }

  weight(rng: Rng, shape: readonly number[], low = -1, high = 1): Value {
    const name = this.fresh('w');
    this.initializers.push({ name, dims: [...shape], floats: Array.from({ length: size(shape) }, () => rng.uniform(low, high)) });
    return { name, shape: [...shape] };
  }

  constant(shape: readonly number[], floats: number[]): Value {
    const name = this.fresh('c');
    this.initializers.push({ name, dims: [...shape], floats });
    return { name, shape: [...shape] };
  }

  int64s(values: readonly number[]): string {
    const name = this.fresh('i');
    this.initializers.push({ name, dims: [values.length], floats: [], int64s: [...values] });
    return name;
  }

  node(op: string, inputs: string[], shape: number[], attributes: Omit<TestNode, 'op' | 'inputs' | 'outputs'> = {}): Value {
    const name = this.fresh('v');
    this.nodes.push({ op, inputs, outputs: [name], ...attributes });
    return { name, shape };
  }
}
