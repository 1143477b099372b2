// Recognizes the portable kernel calls the XNNPACK delegate can run and
// describes each as a delegate node over method values. Anything not matched
// here stays a portable kernel call.
import { isBounded, type GraphInstruction, type MethodGraph, type TensorNode } from '../graph.js';
import { QUANTIZED_RANGES } from '../quantize.js';
import { padsByDim } from '../shape.js';
import { NodeUnion } from '../../generated/xnnpack/xnnpack_generated.js';
import {
  MAX_CONCATENATE_INPUTS,
  type BinaryCode,
  type ConstantPadding,
  type ConvolutionGeometry,
  type PoolingCode,
  type PoolingWindow,
  type UnaryCode,
} from './payload.js';

/** A tensor operand: a method value, or a number turned into a one-element constant. */
export type Operand = { readonly value: number } | { readonly scalar: number };

/** A static quantization: one scale and zero point, the dtype of the 8-bit tensor. */
export interface TensorQuantization {
  readonly scale: number;
  readonly zeroPoint: number;
  readonly dtype: 'int8' | 'uint8';
}

/** dequantize_per_channel of a constant (int8 weights, int32 biases): absorbed when a convolution or linear reads it as its weight or bias. */
export interface DequantizedConstant {
  readonly kind: 'dequantizedConstant';
  readonly source: number;
  readonly scales: Float32Array;
  readonly axis: number;
  readonly out: number;
}

export type MatchedOp =
  /** permute_copy [1, 0] of a constant matrix: absorbed when a linear reads it as its weight. */
  | { readonly kind: 'weightTranspose'; readonly source: number; readonly out: number }
  | DequantizedConstant
  /** quantize_per_tensor of a float32 tensor over the whole 8-bit range. */
  | ({ readonly kind: 'quantize'; readonly input: number; readonly out: number } & TensorQuantization)
  /** dequantize_per_tensor of a computed 8-bit tensor. */
  | ({ readonly kind: 'dequantize'; readonly input: number; readonly out: number } & TensorQuantization)
  | {
      readonly kind: 'fullyConnected';
      readonly input: number;
      readonly filter: number;
      readonly filterIsTransposed: boolean;
      readonly bias: number | undefined;
      readonly out: number;
    }
  | { readonly kind: 'binary'; readonly code: BinaryCode; readonly a: Operand; readonly b: Operand; readonly out: number }
  | { readonly kind: 'unary'; readonly code: UnaryCode; readonly input: number; readonly out: number }
  | { readonly kind: 'leakyRelu'; readonly slope: number; readonly input: number; readonly out: number }
  /** ELU; `zeroToPositive` adds +0 after it, so -0 comes out as +0 (Selu's exponential branch takes x <= 0). */
  | { readonly kind: 'elu'; readonly alpha: number; readonly zeroToPositive: boolean; readonly input: number; readonly out: number }
  /** PReLU over a constant slope of `slopeShape`, which broadcasts to the input's shape as ONNX's PRelu broadcasts it. */
  | {
      readonly kind: 'prelu';
      readonly slope: Float32Array;
      readonly slopeShape: readonly number[];
      readonly input: number;
      readonly out: number;
    }
  /** GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as nodes of its arithmetic. */
  | { readonly kind: 'geluTanh'; readonly input: number; readonly out: number }
  /** x * sigmoid(x). */
  | { readonly kind: 'silu'; readonly input: number; readonly out: number }
  /** pow by a constant exponent the delegate computes as onnxruntime and PyTorch do: 1 / x, x * x, or (x * x) * x. */
  | { readonly kind: 'pow'; readonly exponent: -1 | 2 | 3; readonly input: number; readonly out: number }
  /** An instruction whose work a later fused op does (its result is read by nothing else). */
  | { readonly kind: 'absorbed'; readonly out: number }
  /** relu, clamp and hardtanh: output bounds, which fold into the producing node when it takes bounds. */
  | { readonly kind: 'clamp'; readonly min: number; readonly max: number; readonly input: number; readonly out: number }
  /**
   * A mean over one block of adjacent dims, the input seen as [outer, size,
   * inner] (dims kept or dropped alike): the last dims (inner 1), or outer 1.
   * (amax stays portable: XNNPACK's max pooling flushes a subnormal maximum
   * to 0, where onnxruntime keeps it.)
   */
  | {
      readonly kind: 'mean';
      readonly outer: number;
      readonly size: number;
      readonly inner: number;
      readonly input: number;
      readonly out: number;
    }
  /** 2-D max or average pooling of an NCHW tensor; `unread` is an output of the kernel the delegate does not produce. */
  | {
      readonly kind: 'pool2d';
      readonly code: PoolingCode;
      readonly window: PoolingWindow;
      readonly input: number;
      readonly out: number;
      readonly unread?: number;
    }
  /** mean over H and W of an NCHW tensor, dims kept. */
  | { readonly kind: 'globalAvgPool'; readonly input: number; readonly out: number }
  | {
      readonly kind: 'conv2d';
      readonly input: number;
      readonly weight: number;
      readonly bias: number | undefined;
      readonly geometry: ConvolutionGeometry;
      readonly out: number;
    }
  /** A transposed convolution; its weight is [in, out / groups, kh, kw] as the method holds it. */
  | {
      readonly kind: 'convTranspose2d';
      readonly input: number;
      readonly weight: number;
      readonly bias: number | undefined;
      readonly geometry: ConvolutionGeometry;
      readonly adjustment: readonly [number, number];
      readonly out: number;
    }
  /** upsample_bilinear2d to a given output size (half-pixel centres, or corners aligned). */
  | { readonly kind: 'resizeBilinear'; readonly alignCorners: boolean; readonly input: number; readonly out: number }
  /** upsample_nearest2d by whole factors: every input pixel repeated factors[0] x factors[1] times. */
  | { readonly kind: 'repeatPixels'; readonly factors: readonly [number, number]; readonly input: number; readonly out: number }
  | { readonly kind: 'transpose'; readonly perm: readonly number[]; readonly input: number; readonly out: number }
  | { readonly kind: 'reshape'; readonly input: number; readonly out: number }
  | { readonly kind: 'slice'; readonly offsets: readonly number[]; readonly input: number; readonly out: number }
  /** select_copy: a slice one wide along `dim`, then that dim dropped. */
  | { readonly kind: 'select'; readonly dim: number; readonly index: number; readonly input: number; readonly out: number }
  | { readonly kind: 'concatenate'; readonly axis: number; readonly inputs: readonly number[]; readonly out: number }
  /** index_select by constant positions: runs of consecutive positions along `axis`, each a slice, joined in order. */
  | {
      readonly kind: 'gather';
      readonly axis: number;
      readonly pieces: readonly { readonly start: number; readonly length: number }[];
      readonly input: number;
      readonly out: number;
    }
  | ({ readonly kind: 'constantPad'; readonly input: number; readonly out: number } & ConstantPadding);

