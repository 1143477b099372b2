// The delegate nodes each matched op becomes: one emitter per op kind in
// OP_EMITTERS, plus the two forms the run discovery (lowering.ts) picks for
// several ops together (an 8-bit product, a batch matmul over a transpose).
import { EtnaError } from '../../errors.js';
import { NodeUnion } from '../../generated/xnnpack/xnnpack_generated.js';
import { packInt4Rows, type Int4GroupWeights, type Int8ChannelWeights } from '../quantize.js';
import type { MatchedOp } from './partition.js';
import {
  BATCH_MATMUL_TRANSPOSE_B,
  INVALID_VALUE_ID,
  MAX_CONCATENATE_INPUTS,
  RESIZE_ALIGN_CORNERS,
  TRANSPOSE_WEIGHTS_FLAG,
  type XnnNodeSpec,
  type XnnQuantization,
} from './payload.js';
import { NHWC_POSITION_OF_NCHW_DIM, type RunBuilder } from './run-builder.js';
import { constantKey, float32Bytes, ohwi, qint8Of, transposedConvFilter } from './weights.js';

/** A convolution or linear over 8-bit codes: its input's dequantize and its output's quantize fold into it. */
export interface QuantizedProduct {
  readonly dequantize: Extract<MatchedOp, { kind: 'dequantize' }>;
  readonly quantize: Extract<MatchedOp, { kind: 'quantize' }>;
}

/** A clamp folded into an op: the value it writes in the op's place, and its bounds. */
interface FusedClamp {
  readonly out: number | undefined;
  readonly minMax: readonly [number, number] | undefined;
}

type Emitter<K extends MatchedOp['kind']> = (b: RunBuilder, op: Extract<MatchedOp, { kind: K }>, fused: FusedClamp) => void;

/** The value an op writes: its own result, or that of a clamp folded into it. */
function result(b: RunBuilder, fused: FusedClamp, out: number): number {
  return b.define(fused.out ?? out);
}

function emitConvert(b: RunBuilder, op: Extract<MatchedOp, { kind: 'quantize' | 'dequantize' }>): void {
  b.elementwise(op.input, op.out, (input, output) => b.emit({ kind: 'unary', code: NodeUnion.XNNConvert, input, output }));
}

/**
 * The codes a linear's constant weight carries: 4-bit groups with bf16 scales
 * (8da4w) or 8-bit rows with one scale each (8da8w); undefined for a float
 * linear.
 */
function quantizedCodes(
  b: RunBuilder,
  op: Extract<MatchedOp, { kind: 'fullyConnected' }>,
): { readonly int4: Int4GroupWeights } | { readonly int8: Int8ChannelWeights } | undefined {
  const weight = b.method.tensorNode(op.filter).origin;
  if (weight.kind !== 'constant' || op.filterIsTransposed) return undefined;
  const { int4Groups: int4, int8Channels: int8 } = weight.constant;
  if (int4 !== undefined) return { int4 };
  if (int8 !== undefined) return { int8 };
  return undefined;
}

/** The delegate constant of those codes. */
function quantizedFilter(b: RunBuilder, codes: { readonly int4: Int4GroupWeights } | { readonly int8: Int8ChannelWeights }): number {
  if ('int8' in codes) {
    const { int8 } = codes;
    return b.quantizedConstant(int8.codes, [int8.outFeatures, int8.inFeatures], int8.scales, 0);
  }
  const { int4 } = codes;
  const packed = packInt4Rows(int4);
  return b.constantValue(constantKey(packed), packed, [int4.outFeatures, int4.inFeatures], {
    kind: 'int4Groups',
    groupSize: int4.groupSize,
    scalesBf16: int4.scalesBf16,
  });
}

/**
 * bmm(a, permute(x, perm)) as bmm(a, permute(x, perm')) with the second
 * operand transposed, perm' being perm with its last two entries swapped:
 * when perm' keeps x's innermost dim innermost, the copy moves whole rows
 * instead of gathering single elements.
 */
