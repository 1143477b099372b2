// ONNX op -> ExecuTorch portable kernels, with ONNX semantics (numpy
// broadcasting, attribute defaults per opset, explicit pads, LSTM/GRU gate
// orders). Every handler gets static shapes; values known at import time are
// folded instead of lowered wherever the result is needed as an argument.
import type { DType } from '../export/dtype.js';
import type { KernelArgument } from '../export/method-builder.js';
import { viewShape } from '../export/shape-inference.js';
import { MAX_CONCATENATE_INPUTS } from '../export/xnnpack/payload.js';
import { elementAt, fromNumbers, gatherElements, shapeSize, toNumbers, type ConstTensor } from './constant.js';
import { constValue, dtypeOf, isFloat, shapeOf, tensorValue, type LoweringContext, type NodeView, type OnnxValue } from './context.js';
import { batchNormAffine } from './batchnorm.js';
import { broadcastShape, concatConst, normalizeAxis, reshapeConst, sliceConst } from './fold.js';
import { poolKernel } from './pool-kernel.js';
import { resize } from './resize.js';

export type OpHandler = (node: NodeView) => (OnnxValue | undefined)[];

const LOWEST_FLOAT32 = -3.4028234663852886e38;

/** The finite range of each float dtype: ONNX's default Clip bounds. */
const FINITE_RANGE: Partial<Record<DType, readonly [number, number]>> = {
  float32: [LOWEST_FLOAT32, -LOWEST_FLOAT32],
  float64: [-Number.MAX_VALUE, Number.MAX_VALUE],
};

// ---------------------------------------------------------------- shared helpers

function reshape(ctx: LoweringContext, x: OnnxValue, shape: readonly number[]): OnnxValue {
  if (x.kind === 'const') return constValue(reshapeConst(x.tensor, shape));
  if (shapeOf(x).length === shape.length && shapeOf(x).every((d, i) => d === shape[i])) return x;
  return ctx.emit('aten::view_copy.out', [ctx.tensor(x), { intList: shape }], x.dtype, shape);
}

function permute(ctx: LoweringContext, x: OnnxValue, perm: readonly number[]): OnnxValue {
  const shape = shapeOf(x);
  const outShape = perm.map((p) => shape[p]!);
  if (perm.every((p, i) => p === i)) return x;
  if (x.kind === 'const') {
    const strides = shape.map((_, d) => shapeSize(shape.slice(d + 1)));
    const t = x.tensor;
    const count = shapeSize(outShape);
    const values = new Array<number>(count);
    const index = new Array<number>(outShape.length).fill(0);
    for (let i = 0; i < count; i++) {
      let flat = 0;
      for (let d = 0; d < perm.length; d++) flat += index[d]! * strides[perm[d]!]!;
      values[i] = elementAt(t, flat);
      for (let d = outShape.length - 1; d >= 0; d--) {
        if (++index[d]! < outShape[d]!) break;
        index[d] = 0;
      }
    }
    return constValue(fromNumbers(t.dtype, outShape, values));
  }
  return ctx.emit('aten::permute_copy.out', [ctx.tensor(x), { intList: perm }], x.dtype, outShape);
}

/** x[..., start:end:step, ...] along `dim` with start/end already clamped. */
function slice(ctx: LoweringContext, x: OnnxValue, dim: number, start: number, end: number, step = 1): OnnxValue {
  const shape = shapeOf(x);
  const length = Math.max(0, Math.ceil((end - start) / step));
  if (start === 0 && step === 1 && length === shape[dim]) return x;
  const outShape = [...shape];
  outShape[dim] = length;
  if (x.kind === 'const') {
    const starts = shape.map((_, d) => (d === dim ? start : 0));
    const steps = shape.map((_, d) => (d === dim ? step : 1));
    return constValue(sliceConst(x.tensor, starts, steps, outShape));
  }
  return ctx.emit('aten::slice_copy.Tensor_out', [ctx.tensor(x), { int: dim }, { int: start }, { int: end }, { int: step }], x.dtype, outShape);
}

/** Picks positions `indices` (already non-negative) along `dim`. */
function indexSelect(ctx: LoweringContext, x: OnnxValue, dim: number, indices: readonly number[]): OnnxValue {
  const shape = shapeOf(x);
  if (indices.length === shape[dim] && indices.every((v, i) => v === i)) return x;
  const outShape = [...shape];
  outShape[dim] = indices.length;
  if (x.kind === 'const') {
    const t = x.tensor;
    return constValue(gatherElements(t, outShape, (index) => {
      let flat = 0;
      for (let d = 0; d < outShape.length; d++) flat = flat * shape[d]! + (d === dim ? indices[index[d]!]! : index[d]!);
      return flat;
    }));
  }
  const index = ctx.tensor(ctx.constant('int64', [indices.length], indices));
  return ctx.emit('aten::index_select.out', [ctx.tensor(x), { int: dim }, index], dtypeOf(x), outShape);
}

function cat(ctx: LoweringContext, parts: readonly OnnxValue[], dim: number): OnnxValue {
  if (parts.length === 1) return parts[0]!;
  if (parts.every((p) => p.kind === 'const')) return constValue(concatConst(parts.map((p) => (p as { tensor: ConstTensor }).tensor), dim));
  const shape = [...shapeOf(parts[0]!)];
  shape[dim] = parts.reduce((sum, p) => sum + shapeOf(p)[dim]!, 0);
  const nonEmpty = parts.filter((p) => shapeOf(p)[dim]! > 0);
  return ctx.emit('aten::cat.out', [{ tensorList: nonEmpty.map((p) => ctx.tensor(p)) }, { int: dim }], dtypeOf(parts[0]!), shape);
}

function binaryShape(node: NodeView, a: OnnxValue, b: OnnxValue): number[] {
  const shape = broadcastShape(shapeOf(a), shapeOf(b));
  if (shape === undefined) node.invalid(`shapes ${JSON.stringify(shapeOf(a))} and ${JSON.stringify(shapeOf(b))} do not broadcast`);
  return shape;
}

/** A constant with one element whose rank does not widen the other operand: usable as a Scalar argument. */
function scalarOperand(value: OnnxValue, other: OnnxValue): number | undefined {
  if (value.kind !== 'const' || value.tensor.data.length !== 1) return undefined;
  if (value.tensor.shape.length > shapeOf(other).length) return undefined;
  return elementAt(value.tensor, 0);
}

type Arith = 'add' | 'sub' | 'mul' | 'div';

function arith(ctx: LoweringContext, node: NodeView, op: Arith, a: OnnxValue, b: OnnxValue): OnnxValue {
  const dtype = dtypeOf(a);
  const shape = binaryShape(node, a, b);
  const integerDivision = op === 'div' && !isFloat(dtype);
  const scalarB = scalarOperand(b, a);
  if (scalarB !== undefined && !integerDivision) {
    const alpha: KernelArgument[] = op === 'add' || op === 'sub' ? [{ int: 1 }] : [];
    return ctx.emit(`aten::${op}.Scalar_out`, [ctx.tensor(a), ctx.scalar(dtype, scalarB), ...alpha], dtype, shape);
  }
  const scalarA = scalarOperand(a, b);
  if (scalarA !== undefined && (op === 'add' || op === 'mul')) {
    const alpha: KernelArgument[] = op === 'add' ? [{ int: 1 }] : [];
    return ctx.emit(`aten::${op}.Scalar_out`, [ctx.tensor(b), ctx.scalar(dtype, scalarA), ...alpha], dtype, shape);
  }
  if (integerDivision) return ctx.emit('aten::div.out_mode', [ctx.tensor(a), ctx.tensor(b), { string: 'trunc' }], dtype, shape);
  const alpha: KernelArgument[] = op === 'add' || op === 'sub' ? [{ int: 1 }] : [];
  return ctx.emit(`aten::${op}.out`, [ctx.tensor(a), ctx.tensor(b), ...alpha], dtype, shape);
}

function unary(ctx: LoweringContext, name: string, x: OnnxValue, outDtype?: DType): OnnxValue {
  return ctx.emit(name, [ctx.tensor(x)], outDtype ?? dtypeOf(x), shapeOf(x));
}

const COMPARISON_KERNELS: Readonly<Record<string, string>> = {
  Equal: 'eq', Greater: 'gt', Less: 'lt', GreaterOrEqual: 'ge', LessOrEqual: 'le',
};

function compare(ctx: LoweringContext, node: NodeView, kind: string, a: OnnxValue, b: OnnxValue): OnnxValue {
  const shape = binaryShape(node, a, b);
  const scalarB = scalarOperand(b, a);
  if (scalarB !== undefined) return ctx.emit(`aten::${kind}.Scalar_out`, [ctx.tensor(a), ctx.scalar(dtypeOf(a), scalarB)], 'bool', shape);
  return ctx.emit(`aten::${kind}.Tensor_out`, [ctx.tensor(a), ctx.tensor(b)], 'bool', shape);
}

function where(ctx: LoweringContext, node: NodeView, cond: OnnxValue, x: OnnxValue, y: OnnxValue): OnnxValue {
  const shape = broadcastShape(binaryShape(node, cond, x), shapeOf(y));
  if (shape === undefined) node.invalid('operands of Where do not broadcast');
  return ctx.emit('aten::where.self_out', [ctx.tensor(cond), ctx.tensor(x), ctx.tensor(y)], dtypeOf(x), shape);
}

/**
 * Whether a float32 product of runtime `x` with constant weights (and bias)
 * goes to the XNNPACK delegate, which sums in order with fused multiply-adds
 * as ONNX Runtime does; products left on portable kernels are split into blocks.
 */
function toDelegate(ctx: LoweringContext, x: OnnxValue, weight: OnnxValue, bias?: OnnxValue): boolean {
  return ctx.xnnpack && dtypeOf(x) === 'float32' && dtypeOf(weight) === 'float32' && x.kind === 'tensor' && weight.kind === 'const' && (bias === undefined || bias.kind === 'const');
}

function mm(ctx: LoweringContext, a: OnnxValue, b: OnnxValue): OnnxValue {
  const [m, k] = shapeOf(a) as [number, number];
  const n = shapeOf(b)[1]!;
  const wide = widened(ctx, [a, b], ([wa, wb]) => ctx.emit('aten::mm.out', [ctx.tensor(wa!), ctx.tensor(wb!)], 'float64', [m, n]));
  if (wide !== undefined) return wide;
  if (k > BLOCK_TERMS && isFloat(dtypeOf(a)) && !toDelegate(ctx, a, b)) {
    const parts: OnnxValue[] = [];
    for (let s = 0; s < k; s += BLOCK_TERMS) {
      const end = Math.min(k, s + BLOCK_TERMS);
      parts.push(ctx.emit('aten::mm.out', [ctx.tensor(slice(ctx, a, 1, s, end)), ctx.tensor(slice(ctx, b, 0, s, end))], dtypeOf(a), [m, n]));
    }
    let level = parts;
    while (level.length > 1) {
      const next: OnnxValue[] = [];
      for (let i = 0; i + 1 < level.length; i += 2) next.push(ctx.emit('aten::add.out', [ctx.tensor(level[i]!), ctx.tensor(level[i + 1]!), { int: 1 }], dtypeOf(a), [m, n]));
      if (level.length % 2 === 1) next.push(level[level.length - 1]!);
      level = next;
    }
    return level[0]!;
  }
  return ctx.emit('aten::mm.out', [ctx.tensor(a), ctx.tensor(b)], dtypeOf(a), [m, n]);
}

