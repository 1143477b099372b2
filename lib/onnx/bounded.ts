// Bounded dynamic shapes: an input dim given as a range (`1x3x48x32..960`)
// makes one program planned at the upper bound that runs any size in range.
//
// How the varying dims are found: the graph is imported at the upper bound and
// again at a few smaller sizes (probes). The imports must produce the same
// program apart from sizes. A tensor dim that differs between them varies per
// call (DYNAMIC_BOUND); a baked argument that differs is either rewritten to
// hold at every size (a reshape's size becomes -1, an expand keeps the input's
// dim, a slice to the end of its dim clamps) or the node is refused by name.
// Anything else that differs (a constant, a count, the ops chosen) means the
// graph computes something from the size that the program cannot follow.
import { EtnaError } from '../errors.js';
import { sameBytes } from '../export/assemble.js';
import type { GraphValue, MethodGraph, TensorNode } from '../export/graph.js';

/** A dim whose size varies per call, from `min` to `max` inclusive. */
export interface DimRange {
  min: number;
  max: number;
}

/**
 * An input's shape: one entry per dim, a size or a range, or the CLI's text
 * form (`'1x3x48x320'`, `'1x3x48x32..960'`, `'scalar'`).
 */
export type InputShape = readonly (number | DimRange)[] | string;

/** An input shape resolved to its largest and smallest sizes. */
export interface ShapeBounds {
  max: number[];
  min: number[];
}

function badShape(input: string, what: string): never {
  throw new EtnaError('INVALID_INPUT', `shape of input '${input}': ${what}`);
}

function checkSize(input: string, dim: number, value: unknown, what: string, least: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < least) {
    badShape(input, `dim ${dim} ${what} ${JSON.stringify(value)} is not an integer >= ${least}`);
  }
  return value;
}

/** Reads one input's shape (array or text form), checking every size and range. */
export function shapeBounds(input: string, shape: InputShape): ShapeBounds {
  const dims: (number | DimRange)[] = typeof shape === 'string' ? parseShapeText(input, shape) : [...shape];
  if (!Array.isArray(dims)) badShape(input, `expected an array of sizes or { min, max } ranges, got ${JSON.stringify(shape)}`);
  const max: number[] = [];
  const min: number[] = [];
  dims.forEach((dim, d) => {
    if (typeof dim === 'object' && dim !== null) {
      const lo = checkSize(input, d, dim.min, 'min', 1);
      const hi = checkSize(input, d, dim.max, 'max', 1);
      if (lo > hi) badShape(input, `dim ${d} range ${lo}..${hi} has min > max`);
      max.push(hi);
      min.push(lo);
    } else {
      const size = checkSize(input, d, dim, 'size', 0);
      max.push(size);
      min.push(size);
    }
  });
  return { max, min };
}

function parseShapeText(input: string, text: string): (number | DimRange)[] {
  if (text === '' || text === 'scalar') return [];
  return text.split('x').map((part, d) => {
    const range = /^(.*)\.\.(.*)$/.exec(part);
    const number = (s: string, what: string): number => {
      if (!/^\d+$/.test(s))
        badShape(input, `dim ${d} ${what} '${s}' in '${text}' is not a non-negative integer (shapes read like 1x3x48x32..960)`);
      return Number(s);
    };
    return range === null ? number(part, 'size') : { min: number(range[1]!, 'min'), max: number(range[2]!, 'max') };
  });
}

/** A shape as `1,3,48,32..960`: each dim its size, or its range where it varies. */
export function formatBounds(bounds: ShapeBounds): string {
  return bounds.max.map((hi, d) => (bounds.min[d] === hi ? String(hi) : `${bounds.min[d]}..${hi}`)).join(',');
}

/**
 * The sizes the graph is imported at besides the upper bound: the smallest,
 * one in the middle and one below the largest (so strides and rounding show),
 * every ranged dim at its k-th probe at once.
 */
export function probeShapes(bounds: ReadonlyMap<string, ShapeBounds>): Map<string, number[]>[] {
  const ranged = [...bounds.values()].some((b) => b.min.some((lo, d) => lo !== b.max[d]));
  if (!ranged) return [];
  const probes: Map<string, number[]>[] = [];
  const pick = [(lo: number) => lo, (lo: number, hi: number) => Math.floor((lo + hi) / 2), (_lo: number, hi: number) => hi - 1];
  const seen = new Set<string>();
  for (const choose of pick) {
    const probe = new Map<string, number[]>();
    for (const [name, b] of bounds)
      probe.set(
        name,
        b.max.map((hi, d) => (b.min[d] === hi ? hi : Math.max(b.min[d]!, choose(b.min[d]!, hi)))),
      );
    const key = JSON.stringify([...probe]);
    const isUpper = [...probe].every(([name, shape]) => shape.every((s, d) => s === bounds.get(name)!.max[d]));
    if (!seen.has(key) && !isUpper) probes.push(probe);
    seen.add(key);
  }
  return probes;
}

