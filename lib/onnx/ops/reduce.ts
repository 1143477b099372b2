// Reductions (ReduceSum ... ReduceLogSumExp), ArgMax/ArgMin and TopK.
import { dtypeOf, shapeOf, tensorValue, type ImportContext, type NodeView, type OnnxValue } from '../context.js';
import { normalizeAxis } from '../fold.js';
import { arith, compare, indexSelect, reshape, unary, where, zeroOf, type OpHandler } from './common.js';

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

export function reduceKernel(
  ctx: ImportContext,
  kind: 'sum' | 'mean' | 'amax' | 'amin',
  x: OnnxValue,
  axes: readonly number[],
  keep: boolean,
): OnnxValue {
  const shape = reducedShape(shapeOf(x), axes, keep);
  if (axes.length === 0) return x;
  if (kind === 'sum') return ctx.emit('aten::sum.IntList_out', [ctx.tensor(x), { intList: axes }, { bool: keep }, null], dtypeOf(x), shape);
  if (kind === 'mean') return ctx.emit('aten::mean.out', [ctx.tensor(x), { intList: axes }, { bool: keep }, null], dtypeOf(x), shape);
  return ctx.emit(`aten::${kind}.out`, [ctx.tensor(x), { intList: axes }, { bool: keep }], dtypeOf(x), shape);
}

export function reduceHandler(
  kind: 'sum' | 'mean' | 'amax' | 'amin' | 'sumsquare' | 'l1' | 'l2' | 'logsum' | 'logsumexp',
  inputSince: number,
): OpHandler {
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

export function argReduce(kind: 'argmax' | 'argmin'): OpHandler {
  return (node) => {
    const { ctx } = node;
    let x = node.input(0);
    const shape = shapeOf(x);
    const axis = normalizeAxis(node.int('axis', 0), shape.length);
    const keep = node.int('keepdims', 1) !== 0;
    const last = node.int('select_last_index', 0) !== 0;
    if (last)
      x = indexSelect(
        ctx,
        x,
        axis,
        Array.from({ length: shape[axis]! }, (_, i) => shape[axis]! - 1 - i),
      );
    let y = ctx.emit(`aten::${kind}.out`, [ctx.tensor(x), { int: axis }, { bool: keep }], 'int64', reducedShape(shape, [axis], keep));
    if (last) y = ctx.emit('aten::rsub.Scalar_out', [ctx.tensor(y), { int: shape[axis]! - 1 }, { int: 1 }], 'int64', shapeOf(y));
    return [y];
  };
}

/**
 * TopK as `aten::topk.values`: K from the attribute (opset 1 to 9) or a
 * constant input. Results come sorted, which ONNX allows when `sorted` is 0,
 * and equal values keep ascending index order, as ONNX asks; NaN counts as
 * the largest value, as in PyTorch (onnxruntime's comparison leaves where
 * NaN lands open).
 */
export const topK: OpHandler = (node) => {
  const { ctx } = node;
  const x = node.input(0);
  const shape = shapeOf(x);
  if (shape.length === 0) node.invalid('input is a scalar; TopK needs at least one axis');
  const axis = normalizeAxis(node.int('axis', -1), shape.length);
  let k: number;
  if (node.opset < 10) {
    k = node.int('k', -1);
  } else {
    const given = node.constInts(1, 'K') ?? node.invalid('input K is missing');
    if (given.length !== 1) node.invalid(`K holds ${given.length} values, not one`);
    k = given[0]!;
  }
  if (!Number.isInteger(k) || k < 0 || k > shape[axis]!)
    node.invalid(`K ${k} is outside [0, ${shape[axis]}] for axis ${axis} of ${JSON.stringify(shape)}`);
  const outShape = shape.map((d, i) => (i === axis ? k : d));
  const values = ctx.out(dtypeOf(x), outShape);
  const indices = ctx.out('int64', outShape);
  const g = ctx.m.graph;
  const results = g.addValue({ kind: 'tensorList', items: [values.index, indices.index] });
  g.addKernelCall('aten::topk.values', [
    ctx.m.use(ctx.tensor(x)).index,
    g.addValue({ kind: 'int', value: BigInt(k) }),
    g.addValue({ kind: 'int', value: BigInt(axis) }),
    g.addValue({ kind: 'bool', value: node.int('largest', 1) !== 0 }),
    g.addValue({ kind: 'bool', value: node.int('sorted', 1) !== 0 }),
    values.index,
    indices.index,
    results,
  ]);
  return [tensorValue(values), tensorValue(indices)];
};