function expandTo(ctx: LoweringContext, x: OnnxValue, shape: readonly number[]): OnnxValue {
  const current = shapeOf(x);
  if (current.length === shape.length && current.every((d, i) => d === shape[i])) return x;
  return ctx.emit('aten::expand_copy.out', [ctx.tensor(x), { intList: shape }, { bool: false }], dtypeOf(x), shape);
}

/** Reduction axes from the attribute (older opsets) or the input (newer), normalized and sorted. */
function reduceAxes(node: NodeView, inputSince: number): number[] | undefined {
  const rank = shapeOf(node.input(0)).length;
  const raw = node.opset >= inputSince ? node.constInts(1, 'axes') : node.ints('axes');
  if (raw === undefined || raw.length === 0) return undefined;
  return [...new Set(raw.map((a) => normalizeAxis(a, rank)))].sort((a, b) => a - b);
}

function reducedShape(shape: readonly number[], axes: readonly number[], keep: boolean): number[] {
  const out: number[] = [];
  shape.forEach((d, i) => {
    if (!axes.includes(i)) out.push(d);
    else if (keep) out.push(1);
  });
  return out;
}

function reduceKernel(ctx: LoweringContext, kind: 'sum' | 'mean' | 'amax' | 'amin', x: OnnxValue, axes: readonly number[], keep: boolean): OnnxValue {
  const shape = reducedShape(shapeOf(x), axes, keep);
  if (axes.length === 0) return x;
  if (kind === 'sum') return ctx.emit('aten::sum.IntList_out', [ctx.tensor(x), { intList: axes }, { bool: keep }, null], dtypeOf(x), shape);
  if (kind === 'mean') return ctx.emit('aten::mean.out', [ctx.tensor(x), { intList: axes }, { bool: keep }, null], dtypeOf(x), shape);
  return ctx.emit(`aten::${kind}.out`, [ctx.tensor(x), { intList: axes }, { bool: keep }], dtypeOf(x), shape);
}

function reduceHandler(kind: 'sum' | 'mean' | 'amax' | 'amin' | 'sumsquare' | 'l1' | 'l2' | 'logsum' | 'logsumexp', inputSince: number): OpHandler {
  return (node) => {
    const { ctx } = node;
    let x = node.input(0);
    const keep = node.int('keepdims', 1) !== 0;
    let axes = reduceAxes(node, inputSince);
    if (axes === undefined) {
      if (node.int('noop_with_empty_axes', 0) !== 0) return [x];
      axes = shapeOf(x).map((_, i) => i);
    }
    if (kind === 'sumsquare' || kind === 'l2') x = arith(ctx, node, 'mul', x, x);
    if (kind === 'l1') x = unary(ctx, 'aten::abs.out', x);
    if (kind === 'logsumexp') {
      // Shifted by the peak so exp cannot overflow; an infinite peak shifts by 0 instead (inf - inf would be NaN).
      const highest = reduceKernel(ctx, 'amax', x, axes, true);
      const infinite = compare(ctx, node, 'eq', unary(ctx, 'aten::abs.out', highest), ctx.constant(dtypeOf(x), [], [Infinity]));
      const peak = where(ctx, node, infinite, zeroOf(ctx, x), highest);
      const shifted = unary(ctx, 'aten::exp.out', arith(ctx, node, 'sub', x, peak));
      const summed = unary(ctx, 'aten::log.out', reduceKernel(ctx, 'sum', shifted, axes, true));
      return [reshape(ctx, arith(ctx, node, 'add', summed, peak), reducedShape(shapeOf(x), axes, keep))];
    }
    const base = kind === 'sumsquare' || kind === 'l1' || kind === 'l2' || kind === 'logsum' ? 'sum' : kind;
    let y = reduceKernel(ctx, base, x, axes, keep);
    if (kind === 'l2') y = unary(ctx, 'aten::sqrt.out', y);
    if (kind === 'logsum') y = unary(ctx, 'aten::log.out', y);
    return [y];
  };
}

/** Explicit [begin..., end...] pads for a windowed op from `pads` / `auto_pad`. */
function windowPads(node: NodeView, inputSpatial: readonly number[], kernel: readonly number[], strides: readonly number[], dilations: readonly number[]): number[] {
  const rank = inputSpatial.length;
  const autoPad = node.string('auto_pad', 'NOTSET');
  if (autoPad === 'SAME_UPPER' || autoPad === 'SAME_LOWER') {
    const begins: number[] = [];
    const ends: number[] = [];
    for (let i = 0; i < rank; i++) {
      const out = Math.ceil(inputSpatial[i]! / strides[i]!);
      const total = Math.max(0, (out - 1) * strides[i]! + dilations[i]! * (kernel[i]! - 1) + 1 - inputSpatial[i]!);
      const small = Math.floor(total / 2);
      begins.push(autoPad === 'SAME_UPPER' ? small : total - small);
      ends.push(autoPad === 'SAME_UPPER' ? total - small : small);
    }
    return [...begins, ...ends];
  }
  if (autoPad === 'VALID') return new Array<number>(2 * rank).fill(0);
  return node.ints('pads') ?? new Array<number>(2 * rank).fill(0);
}

/** constant_pad_nd with ONNX-ordered pads ([begin per dim..., end per dim...] over the last `pads.length/2` dims). */
function constantPad(ctx: LoweringContext, x: OnnxValue, pads: readonly number[], value: number): OnnxValue {
  const shape = shapeOf(x);
  const padded = pads.length / 2;
  if (pads.every((p) => p === 0)) return x;
  const atenPads: number[] = [];
  const outShape = [...shape];
  for (let i = padded - 1; i >= 0; i--) {
    const dim = shape.length - padded + i;
    atenPads.push(pads[i]!, pads[i + padded]!);
    outShape[dim] = shape[dim]! + pads[i]! + pads[i + padded]!;
  }
  return ctx.emit('aten::constant_pad_nd.out', [ctx.tensor(x), { intList: atenPads }, ctx.scalar(dtypeOf(x), value)], dtypeOf(x), outShape);
}

// ---------------------------------------------------------------- handlers

function passThrough(node: NodeView): (OnnxValue | undefined)[] {
  return [node.input(0)];
}

function binaryArith(op: Arith): OpHandler {
  return (node) => [arith(node.ctx, node, op, node.input(0), node.input(1))];
}

function unaryKernel(name: string): OpHandler {
  return (node) => [unary(node.ctx, name, node.input(0))];
}

function comparison(kind: string): OpHandler {
  return (node) => [compare(node.ctx, node, kind, node.input(0), node.input(1))];
}

function pow(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const base = node.input(0);
  const exponent = node.input(1);
  const outDtype = dtypeOf(base);
  const scalar = scalarOperand(exponent, base);
  if (scalar !== undefined && (isFloat(outDtype) || Number.isInteger(scalar))) {
    if (scalar === 2 && isFloat(outDtype)) return [arith(ctx, node, 'mul', base, base)];
    return [ctx.emit('aten::pow.Tensor_Scalar_out', [ctx.tensor(base), ctx.scalar(outDtype, scalar)], outDtype, shapeOf(base))];
  }
  // base^e = exp(e * log|base|), with the sign and 0^0 fixed where the exponent is known.
  const floatDtype: DType = isFloat(outDtype) ? outDtype : 'float32';
  const b = convertFloat(ctx, base, floatDtype);
  const e = convertFloat(ctx, exponent, floatDtype);
  let y = unary(ctx, 'aten::exp.out', arith(ctx, node, 'mul', e, unary(ctx, 'aten::log.out', unary(ctx, 'aten::abs.out', b))));
  const shape = shapeOf(y);
  const negative = compare(ctx, node, 'lt', b, ctx.constant(floatDtype, [], [0]));
  if (e.kind === 'const') {
    const exps = toNumbers(e.tensor);
    const signs = ctx.constant(floatDtype, e.tensor.shape, exps.map((v) => (Number.isInteger(v) ? (Math.abs(v) % 2 === 1 ? -1 : 1) : NaN)));
    y = arith(ctx, node, 'mul', y, where(ctx, node, negative, signs, ctx.constant(floatDtype, [], [1])));
    if (exps.some((v) => v === 0)) {
      const zero = ctx.constant('bool', e.tensor.shape, exps.map((v) => (v === 0 ? 1 : 0)));
      y = where(ctx, node, zero, ctx.constant(floatDtype, [], [1]), y);
    }
  } else {
    // A negative base keeps a sign for integer exponents (negative for odd ones) and is NaN otherwise.
    const integral = compare(ctx, node, 'eq', e, unary(ctx, 'aten::round.out', e));
    const half = arith(ctx, node, 'mul', e, ctx.constant(floatDtype, [], [0.5]));
    const odd = compare(ctx, node, 'ne', unary(ctx, 'aten::floor.out', half), half);
    const signed = arith(ctx, node, 'mul', y, where(ctx, node, odd, ctx.constant(floatDtype, [], [-1]), ctx.constant(floatDtype, [], [1])));
    // The sign bit decides, so -0 counts as negative: 1 / -0 is -Inf.
    const reciprocalNegative = compare(ctx, node, 'lt', arith(ctx, node, 'div', ctx.constant(floatDtype, [], [1]), b), ctx.constant(floatDtype, [], [0]));
    const signBit = ctx.emit('aten::logical_or.out', [ctx.tensor(negative), ctx.tensor(reciprocalNegative)], 'bool', shapeOf(b));
    // -Inf and -0 to a fractional power are +0 or +Inf like their positive twins, not NaN.
    const zeroOrInfinite = ctx.emit('aten::logical_or.out', [
      ctx.tensor(compare(ctx, node, 'eq', b, ctx.constant(floatDtype, [], [-Infinity]))),
      ctx.tensor(compare(ctx, node, 'eq', b, ctx.constant(floatDtype, [], [0]))),
    ], 'bool', shapeOf(b));
    const fractional = where(ctx, node, zeroOrInfinite, y, ctx.constant(floatDtype, [], [NaN]));
    y = where(ctx, node, signBit, where(ctx, node, integral, signed, fractional), y);
    // As C's pow: x^0 and 1^y are 1 whatever the other operand (NaN and infinities included), and so is (-1)^±Inf.
    const unitBase = compare(ctx, node, 'eq', unary(ctx, 'aten::abs.out', b), ctx.constant(floatDtype, [], [1]));
    const infiniteExponent = compare(ctx, node, 'eq', unary(ctx, 'aten::abs.out', e), ctx.constant(floatDtype, [], [Infinity]));
    const oneCases = [
      compare(ctx, node, 'eq', e, ctx.constant(floatDtype, [], [0])),
      compare(ctx, node, 'eq', b, ctx.constant(floatDtype, [], [1])),
      ctx.emit('aten::logical_and.out', [ctx.tensor(unitBase), ctx.tensor(infiniteExponent)], 'bool', binaryShape(node, unitBase, infiniteExponent)),
    ];
    for (const isOne of oneCases) y = where(ctx, node, isOne, ctx.constant(floatDtype, [], [1]), y);
  }
  y = expandTo(ctx, y, shape);
  if (isFloat(outDtype)) return [y];
  const rounded = unary(ctx, 'aten::round.out', y);
  return [ctx.emit('dim_order_ops::_to_dim_order_copy.out', [ctx.tensor(rounded), { bool: false }, { intList: shape.map((_, i) => i) }], outDtype, shape)];
}