export function emitTransposedBatchMatmul(
  b: RunBuilder,
  op: Extract<MatchedOp, { kind: 'binary' }>,
  transpose: Extract<MatchedOp, { kind: 'transpose' }>,
): void {
  const r = transpose.perm.length;
  const swapLast = <T>(list: readonly T[]): T[] => [...list.slice(0, r - 2), list[r - 1]!, list[r - 2]!];
  const rows = b.addValue({ dims: swapLast(b.method.tensorNode(transpose.out).shape), role: 'internal' });
  b.emit({ kind: 'transpose', perm: swapLast(transpose.perm), input: b.operand(transpose.input), output: rows });
  const input1 = b.scalarOperand(op.a);
  b.emit({
    kind: 'binary',
    code: NodeUnion.XNNBatchMatrixMultiply,
    input1,
    input2: rows,
    output: b.define(op.out),
    flags: BATCH_MATMUL_TRANSPOSE_B,
  });
}

/**
 * A convolution or linear over 8-bit codes: qint8 input (the dequantize's
 * input), qcint8 filter per output channel, qcint32 bias whose scales are
 * input scale x filter scale, qint8 output (the quantize's output), the
 * requantization XNNPACK does (fp32 multiplier, ties to even).
 */
export function emitQuantizedProduct(
  b: RunBuilder,
  op: Extract<MatchedOp, { kind: 'conv2d' | 'fullyConnected' }>,
  plan: QuantizedProduct,
  minMax?: readonly [number, number],
): void {
  const inputScale = qint8Of(plan.dequantize) as Extract<XnnQuantization, { kind: 'perTensor' }>;
  const weightIndex = op.kind === 'conv2d' ? op.weight : op.filter;
  const weight = b.codes(weightIndex);
  const biasConstant = (outChannels: number): number => {
    if (op.bias === undefined) return INVALID_VALUE_ID;
    const { codes } = b.codes(op.bias);
    const scales = Float32Array.from({ length: outChannels }, (_, c) => Math.fround(inputScale.scale * weight.scales[c]!));
    return b.quantizedConstant(codes, [outChannels], scales, 0);
  };
  if (op.kind === 'conv2d') {
    const shape = b.method.tensorNode(op.weight).shape;
    const [o, i, kh, kw] = shape as [number, number, number, number];
    const filter = b.quantizedConstant(ohwi(weight.codes as Int8Array, shape), [o, kh, kw, i], weight.scales, 0);
    const bias = biasConstant(o);
    const input = b.operandChannelsLast(plan.dequantize.input);
    const output = b.defineChannelsLast(plan.quantize.out);
    b.emit({ kind: 'conv2d', geometry: op.geometry, input, filter, bias, output }, minMax);
    return;
  }
  // [in, out] codes quantized along dim 1, read transposed.
  const shape = b.method.tensorNode(op.filter).shape;
  const filter = b.quantizedConstant(weight.codes, shape, weight.scales, 1);
  const bias = biasConstant(shape[1]!);
  const input = b.operand(plan.dequantize.input);
  const output = b.define(plan.quantize.out);
  b.emit({ kind: 'fullyConnected', input, filter, bias, output, flags: TRANSPOSE_WEIGHTS_FLAG }, minMax);
}

/**
 * PReLU over a slope that broadcasts against the input from its last dim,
 * written without its leading 1s (one slope per element of the last dim is
 * the vector ExecuTorch writes). An NCHW tensor held channels-last (a
 * convolution's result) stays so, its slopes moved with it.
 */
