// Import-time evaluation of ONNX ops whose inputs are all known. This is how
// shape arithmetic (Shape -> Gather -> Concat -> Reshape), conditions of If
// nodes and weight rearrangements disappear before lowering. Ops without an
// evaluator here are lowered to kernels even when their inputs are constant.
import type { DType } from '../export/dtype.js';
import { numel } from '../shape.js';
import { allocate, elementAt, fromNumbers, gatherElements, stridesOf, toNumbers, type ConstTensor } from './constant.js';
import { castTarget } from './dtype.js';

export function broadcastShape(a: readonly number[], b: readonly number[]): number[] | undefined {
  const rank = Math.max(a.length, b.length);
  const out = new Array<number>(rank);
  for (let i = 0; i < rank; i++) {
    const x = a[a.length - rank + i] ?? 1;
    const y = b[b.length - rank + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) return undefined;
    out[i] = x === 1 ? y : x;
  }
  return out;
}

/** Flat index into a tensor of `shape` for an output index of a broadcast result. */
function broadcastIndex(shape: readonly number[], outIndex: readonly number[]): number {
  const strides = stridesOf(shape);
  const offset = outIndex.length - shape.length;
  let flat = 0;
  for (let d = 0; d < shape.length; d++) flat += (shape[d] === 1 ? 0 : outIndex[d + offset]!) * strides[d]!;
  return flat;
}

function elementwise(inputs: readonly ConstTensor[], dtype: DType, fn: (values: number[]) => number): ConstTensor | undefined {
  let shape: number[] = [];
  for (const t of inputs) {
    const next = broadcastShape(shape, t.shape);
    if (next === undefined) return undefined;
    shape = next;
  }
  const count = numel(shape);
  const values = new Array<number>(count);
  const index = new Array<number>(shape.length).fill(0);
  const args = new Array<number>(inputs.length);
  for (let i = 0; i < count; i++) {
    for (let k = 0; k < inputs.length; k++) args[k] = elementAt(inputs[k]!, broadcastIndex(inputs[k]!.shape, index));
    values[i] = fn(args);
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++index[d]! < shape[d]!) break;
      index[d] = 0;
    }
  }
  return fromNumbers(dtype, shape, values);
}

function isIntegral(dtype: DType): boolean {
  return dtype !== 'float32' && dtype !== 'float64' && dtype !== 'float16' && dtype !== 'bfloat16';
}

const BINARY: Readonly<Record<string, (a: number, b: number, integral: boolean) => number>> = {
  Add: (a, b) => a + b,
  Sub: (a, b) => a - b,
  Mul: (a, b) => a * b,
  Div: (a, b, integral) => (integral ? Math.trunc(a / b) : a / b),
  Pow: (a, b) => a ** b,
  Max: (a, b) => Math.max(a, b),
  Min: (a, b) => Math.min(a, b),
};

const COMPARE: Readonly<Record<string, (a: number, b: number) => boolean>> = {
  Equal: (a, b) => a === b,
  Greater: (a, b) => a > b,
  Less: (a, b) => a < b,
  GreaterOrEqual: (a, b) => a >= b,
  LessOrEqual: (a, b) => a <= b,
  And: (a, b) => a !== 0 && b !== 0,
  Or: (a, b) => a !== 0 || b !== 0,
  Xor: (a, b) => (a !== 0) !== (b !== 0),
};

const UNARY: Readonly<Record<string, (a: number) => number>> = {
  Neg: (a) => -a,
  Abs: (a) => Math.abs(a),
  Floor: Math.floor,
  Ceil: Math.ceil,
  Sqrt: Math.sqrt,
  Exp: Math.exp,
  Log: Math.log,
  Reciprocal: (a) => 1 / a,
  Relu: (a) => Math.max(a, 0),
  Sigmoid: (a) => 1 / (1 + Math.exp(-a)),
  Tanh: Math.tanh,
  Sign: Math.sign,
};

export interface FoldAttributes {
  int(name: string, fallback: number): number;
  ints(name: string): number[] | undefined;
}