/** What Conv and ConvTranspose read alike: inputs, shapes and window attributes with ONNX's defaults. */
function convSetup(node: NodeView, what: string) {
  const x = node.input(0);
  const w = node.input(1);
  const xShape = shapeOf(x);
  const wShape = shapeOf(w);
  const spatial = xShape.length - 2;
  if (spatial < 1 || spatial > 2) node.fail(`only 1-D and 2-D ${what} are supported, input is ${JSON.stringify(xShape)}`);
  return {
    x,
    w,
    bias: node.optional(2),
    xShape,
    wShape,
    spatial,
    groups: node.int('group', 1),
    kernel: node.ints('kernel_shape') ?? wShape.slice(2),
    strides: node.ints('strides') ?? new Array<number>(spatial).fill(1),
    dilations: node.ints('dilations') ?? new Array<number>(spatial).fill(1),
  };
}

function conv(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const { w, bias, xShape, wShape, spatial, kernel, strides, dilations, groups, ...setup } = convSetup(node, 'convolutions');
  let { x } = setup;
  let pads = windowPads(node, xShape.slice(2), kernel, strides, dilations);
  const symmetric = pads.slice(0, spatial).every((p, i) => p === pads[i + spatial]);
  if (!symmetric) {
    x = constantPad(ctx, x, pads, 0);
    pads = new Array<number>(2 * spatial).fill(0);
  }
  const inShape = shapeOf(x);
  const outShape = [inShape[0]!, wShape[0]!];
  for (let i = 0; i < spatial; i++) {
    outShape.push(Math.floor((inShape[i + 2]! + 2 * pads[i]! - dilations[i]! * (kernel[i]! - 1) - 1) / strides[i]!) + 1);
  }
  const inPerGroup = wShape[1]!;
  const wideConv = widened(ctx, [x, w, bias], ([wx, ww, wb]) => ctx.emit('aten::convolution.out', [
    ctx.tensor(wx!), ctx.tensor(ww!), wb === undefined ? null : ctx.tensor(wb),
    { intList: strides }, { intList: pads.slice(0, spatial) }, { intList: dilations },
    { bool: false }, { intList: new Array<number>(spatial).fill(0) }, { int: groups },
  ], 'float64', outShape));
  if (wideConv !== undefined) return [wideConv];
  if (toDelegate(ctx, x, w, bias)) {
    if (spatial === 1 && groups === 1 && dilations[0] === 1 && outShape[2]! <= IM2COL_MAX_POSITIONS) {
      return [im2colConv1d(ctx, node, constantPad(ctx, x, pads, 0), w, bias, strides[0]!, outShape)];
    }
    if (spatial === 1) {
      // The delegate takes 2-D convolutions: a 1-D one is the same with H = 1.
      const x4 = reshape(ctx, x, [inShape[0]!, inShape[1]!, 1, inShape[2]!]);
      const w4 = reshape(ctx, w, [wShape[0]!, wShape[1]!, 1, wShape[2]!]);
      const y4 = ctx.emit('aten::convolution.out', [
        ctx.tensor(x4), ctx.tensor(w4), bias === undefined ? null : ctx.tensor(bias),
        { intList: [1, strides[0]!] }, { intList: [0, pads[0]!] }, { intList: [1, dilations[0]!] },
        { bool: false }, { intList: [0, 0] }, { int: groups },
      ], 'float32', [outShape[0]!, outShape[1]!, 1, outShape[2]!]);
      return [reshape(ctx, y4, outShape)];
    }
  }
  if (groups === 1 && shapeSize(kernel) * inPerGroup > BLOCK_TERMS && dilations.every((d) => d === 1) && !toDelegate(ctx, x, w, bias)) {
    return [blockedConv(ctx, node, constantPad(ctx, x, pads, 0), w, bias, strides, kernel, outShape)];
  }
  return [ctx.emit('aten::convolution.out', [
    ctx.tensor(x), ctx.tensor(w), bias === undefined ? null : ctx.tensor(bias),
    { intList: strides }, { intList: pads.slice(0, spatial) }, { intList: dilations },
    { bool: false }, { intList: new Array<number>(spatial).fill(0) }, { int: groups },
  ], dtypeOf(x), outShape)];
}

// ONNX Runtime computes a 1-D convolution as im2col rows (channel-major,
// tap-minor) times the weights, each sum accumulated in that order from zero,
// with the bias added afterwards. XNNPACK's own convolution sums taps first
// and starts from the bias; in recurrent models (Silero's LSTM state) that
// rounding difference feeds back. For short outputs the importer therefore
// builds the im2col rows from slices and runs the product as a fully
// connected layer, which XNNPACK sums in row order from zero.
const IM2COL_MAX_POSITIONS = 16;

function im2colConv1d(ctx: LoweringContext, node: NodeView, x: OnnxValue, w: OnnxValue, bias: OnnxValue | undefined, stride: number, outShape: readonly number[]): OnnxValue {
  const [batch, channels] = shapeOf(x) as [number, number, number];
  const [outChannels, , taps] = shapeOf(w) as [number, number, number];
  const positions = outShape[2]!;
  const terms = channels * taps;
  const rows: OnnxValue[] = [];
  for (let l = 0; l < positions; l++) {
    rows.push(reshape(ctx, slice(ctx, x, 2, l * stride, l * stride + taps), [batch, 1, terms]));
  }
  // One delegate node joins a bounded number of inputs.
  let level = rows;
  while (level.length > 1) {
    const next: OnnxValue[] = [];
    for (let i = 0; i < level.length; i += MAX_CONCATENATE_INPUTS) next.push(cat(ctx, level.slice(i, i + MAX_CONCATENATE_INPUTS), 1));
    level = next;
  }
  const columns = reshape(ctx, level[0]!, [batch * positions, terms]);
  const weight = permute(ctx, reshape(ctx, w, [outChannels, terms]), [1, 0]);
  let y = ctx.emit('aten::mm.out', [ctx.tensor(columns), ctx.tensor(weight)], 'float32', [batch * positions, outChannels]);
  if (bias !== undefined) y = arith(ctx, node, 'add', y, bias);
  if (positions === 1) return reshape(ctx, y, outShape);
  return permute(ctx, reshape(ctx, y, [batch, positions, outChannels]), [0, 2, 1]);
}

/** float32 -> float64 (constants converted at import), or back. */
function convertFloat(ctx: LoweringContext, x: OnnxValue, dtype: DType): OnnxValue {
  if (dtypeOf(x) === dtype) return x;
  if (x.kind === 'const') return constValue(fromNumbers(dtype, x.tensor.shape, toNumbers(x.tensor)));
  return ctx.emit('dim_order_ops::_to_dim_order_copy.out', [ctx.tensor(x), { bool: false }, { intList: shapeOf(x).map((_, i) => i) }], dtype, shapeOf(x));
}

/** Runs `compute` on float64 copies of float32 operands when the context asks for wide accumulation. */
function widened(ctx: LoweringContext, operands: (OnnxValue | undefined)[], compute: (wide: (OnnxValue | undefined)[]) => OnnxValue): OnnxValue | undefined {
  if (!ctx.wideAccumulation || operands.some((o) => o !== undefined && dtypeOf(o) !== 'float32')) return undefined;
  const result = compute(operands.map((o) => (o === undefined ? undefined : convertFloat(ctx, o, 'float64'))));
  return convertFloat(ctx, result, 'float32');
}

// The portable convolution and mm kernels accumulate float32 sums in order.
// For long dot products (hundreds of channels x taps) that loses about an
// order of magnitude against a blocked sum, which shows in recurrent models
// where the error feeds back. The importer splits such products into blocks
// of input channels (and taps, for long kernels) and adds the partial results
// pairwise.
const BLOCK_TERMS = 32;

function pairwiseSum(ctx: LoweringContext, node: NodeView, parts: OnnxValue[]): OnnxValue {
  let level = parts;
  while (level.length > 1) {
    const next: OnnxValue[] = [];
    for (let i = 0; i + 1 < level.length; i += 2) next.push(arith(ctx, node, 'add', level[i]!, level[i + 1]!));
    if (level.length % 2 === 1) next.push(level[level.length - 1]!);
    level = next;
  }
  return level[0]!;
}

function blockedConv(ctx: LoweringContext, node: NodeView, x: OnnxValue, w: OnnxValue, bias: OnnxValue | undefined, strides: readonly number[], kernel: readonly number[], outShape: readonly number[]): OnnxValue {
  const spatial = kernel.length;
  const channels = shapeOf(w)[1]!;
  const window = shapeSize(kernel);
  const channelBlock = Math.max(1, Math.floor(BLOCK_TERMS / window));
  // Split taps only for 1-D kernels longer than a block.
  const tapBlock = spatial === 1 && window > BLOCK_TERMS ? BLOCK_TERMS : kernel[spatial - 1]!;
  const lastKernel = kernel[spatial - 1]!;
  const outLast = outShape[outShape.length - 1]!;
  const partials: OnnxValue[] = [];
  for (let c = 0; c < channels; c += channelBlock) {
    const cEnd = Math.min(channels, c + channelBlock);
    const wChannels = slice(ctx, w, 1, c, cEnd);
    const xChannels = slice(ctx, x, 1, c, cEnd);
    for (let t = 0; t < lastKernel; t += tapBlock) {
      const tEnd = Math.min(lastKernel, t + tapBlock);
      const wPart = tapBlock === lastKernel ? wChannels : slice(ctx, wChannels, 2 + spatial - 1, t, tEnd);
      const lastDim = 2 + spatial - 1;
      const needed = (outLast - 1) * strides[spatial - 1]! + (tEnd - t);
      const xPart = tapBlock === lastKernel ? xChannels : slice(ctx, xChannels, lastDim, t, t + needed);
      partials.push(ctx.emit('aten::convolution.out', [
        ctx.tensor(xPart), ctx.tensor(wPart), null, { intList: strides }, { intList: new Array<number>(spatial).fill(0) },
        { intList: new Array<number>(spatial).fill(1) }, { bool: false }, { intList: new Array<number>(spatial).fill(0) }, { int: 1 },
      ], dtypeOf(x), outShape));
    }
  }
  const sum = pairwiseSum(ctx, node, partials);
  if (bias === undefined) return sum;
  return arith(ctx, node, 'add', sum, reshape(ctx, bias, [shapeOf(bias)[0]!, ...new Array<number>(spatial).fill(1)]));
}

