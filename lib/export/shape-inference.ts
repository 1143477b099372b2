// Output shapes of the operators the graph builder emits. Every function throws
// EtnaError('INVALID_INPUT') naming the operator and the expected vs actual shapes.
import { EtnaError } from '../errors.js';
import { formatShape, normalizeDim, numel, type Shape } from './shape.js';

function fail(op: string, message: string): never {
  throw new EtnaError('INVALID_INPUT', `${op}: ${message}`);
}

/** NumPy-style broadcasting of two shapes. */
export function broadcastShapes(op: string, a: Shape, b: Shape): Shape {
  const rank = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      fail(op, `shapes ${formatShape(a)} and ${formatShape(b)} cannot be broadcast (dim ${i} of the result: ${da} vs ${db})`);
    }
    out.push(da === 1 ? db : da);
  }
  return out;
}

/** True when `from` broadcasts to exactly `to`. */
export function broadcastsTo(from: Shape, to: Shape): boolean {
  if (from.length > to.length) return false;
  return from.every((size, i) => size === 1 || size === to[to.length - from.length + i]);
}

export function mmShape(op: string, a: Shape, b: Shape): Shape {
  if (a.length !== 2 || b.length !== 2) fail(op, `expects two matrices, got ${formatShape(a)} and ${formatShape(b)}`);
  if (a[1] !== b[0]) fail(op, `inner dimensions differ: ${formatShape(a)} x ${formatShape(b)} (expected ${formatShape(a)} x [${a[1]}, n])`);
  return [a[0]!, b[1]!];
}

export function bmmShape(op: string, a: Shape, b: Shape): Shape {
  if (a.length !== 3 || b.length !== 3) fail(op, `expects two rank-3 tensors, got ${formatShape(a)} and ${formatShape(b)}`);
  if (a[0] !== b[0]) fail(op, `batch sizes differ: ${formatShape(a)} vs ${formatShape(b)}`);
  if (a[2] !== b[1])
    fail(op, `inner dimensions differ: ${formatShape(a)} x ${formatShape(b)} (expected [${a[0]}, ${a[2]}, n] on the right)`);
  return [a[0]!, a[1]!, b[2]!];
}

/** Resolves one -1 in a view size and checks the element count. */
export function viewShape(op: string, input: Shape, target: readonly number[]): Shape {
  let inferred = -1;
  let known = 1;
  target.forEach((size, i) => {
    if (size === -1) {
      if (inferred >= 0) fail(op, `only one size may be -1, got ${formatShape(target)}`);
      inferred = i;
    } else if (!Number.isInteger(size) || size < 0) {
      fail(op, `invalid size ${String(size)} in ${formatShape(target)}`);
    } else {
      known *= size;
    }
  });
  const total = numel(input);
  const out = [...target];
  if (inferred >= 0) {
    if (known === 0 || total % known !== 0) fail(op, `cannot view ${formatShape(input)} (${total} elements) as ${formatShape(target)}`);
    out[inferred] = total / known;
  }
  if (numel(out) !== total)
    fail(op, `cannot view ${formatShape(input)} (${total} elements) as ${formatShape(target)} (${numel(out)} elements)`);
  return out;
}

export function permuteShape(op: string, input: Shape, dims: readonly number[]): { dims: number[]; shape: Shape } {
  if (dims.length !== input.length)
    fail(op, `got ${dims.length} dims ${formatShape(dims)} for a rank-${input.length} tensor ${formatShape(input)}`);
  const normalized = dims.map((d) => normalizeDim(op, d, input.length));
  if (new Set(normalized).size !== normalized.length) fail(op, `dims ${formatShape(dims)} are not a permutation of 0..${input.length - 1}`);
  return { dims: normalized, shape: normalized.map((d) => input[d]!) };
}

export function transposeShape(op: string, input: Shape, dim0: number, dim1: number): { dim0: number; dim1: number; shape: Shape } {
  const a = normalizeDim(op, dim0, input.length, 'dim0');
  const b = normalizeDim(op, dim1, input.length, 'dim1');
  const shape = [...input];
  shape[a] = input[b]!;
  shape[b] = input[a]!;
  return { dim0: a, dim1: b, shape };
}

/** Python slice semantics on one dim (clamped start/end, positive step). */
export function sliceShape(
  op: string,
  input: Shape,
  dim: number,
  start: number,
  end: number,
  step: number,
): { dim: number; start: number; end: number; shape: Shape } {
  const d = normalizeDim(op, dim, input.length);
  if (!Number.isInteger(step) || step < 1) fail(op, `step must be a positive integer, got ${String(step)}`);
  if (!Number.isInteger(start) || !Number.isInteger(end))
    fail(op, `start and end must be integers, got ${String(start)} and ${String(end)}`);
  const size = input[d]!;
  const clamp = (i: number): number => Math.min(Math.max(i < 0 ? i + size : i, 0), size);
  const s = clamp(start);
  const e = Math.max(clamp(end), s);
  const shape = [...input];
  shape[d] = Math.ceil((e - s) / step);
  return { dim: d, start: s, end: e, shape };
}

export function selectShape(op: string, input: Shape, dim: number, index: number): { dim: number; index: number; shape: Shape } {
  if (input.length === 0) fail(op, 'cannot select from a rank-0 tensor');
  const d = normalizeDim(op, dim, input.length);
  const size = input[d]!;
  if (!Number.isInteger(index) || index < -size || index >= size)
    fail(op, `index ${String(index)} is out of range for dim ${d} of ${formatShape(input)}`);
  return { dim: d, index: index < 0 ? index + size : index, shape: input.filter((_, i) => i !== d) };
}