/** Which ONNX node emitted instruction `index` of the main method. */
export type NodeOfInstruction = (index: number) => string;

function unsupported(node: string, what: string): never {
  throw new EtnaError(
    'UNSUPPORTED_OPERATOR',
    `${node}: ${what}, so the program cannot run it at every size of the range; give that input a fixed shape`,
  );
}

function sameScalar(a: GraphValue, b: GraphValue): boolean {
  if (a.kind !== b.kind) return false;
  switch (a.kind) {
    case 'tensor':
      return true;
    case 'null':
      return true;
    case 'int':
    case 'double':
    case 'bool':
    case 'string':
      return a.value === (b as typeof a).value;
    default:
      return JSON.stringify(a.items) === JSON.stringify((b as typeof a).items);
  }
}

/**
 * Compares the main method imported at the upper bound with the same method
 * imported at the probe sizes; marks every dim that differs as dynamic and
 * rewrites the size arguments that must follow it. Throws
 * UNSUPPORTED_OPERATOR naming the node when the graph depends on the size in
 * a way the program cannot.
 */
export function markBoundedDims(upper: MethodGraph, probes: readonly MethodGraph[], nodeOf: NodeOfInstruction): void {
  const firstReader = new Map<number, number>();
  upper.instructions.forEach((instruction, i) => {
    for (const operand of upper.instructionOperands(instruction)) if (!firstReader.has(operand)) firstReader.set(operand, i);
  });
  const nodeReading = (value: number): string => {
    const i = firstReader.get(value);
    return i === undefined ? 'the graph' : nodeOf(i);
  };

  const dynamic = new Map<number, Set<number>>();
  const differingInts = new Set<number>();
  for (const probe of probes) {
    const length = Math.max(upper.instructions.length, probe.instructions.length);
    for (let i = 0; i < length; i++) {
      if (JSON.stringify(upper.instructions[i]) !== JSON.stringify(probe.instructions[i])) {
        unsupported(nodeOf(Math.min(i, upper.instructions.length - 1)), 'the ops it lowers to depend on the input size');
      }
    }
    if (probe.values.length !== upper.values.length) unsupported('the graph', 'its values depend on the input size');
    upper.values.forEach((value, index) => {
      const other = probe.values[index]!;
      if (!sameScalar(value, other)) {
        if (value.kind === 'int' && other.kind === 'int') differingInts.add(index);
        else unsupported(nodeReading(index), `argument ${value.kind} v${index} depends on the input size`);
        return;
      }
      if (value.kind !== 'tensor') return;
      const node = other as TensorNode;
      if (node.dtype !== value.dtype || node.shape.length !== value.shape.length || node.origin.kind !== value.origin.kind) {
        unsupported(nodeReading(index), `tensor v${index} differs in dtype or rank between input sizes`);
      }
      const dims = value.shape.flatMap((size, d) => (size === node.shape[d] ? [] : [d]));
      if (value.origin.kind === 'constant') {
        if (dims.length > 0 || !sameBytes(value.origin.constant.bytes, (node.origin as typeof value.origin).constant.bytes)) {
          unsupported(nodeReading(index), `it reads import-time data computed from the input size (${value.origin.constant.toString()})`);
        }
        return;
      }
      if (dims.length === 0) return;
      if (value.origin.kind === 'shared') unsupported(nodeReading(index), 'state buffers cannot change size');
      const set = dynamic.get(index) ?? new Set<number>();
      for (const d of dims) set.add(d);
      dynamic.set(index, set);
    });
  }

  for (const [index, dims] of dynamic) upper.markDynamic(index, [...dims]);
  followSizeArguments(upper, probes, differingInts, nodeOf);
}