function convTranspose(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const { bias, xShape, wShape, spatial, kernel, strides, dilations, groups, ...setup } = convSetup(node, 'transposed convolutions');
  let { x, w } = setup;
  const outputPadding = node.ints('output_padding') ?? new Array<number>(spatial).fill(0);
  const outputShape = node.ints('output_shape');
  const autoPad = node.string('auto_pad', 'NOTSET');
  let pads = node.ints('pads') ?? new Array<number>(2 * spatial).fill(0);
  const inputSpatial = xShape.slice(2);
  if (outputShape !== undefined || autoPad === 'SAME_UPPER' || autoPad === 'SAME_LOWER') {
    const target = outputShape !== undefined ? outputShape.slice(-spatial) : inputSpatial.map((d, i) => d * strides[i]!);
    pads = new Array<number>(2 * spatial).fill(0);
    for (let i = 0; i < spatial; i++) {
      const total = strides[i]! * (inputSpatial[i]! - 1) + outputPadding[i]! + ((kernel[i]! - 1) * dilations[i]! + 1) - target[i]!;
      const small = Math.floor(total / 2);
      pads[i] = autoPad === 'SAME_UPPER' ? small : total - small;
      pads[i + spatial] = total - pads[i]!;
    }
  }
  const symmetric = pads.slice(0, spatial).every((p, i) => p === pads[i + spatial]);
  if (spatial === 2 && symmetric && toDelegate(ctx, x, w, bias) && outputPadding.every((p, i) => p >= 0 && p < strides[i]!) && pads.every((p) => p >= 0)) {
    // The delegate's transposed convolution, with ONNX's geometry: out = (in - 1) * stride - 2 * pad + dilation * (k - 1) + output_padding + 1.
    const outShape = [xShape[0]!, wShape[1]! * groups];
    for (let i = 0; i < spatial; i++) outShape.push((inputSpatial[i]! - 1) * strides[i]! - 2 * pads[i]! + dilations[i]! * (kernel[i]! - 1) + outputPadding[i]! + 1);
    return [ctx.emit('aten::convolution.out', [
      ctx.tensor(x), ctx.tensor(w), bias === undefined ? null : ctx.tensor(bias),
      { intList: strides }, { intList: pads.slice(0, spatial) }, { intList: dilations },
      { bool: true }, { intList: outputPadding }, { int: groups },
    ], 'float32', outShape)];
  }
  // Insert stride-1 zeros between input positions, then correlate with the flipped kernel.
  for (let i = 0; i < spatial; i++) {
    const s = strides[i]!;
    if (s === 1) continue;
    const dim = i + 2;
    const shape = shapeOf(x);
    const before = [...shape.slice(0, dim + 1), 1, ...shape.slice(dim + 1)];
    const withAxis = reshape(ctx, x, before);
    const zerosShape = [...before];
    zerosShape[dim + 1] = s - 1;
    const zeros = ctx.constant(dtypeOf(x), zerosShape, new Array<number>(shapeSize(zerosShape)).fill(0));
    const interleaved = cat(ctx, [withAxis, zeros], dim + 1);
    const merged = [...shape];
    merged[dim] = shape[dim]! * s;
    x = slice(ctx, reshape(ctx, interleaved, merged), dim, 0, (shape[dim]! - 1) * s + 1);
  }
  const cin = wShape[0]!;
  const coutPerGroup = wShape[1]!;
  const ks = wShape.slice(2);
  w = reshape(ctx, w, [groups, cin / groups, coutPerGroup, ...ks]);
  w = permute(ctx, w, [0, 2, 1, ...ks.map((_, i) => i + 3)]);
  w = reshape(ctx, w, [groups * coutPerGroup, cin / groups, ...ks]);
  for (let i = 0; i < spatial; i++) w = indexSelect(ctx, w, i + 2, Array.from({ length: ks[i]! }, (_, k) => ks[i]! - 1 - k));
  const fullPads: number[] = [];
  for (let i = 0; i < spatial; i++) fullPads.push(dilations[i]! * (kernel[i]! - 1) - pads[i]!);
  for (let i = 0; i < spatial; i++) fullPads.push(dilations[i]! * (kernel[i]! - 1) - pads[i + spatial]! + outputPadding[i]!);
  // Negative pads crop.
  for (let i = 0; i < spatial; i++) {
    const dim = i + 2;
    const size = shapeOf(x)[dim]!;
    const cropBegin = Math.max(0, -fullPads[i]!);
    const cropEnd = Math.max(0, -fullPads[i + spatial]!);
    if (cropBegin > 0 || cropEnd > 0) x = slice(ctx, x, dim, cropBegin, size - cropEnd);
  }
  x = constantPad(ctx, x, fullPads.map((p) => Math.max(p, 0)), 0);
  const inShape = shapeOf(x);
  const outShape = [inShape[0]!, groups * coutPerGroup];
  for (let i = 0; i < spatial; i++) outShape.push(inShape[i + 2]! - dilations[i]! * (kernel[i]! - 1));
  return [ctx.emit('aten::convolution.out', [
    ctx.tensor(x), ctx.tensor(w), bias === undefined ? null : ctx.tensor(bias),
    { intList: new Array<number>(spatial).fill(1) }, { intList: new Array<number>(spatial).fill(0) }, { intList: dilations },
    { bool: false }, { intList: new Array<number>(spatial).fill(0) }, { int: groups },
  ], dtypeOf(x), outShape)];
}

function pool(kind: 'max' | 'average'): OpHandler {
  return (node) => {
    const { ctx } = node;
    const wantIndices = kind === 'max' && node.node.outputs.length > 1 && node.node.outputs[1] !== '';
    const columnMajor = node.int('storage_order', 0) !== 0;
    const x = node.input(0);
    const shape = shapeOf(x);
    const spatial = shape.length - 2;
    const kernel = node.ints('kernel_shape') ?? node.fail('kernel_shape is required');
    const strides = node.ints('strides') ?? new Array<number>(spatial).fill(1);
    const dilations = node.ints('dilations') ?? new Array<number>(spatial).fill(1);
    const ceil = node.int('ceil_mode', 0) !== 0;
    const includePad = node.int('count_include_pad', 0) !== 0;
    const pads = windowPads(node, shape.slice(2), kernel, strides, dilations);
    // On XNNPACK a 2-D pool is one delegate node where the delegate can run it
    // (floor mode, padding left out of averages); a graph imported for a range
    // of sizes needs the kernels' run-time windows whatever the backend.
    const delegable = ctx.xnnpack && !ceil && !(kind === 'average' && includePad && pads.some((p) => p !== 0));
    if ((delegable || ctx.followsInputSize) && !wantIndices && !columnMajor) {
      const pooled = poolKernel(ctx, kind, x, { kernel, strides, dilations, pads, ceil, includePad });
      if (pooled !== undefined) return [pooled];
    }
    const inSpatial = shape.slice(2);
    const outSpatial: number[] = [];
    const padEnds: number[] = [];
    for (let i = 0; i < spatial; i++) {
      const extent = inSpatial[i]! + pads[i]! + pads[i + spatial]!;
      const span = dilations[i]! * (kernel[i]! - 1) + 1;
      let out = (ceil ? Math.ceil : Math.floor)((extent - span) / strides[i]!) + 1;
      if (ceil && (out - 1) * strides[i]! >= inSpatial[i]! + pads[i]!) out--;
      outSpatial.push(out);
      padEnds.push(Math.max(pads[i + spatial]!, (out - 1) * strides[i]! + span - inSpatial[i]! - pads[i]!));
    }
    const padded = constantPad(ctx, x, [...pads.slice(0, spatial), ...padEnds], kind === 'max' ? LOWEST_FLOAT32 : 0);
    const paddedSpatial = shapeOf(padded).slice(2);
    const windowCount = shapeSize(kernel);
    const outCount = shapeSize(outSpatial);
    const indices: number[] = [];
    const sourcePositions: number[] = [];
    const divisors: number[] = [];
    const outIndex = new Array<number>(spatial).fill(0);
    for (let o = 0; o < outCount; o++) {
      const kIndex = new Array<number>(spatial).fill(0);
      let count = 0;
      for (let k = 0; k < windowCount; k++) {
        let flat = 0;
        let inside = true;
        let insidePads = true;
        for (let d = 0; d < spatial; d++) {
          const p = outIndex[d]! * strides[d]! + kIndex[d]! * dilations[d]!;
          flat = flat * paddedSpatial[d]! + p;
          const original = p - pads[d]!;
          if (original < 0 || original >= inSpatial[d]!) inside = false;
          if (p >= inSpatial[d]! + pads[d]! + pads[d + spatial]!) insidePads = false;
        }
        indices.push(flat);
        let source = 0;
        if (columnMajor) for (let d = spatial - 1; d >= 0; d--) source = source * inSpatial[d]! + (outIndex[d]! * strides[d]! + kIndex[d]! * dilations[d]! - pads[d]!);
        else for (let d = 0; d < spatial; d++) source = source * inSpatial[d]! + (outIndex[d]! * strides[d]! + kIndex[d]! * dilations[d]! - pads[d]!);
        sourcePositions.push(source);
        if (includePad ? insidePads : inside) count++;
        for (let d = spatial - 1; d >= 0; d--) {
          if (++kIndex[d]! < kernel[d]!) break;
          kIndex[d] = 0;
        }
      }
      divisors.push(count);
      for (let d = spatial - 1; d >= 0; d--) {
        if (++outIndex[d]! < outSpatial[d]!) break;
        outIndex[d] = 0;
      }
    }
    const [n, c] = shape as [number, number];
    const flat = reshape(ctx, padded, [n, c, shapeSize(paddedSpatial)]);
    const windows = reshape(ctx, indexSelect(ctx, flat, 2, indices), [n, c, outCount, windowCount]);
    if (kind === 'max') {
      const values = reshape(ctx, reduceKernel(ctx, 'amax', windows, [3], false), [n, c, ...outSpatial]);
      if (!wantIndices) return [values];
      // Indices are flat over the whole input tensor: window position -> input position, plus (n*C + c)*plane.
      const which = ctx.emit('aten::argmax.out', [ctx.tensor(windows), { int: 3 }, { bool: false }], 'int64', [n, c, outCount]);
      const rowStart = ctx.constant('int64', [outCount], Array.from({ length: outCount }, (_, o) => o * windowCount));
      const tablePosition = reshape(ctx, arith(ctx, node, 'add', which, rowStart), [n * c * outCount]);
      const table = ctx.tensor(ctx.constant('int64', [sourcePositions.length], sourcePositions));
      const picked = ctx.emit('aten::index_select.out', [table, { int: 0 }, ctx.tensor(tablePosition)], 'int64', [n * c * outCount]);
      const plane = shapeSize(inSpatial);
      const planeStart = ctx.constant('int64', [n, c, 1], Array.from({ length: n * c }, (_, i) => i * plane));
      const flatIndex = arith(ctx, node, 'add', reshape(ctx, picked, [n, c, outCount]), planeStart);
      return [values, reshape(ctx, flatIndex, [n, c, ...outSpatial])];
    }
    const sums = reduceKernel(ctx, 'sum', windows, [3], false);
    const divided = arith(ctx, node, 'div', sums, ctx.constant(dtypeOf(x), [outCount], divisors));
    return [reshape(ctx, divided, [n, c, ...outSpatial])];
  };
}

