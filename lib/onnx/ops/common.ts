// Lowering helpers every operator family uses: views and copies (reshape,
// permute, slice, index_select, cat, expand, pad), elementwise arithmetic
// with ONNX broadcasting, comparisons and selection. Constant operands are
// folded at import instead of lowered.
import type { DType } from '../../export/dtype.js';
import type { TensorValue } from '../../export/graph.js';
import type { KernelArgument } from '../../export/method-builder.js';
import { elementAt, fromNumbers, gatherElements, toNumbers, type ConstTensor } from '../constant.js';
import { constValue, dtypeOf, isFloat, shapeOf, type ImportContext, type NodeView, type OnnxValue } from '../context.js';
import { broadcastShape, concatConst, reshapeConst, sliceConst, transposeConst } from '../fold.js';

export type OpHandler = (node: NodeView) => (OnnxValue | undefined)[];

export const LOWEST_FLOAT32 = -3.4028234663852886e38;

export function reshape(ctx: ImportContext, x: OnnxValue, shape: readonly number[]): OnnxValue {
  if (x.kind === 'const') return constValue(reshapeConst(x.tensor, shape));
  if (shapeOf(x).length === shape.length && shapeOf(x).every((d, i) => d === shape[i])) return x;
  return ctx.emit('aten::view_copy.out', [ctx.tensor(x), { intList: shape }], x.dtype, shape);
}

export function permute(ctx: ImportContext, x: OnnxValue, perm: readonly number[]): OnnxValue {
  const shape = shapeOf(x);
  const outShape = perm.map((p) => shape[p]!);
  if (perm.every((p, i) => p === i)) return x;
  if (x.kind === 'const') return constValue(transposeConst(x.tensor, perm));
  return ctx.emit('aten::permute_copy.out', [ctx.tensor(x), { intList: perm }], x.dtype, outShape);
}

/** x[..., start:end:step, ...] along `dim` with start/end already clamped. */
export function slice(ctx: ImportContext, x: OnnxValue, dim: number, start: number, end: number, step = 1): OnnxValue {
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
  return ctx.emit(
    'aten::slice_copy.Tensor_out',
    [ctx.tensor(x), { int: dim }, { int: start }, { int: end }, { int: step }],
    x.dtype,
    outShape,
  );
}

/** Picks positions `indices` (already non-negative) along `dim`. */
export function indexSelect(ctx: ImportContext, x: OnnxValue, dim: number, indices: readonly number[]): OnnxValue {
  const shape = shapeOf(x);
  if (indices.length === shape[dim] && indices.every((v, i) => v === i)) return x;
  const outShape = [...shape];
  outShape[dim] = indices.length;
  if (x.kind === 'const') {
    const t = x.tensor;
    return constValue(
      gatherElements(t, outShape, (index) => {
        let flat = 0;
        for (let d = 0; d < outShape.length; d++) flat = flat * shape[d]! + (d === dim ? indices[index[d]!]! : index[d]!);
        return flat;
      }),
    );
  }
  const index = ctx.tensor(ctx.constant('int64', [indices.length], indices));
  return ctx.emit('aten::index_select.out', [ctx.tensor(x), { int: dim }, index], dtypeOf(x), outShape);
}

export function cat(ctx: ImportContext, parts: readonly OnnxValue[], dim: number): OnnxValue {
  if (parts.length === 1) return parts[0]!;
  if (parts.every((p) => p.kind === 'const'))
    return constValue(
      concatConst(
        parts.map((p) => (p as { tensor: ConstTensor }).tensor),
        dim,
      ),
    );
  const shape = [...shapeOf(parts[0]!)];
  shape[dim] = parts.reduce((sum, p) => sum + shapeOf(p)[dim]!, 0);
  const nonEmpty = parts.filter((p) => shapeOf(p)[dim]! > 0);
  return ctx.emit('aten::cat.out', [{ tensorList: nonEmpty.map((p) => ctx.tensor(p)) }, { int: dim }], dtypeOf(parts[0]!), shape);
}

export function binaryShape(node: NodeView, a: OnnxValue, b: OnnxValue): number[] {
  const shape = broadcastShape(shapeOf(a), shapeOf(b));
  if (shape === undefined) node.invalid(`shapes ${JSON.stringify(shapeOf(a))} and ${JSON.stringify(shapeOf(b))} do not broadcast`);
  return shape;
}

