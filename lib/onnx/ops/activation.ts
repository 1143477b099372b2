// Activations and Softmax/LogSoftmax, with the edge cases (-0, NaN,
// overflow) computed as onnxruntime computes them.
import { numel } from '../../shape.js';
import { dtypeOf, shapeOf, type NodeView, type OnnxValue } from '../context.js';
import { normalizeAxis } from '../fold.js';
import { arith, compare, reshape, unary, where, zeroOf, type OpHandler } from './common.js';

export function softmaxHandler(log: boolean): OpHandler {
  return (node) => {
    const { ctx } = node;
    const x = node.input(0);
    const shape = shapeOf(x);
    const name = log ? 'aten::_log_softmax.out' : 'aten::_softmax.out';
    const coerced = node.opset < 13 ? normalizeAxis(node.int('axis', 1), shape.length) : undefined;
    // Before opset 13 the input is viewed as a matrix split at `axis`; at the last dim that is a softmax over it.
    if (coerced !== undefined && coerced !== shape.length - 1) {
      const axis = coerced;
      const flat = reshape(ctx, x, [numel(shape.slice(0, axis)), numel(shape.slice(axis))]);
      const y = ctx.emit(name, [ctx.tensor(flat), { int: 1 }, { bool: false }], dtypeOf(x), shapeOf(flat));
      return [reshape(ctx, y, shape)];
    }
    const axis = coerced ?? normalizeAxis(node.int('axis', -1), shape.length);
    return [ctx.emit(name, [ctx.tensor(x), { int: axis }, { bool: false }], dtypeOf(x), shape)];
  };
}

/**
 * log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)): exp never overflows, so a
 * large x gives x rather than Inf, and a very negative one keeps its tiny value.
 * log1p(u) is log(w) - ((w - 1) - u) / w with w = 1 + u: the second term puts
 * back what rounding 1 + u lost (u itself where w rounds to 1). Every step is
 * elementwise arithmetic the XNNPACK delegate has a node for.
 */
function softplusOf(node: NodeView, x: OnnxValue): OnnxValue {
  const { ctx } = node;
  const one = ctx.constant(dtypeOf(x), [], [1]);
  const small = unary(ctx, 'aten::exp.out', unary(ctx, 'aten::neg.out', unary(ctx, 'aten::abs.out', x)));
  const w = arith(ctx, node, 'add', small, one);
  const lost = arith(ctx, node, 'sub', arith(ctx, node, 'sub', w, one), small);
  const log1p = arith(ctx, node, 'sub', unary(ctx, 'aten::log.out', w), arith(ctx, node, 'div', lost, w));
  return arith(ctx, node, 'add', unary(ctx, 'aten::relu.out', x), log1p);
}

export function softplus(node: NodeView): OnnxValue[] {
  return [softplusOf(node, node.input(0))];
}

/** Mish (opset 18): x * tanh(softplus(x)). */
export function mish(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  return [arith(node.ctx, node, 'mul', x, unary(node.ctx, 'aten::tanh.out', softplusOf(node, x)))];
}

/** Gelu (opset 20): the exact erf form, or the tanh approximation. */
export function gelu(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const approximate = node.string('approximate', 'none');
  if (approximate !== 'none' && approximate !== 'tanh') node.invalid(`approximate must be 'none' or 'tanh', got '${approximate}'`);
  return [node.ctx.emit('aten::gelu.out', [node.ctx.tensor(x), { string: approximate }], dtypeOf(x), shapeOf(x))];
}

/** Elu (exponential branch for x < 0, so -0 stays -0) and Selu (for x <= 0, so -0 gives +0), as onnxruntime computes them. */
function exponentialLinear(node: NodeView, alphaDefault: number, scale: number, zeroTakesExponential: boolean): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const alpha = node.float('alpha', alphaDefault);
  const gamma = node.float('gamma', scale);
  const negative = arith(
    ctx,
    node,
    'mul',
    arith(ctx, node, 'sub', unary(ctx, 'aten::exp.out', x), ctx.constant(dtypeOf(x), [], [1])),
    ctx.constant(dtypeOf(x), [], [alpha]),
  );
  const y = zeroTakesExponential
    ? where(ctx, node, compare(ctx, node, 'gt', x, zeroOf(ctx, x)), x, negative)
    : where(ctx, node, compare(ctx, node, 'lt', x, zeroOf(ctx, x)), negative, x);
  return [gamma === 1 ? y : arith(ctx, node, 'mul', y, ctx.constant(dtypeOf(x), [], [gamma]))];
}

export const elu: OpHandler = (node) => exponentialLinear(node, 1, 1, false);

// biome-ignore lint/correctness/noPrecisionLoss: the float32 constants, written out exactly
export const selu: OpHandler = (node) => exponentialLinear(node, 1.67326319217681884765625, 1.05070102214813232421875, true);

export function hardSigmoid(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const alpha = node.float('alpha', 0.2);
  const beta = node.float('beta', 0.5);
  const linear = arith(
    ctx,
    node,
    'add',
    arith(ctx, node, 'mul', x, ctx.constant(dtypeOf(x), [], [alpha])),
    ctx.constant(dtypeOf(x), [], [beta]),
  );
  return [ctx.emit('aten::clamp.out', [ctx.tensor(linear), { double: 0 }, { double: 1 }], dtypeOf(x), shapeOf(x))];
}

// One aten::hardswish (one XNNPACK node when delegated); the same function as ONNX's x * HardSigmoid(x, 1/6, 1/2).
export function hardSwish(node: NodeView): OnnxValue[] {
  return [unary(node.ctx, 'aten::hardswish.out', node.input(0))];
}

export function leakyRelu(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  return [node.ctx.emit('aten::leaky_relu.out', [node.ctx.tensor(x), { double: node.float('alpha', 0.01) }], dtypeOf(x), shapeOf(x))];
}

export function prelu(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  // slope * x only where x < 0: elsewhere x itself, so an infinite slope cannot turn 0 into NaN.
  return [where(ctx, node, compare(ctx, node, 'lt', x, zeroOf(ctx, x)), arith(ctx, node, 'mul', x, node.input(1)), x)];
}