function pad(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  let x = node.input(0);
  const shape = shapeOf(x);
  const rank = shape.length;
  const mode = node.string('mode', 'constant');
  let pads: number[];
  let value = 0;
  let runtimeValue: OnnxValue | undefined;
  if (node.opset < 11) {
    pads = node.ints('pads') ?? node.fail('pads is required');
    value = node.float('value', 0);
  } else {
    pads = node.constInts(1, 'pads') ?? node.fail('pads is required');
    const valueInput = node.optional(2);
    if (valueInput?.kind === 'tensor' && mode === 'constant') runtimeValue = valueInput;
    else if (valueInput !== undefined) value = elementAt(node.constInput(2, 'constant_value'), 0);
    const axes = node.constInts(3, 'axes');
    if (axes !== undefined) {
      const full = new Array<number>(2 * rank).fill(0);
      axes.forEach((a, i) => {
        const axis = normalizeAxis(a, rank);
        full[axis] = pads[i]!;
        full[axis + rank] = pads[i + axes.length]!;
      });
      pads = full;
    }
  }
  // Negative pads crop first.
  for (let d = 0; d < rank; d++) {
    const cropBegin = Math.max(0, -pads[d]!);
    const cropEnd = Math.max(0, -pads[d + rank]!);
    if (cropBegin > 0 || cropEnd > 0) x = slice(ctx, x, d, cropBegin, shapeOf(x)[d]! - cropEnd);
  }
  pads = pads.map((p) => Math.max(p, 0));
  if (mode === 'constant' && runtimeValue !== undefined) {
    // The pad value is only known at run time: pad with 0 and add value * (1 where padded).
    const zeros = ctx.constant(dtypeOf(x), shapeOf(x), new Array<number>(shapeSize(shapeOf(x))).fill(0));
    const mask = constantPad(ctx, zeros, pads, 1);
    return [arith(ctx, node, 'add', constantPad(ctx, x, pads, 0), arith(ctx, node, 'mul', mask, reshape(ctx, runtimeValue, [])))];
  }
  if (mode === 'constant') return [constantPad(ctx, x, pads, value)];
  for (let d = 0; d < rank; d++) {
    const before = pads[d]!;
    const after = pads[d + rank]!;
    if (before === 0 && after === 0) continue;
    const size = shapeOf(x)[d]!;
    const positions: number[] = [];
    for (let i = -before; i < size + after; i++) {
      if (mode === 'edge') positions.push(Math.min(Math.max(i, 0), size - 1));
      else if (mode === 'wrap') positions.push(((i % size) + size) % size);
      else if (mode === 'reflect') {
        if (size === 1) {
          positions.push(0);
          continue;
        }
        const period = 2 * (size - 1);
        const m = ((i % period) + period) % period;
        positions.push(m < size ? m : period - m);
      } else node.fail(`mode '${mode}' is not supported`);
    }
    x = indexSelect(ctx, x, d, positions);
  }
  return [x];
}

function sliceOp(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  let x = node.input(0);
  const shape = shapeOf(x);
  let starts: number[];
  let ends: number[];
  let axes: number[] | undefined;
  let steps: number[] | undefined;
  if (node.opset < 10) {
    starts = node.ints('starts') ?? node.fail('starts is required');
    ends = node.ints('ends') ?? node.fail('ends is required');
    axes = node.ints('axes');
  } else {
    starts = node.constInts(1, 'starts')!;
    ends = node.constInts(2, 'ends')!;
    axes = node.constInts(3, 'axes');
    steps = node.constInts(4, 'steps');
  }
  axes = (axes ?? starts.map((_, i) => i)).map((a) => normalizeAxis(a, shape.length));
  axes.forEach((axis, i) => {
    const size = shape[axis]!;
    const step = steps?.[i] ?? 1;
    let start = starts[i]!;
    let end = ends[i]!;
    if (start < 0) start += size;
    if (end < 0) end += size;
    if (step > 0) {
      start = Math.min(Math.max(start, 0), size);
      end = Math.min(Math.max(end, 0), size);
      x = slice(ctx, x, axis, start, Math.max(start, end), step);
    } else {
      start = Math.min(Math.max(start, 0), size - 1);
      end = Math.min(Math.max(end, -1), size - 1);
      const positions: number[] = [];
      for (let p = start; p > end; p += step) positions.push(p);
      x = indexSelect(ctx, x, axis, positions);
    }
  });
  return [x];
}

function gather(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const data = node.input(0);
  const indices = node.input(1);
  const shape = shapeOf(data);
  const axis = normalizeAxis(node.int('axis', 0), shape.length);
  const indexShape = shapeOf(indices);
  const outShape = [...shape.slice(0, axis), ...indexShape, ...shape.slice(axis + 1)];
  if (indices.kind === 'const') {
    const positions = toNumbers(indices.tensor).map((i) => (i < 0 ? i + shape[axis]! : i));
    if (indexShape.length === 0) {
      if (data.kind === 'const') return [reshape(ctx, slice(ctx, data, axis, positions[0]!, positions[0]! + 1), outShape)];
      return [ctx.emit('aten::select_copy.int_out', [ctx.tensor(data), { int: axis }, { int: positions[0]! }], dtypeOf(data), outShape)];
    }
    return [reshape(ctx, indexSelect(ctx, data, axis, positions), outShape)];
  }
  const flatIndex = reshape(ctx, indices, [shapeSize(indexShape)]);
  const selectedShape = [...shape];
  selectedShape[axis] = shapeSize(indexShape);
  const selected = ctx.emit('aten::index_select.out', [ctx.tensor(data), { int: axis }, ctx.tensor(flatIndex)], dtypeOf(data), selectedShape);
  return [reshape(ctx, selected, outShape)];
}

function concat(node: NodeView): OnnxValue[] {
  const parts = node.inputs.filter((v): v is OnnxValue => v !== undefined);
  const rank = shapeOf(parts[0]!).length;
  const axis = normalizeAxis(node.int('axis', 0), rank);
  return [cat(node.ctx, parts, axis)];
}

function unsqueeze(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const axesRaw = node.opset >= 13 ? node.constInts(1, 'axes') : node.ints('axes');
  if (axesRaw === undefined) node.fail('axes is required');
  const shape = shapeOf(x);
  const rank = shape.length + axesRaw.length;
  const axes = axesRaw.map((a) => normalizeAxis(a, rank));
  const out: number[] = [];
  let source = 0;
  for (let d = 0; d < rank; d++) out.push(axes.includes(d) ? 1 : shape[source++]!);
  return [reshape(node.ctx, x, out)];
}

function squeeze(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const shape = shapeOf(x);
  const axesRaw = node.opset >= 13 ? node.constInts(1, 'axes') : node.ints('axes');
  const axes = axesRaw?.map((a) => normalizeAxis(a, shape.length));
  const out = shape.filter((d, i) => (axes === undefined ? d !== 1 : !axes.includes(i)));
  return [reshape(node.ctx, x, out)];
}

function reshapeOp(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const shape = shapeOf(x);
  const requested = node.opset >= 5 ? node.constInts(1, 'shape')! : node.ints('shape')!;
  const allowZero = node.int('allowzero', 0) !== 0;
  const out = requested.map((d, i) => (d === 0 && !allowZero ? shape[i]! : d));
  return [reshape(node.ctx, x, viewShape('Reshape', shape, out))];
}

function flatten(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const shape = shapeOf(x);
  const axis = normalizeAxis(node.int('axis', 1), shape.length);
  return [reshape(node.ctx, x, [shapeSize(shape.slice(0, axis)), shapeSize(shape.slice(axis))])];
}

function transpose(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const rank = shapeOf(x).length;
  const perm = node.ints('perm') ?? Array.from({ length: rank }, (_, i) => rank - 1 - i);
  return [permute(node.ctx, x, perm)];
}

function split(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const shape = shapeOf(x);
  const axis = normalizeAxis(node.int('axis', 0), shape.length);
  const count = node.node.outputs.length;
  let sizes = node.opset >= 13 ? node.constInts(1, 'split') : node.ints('split');
  if (sizes === undefined) {
    const numOutputs = node.opset >= 18 ? node.int('num_outputs', count) : count;
    const chunk = Math.ceil(shape[axis]! / numOutputs);
    sizes = Array.from({ length: numOutputs }, (_, i) => Math.min(chunk, shape[axis]! - i * chunk));
  }
  let start = 0;
  return sizes.map((size) => {
    const part = slice(ctx, x, axis, start, start + size);
    start += size;
    return part;
  });
}

function cast(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const to = node.int('to', 0);
  const targets: Record<number, DType> = { 1: 'float32', 2: 'uint8', 3: 'int8', 5: 'int16', 6: 'int32', 7: 'int64', 9: 'bool', 11: 'float64' };
  const dtype = targets[to];
  if (dtype === undefined) node.fail(`cast to ONNX type ${to} is not supported`);
  if (dtypeOf(x) === dtype) return [x];
  return [node.ctx.emit('dim_order_ops::_to_dim_order_copy.out', [node.ctx.tensor(x), { bool: false }, { intList: shapeOf(x).map((_, i) => i) }], dtype, shapeOf(x))];
}

function softmaxHandler(log: boolean): OpHandler {
  return (node) => {
    const { ctx } = node;
    const x = node.input(0);
    const shape = shapeOf(x);
    const name = log ? 'aten::_log_softmax.out' : 'aten::_softmax.out';
    const coerced = node.opset < 13 ? normalizeAxis(node.int('axis', 1), shape.length) : undefined;
    // Before opset 13 the input is viewed as a matrix split at `axis`; at the last dim that is a softmax over it.
    if (coerced !== undefined && coerced !== shape.length - 1) {
      const axis = coerced;
      const flat = reshape(ctx, x, [shapeSize(shape.slice(0, axis)), shapeSize(shape.slice(axis))]);
      const y = ctx.emit(name, [ctx.tensor(flat), { int: 1 }, { bool: false }], dtypeOf(x), shapeOf(flat));
      return [reshape(ctx, y, shape)];
    }
    const axis = coerced ?? normalizeAxis(node.int('axis', -1), shape.length);
    return [ctx.emit(name, [ctx.tensor(x), { int: axis }, { bool: false }], dtypeOf(x), shape)];
  };
}

