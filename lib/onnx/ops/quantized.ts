// Dynamic 8-bit quantization: DynamicQuantizeLinear, and the integer products
// that read its output, ConvInteger and MatMulInteger.
//
// DynamicQuantizeLinear follows onnxruntime's CPU kernel: the range is
// [min(0, min x), max(0, max x)], scale = (high - low) / 255 (1 when the
// range is empty, all-zero input), zero point = round(clamp(0 - low / scale,
// 0, 255)) with a NaN zero point taken as 255, and y = round(clamp(x / scale,
// -zp, 255 - zp)) + zp with a NaN quotient taken as -zp (so y = 0): a
// division, not a product with the reciprocal, and ties to even. A NaN in x
// makes min and max NaN here (scale NaN, zero point 255, y all 0);
// onnxruntime's vectorized scan keeps or drops a NaN depending on its position.
//
// The integer products run as float32 convolutions and matrix products of
// (x - x_zero_point) and (w - w_zero_point), so they take the same kernels,
// and the XNNPACK delegate, as float models. Centered 8-bit values are exact
// in float32 (weights are centered at import), and so are their products
// (below 2^16) and every partial sum below 2^24 in magnitude: a product whose
// partial sums stay below 2^24 is the exact integer result. A larger sum may
// round at each addition past 2^24 by half an ulp of the partial sum, which
// keeps the result within float32's relative precision times the number of
// terms. The int32 result is converted from that float32 one, only when
// something reads it: a Cast to float32, the usual consumer (before the
// rescale by x_scale * w_scale), returns the float32 result as it is.
import type { DType } from '../../export/dtype.js';
import { constValue, dtypeOf, NodeView, shapeOf, type ImportContext, type OnnxValue } from '../context.js';
import { foldNode } from '../fold.js';
import { arith, compare, convert, convertInto, reshape, unary, where } from './common.js';
import { conv } from './conv.js';
import { matmul } from './matmul.js';

const QUANTIZED_MAX = 255;
/** 1.5 * 2^23: float32 sums with it have no fraction bits left (see the rounding of y below). */
const ROUNDING_SHIFT = 12582912;

/**
 * The quantized value less its zero point: `quotient` (x / scale) clamped to
 * [low, high] with a NaN quotient taken as `low`, rounded to whole numbers,
 * ties to even. The bounds are integers within 2^8, so clamping first rounds
 * the same; the clamp is MAXPS then MINPS as onnxruntime's kernels run it,
 * here a compare-and-where so NaN goes to `low` on every path (the
 * delegate's clamps differ); and a float32 of magnitude up to 2^22 plus
 * 1.5 * 2^23 rounds to a whole number, ties to even, which subtracting
 * 1.5 * 2^23 leaves exact: two additions the delegate runs, where round is a
 * portable kernel.
 */
export function centeredCodes(ctx: ImportContext, node: NodeView, quotient: OnnxValue, low: OnnxValue, high: OnnxValue): OnnxValue {
  const capped = ctx.emit('aten::minimum.out', [ctx.tensor(quotient), ctx.tensor(high)], 'float32', shapeOf(quotient));
  const clamped = where(ctx, node, compare(ctx, node, 'ge', quotient, low), capped, low);
  const shift = ctx.constant('float32', [], [ROUNDING_SHIFT]);
  return arith(ctx, node, 'sub', arith(ctx, node, 'add', clamped, shift), shift);
}

/** `x` converted to `dtype`, computed only when something reads it. */
function deferredConversion(ctx: ImportContext, x: OnnxValue, dtype: DType): OnnxValue {
  return ctx.deferred(dtype, shapeOf(x), (out) => convertInto(ctx, x, out));
}

export function dynamicQuantizeLinear(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  if (dtypeOf(x) !== 'float32') node.fail(`input is ${dtypeOf(x)}; DynamicQuantizeLinear quantizes float32`);
  const shape = shapeOf(x);
  const number = (value: number): OnnxValue => ctx.constant('float32', [], [value]);
  // The selections below are compare-and-where, not clamps or maximum/minimum, so a NaN goes
  // where onnxruntime's std::min/std::max send it on every path (the delegate's clamps differ).
  const select = (condition: OnnxValue, whenTrue: OnnxValue, whenFalse: OnnxValue): OnnxValue =>
    where(ctx, node, condition, whenTrue, whenFalse);
  const reduce = (kind: 'amin' | 'amax'): OnnxValue =>
    ctx.emit(`aten::${kind}.out`, [ctx.tensor(x), { intList: shape.map((_, i) => i) }, { bool: false }], 'float32', []);
  const zero = number(0);
  // low = min(min x, 0) and high = max(max x, 0), as std::min(low, 0) and std::max(high, 0) (a NaN stays).
  const lowest = reduce('amin');
  const low = select(compare(ctx, node, 'gt', lowest, zero), zero, lowest);
  const highest = reduce('amax');
  const high = select(compare(ctx, node, 'lt', highest, zero), zero, highest);
  const scale = select(
    compare(ctx, node, 'eq', high, low),
    number(1),
    arith(ctx, node, 'div', arith(ctx, node, 'sub', high, low), number(QUANTIZED_MAX)),
  );
  // zero point = round(max(0, min(255, 0 - low / scale))); std::min(255, NaN) is 255.
  const initial = arith(ctx, node, 'sub', zero, arith(ctx, node, 'div', low, scale));
  const belowMax = select(compare(ctx, node, 'lt', initial, number(QUANTIZED_MAX)), initial, number(QUANTIZED_MAX));
  const clamped = select(compare(ctx, node, 'gt', belowMax, zero), belowMax, zero);
  const zeroPoint = unary(ctx, 'aten::round.out', clamped);
  // y - zp = x / scale clamped to [-zp, 255 - zp], a NaN quotient to -zp, then rounded.
  const quotient = arith(ctx, node, 'div', x, scale);
  const bottom = arith(ctx, node, 'sub', zero, zeroPoint);
  const top = arith(ctx, node, 'sub', number(QUANTIZED_MAX), zeroPoint);
  const centered = centeredCodes(ctx, node, quotient, bottom, top);
  const zeroPointOut = deferredConversion(ctx, zeroPoint, 'uint8');
  const y = ctx.deferred('uint8', shape, (out) => convertInto(ctx, arith(ctx, node, 'add', centered, zeroPoint), out));
  ctx.centeredForms.set(y, { centered, zeroPoint: zeroPointOut });
  return [y, scale, zeroPointOut];
}