// Rewrites the integer arguments that differ between sizes into forms that
// hold at every size, or refuses the node that reads them.
function followSizeArguments(
  upper: MethodGraph,
  probes: readonly MethodGraph[],
  differing: ReadonlySet<number>,
  nodeOf: NodeOfInstruction,
): void {
  const handled = new Set<number>();
  const ints = (list: number): number[] => {
    const value = upper.value(list);
    return value.kind === 'intList' ? [...value.items] : [];
  };
  const shapeIn = (graph: MethodGraph, index: number): readonly number[] => graph.tensorNode(index).shape;
  const setInt = (index: number, value: number): void => {
    upper.values[index] = { kind: 'int', value: BigInt(value) };
  };
  const intIn = (graph: MethodGraph, index: number): number => Number((graph.value(index) as { value: bigint }).value);
  // The dim of `self` that has the size of int `item` in every import.
  const sameAsInputDim = (self: number, item: number): number | undefined => {
    const dims = shapeIn(upper, self).map((_, d) => d);
    return dims.find((d) => [upper, ...probes].every((g) => shapeIn(g, self)[d] === intIn(g, item)));
  };
  const sizeReads: { before: number; self: number; dim: number; item: number }[] = [];
  upper.instructions.forEach((instruction, i) => {
    if (instruction.kind !== 'kernel') return;
    const args = instruction.args;
    const op = `${instruction.name}.${instruction.overload}`;
    if (op === 'aten::view_copy.out') {
      // One varying size is inferred (-1). With more, each that is one of the
      // input's own dims is read from it at run time (aten::sym_size.int
      // writing the list item, as ExecuTorch programs do); one may remain.
      const self = args[0]!;
      const items = ints(args[1]!).filter((item) => differing.has(item));
      const inferred: number[] = [];
      for (const item of items) {
        const fromInput = items.length > 1 ? sameAsInputDim(self, item) : undefined;
        if (fromInput === undefined) inferred.push(item);
        else sizeReads.push({ before: i, self, dim: fromInput, item });
        handled.add(item);
      }
      if (inferred.length > 1)
        unsupported(
          nodeOf(i),
          `its reshape has ${inferred.length} dims that follow the input size and are not dims of its input; at most one can be inferred`,
        );
      for (const item of inferred) setInt(item, -1);
    } else if (op === 'aten::expand_copy.out') {
      const self = args[0]!;
      const items = ints(args[1]!);
      const lead = items.length - shapeIn(upper, self).length;
      items.forEach((item, k) => {
        if (!differing.has(item)) return;
        // -1 keeps the input's own size, which is what the expansion asked for when it equals it at every size.
        const keeps = k >= lead && [upper, ...probes].every((g) => shapeIn(g, self)[k - lead] === intIn(g, item));
        if (!keeps) unsupported(nodeOf(i), 'it expands to a size computed from the input size');
        setInt(item, -1);
        handled.add(item);
      });
    } else if (op === 'aten::upsample_nearest2d.vec_out' || op === 'aten::upsample_bilinear2d.vec_out') {
      // Resize by scales: the output size becomes the input's times a fixed
      // factor, which the kernel computes itself from scale_factors.
      const [self, outputSize] = args as [number, number];
      const scalesArg = args[op === 'aten::upsample_nearest2d.vec_out' ? 2 : 3]!;
      const items = ints(outputSize);
      if (!items.some((item) => differing.has(item))) return;
      const factors = items.map((item, k) => intIn(upper, item) / shapeIn(upper, self)[k + 2]!);
      const fixed = [upper, ...probes].every((g) =>
        items.every((item, k) => intIn(g, item) === Math.trunc(shapeIn(g, self)[k + 2]! * factors[k]!)),
      );
      if (!fixed || upper.value(scalesArg).kind !== 'null')
        unsupported(nodeOf(i), 'it resizes to a size that is not the input size times a fixed factor');
      upper.values[outputSize] = { kind: 'null' };
      upper.values[scalesArg] = { kind: 'doubleList', items: factors };
      for (const item of items) handled.add(item);
    } else if (op === 'aten::slice_copy.Tensor_out') {
      // A bound at a fixed distance from the end of its dim: the end itself
      // (the kernel clamps the upper bound's value to the actual size) or a
      // negative index, which the kernel counts from the end.
      const [self, dim, start, end] = args as [number, number, number, number];
      for (const bound of [start, end]) {
        if (!differing.has(bound)) continue;
        const fromEnd = (g: MethodGraph): number => {
          const shape = shapeIn(g, self);
          const d = intIn(g, dim);
          return intIn(g, bound) - shape[d < 0 ? d + shape.length : d]!;
        };
        const distance = fromEnd(upper);
        if (distance > 0 || !probes.every((g) => fromEnd(g) === distance)) continue;
        if (distance < 0) setInt(bound, distance);
        handled.add(bound);
      }
    }
  });
  upper.instructions.forEach((instruction, i) => {
    for (const operand of upper.instructionOperands(instruction)) {
      if (differing.has(operand) && !handled.has(operand))
        unsupported(
          nodeOf(i),
          `its ${instruction.kind === 'kernel' ? instruction.name : 'delegate call'} takes an argument computed from the input size`,
        );
    }
  });
  // Last, as inserting moves the instructions nodeOf counts.
  for (const read of sizeReads.reverse()) {
    const dim = upper.addValue({ kind: 'int', value: BigInt(read.dim) });
    upper.instructions.splice(read.before, 0, {
      kind: 'kernel',
      name: 'aten::sym_size',
      overload: 'int',
      args: [read.self, dim, read.item],
    });
  }
}