function gemm(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  let a = node.input(0);
  let b = node.input(1);
  const c = node.optional(2);
  if (node.int('transA', 0) !== 0) a = permute(ctx, a, [1, 0]);
  if (node.int('transB', 0) !== 0) b = permute(ctx, b, [1, 0]);
  const alpha = node.float('alpha', 1);
  const beta = node.float('beta', 1);
  const rows = shapeOf(a)[0]!;
  const cols = shapeOf(b)[1]!;
  // On the delegate the bias is added after the product (as ONNX Runtime does), not used as the starting sum.
  if (c !== undefined && alpha === 1 && beta === 1 && !toDelegate(ctx, a, b)) {
    return [ctx.emit('aten::addmm.out', [ctx.tensor(c), ctx.tensor(a), ctx.tensor(b), { double: 1 }, { double: 1 }], dtypeOf(a), [rows, cols])];
  }
  let y = mm(ctx, a, b);
  if (alpha !== 1) y = arith(ctx, node, 'mul', y, ctx.constant(dtypeOf(a), [], [alpha]));
  if (c !== undefined && beta !== 0) {
    const scaled = beta === 1 ? c : arith(ctx, node, 'mul', c, ctx.constant(dtypeOf(c), [], [beta]));
    y = arith(ctx, node, 'add', y, scaled);
  }
  return [y];
}

function matmul(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  let a = node.input(0);
  let b = node.input(1);
  const aVector = shapeOf(a).length === 1;
  const bVector = shapeOf(b).length === 1;
  if (aVector) a = reshape(ctx, a, [1, shapeOf(a)[0]!]);
  if (bVector) b = reshape(ctx, b, [shapeOf(b)[0]!, 1]);
  const aShape = shapeOf(a);
  const bShape = shapeOf(b);
  const [m, k] = aShape.slice(-2) as [number, number];
  const n = bShape[bShape.length - 1]!;
  let result: OnnxValue;
  let outShape: number[];
  if (aShape.length === 2 && bShape.length === 2) {
    result = mm(ctx, a, b);
    outShape = [m, n];
  } else {
    const batch = broadcastShape(aShape.slice(0, -2), bShape.slice(0, -2));
    if (batch === undefined) node.invalid(`batch dims of ${JSON.stringify(aShape)} and ${JSON.stringify(bShape)} do not broadcast`);
    const count = shapeSize(batch);
    if (bShape.length === 2 && shapeSize(aShape.slice(0, -2)) === count) {
      const flat = reshape(ctx, expandTo(ctx, a, [...batch, m, k]), [count * m, k]);
      result = mm(ctx, flat, b);
    } else {
      const a3 = reshape(ctx, expandTo(ctx, a, [...batch, m, k]), [count, m, k]);
      const b3 = reshape(ctx, expandTo(ctx, b, [...batch, k, n]), [count, k, n]);
      result = ctx.emit('aten::bmm.out', [ctx.tensor(a3), ctx.tensor(b3)], dtypeOf(a), [count, m, n]);
    }
    outShape = [...batch, m, n];
  }
  if (aVector) outShape.splice(outShape.length - 2, 1);
  if (bVector) outShape.splice(outShape.length - 1, 1);
  return [reshape(ctx, result, outShape)];
}

function clip(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const dtype = dtypeOf(x);
  const range = FINITE_RANGE[dtype];
  let low: number | undefined;
  let high: number | undefined;
  if (node.opset < 11) {
    low = node.attribute('min') ? node.float('min', 0) : undefined;
    high = node.attribute('max') ? node.float('max', 0) : undefined;
  } else {
    const lowInput = node.optional(1);
    const highInput = node.optional(2);
    if (lowInput?.kind === 'tensor' || highInput?.kind === 'tensor') {
      // Bounds computed at run time: compare and select against the bound tensors.
      let y = x;
      if (lowInput !== undefined) y = where(ctx, node, compare(ctx, node, 'lt', y, lowInput), lowInput, y);
      if (highInput !== undefined) y = where(ctx, node, compare(ctx, node, 'gt', y, highInput), highInput, y);
      if (range !== undefined && (lowInput === undefined || highInput === undefined)) {
        y = ctx.emit('aten::clamp.out', [ctx.tensor(y), lowInput === undefined ? ctx.scalar(dtype, range[0]) : null, highInput === undefined ? ctx.scalar(dtype, range[1]) : null], dtype, shapeOf(y));
      }
      return [expandTo(ctx, y, shapeOf(x))];
    }
    if (lowInput !== undefined) low = elementAt(node.constInput(1, 'min'), 0);
    if (highInput !== undefined) high = elementAt(node.constInput(2, 'max'), 0);
  }
  // A missing bound is the dtype's lowest or largest finite value, so infinities clamp to them.
  if (range !== undefined) {
    low ??= range[0];
    high ??= range[1];
  }
  if (low === undefined && high === undefined) return [x];
  return [ctx.emit('aten::clamp.out', [ctx.tensor(x), low === undefined ? null : ctx.scalar(dtype, low), high === undefined ? null : ctx.scalar(dtype, high)], dtype, shapeOf(x))];
}

function variadic(kind: 'max' | 'min' | 'sum' | 'mean'): OpHandler {
  return (node) => {
    const { ctx } = node;
    const parts = node.inputs.filter((v): v is OnnxValue => v !== undefined);
    let acc = parts[0]!;
    for (const next of parts.slice(1)) {
      if (kind === 'sum' || kind === 'mean') acc = arith(ctx, node, 'add', acc, next);
      // maximum/minimum let NaN win from either side, as onnxruntime does; a compare-and-select would keep only the second's.
      else acc = ctx.emit(`aten::${kind === 'max' ? 'maximum' : 'minimum'}.out`, [ctx.tensor(acc), ctx.tensor(next)], dtypeOf(acc), binaryShape(node, acc, next));
    }
    if (kind === 'mean') acc = arith(ctx, node, 'div', acc, ctx.constant(dtypeOf(acc), [], [parts.length]));
    if (parts.length === 1) acc = expandTo(ctx, acc, shapeOf(acc));
    return [acc];
  };
}

/**
 * log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)): exp never overflows, so a
 * large x gives x rather than Inf, and a very negative one keeps its tiny value.
 */
function softplus(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const one = ctx.constant(dtypeOf(x), [], [1]);
  const small = unary(ctx, 'aten::exp.out', unary(ctx, 'aten::neg.out', unary(ctx, 'aten::abs.out', x)));
  // log1p(u) = u * log(w) / (w - 1) with w = 1 + u, and u itself where w rounds to 1.
  const w = arith(ctx, node, 'add', small, one);
  const ratio = arith(ctx, node, 'div', unary(ctx, 'aten::log.out', w), arith(ctx, node, 'sub', w, one));
  const log1p = where(ctx, node, compare(ctx, node, 'eq', w, one), small, arith(ctx, node, 'mul', small, ratio));
  return [arith(ctx, node, 'add', unary(ctx, 'aten::relu.out', x), log1p)];
}

function zeroOf(ctx: LoweringContext, x: OnnxValue): OnnxValue {
  return ctx.constant(dtypeOf(x), [], [0]);
}

/** Elu (exponential branch for x < 0, so -0 stays -0) and Selu (for x <= 0, so -0 gives +0), as onnxruntime computes them. */
function elu(node: NodeView, alphaDefault: number, scale: number, zeroTakesExponential: boolean): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const alpha = node.float('alpha', alphaDefault);
  const gamma = node.float('gamma', scale);
  const negative = arith(ctx, node, 'mul', arith(ctx, node, 'sub', unary(ctx, 'aten::exp.out', x), ctx.constant(dtypeOf(x), [], [1])), ctx.constant(dtypeOf(x), [], [alpha]));
  const y = zeroTakesExponential
    ? where(ctx, node, compare(ctx, node, 'gt', x, zeroOf(ctx, x)), x, negative)
    : where(ctx, node, compare(ctx, node, 'lt', x, zeroOf(ctx, x)), negative, x);
  return [gamma === 1 ? y : arith(ctx, node, 'mul', y, ctx.constant(dtypeOf(x), [], [gamma]))];
}

function hardSigmoid(ctx: LoweringContext, node: NodeView, x: OnnxValue, alpha: number, beta: number): OnnxValue {
  const linear = arith(ctx, node, 'add', arith(ctx, node, 'mul', x, ctx.constant(dtypeOf(x), [], [alpha])), ctx.constant(dtypeOf(x), [], [beta]));
  return ctx.emit('aten::clamp.out', [ctx.tensor(linear), { double: 0 }, { double: 1 }], dtypeOf(x), shapeOf(x));
}

function argReduce(kind: 'argmax' | 'argmin'): OpHandler {
  return (node) => {
    const { ctx } = node;
    let x = node.input(0);
    const shape = shapeOf(x);
    const axis = normalizeAxis(node.int('axis', 0), shape.length);
    const keep = node.int('keepdims', 1) !== 0;
    const last = node.int('select_last_index', 0) !== 0;
    if (last) x = indexSelect(ctx, x, axis, Array.from({ length: shape[axis]! }, (_, i) => shape[axis]! - 1 - i));
    let y = ctx.emit(`aten::${kind}.out`, [ctx.tensor(x), { int: axis }, { bool: keep }], 'int64', reducedShape(shape, [axis], keep));
    if (last) y = ctx.emit('aten::rsub.Scalar_out', [ctx.tensor(y), { int: shape[axis]! - 1 }, { int: 1 }], 'int64', shapeOf(y));
    return [y];
  };
}

/** [C] parameters viewed as [C, 1, ...] against an input of `rank`. */
function channelView(ctx: LoweringContext, p: OnnxValue, rank: number): OnnxValue {
  return reshape(ctx, p, [shapeOf(p)[0]!, ...new Array<number>(rank - 2).fill(1)]);
}

function batchNorm(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const rank = shapeOf(x).length;
  const [scale, bias, mean, variance] = [1, 2, 3, 4].map((i) => node.input(i));
  const eps = node.float('epsilon', 1e-5);
  if (node.int('training_mode', 0) !== 0) {
    // Normalise with the batch statistics and update the running ones.
    const axes = [0, ...shapeOf(x).slice(2).map((_, i) => i + 2)];
    const batchMean = reduceKernel(ctx, 'mean', x, axes, true);
    const centered = arith(ctx, node, 'sub', x, batchMean);
    const batchVar = reduceKernel(ctx, 'mean', arith(ctx, node, 'mul', centered, centered), axes, true);
    const inv = unary(ctx, 'aten::rsqrt.out', arith(ctx, node, 'add', batchVar, ctx.constant(dtypeOf(x), [], [eps])));
    const y = arith(ctx, node, 'add', arith(ctx, node, 'mul', arith(ctx, node, 'mul', centered, inv), channelView(ctx, scale!, rank)), channelView(ctx, bias!, rank));
    const momentum = node.float('momentum', 0.9);
    const channels = shapeOf(scale!);
    const blend = (running: OnnxValue, current: OnnxValue): OnnxValue => arith(ctx, node, 'add',
      arith(ctx, node, 'mul', running, ctx.constant(dtypeOf(x), [], [momentum])),
      arith(ctx, node, 'mul', reshape(ctx, current, channels), ctx.constant(dtypeOf(x), [], [1 - momentum])));
    return [y, blend(mean!, batchMean), blend(variance!, batchVar)];
  }
  const affine = scale?.kind === 'const' && bias?.kind === 'const' && mean?.kind === 'const' && variance?.kind === 'const'
    ? batchNormAffine(scale.tensor, bias.tensor, mean.tensor, variance.tensor, eps)
    : undefined;
  if (affine !== undefined) {
    // Constant statistics: one multiply-add by import-time per-channel tensors.
    const channelShape = [affine.scale.length, ...new Array<number>(rank - 2).fill(1)];
    const scaled = arith(ctx, node, 'mul', x, ctx.constant(dtypeOf(x), channelShape, affine.scale));
    return [arith(ctx, node, 'add', scaled, ctx.constant(dtypeOf(x), channelShape, affine.shift))];
  }
  const epsilon = ctx.constant(dtypeOf(x), [], [eps]);
  const inv = unary(ctx, 'aten::rsqrt.out', arith(ctx, node, 'add', variance!, epsilon));
  const factor = channelView(ctx, arith(ctx, node, 'mul', scale!, inv), rank);
  const centered = arith(ctx, node, 'sub', x, channelView(ctx, mean!, rank));
  return [arith(ctx, node, 'add', arith(ctx, node, 'mul', centered, factor), channelView(ctx, bias!, rank))];
}