const DATA_MOVEMENT: ReadonlySet<MatchedOp['kind']> = new Set([
  'absorbed',
  'weightTranspose',
  'dequantizedConstant',
  'transpose',
  'reshape',
  'slice',
  'select',
  'concatenate',
  'gather',
  'constantPad',
  'repeatPixels',
]);

/** Nodes worth a delegate call on their own; data movement alone is not. */
export function isComputeOp(op: MatchedOp): boolean {
  return !DATA_MOVEMENT.has(op.kind);
}

/** Method values the op reads (scalars and absorbed weights excluded). */
export function operandsRead(op: MatchedOp): number[] {
  switch (op.kind) {
    case 'absorbed':
      return [];
    case 'weightTranspose':
    case 'dequantizedConstant':
      return [op.source];
    case 'fullyConnected':
      return op.bias === undefined ? [op.input, op.filter] : [op.input, op.filter, op.bias];
    case 'binary':
      return [op.a, op.b].flatMap((operand) => ('value' in operand ? [operand.value] : []));
    case 'conv2d':
    case 'convTranspose2d':
      return op.bias === undefined ? [op.input, op.weight] : [op.input, op.weight, op.bias];
    case 'concatenate':
      return [...op.inputs];
    default:
      return [op.input];
  }
}

const MAX_RANK = 6;

class Matcher {
  constructor(readonly method: MethodGraph) {}

  tensor(index: number): TensorNode | undefined {
    const value = this.method.values[index];
    return value?.kind === 'tensor' ? value : undefined;
  }

  // Every tensor a lowered node touches is fp32 of a rank the delegate takes.
  float32(index: number): boolean {
    const node = this.tensor(index);
    return node !== undefined && node.dtype === 'float32' && node.shape.length <= MAX_RANK;
  }