/**
 * Input `index` minus its zero point (input `zeroPointIndex`) in float32. `zeroPointShape`
 * gives a zero point with more than one element the shape it broadcasts in
 * (per output channel, row or column).
 */
function centeredOperand(
  node: NodeView,
  index: number,
  zeroPointIndex: number,
  what: string,
  zeroPointShape: (zeroPoint: readonly number[]) => readonly number[] | undefined,
): OnnxValue {
  const { ctx } = node;
  const value = node.input(index);
  const zeroPoint = node.optional(zeroPointIndex);
  const dtype = dtypeOf(value);
  if (dtype !== 'uint8' && dtype !== 'int8') node.fail(`${what} is ${dtype}; ${node.op} takes uint8 or int8`);
  if (zeroPoint !== undefined && dtypeOf(zeroPoint) !== dtype) {
    node.invalid(`the zero point of ${what} is ${dtypeOf(zeroPoint)}, ${what} is ${dtype}`);
  }
  const form = ctx.centeredForms.get(value);
  if (form !== undefined && zeroPoint !== undefined && form.zeroPoint === zeroPoint) return form.centered;
  const values = convert(ctx, value, 'float32');
  if (zeroPoint === undefined) return values;
  const count = shapeOf(zeroPoint).reduce((a, b) => a * b, 1);
  const shape = count === 1 ? [] : zeroPointShape(shapeOf(zeroPoint));
  if (shape === undefined)
    node.fail(`the zero point of ${what} has shape ${JSON.stringify(shapeOf(zeroPoint))}, which ${node.op} does not take`);
  const offsets = reshape(ctx, convert(ctx, zeroPoint, 'float32'), shape);
  if (values.kind === 'const' && offsets.kind === 'const') {
    const centered = foldNode('Sub', [values.tensor, offsets.tensor], node);
    if (centered?.[0] === undefined || centered[0].shape.join() !== shapeOf(values).join()) {
      node.invalid(`the zero point of ${what} does not broadcast to its shape ${JSON.stringify(shapeOf(values))}`);
    }
    return constValue(centered[0]);
  }
  return arith(ctx, node, 'sub', values, offsets);
}

/** The int32 result of an integer product computed in float32, converted when read. */
function integerResult(ctx: ImportContext, product: OnnxValue): OnnxValue {
  const result = deferredConversion(ctx, product, 'int32');
  ctx.floatForms.set(result, product);
  return result;
}

export function convInteger(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = centeredOperand(node, 0, 2, 'x', () => undefined);
  const w = centeredOperand(node, 1, 3, 'w', (zeroPoint) => {
    const filter = shapeOf(node.input(1));
    // One zero point per output channel.
    return zeroPoint.length === 1 && zeroPoint[0] === filter[0] ? [filter[0]!, ...filter.slice(1).map(() => 1)] : undefined;
  });
  const [product] = conv(new NodeView(node.node, [x, w], ctx));
  return [integerResult(ctx, product!)];
}

export function matMulInteger(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const a = centeredOperand(node, 0, 2, 'A', (zeroPoint) => {
    const rows = shapeOf(node.input(0));
    // One zero point per row: [M], or [..., M, 1].
    if (zeroPoint.length === 1) return rows.length >= 2 && zeroPoint[0] === rows[rows.length - 2] ? [zeroPoint[0]!, 1] : undefined;
    return zeroPoint;
  });
  // One zero point per column: [N], or [..., 1, N].
  const b = centeredOperand(node, 1, 3, 'B', (zeroPoint) => zeroPoint);
  for (const [operand, what] of [
    [a, 'A'],
    [b, 'B'],
  ] as const) {
    const original = shapeOf(node.input(what === 'A' ? 0 : 1));
    if (shapeOf(operand).join() !== original.join())
      node.invalid(`the zero point of ${what} does not broadcast to its shape ${JSON.stringify(original)}`);
  }
  const [product] = matmul(new NodeView(node.node, [a, b], ctx));
  return [integerResult(ctx, product!)];
}