/** A constant with one element whose rank does not widen the other operand: usable as a Scalar argument. */
export function scalarOperand(value: OnnxValue, other: OnnxValue): number | undefined {
  if (value.kind !== 'const' || value.tensor.data.length !== 1) return undefined;
  if (value.tensor.shape.length > shapeOf(other).length) return undefined;
  return elementAt(value.tensor, 0);
}

export type Arith = 'add' | 'sub' | 'mul' | 'div';

export function arith(ctx: ImportContext, node: NodeView, op: Arith, a: OnnxValue, b: OnnxValue): OnnxValue {
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

export function unary(ctx: ImportContext, name: string, x: OnnxValue, outDtype?: DType): OnnxValue {
  return ctx.emit(name, [ctx.tensor(x)], outDtype ?? dtypeOf(x), shapeOf(x));
}

export function compare(ctx: ImportContext, node: NodeView, kind: string, a: OnnxValue, b: OnnxValue): OnnxValue {
  const shape = binaryShape(node, a, b);
  const scalarB = scalarOperand(b, a);
  if (scalarB !== undefined) return ctx.emit(`aten::${kind}.Scalar_out`, [ctx.tensor(a), ctx.scalar(dtypeOf(a), scalarB)], 'bool', shape);
  return ctx.emit(`aten::${kind}.Tensor_out`, [ctx.tensor(a), ctx.tensor(b)], 'bool', shape);
}

export function where(ctx: ImportContext, node: NodeView, cond: OnnxValue, x: OnnxValue, y: OnnxValue): OnnxValue {
  const shape = broadcastShape(binaryShape(node, cond, x), shapeOf(y));
  if (shape === undefined) node.invalid('operands of Where do not broadcast');
  return ctx.emit('aten::where.self_out', [ctx.tensor(cond), ctx.tensor(x), ctx.tensor(y)], dtypeOf(x), shape);
}

export function expandTo(ctx: ImportContext, x: OnnxValue, shape: readonly number[]): OnnxValue {
  const current = shapeOf(x);
  if (current.length === shape.length && current.every((d, i) => d === shape[i])) return x;
  return ctx.emit('aten::expand_copy.out', [ctx.tensor(x), { intList: shape }, { bool: false }], dtypeOf(x), shape);
}

/** Explicit [begin..., end...] pads for a windowed op from `pads` / `auto_pad`. */
export function windowPads(
  node: NodeView,
  inputSpatial: readonly number[],
  kernel: readonly number[],
  strides: readonly number[],
  dilations: readonly number[],
): number[] {
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
export function constantPad(ctx: ImportContext, x: OnnxValue, pads: readonly number[], value: number): OnnxValue {
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

const CONVERSION = 'dim_order_ops::_to_dim_order_copy.out';

// The conversion kernel's arguments before its out: `x`, not blocking, x's dim order.
function conversionArgs(ctx: ImportContext, x: OnnxValue): KernelArgument[] {
  return [ctx.tensor(x), { bool: false }, { intList: shapeOf(x).map((_, i) => i) }];
}

/** `x` converted to `dtype` by the conversion kernel, as a new activation. */
export function emitConversion(ctx: ImportContext, x: OnnxValue, dtype: DType): OnnxValue {
  return ctx.emit(CONVERSION, conversionArgs(ctx, x), dtype, shapeOf(x));
}

/** `x` converted by the conversion kernel into `out`, a tensor of x's shape made beforehand. */
export function convertInto(ctx: ImportContext, x: OnnxValue, out: TensorValue): void {
  ctx.kernel(CONVERSION, [...conversionArgs(ctx, x), out]);
}

/** `x` as `dtype`: itself when it has it, converted at import when constant, else by the kernel. */
export function convert(ctx: ImportContext, x: OnnxValue, dtype: DType): OnnxValue {
  if (dtypeOf(x) === dtype) return x;
  if (x.kind === 'const') return constValue(fromNumbers(dtype, x.tensor.shape, toNumbers(x.tensor)));
  return emitConversion(ctx, x, dtype);
}

export function zeroOf(ctx: ImportContext, x: OnnxValue): OnnxValue {
  return ctx.constant(dtypeOf(x), [], [0]);
}
