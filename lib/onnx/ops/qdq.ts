// Static quantization: QuantizeLinear and DequantizeLinear, the QDQ form
// onnxruntime's quantize_static writes around float ops.
//
// Both follow onnxruntime's CPU kernels (MLAS on x86 and Arm):
// - QuantizeLinear: y = round(clamp(x / scale, qmin - zp, qmax - zp)) + zp, a
//   division (not a product with the reciprocal), the clamp as MAXPS then
//   MINPS, which send a NaN quotient to the lower bound (y = qmin), and the
//   conversion rounding ties to even.
// - DequantizeLinear: y = float(x - zp) * scale, the difference in int32, one
//   float32 product.
// Per tensor (a scale of one element) or per axis (a 1-D scale along `axis`);
// blocked quantization, 4-bit, 16-bit and float8 types are refused.
//
// As DynamicQuantizeLinear's, the quantized y is the float32 value y - zp
// (kept as a centered form) and is converted to 8 bits only when something
// reads it as such: a DequantizeLinear with the same zero point multiplies
// the centered values by its scale, so Q -> DQ computes in float32 throughout.
import type { DType } from '../../export/dtype.js';
import { elementAt, toNumbers } from '../constant.js';
import { constValue, dtypeOf, shapeOf, type NodeView, type OnnxValue } from '../context.js';
import { arith, compare, convert, convertInto, reshape, where } from './common.js';

/** The integer range of each quantized dtype QuantizeLinear produces. */
const QUANTIZED_RANGES: Readonly<Partial<Record<DType, readonly [number, number]>>> = {
  uint8: [0, 255],
  int8: [-128, 127],
};
/** ONNX element type codes QuantizeLinear's `output_dtype` may name here. */
const OUTPUT_DTYPES: Readonly<Record<number, DType>> = { 2: 'uint8', 3: 'int8' };
/** 1.5 * 2^23: a float32 of magnitude up to 2^22 plus this has no fraction bits left, rounded ties to even. */
const ROUNDING_SHIFT = 12582912;

/** Where a scale and zero point apply: to the whole tensor, or one each along `axis`. */
interface Layout {
  /** The shape scale and zero point take to broadcast over x: [] per tensor, [C, 1, ...] per axis. */
  readonly parameterShape: readonly number[];
  readonly axis: number | undefined;
}

function refuseBlocks(node: NodeView): void {
  const blockSize = node.int('block_size', 0);
  if (blockSize !== 0) node.fail(`block_size ${blockSize} (blocked quantization) is not supported; use one scale, or one per axis`);
}

/** The layout `scale` gives x: one element per tensor, a 1-D scale of x's size along `axis` per axis. */
function layoutOf(node: NodeView, x: OnnxValue, scale: OnnxValue): Layout {
  refuseBlocks(node);
  const xShape = shapeOf(x);
  const scaleShape = shapeOf(scale);
  const count = scaleShape.reduce((a, b) => a * b, 1);
  if (scaleShape.length === 0 || (scaleShape.length === 1 && count === 1)) return { parameterShape: [], axis: undefined };
  if (scaleShape.length !== 1)
    node.fail(`the scale has shape ${JSON.stringify(scaleShape)}; only one scale, or a 1-D scale per axis, is supported`);
  const rank = xShape.length;
  const given = node.int('axis', 1);
  const axis = given < 0 ? given + rank : given;
  if (axis < 0 || axis >= rank) node.invalid(`axis ${given} is outside the rank ${rank} of x`);
  if (scaleShape[0] !== xShape[axis]) {
    node.invalid(`the scale has ${scaleShape[0]} elements, x has ${xShape[axis]} along axis ${axis}`);
  }
  return { parameterShape: [scaleShape[0]!, ...xShape.slice(axis + 1).map(() => 1)], axis };
}

function checkScale(node: NodeView, scale: OnnxValue): void {
  if (dtypeOf(scale) !== 'float32') node.fail(`the scale is ${dtypeOf(scale)}; ${node.op} takes a float32 scale`);
}

