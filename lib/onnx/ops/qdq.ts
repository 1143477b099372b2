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
import { dtypeInfo, type DType } from '../../export/dtype.js';
import { QUANTIZED_RANGES } from '../../export/quantize.js';
import { elementAt, fromNumbers, toNumbers, type ConstTensor } from '../constant.js';
import {
  constValue,
  dtypeOf,
  shapeOf,
  type DequantizedCodes,
  type ImportContext,
  type NodeView,
  type OnnxValue,
  type QuantizedRole,
} from '../context.js';
import type { OnnxNode } from '../proto.js';
import { arith, convert, convertInto, reshape, windowPads, type OpHandler } from './common.js';
import { convolution, convSetup } from './conv.js';
import { centeredCodes } from './quantized.js';

/** QUANTIZED_RANGES looked up by any dtype: undefined for those QuantizeLinear does not produce. */
const RANGES: Readonly<Partial<Record<DType, readonly [number, number]>>> = QUANTIZED_RANGES;
/** ONNX element type codes QuantizeLinear's `output_dtype` may name here. */
const OUTPUT_DTYPES: Readonly<Record<number, DType>> = { 2: 'uint8', 3: 'int8' };

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
  if (ctx.quantizedRoles.get(node.node) === 'quantize' && x.kind === 'tensor') return [quantizeKernel(node, x, scale, given)];
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
  const range = RANGES[dtype];
  if (range === undefined) node.fail(`the zero point is ${dtype}; QuantizeLinear produces uint8 or int8`);
  const layout = layoutOf(node, x, scale);
  const zeroPoint = given ?? ctx.constant(dtype, shapeOf(scale), new Array<number>(shapeOf(scale).reduce((a, b) => a * b, 1)).fill(0));
  checkZeroPoint(node, zeroPoint, scale);
  const shape = shapeOf(x);

  const quotient = arith(ctx, node, 'div', x, reshape(ctx, scale, layout.parameterShape));
  const low = boundBeside(node, range[0], zeroPoint, layout);
  const high = boundBeside(node, range[1], zeroPoint, layout);
  const centered = centeredCodes(ctx, node, quotient, low, high);
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
    const y = dequantizeAtImport(x, scale, zeroPoint, shapeOf(x), layout);
    if (ctx.quantizedRoles.get(node.node) === 'constant') {
      ctx.dequantizedConstants.set(y, { codes: x.tensor, scales: toNumbers(scale.tensor), axis: layout.axis ?? -1 });
    }
    return [y];
  }
  const form = ctx.centeredForms.get(x);
  let centered: OnnxValue;
  if (form !== undefined && zeroPoint !== undefined && sameValues(form.zeroPoint, zeroPoint)) {
    centered = form.centered;
  } else if (
    ctx.xnnpack &&
    dtype !== 'int32' &&
    layout.axis === undefined &&
    scale.kind === 'const' &&
    (zeroPoint === undefined || zeroPoint.kind === 'const')
  ) {
    // The dequantize kernel computes the same float32 (x - zp) * scale, and the delegate runs it as a Convert.
    return [dequantizeKernel(node, x, scale, zeroPoint)];
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

// ---- Static quantization on the XNNPACK path ----
//
// A convolution or linear in onnxruntime's QDQ form (DequantizeLinear of an
// 8-bit activation and of int8 constant weights, an optional int32 bias
// DequantizeLinear, the float op, an optional Relu or Clip, a QuantizeLinear)
// is imported in ExecuTorch's QDQ form: quantized_decomposed kernels around
// the float op, which the XNNPACK lowering turns into one 8-bit node
// (export/xnnpack/lowering.ts). The kernels compute what the ONNX nodes do,
// except that quantize_per_tensor multiplies by the reciprocal of the scale,
// as XNNPACK's Convert does, where onnxruntime divides.

const PRODUCTS: ReadonlySet<string> = new Set(['Conv', 'Gemm', 'MatMul']);
const ACTIVATIONS: ReadonlySet<string> = new Set(['Relu', 'Clip']);

/**
 * Marks the nodes of each statically quantized product of `nodes`, and the
 * QuantizeLinear nodes such products' activations read: values between
 * them have one reader and are not graph outputs; scales and zero points are
 * known, one per tensor for activations; weights are int8 with zero point 0.
 */
export function markQuantizedProducts(nodes: readonly OnnxNode[], ctx: ImportContext, graphOutputs: ReadonlySet<string>): void {
  const producers = new Map<string, OnnxNode>();
  const readers = new Map<string, OnnxNode[]>();
  for (const node of nodes) {
    for (const name of node.outputs) producers.set(name, node);
    for (const name of node.inputs) if (name !== '') readers.set(name, [...(readers.get(name) ?? []), node]);
  }
  const known = (name: string | undefined): ConstTensor | undefined => {
    const value = name === undefined || name === '' ? undefined : ctx.values.get(name);
    return value?.kind === 'const' ? value.tensor : undefined;
  };
  const onlyReader = (name: string, reader: OnnxNode): boolean =>
    !graphOutputs.has(name) && readers.get(name)?.length === 1 && readers.get(name)![0] === reader;
  const eightBit = (t: ConstTensor | undefined): boolean => t !== undefined && (t.dtype === 'uint8' || t.dtype === 'int8');
  const perTensor = (node: OnnxNode): boolean => {
    const scale = known(node.inputs[1]);
    const zeroPoint = known(node.inputs[2]);
    const noZeroPoint = (node.inputs[2] ?? '') === '';
    return scale?.data.length === 1 && (noZeroPoint || (eightBit(zeroPoint) && zeroPoint!.data.length === 1));
  };
  const dequantizing = (name: string | undefined, reader: OnnxNode): OnnxNode | undefined => {
    const node = name === undefined || name === '' ? undefined : producers.get(name);
    return node?.opType === 'DequantizeLinear' && onlyReader(name!, reader) ? node : undefined;
  };
  const roles = new Map<OnnxNode, QuantizedRole>();
  for (const product of nodes) {
    if (!PRODUCTS.has(product.opType)) continue;
    const activation = dequantizing(product.inputs[0], product);
    if (activation === undefined || !perTensor(activation) || known(activation.inputs[0]) !== undefined) continue;
    const weight = dequantizing(product.inputs[1], product);
    const codes = known(weight?.inputs[0]);
    const weightZeroPoint = known(weight?.inputs[2]);
    if (codes?.dtype !== 'int8' || known(weight!.inputs[1]) === undefined) continue;
    if ((weight!.inputs[2] ?? '') !== '' && (weightZeroPoint === undefined || toNumbers(weightZeroPoint).some((zp) => zp !== 0))) continue;
    const biasName = product.opType === 'MatMul' ? undefined : product.inputs[2];
    const bias = biasName === undefined || biasName === '' ? undefined : dequantizing(biasName, product);
    if (biasName !== undefined && biasName !== '' && (known(bias?.inputs[0])?.dtype !== 'int32' || known(bias!.inputs[1]) === undefined))
      continue;
    let result = product.outputs[0]!;
    let next = readers.get(result)?.length === 1 ? readers.get(result)![0] : undefined;
    if (next !== undefined && ACTIVATIONS.has(next.opType) && onlyReader(result, next)) {
      result = next.outputs[0]!;
      next = readers.get(result)?.length === 1 ? readers.get(result)![0] : undefined;
    }
    if (next?.opType !== 'QuantizeLinear' || !onlyReader(result, next) || !perTensor(next)) continue;
    roles.set(product, 'product').set(activation, 'activation').set(weight!, 'constant').set(next, 'quantize');
    if (bias !== undefined) roles.set(bias, 'constant');
  }
  for (const node of nodes) {
    if (node.opType !== 'QuantizeLinear' || roles.has(node) || !perTensor(node) || graphOutputs.has(node.outputs[0]!)) continue;
    const outputReaders = readers.get(node.outputs[0]!) ?? [];
    if (outputReaders.some((reader) => roles.get(reader) === 'activation')) roles.set(node, 'quantize');
  }
  for (const [node, role] of roles) ctx.quantizedRoles.set(node, role);
}

/**
 * ExecuTorch's per-tensor (de)quantize kernel `op` of x with one scale and zero
 * point: `codes` is the 8-bit side's dtype, `out` the result's.
 */
function perTensorKernel(
  node: NodeView,
  op: 'quantize' | 'dequantize',
  x: OnnxValue,
  scale: number,
  zeroPoint: number,
  codes: DType,
  out: DType,
): OnnxValue {
  const range = RANGES[codes]!;
  return node.ctx.emit(
    `quantized_decomposed::${op}_per_tensor.out`,
    [node.ctx.tensor(x), { double: scale }, { int: zeroPoint }, { int: range[0] }, { int: range[1] }, { int: dtypeInfo(codes).scalarType }],
    out,
    shapeOf(x),
  );
}

/** quantize_per_tensor of x with a known scale and zero point (one each). */
function quantizeKernel(node: NodeView, x: OnnxValue, scale: OnnxValue, zeroPoint: OnnxValue | undefined): OnnxValue {
  const dtype = zeroPoint === undefined ? 'uint8' : dtypeOf(zeroPoint);
  if (RANGES[dtype] === undefined || scale.kind !== 'const' || (zeroPoint !== undefined && zeroPoint.kind !== 'const')) {
    node.fail("a quantized product's QuantizeLinear takes a known uint8 or int8 zero point and scale");
  }
  const zp = zeroPoint === undefined ? 0 : elementAt(zeroPoint.tensor, 0);
  return perTensorKernel(node, 'quantize', x, elementAt(scale.tensor, 0), zp, dtype, dtype);
}

/** dequantize_per_tensor of an 8-bit x with a known scale and zero point (one each). */
function dequantizeKernel(node: NodeView, x: OnnxValue, scale: OnnxValue & { kind: 'const' }, zeroPoint: OnnxValue | undefined): OnnxValue {
  const zp = zeroPoint?.kind === 'const' ? elementAt(zeroPoint.tensor, 0) : 0;
  return perTensorKernel(node, 'dequantize', x, elementAt(scale.tensor, 0), zp, dtypeOf(x), 'float32');
}

const INT32_RANGE = [-2147483648, 2147483647] as const;

/** One scale per index of `axis` (size `channels`): the recorded ones, or the one scale repeated. */
function channelScales(form: DequantizedCodes, axis: number, channels: number): number[] | undefined {
  if (form.scales.length === 1) return new Array<number>(channels).fill(form.scales[0]!);
  return form.axis === axis && form.scales.length === channels ? [...form.scales] : undefined;
}

/** dequantize_per_channel of constant codes along `axis`: the kernel the XNNPACK lowering reads back as a quantized filter or bias. */
function dequantizedCodes(ctx: ImportContext, codes: ConstTensor, scales: readonly number[], axis: number): OnnxValue {
  const [low, high] = codes.dtype === 'int8' ? QUANTIZED_RANGES.int8 : INT32_RANGE;
  return ctx.emit(
    'quantized_decomposed::dequantize_per_channel.out',
    [
      ctx.tensor(constValue(codes)),
      ctx.tensor(ctx.constant('float32', [scales.length], scales)),
      null,
      { int: axis },
      { int: low },
      { int: high },
      { int: dtypeInfo(codes.dtype).scalarType },
    ],
    'float32',
    codes.shape,
  );
}

/** [rows, cols] codes as [cols, rows]. */
function transposedCodes(codes: ConstTensor): ConstTensor {
  const [rows, cols] = codes.shape as [number, number];
  const values = toNumbers(codes);
  return fromNumbers(
    codes.dtype,
    [cols, rows],
    Array.from({ length: rows * cols }, (_, i) => values[(i % rows) * cols + Math.floor(i / rows)]!),
  );
}

/** The product's form over dequantized codes, or undefined where it does not apply (the float import then runs). */
function quantizedProductForm(node: NodeView): OnnxValue | undefined {
  const { ctx } = node;
  const x = node.input(0);
  const weight = ctx.dequantizedConstants.get(node.input(1));
  const biasValue = node.op === 'MatMul' ? undefined : node.optional(2);
  const bias = biasValue === undefined ? undefined : ctx.dequantizedConstants.get(biasValue);
  if (x.kind !== 'tensor' || dtypeOf(x) !== 'float32' || weight === undefined || (biasValue !== undefined && bias === undefined))
    return undefined;
  const biasOf = (channels: number): OnnxValue | undefined | null => {
    if (bias === undefined) return undefined;
    const scales = channelScales(bias, 0, channels);
    if (scales === undefined || bias.codes.shape.length !== 1 || bias.codes.shape[0] !== channels) return null;
    return dequantizedCodes(ctx, bias.codes, scales, 0);
  };
  if (node.op === 'Conv') {
    const { w, wShape, xShape, spatial, kernel, strides, dilations, groups } = convSetup(node, 'convolutions');
    if (spatial !== 2 || shapeOf(w).length !== 4) return undefined;
    const pads = windowPads(node, xShape.slice(2), kernel, strides, dilations);
    if (pads[0] !== pads[2] || pads[1] !== pads[3]) return undefined;
    const scales = channelScales(weight, 0, wShape[0]!);
    const b = biasOf(wShape[0]!);
    if (scales === undefined || b === null) return undefined;
    const outShape = [xShape[0]!, wShape[0]!];
    for (let i = 0; i < 2; i++)
      outShape.push(Math.floor((xShape[i + 2]! + 2 * pads[i]! - dilations[i]! * (kernel[i]! - 1) - 1) / strides[i]!) + 1);
    const filter = dequantizedCodes(ctx, weight.codes, scales, 0);
    return convolution(ctx, x, filter, b, { strides, padding: pads.slice(0, 2), dilations, groups }, 'float32', outShape);
  }
  if (shapeOf(x).length !== 2 || weight.codes.shape.length !== 2) return undefined;
  const transposed = node.op === 'Gemm' && node.int('transB', 0) !== 0;
  if (node.op === 'Gemm' && (node.int('transA', 0) !== 0 || node.float('alpha', 1) !== 1 || node.float('beta', 1) !== 1)) return undefined;
  // [in, out] codes, quantized along the output dim.
  const codes = transposed ? transposedCodes(weight.codes) : weight.codes;
  const columns = codes.shape[1]!;
  const scales = channelScales(weight, transposed ? 0 : 1, columns);
  const b = biasOf(columns);
  if (scales === undefined || b === null || codes.shape[0] !== shapeOf(x)[1]) return undefined;
  const filter = dequantizedCodes(ctx, codes, scales, 1);
  const shape = [shapeOf(x)[0]!, columns];
  if (b === undefined) return ctx.emit('aten::mm.out', [ctx.tensor(x), ctx.tensor(filter)], 'float32', shape);
  return ctx.emit('aten::addmm.out', [ctx.tensor(b), ctx.tensor(x), ctx.tensor(filter), { double: 1 }, { double: 1 }], 'float32', shape);
}

/** `handler`, or on the XNNPACK path for a statically quantized product, its form over dequantized codes. */
export function quantizedProduct(handler: OpHandler): OpHandler {
  return (node) => {
    if (node.ctx.quantizedRoles.get(node.node) !== 'product') return handler(node);
    const product = quantizedProductForm(node);
    return product === undefined ? handler(node) : [product];
  };
}