  constant(index: number): boolean {
    return this.tensor(index)?.origin.kind === 'constant';
  }

  // Resizes name their output sizes in the payload, so they cannot follow a
  // size that changes per call.
  bounded(...indices: number[]): boolean {
    return indices.some((index) => {
      const node = this.tensor(index);
      return node !== undefined && isBounded(node);
    });
  }

  shape(index: number): readonly number[] {
    return this.tensor(index)!.shape;
  }

  int(index: number): number | undefined {
    const value = this.method.values[index];
    return value?.kind === 'int' ? Number(value.value) : undefined;
  }

  number(index: number): number | undefined {
    const value = this.method.values[index];
    if (value?.kind === 'int') return Number(value.value);
    if (value?.kind === 'double') return value.value;
    return undefined;
  }

  intList(index: number): number[] | undefined {
    const value = this.method.values[index];
    if (value?.kind !== 'intList') return undefined;
    const items = value.items.map((item) => this.int(item));
    return items.every((item) => item !== undefined) ? (items as number[]) : undefined;
  }

  isOne(index: number): boolean {
    return this.number(index) === 1;
  }

  /** The values of an int64 constant tensor. */
  constantInts(index: number): number[] | undefined {
    const node = this.tensor(index);
    if (node?.origin.kind !== 'constant' || node.dtype !== 'int64') return undefined;
    const bytes = node.origin.constant.bytes;
    return Array.from(new BigInt64Array(bytes.slice().buffer), Number);
  }
}

/**
 * The input of a reduction over `axes` (every dim when empty) seen as
 * [outer, size, inner], when the reduced dims are adjacent. A dim whose size
 * changes per call may only be a row of a mean over the static last dim
 * (the rows of a fully connected node), with the dims kept.
 */
function reducedBlock(
  m: Matcher,
  input: number,
  axes: readonly number[] | undefined,
  rowsMayVary: boolean,
): { outer: number; size: number; inner: number } | undefined {
  const shape = m.shape(input);
  if (axes === undefined) return undefined;
  const reduced =
    axes.length === 0 ? shape.map((_, d) => d) : [...new Set(axes.map((d) => (d < 0 ? d + shape.length : d)))].sort((x, y) => x - y);
  const first = reduced[0] ?? 0;
  const last = reduced[reduced.length - 1] ?? -1;
  if (reduced.some((d, i) => d !== first + i || d < 0 || d >= shape.length)) return undefined;
  const dynamic = m.tensor(input)?.dynamicDims ?? [];
  if (dynamic.length > 0 && !(rowsMayVary && shape.length >= 2 && first === shape.length - 1 && !dynamic.includes(first))) return undefined;
  const product = (dims: readonly number[]): number => dims.reduce((p, d) => p * d, 1);
  return { outer: product(shape.slice(0, first)), size: product(shape.slice(first, last + 1)), inner: product(shape.slice(last + 1)) };
}

const BINARY_CODES: Readonly<Record<string, BinaryCode>> = {
  add: NodeUnion.XNNAdd,
  sub: NodeUnion.XNNSubtract,
  mul: NodeUnion.XNNMultiply,
  div: NodeUnion.XNNDiv,
};

const UNARY_CODES: Readonly<Record<string, UnaryCode>> = {
  sigmoid: NodeUnion.XNNSigmoid,
  tanh: NodeUnion.XNNTanh,
  sqrt: NodeUnion.XNNSquareRoot,
  hardswish: NodeUnion.XNNHardswish,
  abs: NodeUnion.XNNAbs,
  neg: NodeUnion.XNNNegate,
  exp: NodeUnion.XNNExp,
  log: NodeUnion.XNNLog,
  rsqrt: NodeUnion.XNNReciprocalSquareRoot,
  sin: NodeUnion.XNNSin,
  cos: NodeUnion.XNNCos,
};

/**
 * Describes one instruction as a delegate node, or returns undefined when the
 * delegate cannot run it (other operators, dtypes, or argument values).
 * `weightTransposeOf` maps outputs of absorbed weight transposes to their constant.
 */