function instanceNorm(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const rank = shapeOf(x).length;
  const axes = Array.from({ length: rank - 2 }, (_, i) => i + 2);
  const eps = node.float('epsilon', 1e-5);
  const mean = reduceKernel(ctx, 'mean', x, axes, true);
  const centered = arith(ctx, node, 'sub', x, mean);
  const variance = reduceKernel(ctx, 'mean', arith(ctx, node, 'mul', centered, centered), axes, true);
  const inv = unary(ctx, 'aten::rsqrt.out', arith(ctx, node, 'add', variance, ctx.constant(dtypeOf(x), [], [eps])));
  const normalized = arith(ctx, node, 'mul', centered, inv);
  return [arith(ctx, node, 'add', arith(ctx, node, 'mul', normalized, channelView(ctx, node.input(1), rank)), channelView(ctx, node.input(2), rank))];
}

function layerNorm(node: NodeView): (OnnxValue | undefined)[] {
  const { ctx } = node;
  const x = node.input(0);
  const shape = shapeOf(x);
  const axis = normalizeAxis(node.int('axis', -1), shape.length);
  const normalized = shape.slice(axis);
  const eps = node.float('epsilon', 1e-5);
  const affine = (v: OnnxValue | undefined): OnnxValue | undefined => (v === undefined ? undefined : expandTo(ctx, reshape(ctx, v, [...new Array<number>(Math.max(0, normalized.length - shapeOf(v).length)).fill(1), ...shapeOf(v)]), normalized));
  const scale = affine(node.input(1));
  const bias = affine(node.optional(2));
  const statsShape = [...shape.slice(0, axis), ...new Array<number>(normalized.length).fill(1)];
  const out = ctx.out(dtypeOf(x), shape);
  const mean = ctx.out(dtypeOf(x), statsShape);
  const rstd = ctx.out(dtypeOf(x), statsShape);
  const results = ctx.m.graph.addValue({ kind: 'tensorList', items: [out.index, mean.index, rstd.index] });
  const g = ctx.m.graph;
  const operand = (v: OnnxValue | undefined): number => (v === undefined ? g.addValue({ kind: 'null' }) : ctx.m.use(ctx.tensor(v)).index);
  const normalizedList = g.addValue({ kind: 'intList', items: normalized.map((d) => g.addValue({ kind: 'int', value: BigInt(d) })) });
  g.addKernelCall('aten::native_layer_norm.out', [
    operand(x), normalizedList, operand(scale), operand(bias), g.addValue({ kind: 'double', value: eps }),
    out.index, mean.index, rstd.index, results,
  ]);
  return [tensorValue(out), tensorValue(mean), tensorValue(rstd)];
}

function tile(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const repeats = node.constInts(1, 'repeats')!;
  const shape = shapeOf(x);
  const interleaved = shape.flatMap((d) => [1, d]);
  const expanded = shape.flatMap((d, i) => [repeats[i]!, d]);
  const y = expandTo(ctx, reshape(ctx, x, interleaved), expanded);
  return [reshape(ctx, y, shape.map((d, i) => d * repeats[i]!))];
}

function expand(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const target = broadcastShape(shapeOf(x), node.constInts(1, 'shape')!);
  if (target === undefined) node.fail('shape does not broadcast');
  return [expandTo(node.ctx, x, target)];
}

function constantOfShape(node: NodeView): OnnxValue[] {
  const shape = node.constInts(0, 'shape')!;
  const value = node.attribute('value')?.t;
  const dtype = value === undefined ? 'float32' : ({ 1: 'float32', 6: 'int32', 7: 'int64', 9: 'bool', 11: 'float64' } as Record<number, DType>)[value.dataType];
  if (dtype === undefined) node.fail('unsupported value type');
  let fill = 0;
  if (value !== undefined) {
    fill = value.rawData && value.rawData.length > 0
      ? elementAt({ dtype, shape: [1], data: fromRaw(dtype, value.rawData) }, 0)
      : Number(value.floatData[0] ?? value.int64Data[0] ?? value.int32Data[0] ?? value.doubleData[0] ?? 0);
  }
  return [node.ctx.constant(dtype, shape, new Array<number>(shapeSize(shape)).fill(fill))];
}

function fromRaw(dtype: DType, raw: Uint8Array): ConstTensor['data'] {
  const copy = new Uint8Array(raw.length);
  copy.set(raw);
  const t = fromNumbers(dtype, [], [0]);
  const size = t.data.BYTES_PER_ELEMENT;
  const Ctor = t.data.constructor as new (buffer: ArrayBuffer, offset: number, length: number) => ConstTensor['data'];
  return new Ctor(copy.buffer, 0, Math.floor(copy.length / size));
}

function shapeOp(node: NodeView): OnnxValue[] {
  const shape = shapeOf(node.input(0));
  const rank = shape.length;
  const clampIndex = (v: number): number => Math.min(Math.max(v < 0 ? v + rank : v, 0), rank);
  const start = clampIndex(node.int('start', 0));
  const end = clampIndex(node.int('end', rank));
  const dims = shape.slice(start, end);
  return [node.ctx.constant('int64', [dims.length], dims)];
}

// ---------------------------------------------------------------- recurrent layers

interface RecurrentSetup {
  x: OnnxValue;
  /** X as [seq*batch, input]: every step's rows, multiplied by W once per direction. */
  xRows: OnnxValue;
  gates: number;
  seq: number;
  batch: number;
  hidden: number;
  directions: number;
  reverse: boolean[];
}

function recurrentSetup(node: NodeView, gates: number): RecurrentSetup {
  if (node.int('layout', 0) !== 0) node.fail('layout=1 (batch first) is not supported');
  if (node.attribute('clip') !== undefined) node.fail('clip is not supported');
  if (node.attribute('activations') !== undefined) {
    const acts = node.strings('activations')!;
    const defaults = gates === 4 ? ['Sigmoid', 'Tanh', 'Tanh'] : ['Sigmoid', 'Tanh'];
    if (acts.some((a, i) => a !== defaults[i % defaults.length])) node.fail(`activations ${acts.join(',')} are not supported (only the defaults)`);
  }
  if (node.optional(4) !== undefined) {
    const lens = node.constInput(4, 'sequence_lens');
    const seq = shapeOf(node.input(0))[0]!;
    if (toNumbers(lens).some((l) => l !== seq)) node.fail('sequence_lens shorter than the sequence are not supported');
  }
  const x = node.input(0);
  const [seq, batch] = shapeOf(x) as [number, number];
  const hidden = node.int('hidden_size', shapeOf(node.input(2))[2]!);
  const direction = node.string('direction', 'forward');
  const reverse = direction === 'bidirectional' ? [false, true] : [direction === 'reverse'];
  const xRows = reshape(node.ctx, x, [seq * batch, shapeOf(x)[2]!]);
  return { x, xRows, gates, seq, batch, hidden, directions: reverse.length, reverse };
}

interface DirectionInputs {
  /** X·Wᵀ for every step: [seq*batch, gates*H]. */
  readonly projected: OnnxValue;
  /** Rᵀ: [H, gates*H]. */
  readonly rT: OnnxValue;
  /** Wb and Rb of the direction, each [gates*H], when the node has B. */
  readonly bias?: { readonly input: OnnxValue; readonly recurrent: OnnxValue };
}

function directionInputs(node: NodeView, setup: RecurrentSetup, d: number): DirectionInputs {
  const { ctx } = node;
  const width = setup.gates * setup.hidden;
  const wT = directionWeight(ctx, node.input(1), d);
  const rT = directionWeight(ctx, node.input(2), d);
  const projected = mm(ctx, setup.xRows, wT);
  const b = node.optional(3);
  if (b === undefined) return { projected, rT };
  const row = reshape(ctx, slice(ctx, b, 0, d, d + 1), [2 * width]);
  return { projected, rT, bias: { input: slice(ctx, row, 0, 0, width), recurrent: slice(ctx, row, 0, width, 2 * width) } };
}

/** Initial state input `index` of direction d as [batch, H]; zeros when the node has none. */
function initialState(node: NodeView, setup: RecurrentSetup, index: number, d: number): OnnxValue {
  const { ctx } = node;
  const { batch, hidden } = setup;
  const v = node.optional(index);
  if (v === undefined) return ctx.constant(dtypeOf(setup.x), [batch, hidden], new Array<number>(batch * hidden).fill(0));
  return reshape(ctx, slice(ctx, v, 0, d, d + 1), [batch, hidden]);
}

/** Weight matrix of direction d transposed to [in, gates*H]. */
function directionWeight(ctx: LoweringContext, w: OnnxValue, d: number): OnnxValue {
  const shape = shapeOf(w);
  const one = reshape(ctx, slice(ctx, w, 0, d, d + 1), shape.slice(1));
  return permute(ctx, one, [1, 0]);
}

function gate(ctx: LoweringContext, v: OnnxValue, index: number, hidden: number): OnnxValue {
  return slice(ctx, v, 1, index * hidden, (index + 1) * hidden);
}

function stackSteps(ctx: LoweringContext, steps: readonly OnnxValue[], batch: number, hidden: number): OnnxValue {
  return cat(ctx, steps.map((h) => reshape(ctx, h, [1, 1, batch, hidden])), 0);
}

