// Elementwise operators: arithmetic, unary math, comparisons, Where, Pow,
// Clip, the variadic Max/Min/Sum/Mean and Cast.
import type { DType } from '../../export/dtype.js';
import { elementAt, toNumbers } from '../constant.js';
import { dtypeOf, isFloat, shapeOf, type NodeView, type OnnxValue } from '../context.js';
import { castTarget } from '../dtype.js';
import {
  arith,
  binaryShape,
  compare,
  convert,
  emitConversion,
  expandTo,
  LOWEST_FLOAT32,
  scalarOperand,
  unary,
  where,
  zeroOf,
  type Arith,
  type OpHandler,
} from './common.js';

/** The finite range of each float dtype: ONNX's default Clip bounds. */
const FINITE_RANGE: Partial<Record<DType, readonly [number, number]>> = {
  float32: [LOWEST_FLOAT32, -LOWEST_FLOAT32],
  float64: [-Number.MAX_VALUE, Number.MAX_VALUE],
};

export function binaryArith(op: Arith): OpHandler {
  return (node) => [arith(node.ctx, node, op, node.input(0), node.input(1))];
}

export function unaryKernel(name: string): OpHandler {
  return (node) => [unary(node.ctx, name, node.input(0))];
}

export function comparison(kind: string): OpHandler {
  return (node) => [compare(node.ctx, node, kind, node.input(0), node.input(1))];
}

export function pow(node: NodeView): OnnxValue[] {
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
  const b = convert(ctx, base, floatDtype);
  const e = convert(ctx, exponent, floatDtype);
  let y = unary(ctx, 'aten::exp.out', arith(ctx, node, 'mul', e, unary(ctx, 'aten::log.out', unary(ctx, 'aten::abs.out', b))));
  const shape = shapeOf(y);
  const negative = compare(ctx, node, 'lt', b, ctx.constant(floatDtype, [], [0]));
  if (e.kind === 'const') {
    const exps = toNumbers(e.tensor);
    const signs = ctx.constant(
      floatDtype,
      e.tensor.shape,
      exps.map((v) => (Number.isInteger(v) ? (Math.abs(v) % 2 === 1 ? -1 : 1) : NaN)),
    );
    y = arith(ctx, node, 'mul', y, where(ctx, node, negative, signs, ctx.constant(floatDtype, [], [1])));
    if (exps.some((v) => v === 0)) {
      const zero = ctx.constant(
        'bool',
        e.tensor.shape,
        exps.map((v) => (v === 0 ? 1 : 0)),
      );
      y = where(ctx, node, zero, ctx.constant(floatDtype, [], [1]), y);
    }
  } else {
    // A negative base keeps a sign for integer exponents (negative for odd ones) and is NaN otherwise.
    const integral = compare(ctx, node, 'eq', e, unary(ctx, 'aten::round.out', e));
    const half = arith(ctx, node, 'mul', e, ctx.constant(floatDtype, [], [0.5]));
    const odd = compare(ctx, node, 'ne', unary(ctx, 'aten::floor.out', half), half);
    const signed = arith(ctx, node, 'mul', y, where(ctx, node, odd, ctx.constant(floatDtype, [], [-1]), ctx.constant(floatDtype, [], [1])));
    // The sign bit decides, so -0 counts as negative: 1 / -0 is -Inf.
    const reciprocalNegative = compare(
      ctx,
      node,
      'lt',
      arith(ctx, node, 'div', ctx.constant(floatDtype, [], [1]), b),
      ctx.constant(floatDtype, [], [0]),
    );
    const signBit = ctx.emit('aten::logical_or.out', [ctx.tensor(negative), ctx.tensor(reciprocalNegative)], 'bool', shapeOf(b));
    // -Inf and -0 to a fractional power are +0 or +Inf like their positive twins, not NaN.
    const zeroOrInfinite = ctx.emit(
      'aten::logical_or.out',
      [
        ctx.tensor(compare(ctx, node, 'eq', b, ctx.constant(floatDtype, [], [-Infinity]))),
        ctx.tensor(compare(ctx, node, 'eq', b, ctx.constant(floatDtype, [], [0]))),
      ],
      'bool',
      shapeOf(b),
    );
    const fractional = where(ctx, node, zeroOrInfinite, y, ctx.constant(floatDtype, [], [NaN]));
    y = where(ctx, node, signBit, where(ctx, node, integral, signed, fractional), y);
    // As C's pow: x^0 and 1^y are 1 whatever the other operand (NaN and infinities included), and so is (-1)^±Inf.
    const unitBase = compare(ctx, node, 'eq', unary(ctx, 'aten::abs.out', b), ctx.constant(floatDtype, [], [1]));
    const infiniteExponent = compare(ctx, node, 'eq', unary(ctx, 'aten::abs.out', e), ctx.constant(floatDtype, [], [Infinity]));
    const oneCases = [
      compare(ctx, node, 'eq', e, ctx.constant(floatDtype, [], [0])),
      compare(ctx, node, 'eq', b, ctx.constant(floatDtype, [], [1])),
      ctx.emit(
        'aten::logical_and.out',
        [ctx.tensor(unitBase), ctx.tensor(infiniteExponent)],
        'bool',
        binaryShape(node, unitBase, infiniteExponent),
      ),
    ];
    for (const isOne of oneCases) y = where(ctx, node, isOne, ctx.constant(floatDtype, [], [1]), y);
  }
  y = expandTo(ctx, y, shape);
  if (isFloat(outDtype)) return [y];
  return [emitConversion(ctx, unary(ctx, 'aten::round.out', y), outDtype)];
}