export function matchInstruction(
  method: MethodGraph,
  instruction: GraphInstruction,
  weightTransposeOf: ReadonlyMap<number, number>,
  dequantizedConstantOf: ReadonlyMap<number, DequantizedConstant> = new Map(),
): MatchedOp | undefined {
  if (instruction.kind !== 'kernel') return undefined;
  const m = new Matcher(method);
  const a = instruction.args;
  if (instruction.name.startsWith('quantized_decomposed::')) return matchQuantization(m, instruction);
  const op = instruction.name.slice('aten::'.length);
  if (!instruction.name.startsWith('aten::')) return undefined;
  const allFloat = (...indices: number[]): boolean => indices.every((index) => m.float32(index));
  // A weight or bias the delegate reads as constant bytes: a constant, or the dequantized codes of one.
  const constantWeight = (index: number): boolean => m.constant(index) || dequantizedConstantOf.has(index);

  switch (`${op}.${instruction.overload}`) {
    case 'permute_copy.out': {
      const [self, dims, out] = a as [number, number, number];
      const perm = m.intList(dims);
      if (perm === undefined || !allFloat(self, out)) return undefined;
      if (m.constant(self) && perm.length === 2 && perm[0] === 1 && perm[1] === 0) return { kind: 'weightTranspose', source: self, out };
      return { kind: 'transpose', perm, input: self, out };
    }
    case 'view_copy.out':
    case 'unsqueeze_copy.out':
    case 'squeeze_copy.dims_out': {
      const [self, , out] = a as [number, number, number];
      // The delegate infers at most one dim of the new shape.
      return allFloat(self, out) && (m.tensor(out)?.dynamicDims?.length ?? 0) <= 1 ? { kind: 'reshape', input: self, out } : undefined;
    }
    case 'slice_copy.Tensor_out': {
      const [self, dim, start, , step, out] = a as [number, number, number, number, number, number];
      const d = m.int(dim);
      const first = m.int(start);
      // A negative start counts from the end of a dim whose size may change per call.
      if (!allFloat(self, out) || m.int(step) !== 1 || d === undefined || first === undefined || first < 0) return undefined;
      const offsets = m.shape(self).map((_, i) => (i === d ? first : 0));
      return { kind: 'slice', offsets, input: self, out };
    }
    case 'select_copy.int_out': {
      const [self, dim, index, out] = a as [number, number, number, number];
      const rank = m.float32(self) ? m.shape(self).length : 0;
      const d = m.int(dim);
      const i = m.int(index);
      // A rank-0 result has no delegate shape; it stays portable.
      if (!allFloat(self, out) || d === undefined || i === undefined || rank < 2 || d < 0 || d >= rank) return undefined;
      // The selected row is reshaped to the result, where the delegate infers at most one dim.
      if ((m.tensor(out)?.dynamicDims?.length ?? 0) > 1) return undefined;
      const size = m.shape(self)[d]!;
      if (i < 0 || i >= size) return undefined;
      return { kind: 'select', dim: d, index: i, input: self, out };
    }
    case 'cat.out': {
      const [list, dim, out] = a as [number, number, number];
      const items = method.values[list];
      const d = m.int(dim);
      if (items?.kind !== 'tensorList' || d === undefined || !allFloat(out, ...items.items)) return undefined;
      const rank = m.shape(out).length;
      const axis = d < 0 ? d + rank : d;
      // Lists longer than one node joins become several nodes (emitters.ts).
      if (items.items.length < 2 || axis < 0 || axis >= rank) return undefined;
      if (items.items.some((item) => m.shape(item).length !== rank)) return undefined;
      return { kind: 'concatenate', axis, inputs: [...items.items], out };
    }
    case 'constant_pad_nd.out': {
      const [self, pad, value, out] = a as [number, number, number, number];
      const pads = m.intList(pad);
      const fill = m.number(value);
      if (!allFloat(self, out) || pads === undefined || fill === undefined) return undefined;
      const byDim = padsByDim(pads, m.shape(self).length);
      return byDim === undefined ? undefined : { kind: 'constantPad', ...byDim, value: fill, input: self, out };
    }
    case 'mm.out':
    case 'addmm.out': {
      const withBias = op === 'addmm';
      const [bias, input, weight, beta, alpha, out] = withBias ? (a as number[]) : [undefined, a[0]!, a[1]!, undefined, undefined, a[2]!];
      if (!allFloat(input!, weight!, out!)) return undefined;
      if (withBias && !(m.isOne(beta!) && m.isOne(alpha!))) return undefined;
      const outFeatures = m.shape(out!)[1]!;
      if (
        bias !== undefined &&
        !(m.float32(bias) && constantWeight(bias) && m.shape(bias).length === 1 && m.shape(bias)[0] === outFeatures)
      )
        return undefined;
      // Dequantized [in, out] codes, quantized along dim 1 (the output), which the delegate reads transposed.
      const codes = dequantizedConstantOf.get(weight!);
      if (codes !== undefined)
        return codes.axis === 1
          ? { kind: 'fullyConnected', input: input!, filter: weight!, filterIsTransposed: true, bias, out: out! }
          : undefined;
      const source = weightTransposeOf.get(weight!);
      if (source !== undefined)
        return { kind: 'fullyConnected', input: input!, filter: source, filterIsTransposed: false, bias, out: out! };
      if (m.constant(weight!)) return { kind: 'fullyConnected', input: input!, filter: weight!, filterIsTransposed: true, bias, out: out! };
      return undefined;
    }
    case 'bmm.out': {
      const [left, right, out] = a as [number, number, number];
      if (!allFloat(left, right, out) || m.shape(left).length !== 3) return undefined;
      return { kind: 'binary', code: NodeUnion.XNNBatchMatrixMultiply, a: { value: left }, b: { value: right }, out };
    }
    case 'add.out':
    case 'sub.out':
    case 'mul.out':
    case 'div.out': {
      const hasAlpha = op === 'add' || op === 'sub';
      const [left, right] = a as [number, number];
      const out = a[hasAlpha ? 3 : 2]!;
      if (!allFloat(left, right, out) || (hasAlpha && !m.isOne(a[2]!))) return undefined;
      return { kind: 'binary', code: BINARY_CODES[op]!, a: { value: left }, b: { value: right }, out };
    }
    case 'add.Scalar_out':
    case 'sub.Scalar_out':
    case 'rsub.Scalar_out':
    case 'mul.Scalar_out':
    case 'div.Scalar_out': {
      const hasAlpha = op === 'add' || op === 'sub' || op === 'rsub';
      const [self, other] = a as [number, number];
      const out = a[hasAlpha ? 3 : 2]!;
      const scalar = m.number(other);
      if (!allFloat(self, out) || scalar === undefined || (hasAlpha && !m.isOne(a[2]!))) return undefined;
      if (op === 'rsub') return { kind: 'binary', code: NodeUnion.XNNSubtract, a: { scalar }, b: { value: self }, out };
      return { kind: 'binary', code: BINARY_CODES[op]!, a: { value: self }, b: { scalar }, out };
    }
    case 'maximum.out':
    case 'minimum.out': {
      const [left, right, out] = a as [number, number, number];
      if (!allFloat(left, right, out)) return undefined;
      return {
        kind: 'binary',
        code: op === 'maximum' ? NodeUnion.XNNMaximum : NodeUnion.XNNMinimum,
        a: { value: left },
        b: { value: right },
        out,
      };
    }
    case 'leaky_relu.out': {
      const [self, slope, out] = a as [number, number, number];
      const value = m.number(slope);
      return allFloat(self, out) && value !== undefined ? { kind: 'leakyRelu', slope: value, input: self, out } : undefined;
    }
    case 'silu.out': {
      const [self, out] = a as [number, number];
      return allFloat(self, out) ? { kind: 'silu', input: self, out } : undefined;
    }
    case 'pow.Tensor_Scalar_out': {
      const [self, exponent, out] = a as [number, number, number];
      const value = m.number(exponent);
      // Other exponents (0.5 among them: pow(-0, 0.5) is +0, sqrt(-0) is -0) stay portable.
      if (!allFloat(self, out) || (value !== -1 && value !== 2 && value !== 3)) return undefined;
      return { kind: 'pow', exponent: value, input: self, out };
    }
    case 'relu.out': {
      const [self, out] = a as [number, number];
      return allFloat(self, out) ? { kind: 'clamp', min: 0, max: Infinity, input: self, out } : undefined;
    }
    case 'clamp.out':
    case 'hardtanh.out': {
      const [self, low, high, out] = a as [number, number, number, number];
      const bound = (index: number, fallback: number): number | undefined =>
        method.values[index]?.kind === 'null' ? fallback : m.number(index);
      const min = bound(low, -Infinity);
      const max = bound(high, Infinity);
      // XNNPACK refuses a clamp whose bounds are equal (or crossed): that one stays portable.
      if (!allFloat(self, out) || min === undefined || max === undefined || !(min < max)) return undefined;
      return { kind: 'clamp', min, max, input: self, out };
    }
    case 'mean.out': {
      const [self, dims, keepdim, dtype, out] = a as [number, number, number, number, number];
      const keep = method.values[keepdim];
      if (!allFloat(self, out) || method.values[dtype]?.kind !== 'null' || keep?.kind !== 'bool') return undefined;
      const rank = m.shape(self).length;
      const axes = m.intList(dims)?.map((d) => (d < 0 ? d + rank : d));
      if (keep.value && rank === 4 && axes?.length === 2 && axes.includes(2) && axes.includes(3)) {
        return { kind: 'globalAvgPool', input: self, out };
      }
      const block = reducedBlock(m, self, axes, keep.value);
      // A sum along rows by a fully connected node, or down columns (one matrix of them) by a batch matrix product.
      if (block === undefined || (block.size > 1 && block.inner > 1 && block.outer > 1)) return undefined;
      return { kind: 'mean', ...block, input: self, out };
    }
    case 'index_select.out': {
      const [self, dim, index, out] = a as [number, number, number, number];
      const positions = m.constantInts(index);
      const rank = allFloat(self, out) ? m.shape(self).length : 0;
      const d = m.int(dim);
      if (positions === undefined || d === undefined || rank === 0 || (m.tensor(self)?.dynamicDims?.length ?? 0) > 0) return undefined;
      const axis = d < 0 ? d + rank : d;
      const size = m.shape(self)[axis]!;
      const pieces: { start: number; length: number }[] = [];
      for (const raw of positions) {
        const p = raw < 0 ? raw + size : raw;
        if (!(p >= 0 && p < size)) return undefined;
        const last = pieces[pieces.length - 1];
        if (last !== undefined && last.start + last.length === p) last.length++;
        else pieces.push({ start: p, length: 1 });
      }
      // As many runs as one Concatenate node joins; a longer gather stays one portable kernel.
      if (pieces.length === 0 || pieces.length > MAX_CONCATENATE_INPUTS) return undefined;
      return { kind: 'gather', axis, pieces, input: self, out };
    }
    case 'max_pool2d_with_indices.out':
    case 'avg_pool2d.out': {
      const max = op === 'max_pool2d_with_indices';
      const [self, kernelSize, stride, padding] = a as [number, number, number, number];
      const pair = (index: number): [number, number] | undefined => {
        const list = m.intList(index);
        return list?.length === 2 ? [list[0]!, list[1]!] : undefined;
      };
      const kernel = pair(kernelSize);
      const strides = pair(stride);
      const pads = pair(padding);
      const out = a[max ? 6 : 7]!;
      const ceil = method.values[a[max ? 5 : 4]!];
      if (!allFloat(self, out) || m.shape(self).length !== 4 || kernel === undefined || strides === undefined || pads === undefined)
        return undefined;
      if (ceil?.kind !== 'bool' || (ceil.value && !max)) return undefined;
      // XNNPACK refuses a 1x1 window (a copy or a strided subsample); that stays portable.
      if (kernel[0] * kernel[1] === 1) return undefined;
      if (max) {
        const dilation = pair(a[4]!);
        if (dilation === undefined) return undefined;
        // Ceil mode's last, partial windows are windows over more padding at the bottom and right:
        // XNNPACK's max pooling never reads padding, as ceil mode's windows leave out what lies past the input.
        const inSpatial = m.shape(self).slice(2);
        const outSpatial = m.shape(out).slice(2);
        const paddingEnd = [0, 1].map((i) =>
          Math.max(pads[i]!, (outSpatial[i]! - 1) * strides[i]! + dilation[i]! * (kernel[i]! - 1) + 1 - inSpatial[i]! - pads[i]!),
        ) as [number, number];
        return {
          kind: 'pool2d',
          code: NodeUnion.XNNMaxPooling2d,
          window: { kernel, stride: strides, padding: pads, ...(ceil.value && { paddingEnd }), dilation },
          input: self,
          out,
          unread: a[7]!,
        };
      }
      // XNNPACK leaves padding out of each average's count.
      const countsPadding = method.values[a[5]!];
      const padded = pads[0] !== 0 || pads[1] !== 0;
      if (countsPadding?.kind !== 'bool' || (padded && countsPadding.value) || method.values[a[6]!]?.kind !== 'null') return undefined;
      return {
        kind: 'pool2d',
        code: NodeUnion.XNNAvgPooling2d,
        window: { kernel, stride: strides, padding: pads, dilation: [1, 1] },
        input: self,
        out,
      };
    }
    case 'sigmoid.out':
    case 'sqrt.out':
    case 'tanh.out':
    case 'hardswish.out':
    case 'abs.out':
    case 'neg.out':
    case 'exp.out':
    case 'log.out':
    case 'rsqrt.out':
    case 'sin.out':
    case 'cos.out': {
      const [self, out] = a as [number, number];
      return allFloat(self, out) ? { kind: 'unary', code: UNARY_CODES[op]!, input: self, out } : undefined;
    }
    case 'gelu.out': {
      const [self, approximate, out] = a as [number, number, number];
      const mode = method.values[approximate];
      if (!allFloat(self, out) || mode?.kind !== 'string') return undefined;
      if (mode.value === 'tanh') return { kind: 'geluTanh', input: self, out };
      return mode.value === 'none' ? { kind: 'unary', code: NodeUnion.XNNGelu, input: self, out } : undefined;
    }
    case '_softmax.out': {
      const [self, dim, halfToFloat, out] = a as [number, number, number, number];
      const halves = method.values[halfToFloat];
      const rank = m.float32(self) ? m.shape(self).length : 0;
      if (!allFloat(self, out) || rank === 0 || m.int(dim) !== rank - 1 || halves?.kind !== 'bool' || halves.value) return undefined;
      return { kind: 'unary', code: NodeUnion.XNNSoftmax, input: self, out };
    }
    case 'upsample_bilinear2d.vec_out': {
      const [self, outputSize, alignCorners, scales, out] = a as [number, number, number, number, number];
      const align = method.values[alignCorners];
      const size = m.intList(outputSize);
      if (
        !allFloat(self, out) ||
        m.shape(self).length !== 4 ||
        align?.kind !== 'bool' ||
        size?.length !== 2 ||
        method.values[scales]?.kind !== 'null'
      )
        return undefined;
      if (m.bounded(self, out)) return undefined;
      return { kind: 'resizeBilinear', alignCorners: align.value, input: self, out };
    }
    case 'upsample_nearest2d.vec_out': {
      const [self, outputSize, scales, out] = a as [number, number, number, number];
      const size = m.intList(outputSize);
      if (!allFloat(self, out) || m.shape(self).length !== 4 || size?.length !== 2 || method.values[scales]?.kind !== 'null')
        return undefined;
      if (m.bounded(self, out)) return undefined;
      const [, , h, w] = m.shape(self) as [number, number, number, number];
      const factors: [number, number] = [size[0]! / h, size[1]! / w];
      if (!factors.every((f) => Number.isInteger(f) && f >= 1)) return undefined;
      return { kind: 'repeatPixels', factors, input: self, out };
    }
    case 'convolution.out': {
      const [input, weight, bias, stride, padding, dilation, transposed, outputPadding, groups, out] = a as number[];
      const flag = method.values[transposed!];
      const biasValue = method.values[bias!];
      const hasBias = biasValue?.kind === 'tensor';
      if (!allFloat(input!, weight!, out!) || flag?.kind !== 'bool' || !constantWeight(weight!)) return undefined;
      if (hasBias && !(m.float32(bias!) && constantWeight(bias!))) return undefined;
      // Dequantized filters are quantized per output channel ([O, I, KH, KW], dim 0); transposed ones stay float constants.
      if ((dequantizedConstantOf.get(weight!)?.axis ?? 0) !== 0 || (flag.value && dequantizedConstantOf.has(weight!))) return undefined;
      if (m.shape(input!).length !== 4 || m.shape(weight!).length !== 4) return undefined;
      const pair = (index: number): [number, number] | undefined => {
        const list = m.intList(index);
        return list?.length === 2 ? [list[0]!, list[1]!] : undefined;
      };
      const s = pair(stride!);
      const p = pair(padding!);
      const d = pair(dilation!);
      const g = m.int(groups!);
      if (s === undefined || p === undefined || d === undefined || g === undefined || g < 1) return undefined;
      if (flag.value) {
        const adjustment = pair(outputPadding!);
        const [inChannels, groupOutputChannels, kh, kw] = m.shape(weight!) as [number, number, number, number];
        if (adjustment === undefined || adjustment.some((v, i) => v < 0 || v >= s[i]!) || inChannels % g !== 0) return undefined;
        const geometry: ConvolutionGeometry = {
          padding: p,
          kernel: [kh, kw],
          stride: s,
          dilation: d,
          groupInputChannels: inChannels / g,
          groupOutputChannels,
          groups: g,
        };
        return {
          kind: 'convTranspose2d',
          input: input!,
          weight: weight!,
          bias: hasBias ? bias! : undefined,
          geometry,
          adjustment,
          out: out!,
        };
      }
      const [outChannels, groupInputChannels, kh, kw] = m.shape(weight!) as [number, number, number, number];
      const geometry: ConvolutionGeometry = {
        padding: p,
        kernel: [kh, kw],
        stride: s,
        dilation: d,
        groupInputChannels,
        groupOutputChannels: outChannels / g,
        groups: g,
      };
      return { kind: 'conv2d', input: input!, weight: weight!, bias: hasBias ? bias! : undefined, geometry, out: out! };
    }
    default:
      return undefined;
  }
}