/** The zero point's shape must be the scale's. */
function checkZeroPoint(node: NodeView, zeroPoint: OnnxValue, scale: OnnxValue): void {
  if (shapeOf(zeroPoint).join() !== shapeOf(scale).join()) {
    node.invalid(`the zero point has shape ${JSON.stringify(shapeOf(zeroPoint))}, the scale ${JSON.stringify(shapeOf(scale))}`);
  }
}

/** `bound - zeroPoint` in float32, in the parameters' broadcast shape (computed at import when the zero point is known). */
function boundBeside(node: NodeView, bound: number, zeroPoint: OnnxValue, layout: Layout): OnnxValue {
  const { ctx } = node;
  if (zeroPoint.kind === 'const') {
    return ctx.constant(
      'float32',
      layout.parameterShape,
      toNumbers(zeroPoint.tensor).map((zp) => bound - zp),
    );
  }
  return arith(
    ctx,
    node,
    'sub',
    ctx.constant('float32', [], [bound]),
    reshape(ctx, convert(ctx, zeroPoint, 'float32'), layout.parameterShape),
  );
}

export function quantizeLinear(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const scale = node.input(1);
  const given = node.optional(2);
  if (dtypeOf(x) !== 'float32') node.fail(`x is ${dtypeOf(x)}; QuantizeLinear quantizes float32`);
  checkScale(node, scale);
  const outputCode = node.int('output_dtype', 0);
  let dtype: DType;
  if (given !== undefined) {
    dtype = dtypeOf(given);
    if (outputCode !== 0 && OUTPUT_DTYPES[outputCode] !== dtype)
      node.invalid(`output_dtype ${outputCode} differs from the zero point's ${dtype}`);
  } else {
    const named = outputCode === 0 ? 'uint8' : OUTPUT_DTYPES[outputCode];
    if (named === undefined) node.fail(`output_dtype ${outputCode} is not supported; QuantizeLinear produces uint8 or int8`);
    dtype = named;
  }
  const range = QUANTIZED_RANGES[dtype];
  if (range === undefined) node.fail(`the zero point is ${dtype}; QuantizeLinear produces uint8 or int8`);
  const layout = layoutOf(node, x, scale);
  const zeroPoint = given ?? ctx.constant(dtype, shapeOf(scale), new Array<number>(shapeOf(scale).reduce((a, b) => a * b, 1)).fill(0));
  checkZeroPoint(node, zeroPoint, scale);
  const shape = shapeOf(x);

  const quotient = arith(ctx, node, 'div', x, reshape(ctx, scale, layout.parameterShape));
  const low = boundBeside(node, range[0], zeroPoint, layout);
  const high = boundBeside(node, range[1], zeroPoint, layout);
  // max(quotient, low) then min(., high), as MAXPS and MINPS: a NaN quotient becomes low. The
  // selection is compare-and-where, so a NaN goes there on every path (the delegate's clamps differ).
  const capped = ctx.emit('aten::minimum.out', [ctx.tensor(quotient), ctx.tensor(high)], 'float32', shape);
  const clamped = where(ctx, node, compare(ctx, node, 'ge', quotient, low), capped, low);
  // The bounds are integers within 2^8, so adding and subtracting 1.5 * 2^23 rounds to a whole
  // number, ties to even, exactly: two additions the delegate runs, where round is a portable kernel.
  const shift = ctx.constant('float32', [], [ROUNDING_SHIFT]);
  const centered = arith(ctx, node, 'sub', arith(ctx, node, 'add', clamped, shift), shift);
  const zeroPointFloat = reshape(ctx, convert(ctx, zeroPoint, 'float32'), layout.parameterShape);
  const y = ctx.deferred(dtype, shape, (out) => convertInto(ctx, arith(ctx, node, 'add', centered, zeroPointFloat), out));
  ctx.centeredForms.set(y, { centered, zeroPoint });
  return [y];
}