export function catShape(op: string, shapes: readonly Shape[], dim: number): { dim: number; shape: Shape } {
  const first = shapes[0];
  if (first === undefined) fail(op, 'needs at least one tensor');
  const d = normalizeDim(op, dim, first.length);
  let total = 0;
  shapes.forEach((shape, k) => {
    if (shape.length !== first.length || shape.some((size, i) => i !== d && size !== first[i])) {
      fail(op, `tensor ${k} has shape ${formatShape(shape)}; all tensors must match ${formatShape(first)} except in dim ${d}`);
    }
    total += shape[d]!;
  });
  const shape = [...first];
  shape[d] = total;
  return { dim: d, shape };
}

export function unsqueezeShape(op: string, input: Shape, dim: number): { dim: number; shape: Shape } {
  const d = normalizeDim(op, dim, input.length + 1);
  const shape = [...input];
  shape.splice(d, 0, 1);
  return { dim: d, shape };
}

/** expand: -1 keeps a size; size-1 dims stretch; new leading dims may be added. */
export function expandShape(op: string, input: Shape, sizes: readonly number[]): Shape {
  if (sizes.length < input.length) fail(op, `cannot expand ${formatShape(input)} to fewer dims ${formatShape(sizes)}`);
  const lead = sizes.length - input.length;
  return sizes.map((size, i) => {
    const own = i >= lead ? input[i - lead]! : undefined;
    if (size === -1) {
      if (own === undefined) fail(op, `-1 is not allowed for a new leading dim (${formatShape(sizes)})`);
      return own;
    }
    if (!Number.isInteger(size) || size < 0) fail(op, `invalid size ${String(size)} in ${formatShape(sizes)}`);
    if (own !== undefined && own !== 1 && own !== size) {
      fail(op, `dim ${i - lead} of ${formatShape(input)} has size ${own}; only size-1 dims can expand (to ${formatShape(sizes)})`);
    }
    return size;
  });
}

/**
 * Shape of `self[indices]` with advanced indexing: `null` entries keep a dim,
 * tensor entries are broadcast together. Adjacent index tensors put the
 * broadcast shape where they stand; separated ones put it first (PyTorch rule).
 */
export function advancedIndexShape(op: string, self: Shape, indices: readonly (Shape | null)[]): Shape {
  if (indices.length > self.length) fail(op, `${indices.length} indices for a rank-${self.length} tensor ${formatShape(self)}`);
  const positions = indices.flatMap((index, i) => (index === null ? [] : [i]));
  if (positions.length === 0) fail(op, 'needs at least one index tensor');
  let broadcast: Shape = [];
  for (const i of positions) broadcast = broadcastShapes(op, broadcast, indices[i]!);
  const first = positions[0]!;
  const last = positions[positions.length - 1]!;
  const adjacent = last - first + 1 === positions.length;
  const kept = (from: number, to: number): number[] =>
    self.slice(from, to).filter((_, k) => indices[from + k] === null || indices[from + k] === undefined);
  if (adjacent) return [...self.slice(0, first), ...broadcast, ...self.slice(last + 1)];
  return [...broadcast, ...kept(0, self.length)];
}

export function layerNormShapes(op: string, input: Shape, normalizedShape: readonly number[]): { stats: Shape } {
  const axis = input.length - normalizedShape.length;
  if (normalizedShape.length === 0 || axis < 0 || normalizedShape.some((size, i) => size !== input[axis + i])) {
    fail(op, `normalized_shape ${formatShape(normalizedShape)} must equal the trailing dims of the input ${formatShape(input)}`);
  }
  return { stats: input.map((size, i) => (i < axis ? size : 1)) };
}

export interface Conv2dParams {
  stride: [number, number];
  padding: [number, number];
  dilation: [number, number];
  groups: number;
}

export function conv2dShape(op: string, input: Shape, weight: Shape, params: Conv2dParams): Shape {
  if (input.length !== 4) fail(op, `input must be [N, C, H, W], got ${formatShape(input)}`);
  if (weight.length !== 4) fail(op, `weight must be [out_channels, in_channels/groups, kH, kW], got ${formatShape(weight)}`);
  const [n, c, h, w] = input as [number, number, number, number];
  const [o, cg, kh, kw] = weight as [number, number, number, number];
  const { stride, padding, dilation, groups } = params;
  if (!Number.isInteger(groups) || groups < 1 || c % groups !== 0 || o % groups !== 0) {
    fail(op, `groups ${groups} must divide in_channels ${c} and out_channels ${o}`);
  }
  if (cg * groups !== c)
    fail(op, `weight ${formatShape(weight)} expects ${cg * groups} input channels, input ${formatShape(input)} has ${c}`);
  for (const [label, pair, min] of [
    ['stride', stride, 1],
    ['padding', padding, 0],
    ['dilation', dilation, 1],
  ] as const) {
    if (pair.some((v) => !Number.isInteger(v) || v < min)) fail(op, `${label} ${formatShape(pair)} must be integers >= ${min}`);
  }
  const out = (size: number, k: number, axis: 0 | 1): number =>
    Math.floor((size + 2 * padding[axis] - dilation[axis] * (k - 1) - 1) / stride[axis]) + 1;
  const ho = out(h, kh, 0);
  const wo = out(w, kw, 1);
  if (ho < 1 || wo < 1)
    fail(op, `kernel ${kh}x${kw} does not fit input ${h}x${w} with padding ${formatShape(padding)} and dilation ${formatShape(dilation)}`);
  return [n, o, ho, wo];
}
