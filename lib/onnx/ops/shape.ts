// Operators that change only a shape or give one: Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose, Expand, Tile, Shape, Size, ConstantOfShape,
// and the pass-throughs (Identity, Dropout at inference).
import type { DType } from '../../export/dtype.js';
import { viewShape } from '../../export/shape-inference.js';
import { float16ToNumber } from '../../dtypes.js';
import { numel } from '../../shape.js';
import { elementAt, fromNumbers, type ConstTensor } from '../constant.js';
import { shapeOf, type NodeView, type OnnxValue } from '../context.js';
import { computeDtype, onnxDtype, ONNX_DTYPE_CODES } from '../dtype.js';
import { broadcastShape, normalizeAxis } from '../fold.js';
import { expandTo, permute, reshape } from './common.js';

export function passThrough(node: NodeView): (OnnxValue | undefined)[] {
  return [node.input(0)];
}

/** Dropout at inference: its input, and an all-true mask when the node asks for one. */
export function dropout(node: NodeView): (OnnxValue | undefined)[] {
  const x = node.input(0);
  if (node.opset >= 12 && node.optional(2) !== undefined) {
    const training = node.constInput(2, 'training_mode');
    if (elementAt(training, 0) !== 0) node.fail('training_mode=1 is random and not supported');
  }
  const mask =
    node.node.outputs.length > 1 ? node.ctx.constant('bool', shapeOf(x), new Array<number>(numel(shapeOf(x))).fill(1)) : undefined;
  return [x, mask];
}

export function unsqueeze(node: NodeView): OnnxValue[] {
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

export function squeeze(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const shape = shapeOf(x);
  const axesRaw = node.opset >= 13 ? node.constInts(1, 'axes') : node.ints('axes');
  const axes = axesRaw?.map((a) => normalizeAxis(a, shape.length));
  const out = shape.filter((d, i) => (axes === undefined ? d !== 1 : !axes.includes(i)));
  return [reshape(node.ctx, x, out)];
}

export function reshapeOp(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const shape = shapeOf(x);
  const requested = node.opset >= 5 ? node.constInts(1, 'shape')! : node.ints('shape')!;
  const allowZero = node.int('allowzero', 0) !== 0;
  const out = requested.map((d, i) => (d === 0 && !allowZero ? shape[i]! : d));
  return [reshape(node.ctx, x, viewShape('Reshape', shape, out))];
}

export function flatten(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const shape = shapeOf(x);
  const axis = normalizeAxis(node.int('axis', 1), shape.length);
  return [reshape(node.ctx, x, [numel(shape.slice(0, axis)), numel(shape.slice(axis))])];
}

export function transpose(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const rank = shapeOf(x).length;
  const perm = node.ints('perm') ?? Array.from({ length: rank }, (_, i) => rank - 1 - i);
  return [permute(node.ctx, x, perm)];
}

export function tile(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const repeats = node.constInts(1, 'repeats')!;
  const shape = shapeOf(x);
  const interleaved = shape.flatMap((d) => [1, d]);
  const expanded = shape.flatMap((d, i) => [repeats[i]!, d]);
  const y = expandTo(ctx, reshape(ctx, x, interleaved), expanded);
  return [
    reshape(
      ctx,
      y,
      shape.map((d, i) => d * repeats[i]!),
    ),
  ];
}

export function expand(node: NodeView): OnnxValue[] {
  const x = node.input(0);
  const target = broadcastShape(shapeOf(x), node.constInts(1, 'shape')!);
  if (target === undefined) node.fail('shape does not broadcast');
  return [expandTo(node.ctx, x, target)];
}

// The dtypes ConstantOfShape fills.
const FILL_DTYPES: ReadonlySet<DType> = new Set<DType>(['float32', 'int32', 'int64', 'bool', 'float64']);

function fillDtype(code: number): DType | undefined {
  const dtype = onnxDtype(code);
  return dtype !== undefined && FILL_DTYPES.has(computeDtype(dtype)) ? computeDtype(dtype) : undefined;
}

export function constantOfShape(node: NodeView): OnnxValue[] {
  const shape = node.constInts(0, 'shape')!;
  const value = node.attribute('value')?.t;
  const dtype = value === undefined ? 'float32' : fillDtype(value.dataType);
  if (dtype === undefined) node.fail('unsupported value type');
  let fill = 0;
  if (value !== undefined) {
    fill =
      value.rawData && value.rawData.length > 0
        ? value.dataType === ONNX_DTYPE_CODES.float16
          ? float16ToNumber(new DataView(value.rawData.buffer, value.rawData.byteOffset, 2).getUint16(0, true))
          : elementAt({ dtype, shape: [1], data: fromRaw(dtype, value.rawData) }, 0)
        : value.dataType === ONNX_DTYPE_CODES.float16
          ? float16ToNumber(value.int32Data[0] ?? 0)
          : Number(value.floatData[0] ?? value.int64Data[0] ?? value.int32Data[0] ?? value.doubleData[0] ?? 0);
  }
  return [node.ctx.constant(dtype, shape, new Array<number>(numel(shape)).fill(fill))];
}

function fromRaw(dtype: DType, raw: Uint8Array): ConstTensor['data'] {
  const copy = new Uint8Array(raw.length);
  copy.set(raw);
  const t = fromNumbers(dtype, [], [0]);
  const size = t.data.BYTES_PER_ELEMENT;
  const Ctor = t.data.constructor as new (buffer: ArrayBuffer, offset: number, length: number) => ConstTensor['data'];
  return new Ctor(copy.buffer, 0, Math.floor(copy.length / size));
}

export function shapeOp(node: NodeView): OnnxValue[] {
  const shape = shapeOf(node.input(0));
  const rank = shape.length;
  const clampIndex = (v: number): number => Math.min(Math.max(v < 0 ? v + rank : v, 0), rank);
  const start = clampIndex(node.int('start', 0));
  const end = clampIndex(node.int('end', rank));
  const dims = shape.slice(start, end);
  return [node.ctx.constant('int64', [dims.length], dims)];
}

export function size(node: NodeView): OnnxValue[] {
  return [node.ctx.constant('int64', [], [numel(shapeOf(node.input(0)))])];
}