function lstm(node: NodeView): (OnnxValue | undefined)[] {
  const { ctx } = node;
  const setup = recurrentSetup(node, 4);
  const { seq, batch, hidden } = setup;
  if (node.optional(7) !== undefined) {
    const peepholes = node.input(7);
    if (peepholes.kind !== 'const' || toNumbers(peepholes.tensor).some((v) => v !== 0)) node.fail('peephole weights are not supported');
  }
  if (node.int('input_forget', 0) !== 0) node.fail('input_forget=1 is not supported');
  const ys: OnnxValue[] = [];
  const hs: OnnxValue[] = [];
  const cs: OnnxValue[] = [];
  for (let d = 0; d < setup.directions; d++) {
    const { projected, rT, bias: biases } = directionInputs(node, setup, d);
    // Added after both products, the order ONNX Runtime uses.
    const bias = biases && arith(ctx, node, 'add', biases.input, biases.recurrent);
    let h = initialState(node, setup, 5, d);
    let c = initialState(node, setup, 6, d);
    const outputs: OnnxValue[] = new Array<OnnxValue>(seq);
    for (let step = 0; step < seq; step++) {
      const t = setup.reverse[d] ? seq - 1 - step : step;
      const xt = slice(ctx, projected, 0, t * batch, (t + 1) * batch);
      let gates = arith(ctx, node, 'add', xt, mm(ctx, h, rT));
      if (bias !== undefined) gates = arith(ctx, node, 'add', gates, bias);
      const i = unary(ctx, 'aten::sigmoid.out', gate(ctx, gates, 0, hidden));
      const o = unary(ctx, 'aten::sigmoid.out', gate(ctx, gates, 1, hidden));
      const f = unary(ctx, 'aten::sigmoid.out', gate(ctx, gates, 2, hidden));
      const candidate = unary(ctx, 'aten::tanh.out', gate(ctx, gates, 3, hidden));
      c = arith(ctx, node, 'add', arith(ctx, node, 'mul', f, c), arith(ctx, node, 'mul', i, candidate));
      h = arith(ctx, node, 'mul', o, unary(ctx, 'aten::tanh.out', c));
      outputs[t] = h;
    }
    ys.push(stackSteps(ctx, outputs, batch, hidden));
    hs.push(reshape(ctx, h, [1, batch, hidden]));
    cs.push(reshape(ctx, c, [1, batch, hidden]));
  }
  return [cat(ctx, ys, 1), cat(ctx, hs, 0), cat(ctx, cs, 0)];
}

function gru(node: NodeView): (OnnxValue | undefined)[] {
  const { ctx } = node;
  const setup = recurrentSetup(node, 3);
  const { seq, batch, hidden } = setup;
  const linearBeforeReset = node.int('linear_before_reset', 0) !== 0;
  const ys: OnnxValue[] = [];
  const hs: OnnxValue[] = [];
  const one = ctx.constant(dtypeOf(setup.x), [], [1]);
  for (let d = 0; d < setup.directions; d++) {
    const inputs = directionInputs(node, setup, d);
    const { rT } = inputs;
    const projected = inputs.bias ? arith(ctx, node, 'add', inputs.projected, inputs.bias.input) : inputs.projected;
    const recurrentBias = inputs.bias?.recurrent;
    const rzT = slice(ctx, rT, 1, 0, 2 * hidden);
    const rhT = slice(ctx, rT, 1, 2 * hidden, 3 * hidden);
    const rbZr = recurrentBias && slice(ctx, recurrentBias, 0, 0, 2 * hidden);
    const rbH = recurrentBias && slice(ctx, recurrentBias, 0, 2 * hidden, 3 * hidden);
    let h = initialState(node, setup, 5, d);
    const outputs: OnnxValue[] = new Array<OnnxValue>(seq);
    for (let step = 0; step < seq; step++) {
      const t = setup.reverse[d] ? seq - 1 - step : step;
      const xt = slice(ctx, projected, 0, t * batch, (t + 1) * batch);
      let hr = mm(ctx, h, rzT);
      if (rbZr) hr = arith(ctx, node, 'add', hr, rbZr);
      const zr = unary(ctx, 'aten::sigmoid.out', arith(ctx, node, 'add', slice(ctx, xt, 1, 0, 2 * hidden), hr));
      const z = gate(ctx, zr, 0, hidden);
      const r = gate(ctx, zr, 1, hidden);
      let recurrent: OnnxValue;
      if (linearBeforeReset) {
        let hh = mm(ctx, h, rhT);
        if (rbH) hh = arith(ctx, node, 'add', hh, rbH);
        recurrent = arith(ctx, node, 'mul', r, hh);
      } else {
        recurrent = mm(ctx, arith(ctx, node, 'mul', r, h), rhT);
        if (rbH) recurrent = arith(ctx, node, 'add', recurrent, rbH);
      }
      const candidate = unary(ctx, 'aten::tanh.out', arith(ctx, node, 'add', slice(ctx, xt, 1, 2 * hidden, 3 * hidden), recurrent));
      // h' = (1 - z) * candidate + z * h
      const keep = arith(ctx, node, 'sub', one, z);
      h = arith(ctx, node, 'add', arith(ctx, node, 'mul', keep, candidate), arith(ctx, node, 'mul', z, h));
      outputs[t] = h;
    }
    ys.push(stackSteps(ctx, outputs, batch, hidden));
    hs.push(reshape(ctx, h, [1, batch, hidden]));
  }
  return [cat(ctx, ys, 1), cat(ctx, hs, 0)];
}

// ---------------------------------------------------------------- table

export const OP_HANDLERS: Readonly<Record<string, OpHandler>> = {
  Identity: passThrough,
  Dropout: (node) => {
    const x = node.input(0);
    if (node.opset >= 12 && node.optional(2) !== undefined) {
      const training = node.constInput(2, 'training_mode');
      if (elementAt(training, 0) !== 0) node.fail('training_mode=1 is random and not supported');
    }
    const mask = node.node.outputs.length > 1 ? node.ctx.constant('bool', shapeOf(x), new Array<number>(shapeSize(shapeOf(x))).fill(1)) : undefined;
    return [x, mask];
  },
  Add: binaryArith('add'),
  Sub: binaryArith('sub'),
  Mul: binaryArith('mul'),
  Div: binaryArith('div'),
  Pow: pow,
  Relu: unaryKernel('aten::relu.out'),
  Sigmoid: unaryKernel('aten::sigmoid.out'),
  Tanh: unaryKernel('aten::tanh.out'),
  Exp: unaryKernel('aten::exp.out'),
  Log: unaryKernel('aten::log.out'),
  Sqrt: unaryKernel('aten::sqrt.out'),
  Neg: unaryKernel('aten::neg.out'),
  Abs: unaryKernel('aten::abs.out'),
  Sin: unaryKernel('aten::sin.out'),
  Cos: unaryKernel('aten::cos.out'),
  Floor: unaryKernel('aten::floor.out'),
  Ceil: unaryKernel('aten::ceil.out'),
  Round: unaryKernel('aten::round.out'),
  Erf: unaryKernel('aten::erf.out'),
  Not: (node) => [unary(node.ctx, 'aten::logical_not.out', node.input(0), 'bool')],
  Reciprocal: (node) => {
    const x = node.input(0);
    return [node.ctx.emit('aten::pow.Tensor_Scalar_out', [node.ctx.tensor(x), { double: -1 }], dtypeOf(x), shapeOf(x))];
  },
  Softplus: softplus,
  Sign: (node) => {
    const { ctx } = node;
    const x = node.input(0);
    const toX = (v: OnnxValue): OnnxValue => ctx.emit('dim_order_ops::_to_dim_order_copy.out', [ctx.tensor(v), { bool: false }, { intList: shapeOf(x).map((_, i) => i) }], dtypeOf(x), shapeOf(x));
    const sign = arith(ctx, node, 'sub', toX(compare(ctx, node, 'gt', x, zeroOf(ctx, x))), toX(compare(ctx, node, 'lt', x, zeroOf(ctx, x))));
    if (!isFloat(dtypeOf(x))) return [sign];
    // NaN compares false both ways; it stays NaN.
    return [where(ctx, node, compare(ctx, node, 'ne', x, x), x, sign)];
  },
  LeakyRelu: (node) => {
    const x = node.input(0);
    return [node.ctx.emit('aten::leaky_relu.out', [node.ctx.tensor(x), { double: node.float('alpha', 0.01) }], dtypeOf(x), shapeOf(x))];
  },
  Elu: (node) => elu(node, 1, 1, false),
  Selu: (node) => elu(node, 1.67326319217681884765625, 1.05070102214813232421875, true),
  HardSigmoid: (node) => [hardSigmoid(node.ctx, node, node.input(0), node.float('alpha', 0.2), node.float('beta', 0.5))],
  // One aten::hardswish (one XNNPACK node when delegated); the same function as ONNX's x * HardSigmoid(x, 1/6, 1/2).
  HardSwish: (node) => [unary(node.ctx, 'aten::hardswish.out', node.input(0))],
  PRelu: (node) => {
    const { ctx } = node;
    const x = node.input(0);
    // slope * x only where x < 0: elsewhere x itself, so an infinite slope cannot turn 0 into NaN.
    return [where(ctx, node, compare(ctx, node, 'lt', x, zeroOf(ctx, x)), arith(ctx, node, 'mul', x, node.input(1)), x)];
  },
  Equal: comparison(COMPARISON_KERNELS.Equal!),
  Greater: comparison(COMPARISON_KERNELS.Greater!),
  Less: comparison(COMPARISON_KERNELS.Less!),
  GreaterOrEqual: comparison(COMPARISON_KERNELS.GreaterOrEqual!),
  LessOrEqual: comparison(COMPARISON_KERNELS.LessOrEqual!),
  Where: (node) => [where(node.ctx, node, node.input(0), node.input(1), node.input(2))],
  Max: variadic('max'),
  Min: variadic('min'),
  Sum: variadic('sum'),
  Mean: variadic('mean'),
  Conv: conv,
  ConvTranspose: convTranspose,
  Resize: (node) => resize(node, { indexSelect, arith }),
  Upsample: (node) => resize(node, { indexSelect, arith }),
  MaxPool: pool('max'),
  AveragePool: pool('average'),
  GlobalAveragePool: (node) => {
    const x = node.input(0);
    return [reduceKernel(node.ctx, 'mean', x, shapeOf(x).slice(2).map((_, i) => i + 2), true)];
  },
  GlobalMaxPool: (node) => {
    const x = node.input(0);
    return [reduceKernel(node.ctx, 'amax', x, shapeOf(x).slice(2).map((_, i) => i + 2), true)];
  },
  Pad: pad,
  Slice: sliceOp,
  Gather: gather,
  Concat: concat,
  Unsqueeze: unsqueeze,
  Squeeze: squeeze,
  Reshape: reshapeOp,
  Flatten: flatten,
  Transpose: transpose,
  Split: split,
  Cast: cast,
  Softmax: softmaxHandler(false),
  LogSoftmax: softmaxHandler(true),
  Gemm: gemm,
  MatMul: matmul,
  Clip: clip,
  ReduceMean: reduceHandler('mean', 18),
  ReduceSum: reduceHandler('sum', 13),
  ReduceMax: reduceHandler('amax', 18),
  ReduceMin: reduceHandler('amin', 18),
  ReduceSumSquare: reduceHandler('sumsquare', 18),
  ReduceL1: reduceHandler('l1', 18),
  ReduceL2: reduceHandler('l2', 18),
  ReduceLogSum: reduceHandler('logsum', 18),
  ReduceLogSumExp: reduceHandler('logsumexp', 18),
  ArgMax: argReduce('argmax'),
  ArgMin: argReduce('argmin'),
  BatchNormalization: batchNorm,
  InstanceNormalization: instanceNorm,
  LayerNormalization: layerNorm,
  Tile: tile,
  Expand: expand,
  ConstantOfShape: constantOfShape,
  Shape: shapeOp,
  Size: (node) => [node.ctx.constant('int64', [], [shapeSize(shapeOf(node.input(0)))])],
  LSTM: lstm,
  GRU: gru,
};