/**
 * quantize_per_tensor and dequantize_per_tensor over the full range of an
 * 8-bit tensor (XNNConvert nodes, or the edges of a quantized convolution or
 * linear), and dequantize_per_channel of a constant (weights, biases).
 */
function matchQuantization(m: Matcher, instruction: Extract<GraphInstruction, { kind: 'kernel' }>): MatchedOp | undefined {
  const a = instruction.args;
  const eightBit = (index: number): 'int8' | 'uint8' | undefined => {
    const dtype = m.tensor(index)?.dtype;
    return dtype === 'int8' || dtype === 'uint8' ? dtype : undefined;
  };
  const fullRange = (dtype: 'int8' | 'uint8', low: number, high: number): boolean =>
    m.int(low) === QUANTIZED_RANGES[dtype][0] && m.int(high) === QUANTIZED_RANGES[dtype][1];
  const rankFits = (index: number): boolean => m.shape(index).length <= MAX_RANK;
  // quantize_per_tensor writes 8-bit codes from a float32 input, dequantize_per_tensor the reverse.
  const perTensor = (kind: 'quantize' | 'dequantize'): MatchedOp | undefined => {
    const [input, scale, zeroPoint, low, high, , out] = a as number[];
    const [codes, real] = kind === 'quantize' ? [out!, input!] : [input!, out!];
    const dtype = eightBit(codes);
    const s = m.number(scale!);
    const zp = m.int(zeroPoint!);
    if (dtype === undefined || !m.float32(real) || s === undefined || zp === undefined || !fullRange(dtype, low!, high!)) return undefined;
    if (!rankFits(real) || m.constant(input!)) return undefined;
    return { kind, input: input!, out: out!, scale: s, zeroPoint: zp, dtype };
  };
  switch (`${instruction.name}.${instruction.overload}`) {
    case 'quantized_decomposed::quantize_per_tensor.out':
      return perTensor('quantize');
    case 'quantized_decomposed::dequantize_per_tensor.out':
      // Without out_dtype: input, scale, zero point, range, dtype, out, and the return value.
      return a.length === 8 ? perTensor('dequantize') : undefined;
    case 'quantized_decomposed::dequantize_per_channel.out': {
      if (a.length !== 9) return undefined;
      const [input, scales, zeroPoints, axis, , , , out] = a as number[];
      const source = m.tensor(input!);
      const scaleNode = m.tensor(scales!);
      const d = m.int(axis!);
      if (source?.origin.kind !== 'constant' || (source.dtype !== 'int8' && source.dtype !== 'int32') || !m.float32(out!)) return undefined;
      if (scaleNode?.origin.kind !== 'constant' || scaleNode.dtype !== 'float32' || d === undefined) return undefined;
      if (m.method.values[zeroPoints!]?.kind !== 'null') return undefined;
      const bytes = scaleNode.origin.constant.bytes;
      return { kind: 'dequantizedConstant', source: input!, scales: new Float32Array(bytes.slice().buffer), axis: d, out: out! };
    }
    default:
      return undefined;
  }
}