function emitPrelu(b: RunBuilder, op: Extract<MatchedOp, { kind: 'prelu' }>): void {
  const slopeNode = (input: number, values: Float32Array, dims: readonly number[], output: number): void => {
    const bytes = float32Bytes(values);
    const first = dims.findIndex((d) => d !== 1);
    const slope = b.constantValue(constantKey(bytes), bytes, first < 0 ? [1] : dims.slice(first));
    b.emit({ kind: 'binary', code: NodeUnion.XNNPReLU, input1: input, input2: slope, output });
  };
  if (op.slope.length === 1) {
    b.elementwise(op.input, op.out, (input, output) => slopeNode(input, op.slope, [1], output));
    return;
  }
  const shape = b.method.tensorNode(op.input).shape;
  const dims = [...new Array<number>(shape.length - op.slopeShape.length).fill(1), ...op.slopeShape];
  if (shape.length === 4 && b.staysChannelsLast([{ value: op.input }], op.out)) {
    const input = b.operandChannelsLast(op.input);
    slopeNode(input, ohwi(op.slope, dims), [dims[0]!, dims[2]!, dims[3]!, dims[1]!], b.defineChannelsLast(op.out));
    return;
  }
  slopeNode(b.operand(op.input), op.slope, dims, b.define(op.out));
}

/**
 * `inputs` joined along `axis` into `output`. One node joins at most
 * MAX_CONCATENATE_INPUTS; more are joined in groups first, taken from the end
 * and only as many as the last node needs, so most inputs are copied once.
 */
function emitConcatenate(b: RunBuilder, axis: number, inputs: readonly number[], output: number): void {
  let level = [...inputs];
  while (level.length > MAX_CONCATENATE_INPUTS) {
    const joined: number[] = [];
    let end = level.length;
    let count = level.length;
    while (count > MAX_CONCATENATE_INPUTS && end >= 2) {
      const size = Math.min(MAX_CONCATENATE_INPUTS, count - MAX_CONCATENATE_INPUTS + 1, end);
      const group = level.slice(end - size, end);
      const dims = [...b.dimsOf(group[0]!)];
      dims[axis] = group.reduce((sum, value) => sum + b.dimsOf(value)[axis]!, 0);
      const part = b.addValue({ dims, role: 'internal' });
      b.emit({ kind: 'concatenate', axis, inputs: group, output: part });
      joined.unshift(part);
      end -= size;
      count -= size - 1;
    }
    level = [...level.slice(0, end), ...joined];
  }
  b.emit({ kind: 'concatenate', axis, inputs: level, output });
}