/** Both known at import with the same values (zero points of Q and DQ are often separate initializers). */
function sameValues(a: OnnxValue, b: OnnxValue): boolean {
  if (a === b) return true;
  if (a.kind !== 'const' || b.kind !== 'const' || dtypeOf(a) !== dtypeOf(b)) return false;
  const left = a.tensor;
  const right = b.tensor;
  if (left.data.length !== right.data.length) return false;
  for (let i = 0; i < left.data.length; i++) if (elementAt(left, i) !== elementAt(right, i)) return false;
  return true;
}

const DEQUANTIZED_DTYPES: ReadonlySet<DType> = new Set<DType>(['uint8', 'int8', 'int32']);

export function dequantizeLinear(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const scale = node.input(1);
  const zeroPoint = node.optional(2);
  const dtype = dtypeOf(x);
  if (!DEQUANTIZED_DTYPES.has(dtype)) node.fail(`x is ${dtype}; DequantizeLinear takes uint8, int8 or int32`);
  checkScale(node, scale);
  const outputCode = node.int('output_dtype', 0);
  if (outputCode !== 0 && outputCode !== 1) node.fail(`output_dtype ${outputCode} is not supported; DequantizeLinear produces float32`);
  const layout = layoutOf(node, x, scale);
  if (zeroPoint !== undefined) {
    if (dtypeOf(zeroPoint) !== dtype) node.invalid(`the zero point is ${dtypeOf(zeroPoint)}, x is ${dtype}`);
    checkZeroPoint(node, zeroPoint, scale);
    if (dtype === 'int32' && (zeroPoint.kind !== 'const' || toNumbers(zeroPoint.tensor).some((zp) => zp !== 0))) {
      node.fail('an int32 x takes a zero point of 0 (a known one)');
    }
  }
  if (x.kind === 'const' && scale.kind === 'const' && (zeroPoint === undefined || zeroPoint.kind === 'const')) {
    return [dequantizeAtImport(x, scale, zeroPoint, shapeOf(x), layout)];
  }
  const form = ctx.centeredForms.get(x);
  let centered: OnnxValue;
  if (form !== undefined && zeroPoint !== undefined && sameValues(form.zeroPoint, zeroPoint)) {
    centered = form.centered;
  } else {
    // 8-bit differences are exact in float32; an int32 x (zero point 0) rounds once, as onnxruntime's cast does.
    const values = convert(ctx, x, 'float32');
    centered =
      zeroPoint === undefined
        ? values
        : arith(ctx, node, 'sub', values, reshape(ctx, convert(ctx, zeroPoint, 'float32'), layout.parameterShape));
  }
  return [arith(ctx, node, 'mul', centered, reshape(ctx, scale, layout.parameterShape))];
}

/** DequantizeLinear of constants (quantized weights and biases): float32 (x - zp) * scale per element. */
function dequantizeAtImport(
  x: OnnxValue & { kind: 'const' },
  scale: OnnxValue & { kind: 'const' },
  zeroPoint: (OnnxValue & { kind: 'const' }) | undefined,
  shape: readonly number[],
  layout: Layout,
): OnnxValue {
  const values = toNumbers(x.tensor);
  const scales = toNumbers(scale.tensor);
  const zeroPoints = zeroPoint === undefined ? undefined : toNumbers(zeroPoint.tensor);
  const inner = layout.axis === undefined ? values.length : shape.slice(layout.axis + 1).reduce((a, b) => a * b, 1);
  const channels = scales.length;
  const out = new Float32Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const c = layout.axis === undefined ? 0 : Math.floor(i / inner) % channels;
    // A product of two float32 values is exact in float64, so fround rounds it once, as float32 does.
    out[i] = Math.fround(Math.fround(values[i]! - (zeroPoints?.[c] ?? 0)) * scales[c]!);
  }
  return constValue({ dtype: 'float32', shape, data: out });
}
