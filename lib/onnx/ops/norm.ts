// BatchNormalization (inference and training mode), InstanceNormalization
// and LayerNormalization.
import { dtypeOf, shapeOf, tensorValue, type ImportContext, type NodeView, type OnnxValue } from '../context.js';
import { batchNormAffine } from '../batchnorm.js';
import { normalizeAxis } from '../fold.js';
import { arith, expandTo, reshape, unary } from './common.js';
import { reduceKernel } from './reduce.js';

/** [C] parameters viewed as [C, 1, ...] against an input of `rank`. */
function channelView(ctx: ImportContext, p: OnnxValue, rank: number): OnnxValue {
  return reshape(ctx, p, [shapeOf(p)[0]!, ...new Array<number>(rank - 2).fill(1)]);
}

export function batchNorm(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const rank = shapeOf(x).length;
  const [scale, bias, mean, variance] = [1, 2, 3, 4].map((i) => node.input(i));
  const eps = node.float('epsilon', 1e-5);
  if (node.int('training_mode', 0) !== 0) {
    // Normalise with the batch statistics and update the running ones.
    const axes = [
      0,
      ...shapeOf(x)
        .slice(2)
        .map((_, i) => i + 2),
    ];
    const batchMean = reduceKernel(ctx, 'mean', x, axes, true);
    const centered = arith(ctx, node, 'sub', x, batchMean);
    const batchVar = reduceKernel(ctx, 'mean', arith(ctx, node, 'mul', centered, centered), axes, true);
    const inv = unary(ctx, 'aten::rsqrt.out', arith(ctx, node, 'add', batchVar, ctx.constant(dtypeOf(x), [], [eps])));
    const y = arith(
      ctx,
      node,
      'add',
      arith(ctx, node, 'mul', arith(ctx, node, 'mul', centered, inv), channelView(ctx, scale!, rank)),
      channelView(ctx, bias!, rank),
    );
    const momentum = node.float('momentum', 0.9);
    const channels = shapeOf(scale!);
    const blend = (running: OnnxValue, current: OnnxValue): OnnxValue =>
      arith(
        ctx,
        node,
        'add',
        arith(ctx, node, 'mul', running, ctx.constant(dtypeOf(x), [], [momentum])),
        arith(ctx, node, 'mul', reshape(ctx, current, channels), ctx.constant(dtypeOf(x), [], [1 - momentum])),
      );
    return [y, blend(mean!, batchMean), blend(variance!, batchVar)];
  }
  const affine =
    scale?.kind === 'const' && bias?.kind === 'const' && mean?.kind === 'const' && variance?.kind === 'const'
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

export function instanceNorm(node: NodeView): OnnxValue[] {
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
  return [
    arith(
      ctx,
      node,
      'add',
      arith(ctx, node, 'mul', normalized, channelView(ctx, node.input(1), rank)),
      channelView(ctx, node.input(2), rank),
    ),
  ];
}

export function layerNorm(node: NodeView): (OnnxValue | undefined)[] {
  const { ctx } = node;
  const x = node.input(0);
  const shape = shapeOf(x);
  const axis = normalizeAxis(node.int('axis', -1), shape.length);
  const normalized = shape.slice(axis);
  const eps = node.float('epsilon', 1e-5);
  const affine = (v: OnnxValue | undefined): OnnxValue | undefined => {
    if (v === undefined) return undefined;
    const leading = new Array<number>(Math.max(0, normalized.length - shapeOf(v).length)).fill(1);
    return expandTo(ctx, reshape(ctx, v, [...leading, ...shapeOf(v)]), normalized);
  };
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
    operand(x),
    normalizedList,
    operand(scale),
    operand(bias),
    g.addValue({ kind: 'double', value: eps }),
    out.index,
    mean.index,
    rstd.index,
    results,
  ]);
  return [tensorValue(out), tensorValue(mean), tensorValue(rstd)];
}
