// Gemm and MatMul, and the matrix product the recurrent layers and
// convolutions share: delegate-friendly forms on XNNPACK, float64 when the
// import asks for wide accumulation, blocked sums otherwise.
import { numel } from '../../shape.js';
import { dtypeOf, isFloat, shapeOf, type ImportContext, type NodeView, type OnnxValue } from '../context.js';
import { broadcastShape } from '../fold.js';
import { arith, convert, expandTo, permute, reshape, slice } from './common.js';

/**
 * Whether a float32 product of runtime `x` with constant weights (and bias)
 * goes to the XNNPACK delegate, which sums in order with fused multiply-adds
 * as ONNX Runtime does; products left on portable kernels are split into blocks.
 */
export function toDelegate(ctx: ImportContext, x: OnnxValue, weight: OnnxValue, bias?: OnnxValue): boolean {
  const float32 = dtypeOf(x) === 'float32' && dtypeOf(weight) === 'float32';
  return ctx.xnnpack && float32 && x.kind === 'tensor' && weight.kind === 'const' && (bias === undefined || bias.kind === 'const');
}

export function mm(ctx: ImportContext, a: OnnxValue, b: OnnxValue): OnnxValue {
  const [m, k] = shapeOf(a) as [number, number];
  const n = shapeOf(b)[1]!;
  const wide = widened(ctx, [a, b], ([wa, wb]) => ctx.emit('aten::mm.out', [ctx.tensor(wa!), ctx.tensor(wb!)], 'float64', [m, n]));
  if (wide !== undefined) return wide;
  if (k > BLOCK_TERMS && isFloat(dtypeOf(a)) && !toDelegate(ctx, a, b)) {
    const parts: OnnxValue[] = [];
    for (let s = 0; s < k; s += BLOCK_TERMS) {
      const end = Math.min(k, s + BLOCK_TERMS);
      parts.push(
        ctx.emit('aten::mm.out', [ctx.tensor(slice(ctx, a, 1, s, end)), ctx.tensor(slice(ctx, b, 0, s, end))], dtypeOf(a), [m, n]),
      );
    }
    return pairwiseSum(ctx, parts);
  }
  return ctx.emit('aten::mm.out', [ctx.tensor(a), ctx.tensor(b)], dtypeOf(a), [m, n]);
}

/** Runs `compute` on float64 copies of float32 operands when the context asks for wide accumulation. */
export function widened(
  ctx: ImportContext,
  operands: (OnnxValue | undefined)[],
  compute: (wide: (OnnxValue | undefined)[]) => OnnxValue,
): OnnxValue | undefined {
  if (!ctx.wideAccumulation || operands.some((o) => o !== undefined && dtypeOf(o) !== 'float32')) return undefined;
  const result = compute(operands.map((o) => (o === undefined ? undefined : convert(ctx, o, 'float64'))));
  return convert(ctx, result, 'float32');
}

// The portable convolution and mm kernels accumulate float32 sums in order.
// For long dot products (hundreds of channels x taps) that loses about an
// order of magnitude against a blocked sum, which shows in recurrent models
// where the error feeds back. The importer splits such products into blocks
// of input channels (and taps, for long kernels) and adds the partial results
// pairwise.
export const BLOCK_TERMS = 32;

/** Partial results of one shape and dtype added pairwise: ((p0 + p1) + (p2 + p3)) + ... */
export function pairwiseSum(ctx: ImportContext, parts: readonly OnnxValue[]): OnnxValue {
  let level = parts;
  while (level.length > 1) {
    const next: OnnxValue[] = [];
    for (let i = 0; i + 1 < level.length; i += 2) {
      const [a, b] = [level[i]!, level[i + 1]!];
      next.push(ctx.emit('aten::add.out', [ctx.tensor(a), ctx.tensor(b), { int: 1 }], dtypeOf(a), shapeOf(a)));
    }
    if (level.length % 2 === 1) next.push(level[level.length - 1]!);
    level = next;
  }
  return level[0]!;
}

export function gemm(node: NodeView): OnnxValue[] {
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
    return [
      ctx.emit('aten::addmm.out', [ctx.tensor(c), ctx.tensor(a), ctx.tensor(b), { double: 1 }, { double: 1 }], dtypeOf(a), [rows, cols]),
    ];
  }
  let y = mm(ctx, a, b);
  if (alpha !== 1) y = arith(ctx, node, 'mul', y, ctx.constant(dtypeOf(a), [], [alpha]));
  if (c !== undefined && beta !== 0) {
    const scaled = beta === 1 ? c : arith(ctx, node, 'mul', c, ctx.constant(dtypeOf(c), [], [beta]));
    y = arith(ctx, node, 'add', y, scaled);
  }
  return [y];
}

export function matmul(node: NodeView): OnnxValue[] {
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
    const count = numel(batch);
    if (bShape.length === 2 && numel(aShape.slice(0, -2)) === count) {
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