export function cast(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const to = node.int('to', 0);
  const dtype = castTarget(to);
  if (dtype === undefined) node.fail(`cast to ONNX type ${to} is not supported`);
  if (dtypeOf(x) === dtype) return [x];
  // An integer product's result is already at hand in float32 (ops/quantized.ts).
  const floatForm = dtype === 'float32' ? node.ctx.floatForms.get(x) : undefined;
  if (floatForm !== undefined) return [floatForm];
  return [emitConversion(node.ctx, x, dtype)];
}

export function clip(node: NodeView): OnnxValue[] {
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
        y = ctx.emit(
          'aten::clamp.out',
          [
            ctx.tensor(y),
            lowInput === undefined ? ctx.scalar(dtype, range[0]) : null,
            highInput === undefined ? ctx.scalar(dtype, range[1]) : null,
          ],
          dtype,
          shapeOf(y),
        );
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
  return [
    ctx.emit(
      'aten::clamp.out',
      [ctx.tensor(x), low === undefined ? null : ctx.scalar(dtype, low), high === undefined ? null : ctx.scalar(dtype, high)],
      dtype,
      shapeOf(x),
    ),
  ];
}

export function variadic(kind: 'max' | 'min' | 'sum' | 'mean'): OpHandler {
  return (node) => {
    const { ctx } = node;
    const parts = node.inputs.filter((v): v is OnnxValue => v !== undefined);
    let acc = parts[0]!;
    for (const next of parts.slice(1)) {
      if (kind === 'sum' || kind === 'mean') acc = arith(ctx, node, 'add', acc, next);
      // maximum/minimum let NaN win from either side, as onnxruntime does; a compare-and-select would keep only the second's.
      else
        acc = ctx.emit(
          `aten::${kind === 'max' ? 'maximum' : 'minimum'}.out`,
          [ctx.tensor(acc), ctx.tensor(next)],
          dtypeOf(acc),
          binaryShape(node, acc, next),
        );
    }
    if (kind === 'mean') acc = arith(ctx, node, 'div', acc, ctx.constant(dtypeOf(acc), [], [parts.length]));
    if (parts.length === 1) acc = expandTo(ctx, acc, shapeOf(acc));
    return [acc];
  };
}

export function logicalNot(node: NodeView): OnnxValue[] {
  return [unary(node.ctx, 'aten::logical_not.out', node.input(0), 'bool')];
}

export function reciprocal(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  return [node.ctx.emit('aten::pow.Tensor_Scalar_out', [node.ctx.tensor(x), { double: -1 }], dtypeOf(x), shapeOf(x))];
}

export function sign(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const toX = (v: OnnxValue): OnnxValue => emitConversion(ctx, v, dtypeOf(x));
  const sign = arith(ctx, node, 'sub', toX(compare(ctx, node, 'gt', x, zeroOf(ctx, x))), toX(compare(ctx, node, 'lt', x, zeroOf(ctx, x))));
  if (!isFloat(dtypeOf(x))) return [sign];
  // NaN compares false both ways; it stays NaN.
  return [where(ctx, node, compare(ctx, node, 'ne', x, x), x, sign)];
}

export function whereOp(node: NodeView): OnnxValue[] {
  return [where(node.ctx, node, node.input(0), node.input(1), node.input(2))];
}