// Weight transposes, dequantized constants and absorbed kernels have no node of their own.
const OP_EMITTERS: { readonly [K in MatchedOp['kind']]: Emitter<K> } = {
  weightTranspose: () => {},
  dequantizedConstant: () => {},
  absorbed: () => {},
  quantize: (b, op) => emitConvert(b, op),
  dequantize: (b, op) => emitConvert(b, op),
  prelu: (b, op) => emitPrelu(b, op),
  leakyRelu: (b, op) => {
    b.elementwise(op.input, op.out, (input, output) => b.emit({ kind: 'leakyRelu', slope: op.slope, input, output }));
  },
  elu: (b, op) => {
    b.elementwise(op.input, op.out, (input, output) => {
      if (!op.zeroToPositive) {
        b.emit({ kind: 'elu', alpha: op.alpha, input, output });
        return;
      }
      // -0 + +0 is +0; every other value passes unchanged.
      const elu = b.internalLike(output);
      b.emit({ kind: 'elu', alpha: op.alpha, input, output: elu });
      b.emit({ kind: 'binary', code: NodeUnion.XNNAdd, input1: elu, input2: b.scalarOperand({ scalar: 0 }), output });
    });
  },
  silu: (b, op) => {
    b.elementwise(op.input, op.out, (input, output) => {
      const gate = b.internalLike(output);
      b.emit({ kind: 'unary', code: NodeUnion.XNNSigmoid, input, output: gate });
      b.emit({ kind: 'binary', code: NodeUnion.XNNMultiply, input1: input, input2: gate, output });
    });
  },
  geluTanh: (b, op) => {
    b.elementwise(op.input, op.out, (input, output) => {
      const node = (body: (result: number) => XnnNodeSpec['body'], result = b.internalLike(output)): number => {
        b.emit(body(result));
        return result;
      };
      const scalar = (value: number): number => b.scalarOperand({ scalar: value });
      const square = node((r) => ({ kind: 'unary', code: NodeUnion.XNNSquare, input, output: r }));
      const cube = node((r) => ({ kind: 'binary', code: NodeUnion.XNNMultiply, input1: square, input2: input, output: r }));
      const term = node((r) => ({ kind: 'binary', code: NodeUnion.XNNMultiply, input1: cube, input2: scalar(0.044715), output: r }));
      const sum = node((r) => ({ kind: 'binary', code: NodeUnion.XNNAdd, input1: input, input2: term, output: r }));
      const inner = node((r) => ({
        kind: 'binary',
        code: NodeUnion.XNNMultiply,
        input1: sum,
        input2: scalar(Math.sqrt(2 / Math.PI)),
        output: r,
      }));
      const tanh = node((r) => ({ kind: 'unary', code: NodeUnion.XNNTanh, input: inner, output: r }));
      const gate = node((r) => ({ kind: 'binary', code: NodeUnion.XNNAdd, input1: tanh, input2: scalar(1), output: r }));
      const half = node((r) => ({ kind: 'binary', code: NodeUnion.XNNMultiply, input1: input, input2: scalar(0.5), output: r }));
      node(() => ({ kind: 'binary', code: NodeUnion.XNNMultiply, input1: half, input2: gate, output }), output);
    });
  },
  pow: (b, op) => {
    b.elementwise(op.input, op.out, (input, output) => {
      if (op.exponent === -1) {
        b.emit({ kind: 'binary', code: NodeUnion.XNNDiv, input1: b.scalarOperand({ scalar: 1 }), input2: input, output });
        return;
      }
      if (op.exponent === 2) {
        b.emit({ kind: 'unary', code: NodeUnion.XNNSquare, input, output });
        return;
      }
      // (x * x) * x, the order onnxruntime and PyTorch multiply in for a cube.
      const square = b.internalLike(output);
      b.emit({ kind: 'unary', code: NodeUnion.XNNSquare, input, output: square });
      b.emit({ kind: 'binary', code: NodeUnion.XNNMultiply, input1: square, input2: input, output });
    });
  },
  fullyConnected: (b, op, fused) => {
    const codes = quantizedCodes(b, op);
    if (codes !== undefined) {
      // 8da4w and 8da8w as export_llama writes them: per-token int8 activations, then the quantized weights.
      const input = b.operand(op.input);
      const quantized = b.addValue({ dims: b.method.tensorNode(op.input).shape, role: 'internal', quantization: { kind: 'perToken' } });
      b.emit({ kind: 'unary', code: NodeUnion.XNNConvert, input, output: quantized });
      const filter = quantizedFilter(b, codes);
      const bias = op.bias === undefined ? INVALID_VALUE_ID : b.operand(op.bias);
      b.emit({ kind: 'fullyConnected', input: quantized, filter, bias, output: result(b, fused, op.out), flags: 0 }, fused.minMax);
      return;
    }
    const input = b.operand(op.input);
    const filter = b.weightOperand(op.filter);
    const bias = op.bias === undefined ? INVALID_VALUE_ID : b.weightOperand(op.bias);
    const flags = op.filterIsTransposed ? TRANSPOSE_WEIGHTS_FLAG : 0;
    b.emit({ kind: 'fullyConnected', input, filter, bias, output: result(b, fused, op.out), flags }, fused.minMax);
  },
  binary: (b, op, fused) => {
    if (op.code !== NodeUnion.XNNBatchMatrixMultiply && b.staysChannelsLast([op.a, op.b], op.out)) {
      const [input1, input2] = [b.layoutOperand(op.a), b.layoutOperand(op.b)];
      b.emit({ kind: 'binary', code: op.code, input1, input2, output: b.defineChannelsLast(fused.out ?? op.out) }, fused.minMax);
      return;
    }
    const input1 = b.scalarOperand(op.a);
    const input2 = b.scalarOperand(op.b);
    b.emit({ kind: 'binary', code: op.code, input1, input2, output: result(b, fused, op.out) }, fused.minMax);
  },
  clamp: (b, op, fused) => {
    if (b.staysChannelsLast([{ value: op.input }], op.out)) {
      b.emit({ kind: 'unary', code: NodeUnion.XNNClamp, input: b.operandChannelsLast(op.input), output: b.defineChannelsLast(op.out) }, [
        op.min,
        op.max,
      ]);
      return;
    }
    b.emit({ kind: 'unary', code: NodeUnion.XNNClamp, input: b.operand(op.input), output: result(b, fused, op.out) }, [op.min, op.max]);
  },
  globalAvgPool: (b, op, fused) => {
    // XNNPACK pools NHWC input into [N, 1, 1, C], which is the kept-dims result channels-last.
    const input = b.operandChannelsLast(op.input);
    b.emit(
      { kind: 'unary', code: NodeUnion.XNNGlobalAvgPooling2d, input, output: b.defineChannelsLast(fused.out ?? op.out) },
      fused.minMax,
    );
  },
  pool2d: (b, op) => {
    const input = b.operandChannelsLast(op.input);
    b.emit({ kind: 'pool2d', code: op.code, window: op.window, input, output: b.defineChannelsLast(op.out) });
  },
  mean: (b, op) => {
    const dims = b.method.tensorNode(op.input).shape;
    const output = b.define(op.out);
    const { outer, size, inner } = op;
    const reshaped = (value: number, to: readonly number[]): number => {
      const into = b.addValue({ dims: to, role: 'internal' });
      b.emit({ kind: 'reshape', newShape: to, input: value, output: into });
      return into;
    };
    // Sizes that change per call (rows of a mean over the last dim) are the ones the reshape infers.
    const intoOutput = (value: number): void => b.emit({ kind: 'reshape', newShape: b.runtimeSizes(op.out), input: value, output });
    const viewed = (to: readonly number[]): number => {
      const input = b.operand(op.input);
      return dims.join() === to.join() ? input : reshaped(input, to);
    };
    if (size === 1) {
      intoOutput(b.operand(op.input));
      return;
    }
    // Unit weights make each product exact, so the sum is rounded as a plain
    // float32 sum and divided once, as a mean is computed elsewhere: rows by a
    // fully connected node, columns in order by a batch matrix product.
    const ones = float32Bytes(new Float32Array(size).fill(1));
    let sum: number;
    if (inner === 1) {
      // A fully connected node wants a batch of rows: a matrix or more.
      const rows = dims.length >= 2 && dims[dims.length - 1] === size ? dims : [outer, size];
      const input = viewed(rows);
      sum = b.addValue({ dims: [...rows.slice(0, -1), 1], role: 'internal' });
      const filter = b.constantValue(constantKey(ones), ones, [1, size]);
      b.emit({ kind: 'fullyConnected', input, filter, bias: INVALID_VALUE_ID, output: sum, flags: 0 });
    } else {
      const columns = viewed([1, size, inner]);
      sum = b.addValue({ dims: [1, 1, inner], role: 'internal' });
      const row = b.constantValue(constantKey(ones), ones, [1, 1, size]);
      b.emit({ kind: 'binary', code: NodeUnion.XNNBatchMatrixMultiply, input1: row, input2: columns, output: sum });
    }
    // The divide writes the output when it has the output's dims; otherwise a reshape follows it.
    const kept = b.dimsOf(sum).join() === b.dimsOf(output).join();
    const mean = kept ? output : b.addValue({ dims: b.dimsOf(sum), role: 'internal' });
    b.emit({ kind: 'binary', code: NodeUnion.XNNDiv, input1: sum, input2: b.scalarOperand({ scalar: size }), output: mean });
    if (!kept) intoOutput(mean);
  },
  gather: (b, op) => {
    const input = b.operand(op.input);
    const dims = b.dimsOf(input);
    const output = b.define(op.out);
    const piece = (start: number, length: number, into?: number): number => {
      const sizes = dims.map((d, k) => (k === op.axis ? length : d));
      const id = into ?? b.addValue({ dims: sizes, role: 'internal' });
      b.emit({ kind: 'slice', offsets: dims.map((_, k) => (k === op.axis ? start : 0)), sizes, input, output: id });
      return id;
    };
    if (op.pieces.length === 1) {
      piece(op.pieces[0]!.start, op.pieces[0]!.length, output);
      return;
    }
    emitConcatenate(
      b,
      op.axis,
      op.pieces.map((p) => piece(p.start, p.length)),
      output,
    );
  },
  unary: (b, op, fused) => {
    // Softmax normalises along the last dim, which channels-last would change.
    if (op.code !== NodeUnion.XNNSoftmax && b.staysChannelsLast([{ value: op.input }], op.out)) {
      b.emit({ kind: 'unary', code: op.code, input: b.operandChannelsLast(op.input), output: b.defineChannelsLast(op.out) });
      return;
    }
    b.emit({ kind: 'unary', code: op.code, input: b.operand(op.input), output: result(b, fused, op.out) });
  },
  transpose: (b, op, fused) => {
    b.emit({ kind: 'transpose', perm: op.perm, input: b.operand(op.input), output: result(b, fused, op.out) });
  },
  reshape: (b, op, fused) => {
    const input = b.operand(op.input);
    b.emit({ kind: 'reshape', newShape: b.runtimeSizes(op.out), input, output: result(b, fused, op.out) });
  },
  slice: (b, op, fused) => {
    const input = b.operand(op.input);
    b.emit({ kind: 'slice', offsets: op.offsets, sizes: b.runtimeSizes(op.out), input, output: result(b, fused, op.out) });
  },
  select: (b, op, fused) => {
    const input = b.operand(op.input);
    const shape = b.method.tensorNode(op.input).shape;
    const sizes = b.runtimeSizes(op.input).map((d, k) => (k === op.dim ? 1 : d));
    const offsets = shape.map((_, k) => (k === op.dim ? op.index : 0));
    const picked = b.addValue({ dims: shape.map((d, k) => (k === op.dim ? 1 : d)), role: 'internal' });
    b.emit({ kind: 'slice', offsets, sizes, input, output: picked });
    b.emit({ kind: 'reshape', newShape: b.runtimeSizes(op.out), input: picked, output: result(b, fused, op.out) });
  },
  concatenate: (b, op, fused) => {
    if (
      b.staysChannelsLast(
        op.inputs.map((value) => ({ value })),
        op.out,
      )
    ) {
      const inputs = op.inputs.map((index) => b.operandChannelsLast(index));
      emitConcatenate(b, NHWC_POSITION_OF_NCHW_DIM[op.axis]!, inputs, b.defineChannelsLast(op.out));
      return;
    }
    const inputs = op.inputs.map((index) => b.operand(index));
    emitConcatenate(b, op.axis, inputs, result(b, fused, op.out));
  },
  constantPad: (b, op, fused) => {
    if (op.before.length === 4 && b.staysChannelsLast([{ value: op.input }], op.out)) {
      // The padding of each NCHW dim moves to where that dim sits channels-last.
      const nhwc = (amounts: readonly number[]): number[] => {
        const out = [0, 0, 0, 0];
        amounts.forEach((amount, d) => (out[NHWC_POSITION_OF_NCHW_DIM[d]!] = amount));
        return out;
      };
      const input = b.operandChannelsLast(op.input);
      b.emit({
        kind: 'constantPad',
        before: nhwc(op.before),
        after: nhwc(op.after),
        value: op.value,
        input,
        output: b.defineChannelsLast(op.out),
      });
      return;
    }
    const input = b.operand(op.input);
    b.emit({ kind: 'constantPad', before: op.before, after: op.after, value: op.value, input, output: result(b, fused, op.out) });
  },
  convTranspose2d: (b, op, fused) => {
    const input = b.operandChannelsLast(op.input);
    const weight = b.method.tensorNode(op.weight);
    if (weight.origin.kind !== 'constant') throw new EtnaError('INTERNAL', 'xnnpack lowering: transposed conv weight is not a constant');
    const filterBytes = transposedConvFilter(weight.origin.constant, op.geometry.groups);
    const [, groupOut, kh, kw] = weight.shape as [number, number, number, number];
    const filter = b.constantValue(constantKey(filterBytes), filterBytes, [
      op.geometry.groups * groupOut,
      kh,
      kw,
      op.geometry.groupInputChannels,
    ]);
    const bias = op.bias === undefined ? INVALID_VALUE_ID : b.operand(op.bias);
    const output = b.defineChannelsLast(fused.out ?? op.out);
    b.emit({ kind: 'convTranspose2d', geometry: op.geometry, adjustment: op.adjustment, input, filter, bias, output }, fused.minMax);
  },
  resizeBilinear: (b, op) => {
    const [, , height, width] = b.method.tensorNode(op.out).shape as [number, number, number, number];
    const input = b.operandChannelsLast(op.input);
    const flags = op.alignCorners ? RESIZE_ALIGN_CORNERS : 0;
    b.emit({ kind: 'resizeBilinear', height, width, flags, input, output: b.defineChannelsLast(op.out) });
  },
  repeatPixels: (b, op) => {
    // Columns, then rows, each a broadcast multiply by ones: [N*H*W, 1, C] x [1, fw, 1], then
    // [N*H, 1, W*fw*C] x [1, fh, 1]. Exact, channels-last throughout, and the row copies are long.
    const [n, c, h, w] = b.method.tensorNode(op.input).shape as [number, number, number, number];
    const [fh, fw] = op.factors;
    const repeat = (input: number, dims: readonly [number, number], factor: number, output?: number): number => {
      const split = b.addValue({ dims: [dims[0], 1, dims[1]], role: 'internal' });
      b.emit({ kind: 'reshape', newShape: [dims[0], 1, dims[1]], input, output: split });
      const ones = float32Bytes(new Float32Array(factor).fill(1));
      const repeated = output ?? b.addValue({ dims: [dims[0], factor, dims[1]], role: 'internal' });
      b.emit({
        kind: 'binary',
        code: NodeUnion.XNNMultiply,
        input1: split,
        input2: b.constantValue(constantKey(ones), ones, [1, factor, 1]),
        output: repeated,
      });
      return repeated;
    };
    const columns = fw === 1 ? b.operandChannelsLast(op.input) : repeat(b.operandChannelsLast(op.input), [n * h * w, c], fw);
    const rows = repeat(columns, [n * h, w * fw * c], fh);
    b.emit({ kind: 'reshape', newShape: [n, h * fh, w * fw, c], input: rows, output: b.defineChannelsLast(op.out) });
  },
  conv2d: (b, op, fused) => {
    const input = b.operandChannelsLast(op.input);
    const weight = b.floatWeight(op.weight);
    const filterBytes = float32Bytes(ohwi(weight.values, weight.shape));
    const [o, i, kh, kw] = weight.shape as [number, number, number, number];
    const filter = b.constantValue(constantKey(filterBytes), filterBytes, [o, kh, kw, i]);
    const bias = op.bias === undefined ? INVALID_VALUE_ID : b.weightOperand(op.bias);
    const output = b.defineChannelsLast(fused.out ?? op.out);
    b.emit({ kind: 'conv2d', geometry: op.geometry, input, filter, bias, output }, fused.minMax);
  },
};

/** Adds the nodes of one matched op; `fusedOut`/`minMax` come from a clamp folded into it. */
export function emitOp(b: RunBuilder, op: MatchedOp, fusedOut: number | undefined, minMax: readonly [number, number] | undefined): void {
  const emitter = OP_EMITTERS[op.kind] as Emitter<MatchedOp['kind']>;
  emitter(b, op, { out: fusedOut, minMax });
}