/** Folds `op` over constant inputs, or returns undefined when there is no import-time evaluator for it. */
export function foldNode(op: string, inputs: readonly (ConstTensor | undefined)[], attrs: FoldAttributes): ConstTensor[] | undefined {
  const [a, b] = inputs;
  if (a === undefined) return undefined;
  if (op in BINARY && b !== undefined) {
    const fn = BINARY[op]!;
    const integral = isIntegral(a.dtype);
    const r = elementwise([a, b], a.dtype, ([x, y]) => fn(x!, y!, integral));
    return r && [r];
  }
  if (op in COMPARE && b !== undefined) {
    const fn = COMPARE[op]!;
    const r = elementwise([a, b], 'bool', ([x, y]) => (fn(x!, y!) ? 1 : 0));
    return r && [r];
  }
  if (op in UNARY) {
    const fn = UNARY[op]!;
    return [fromNumbers(a.dtype, a.shape, toNumbers(a).map(fn))];
  }
  switch (op) {
    case 'Not':
      return [
        fromNumbers(
          'bool',
          a.shape,
          toNumbers(a).map((v) => (v === 0 ? 1 : 0)),
        ),
      ];
    case 'Where': {
      const c = inputs[2];
      if (b === undefined || c === undefined) return undefined;
      const r = elementwise([a, b, c], b.dtype, ([cond, x, y]) => (cond !== 0 ? x! : y!));
      return r && [r];
    }
    case 'Gather': {
      if (b === undefined) return undefined;
      const axis = normalizeAxis(attrs.int('axis', 0), a.shape.length);
      const indices = toNumbers(b).map((i) => (i < 0 ? i + a.shape[axis]! : i));
      const outShape = [...a.shape.slice(0, axis), ...b.shape, ...a.shape.slice(axis + 1)];
      const strides = stridesOf(a.shape);
      return [
        gatherElements(a, outShape, (index) => {
          let flat = 0;
          for (let d = 0; d < axis; d++) flat += index[d]! * strides[d]!;
          const indexFlat = b.shape.length === 0 ? 0 : flatOf(b.shape, index.slice(axis, axis + b.shape.length));
          flat += indices[indexFlat]! * strides[axis]!;
          for (let d = axis + 1; d < a.shape.length; d++) flat += index[d - 1 + b.shape.length]! * strides[d]!;
          return flat;
        }),
      ];
    }
    case 'Transpose':
      return [transposeConst(a, attrs.ints('perm') ?? a.shape.map((_, i) => a.shape.length - 1 - i))];
    case 'Range': {
      const [start, limit, delta] = inputs.map((t) => (t === undefined ? NaN : elementAt(t, 0)));
      const count = Math.max(Math.ceil((limit! - start!) / delta!), 0);
      return [
        fromNumbers(
          a.dtype,
          [count],
          Array.from({ length: count }, (_, i) => start! + i * delta!),
        ),
      ];
    }
    case 'Cast': {
      const dtype = castTarget(attrs.int('to', 0));
      if (dtype === undefined) return undefined;
      return [fromNumbers(dtype, a.shape, toNumbers(a))];
    }
    case 'Size':
      return [fromNumbers('int64', [], [numel(a.shape)])];
    default:
      return undefined;
  }
}

function flatOf(shape: readonly number[], index: readonly number[]): number {
  let flat = 0;
  for (let d = 0; d < shape.length; d++) flat = flat * shape[d]! + index[d]!;
  return flat;
}

export function normalizeAxis(axis: number, rank: number): number {
  return axis < 0 ? axis + rank : axis;
}

/** Concatenation of constants along `axis`. */
export function concatConst(tensors: readonly ConstTensor[], axis: number): ConstTensor {
  const first = tensors[0]!;
  const outShape = [...first.shape];
  outShape[axis] = tensors.reduce((sum, t) => sum + t.shape[axis]!, 0);
  const data = allocate(first.dtype, numel(outShape));
  const outer = numel(first.shape.slice(0, axis));
  let offset = 0;
  for (let o = 0; o < outer; o++) {
    for (const t of tensors) {
      const block = numel(t.shape.slice(axis));
      for (let i = 0; i < block; i++) (data as unknown as unknown[])[offset++] = t.data[o * block + i];
    }
  }
  return { dtype: first.dtype, shape: outShape, data };
}

/** Strided slice of a constant: per-dim start and step, output shape given. */
export function sliceConst(t: ConstTensor, starts: readonly number[], steps: readonly number[], outShape: readonly number[]): ConstTensor {
  const strides = stridesOf(t.shape);
  return gatherElements(t, outShape, (index) => index.reduce((sum, v, d) => sum + (starts[d]! + v * steps[d]!) * strides[d]!, 0));
}

/** A constant with its dims permuted: output dim d is input dim perm[d]. */
export function transposeConst(t: ConstTensor, perm: readonly number[]): ConstTensor {
  const strides = stridesOf(t.shape);
  const outShape = perm.map((p) => t.shape[p]!);
  return gatherElements(t, outShape, (index) => index.reduce((sum, v, d) => sum + v * strides[perm[d]!]!, 0));
}

/** The same data under a new shape. */
export function reshapeConst(t: ConstTensor, shape: readonly number[]): ConstTensor {
  return { dtype: t.dtype, shape: [...shape], data: t.data };
}
