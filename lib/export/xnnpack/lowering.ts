// The XNNPACK lowering pass: every maximal run of consecutive instructions the
// delegate can execute becomes one XnnpackBackend payload and one
// DelegateCall (arguments: the run's inputs, then its outputs). Constants go
// to program named data under the SHA-256 of their bytes, so the same weight
// used by several delegates or methods is stored once and packed once.
import { createHash } from 'node:crypto';

import { EtnaError } from '../../errors.js';
import type { ConstantTensor, GraphInstruction, MethodGraph } from '../graph.js';
import type { LoweringContext, LoweringPass } from '../lowering.js';
import { NodeUnion } from '../../generated/xnnpack/xnnpack_generated.js';
import { fuseActivationPatterns } from './activation-patterns.js';
import {
  isComputeOp,
  matchInstruction,
  operandsRead,
  type DequantizedConstant,
  type MatchedOp,
  type Operand,
  type TensorQuantization,
} from './partition.js';
import {
  BATCH_MATMUL_TRANSPOSE_B,
  INVALID_VALUE_ID,
  RESIZE_ALIGN_CORNERS,
  serializeXnnPayload,
  TRANSPOSE_WEIGHTS_FLAG,
  type XnnGraphSpec,
  type XnnNodeSpec,
  type XnnQuantization,
  type XnnValueSpec,
} from './payload.js';
import { packInt4Rows } from '../quantize.js';

export const XNNPACK_BACKEND_ID = 'XnnpackBackend';
/** XNNPACK may read up to 16 bytes past a tensor; planned arenas carry this much slack. */
export const XNNPACK_ARENA_PADDING = 64;
/** Alignment of named-data blobs holding delegate constants. */
export const XNNPACK_CONSTANT_ALIGNMENT = 64;

export interface XnnpackLoweringOptions {
  /** Runs with fewer compute nodes (linear, arithmetic, activations, softmax, conv, bmm) stay portable. Default 1. */
  minComputeNodes?: number;
}

/** Lowercase hex SHA-256: the named-data key of a constant. */
export function constantKey(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

const keyCache = new WeakMap<ConstantTensor, string>();

function keyOfConstant(constant: ConstantTensor): string {
  let key = keyCache.get(constant);
  if (key === undefined) {
    key = constantKey(constant.bytes);
    keyCache.set(constant, key);
  }
  return key;
}

function float32Bytes(values: Float32Array): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

// Conv filters go from the method's [O, I, KH, KW] to the delegate's [O, KH, KW, I].
function ohwi<T extends Float32Array | Int8Array>(source: T, shape: readonly number[]): T {
  const [o, i, kh, kw] = shape as [number, number, number, number];
  const target = source.slice() as T;
  for (let oc = 0; oc < o; oc++) {
    for (let ic = 0; ic < i; ic++) {
      for (let y = 0; y < kh; y++) {
        for (let x = 0; x < kw; x++) target[((oc * kh + y) * kw + x) * i + ic] = source[((oc * i + ic) * kh + y) * kw + x]!;
      }
    }
  }
  return target;
}

/** The codes of a dequantized constant, as stored (int8 weights or int32 biases). */
function codesOf(constant: ConstantTensor): Int8Array | Int32Array {
  const bytes = constant.bytes.slice();
  return constant.dtype === 'int8' ? new Int8Array(bytes.buffer) : new Int32Array(bytes.buffer);
}

/** A dequantized constant's float32 values, code * scale of its channel along `axis`, as the dequantize kernel computes them. */
function dequantizedValues(constant: ConstantTensor, op: DequantizedConstant): Float32Array {
  const codes = codesOf(constant);
  const inner = constant.shape.slice(op.axis + 1).reduce((a, b) => a * b, 1);
  const channels = constant.shape[op.axis]!;
  // float(code) * scale in float32, as the kernel computes it (an int32 code past 2^24 rounds first).
  return Float32Array.from(codes, (code, i) => Math.fround(Math.fround(code) * op.scales[Math.floor(i / inner) % channels]!));
}

/** The XNNPACK form of an 8-bit static quantization: every value is qint8, a uint8 one shifted by -128 (the same real values). */
function qint8Of(q: TensorQuantization): XnnQuantization {
  return { kind: 'perTensor', datatype: 'qint8', scale: q.scale, zeroPoint: q.zeroPoint - (q.dtype === 'uint8' ? 128 : 0) };
}

/** A convolution or linear over 8-bit codes: its input's dequantize and its output's quantize fold into it. */
interface QuantizedProduct {
  readonly dequantize: Extract<MatchedOp, { kind: 'dequantize' }>;
  readonly quantize: Extract<MatchedOp, { kind: 'quantize' }>;
}

// Transposed conv filters go from the method's [I, O / G, KH, KW] to the delegate's [O, KH, KW, I / G].
function transposedConvFilter(constant: ConstantTensor, groups: number): Uint8Array {
  const [inChannels, groupOut, kh, kw] = constant.shape as [number, number, number, number];
  const groupIn = inChannels / groups;
  const source = new Float32Array(constant.bytes.slice().buffer);
  const target = new Float32Array(source.length);
  for (let g = 0; g < groups; g++) {
    for (let oc = 0; oc < groupOut; oc++) {
      for (let ic = 0; ic < groupIn; ic++) {
        for (let y = 0; y < kh; y++) {
          for (let x = 0; x < kw; x++) {
            target[(((g * groupOut + oc) * kh + y) * kw + x) * groupIn + ic] =
              source[(((g * groupIn + ic) * groupOut + oc) * kh + y) * kw + x]!;
          }
        }
      }
    }
  }
  return float32Bytes(target);
}

const NCHW_TO_NHWC = [0, 2, 3, 1] as const;
/** Where each NCHW dim sits in NHWC. */
const NHWC_POSITION_OF_NCHW_DIM = [0, 3, 1, 2] as const;
const NHWC_TO_NCHW = [0, 3, 1, 2] as const;

interface RunValue {
  dims: readonly number[];
  quantization?: XnnQuantization;
  role: XnnValueSpec['role'];
  constant?: number;
  /** Method value behind an external input or output. */
  methodValue?: number;
}

/** Builds the delegate graph of one run. */
class RunBuilder {
  private readonly values: RunValue[] = [];
  private readonly nodes: XnnNodeSpec[] = [];
  private readonly inputs: number[] = [];
  private readonly outputs: number[] = [];
  private readonly constants: { key: string; size: number }[] = [];
  private readonly constantIds = new Map<string, number>();
  private readonly plain = new Map<number, number>();
  private readonly channelsLast = new Map<number, number>();

  /** External values of uint8 method values, which the delegate holds as qint8 and converts at its edges. */
  private readonly externalIds = new Map<number, number>();
  /** Converts from a uint8 output's qint8 value to that output, emitted once every node is. */
  private readonly pendingConverts: [number, number][] = [];

  constructor(
    private readonly method: MethodGraph,
    private readonly context: LoweringContext,
    /** Values the run produces that something after it reads. */
    private readonly runOutputs: ReadonlySet<number>,
    private readonly debugHandle: () => number,
    /** The quantization of each 8-bit method value the run reads or writes. */
    private readonly quantizations: ReadonlyMap<number, TensorQuantization> = new Map(),
    private readonly dequantizedConstantOf: ReadonlyMap<number, DequantizedConstant> = new Map(),
  ) {}

  /** The delegate quantization of method value `index`, when it is an 8-bit tensor. */
  private quantizationOf(index: number): XnnQuantization | undefined {
    const q = this.quantizations.get(index);
    return q === undefined ? undefined : qint8Of(q);
  }

  private addValue(value: RunValue): number {
    this.values.push(value);
    return this.values.length - 1;
  }

  private constantValue(key: string, bytes: Uint8Array, dims: readonly number[], quantization?: XnnQuantization): number {
    // Equal codes under different scales are different constants.
    const scales =
      quantization?.kind === 'int4Groups'
        ? constantKey(
            new Uint8Array(quantization.scalesBf16.buffer, quantization.scalesBf16.byteOffset, quantization.scalesBf16.byteLength),
          )
        : quantization?.kind === 'perChannel'
          ? `${quantization.channelDim}/${constantKey(float32Bytes(quantization.scales))}`
          : quantization?.kind === 'perTensor'
            ? `${quantization.scale}/${quantization.zeroPoint}`
            : 'fp32';
    const id = `${key}/${dims.join('x')}/${quantization?.kind ?? ''}/${scales}`;
    let valueId = this.constantIds.get(id);
    if (valueId === undefined) {
      this.context.addNamedData(key, bytes, XNNPACK_CONSTANT_ALIGNMENT);
      let index = this.constants.findIndex((c) => c.key === key) + 1;
      if (index === 0) {
        this.constants.push({ key, size: bytes.byteLength });
        index = this.constants.length;
      }
      valueId = this.addValue({ dims, role: 'constant', constant: index, ...(quantization === undefined ? {} : { quantization }) });
      this.constantIds.set(id, valueId);
    }
    return valueId;
  }

  private emit(body: XnnNodeSpec['body'], minMax?: readonly [number, number]): void {
    const node: XnnNodeSpec = { body, debugHandle: this.debugHandle() };
    if (minMax !== undefined) node.minMax = minMax;
    this.nodes.push(node);
  }

  /** A fresh value for method value `index` in its own layout. */
  define(index: number): number {
    const node = this.method.tensorNode(index);
    const isOutput = this.runOutputs.has(index);
    const quantization = this.quantizationOf(index);
    if (isOutput) this.outputs.push(index);
    if (isOutput && node.dtype === 'uint8') {
      // Held as qint8; the external uint8 output is converted from it through fp32 (exact: whole steps of one scale).
      const id = this.addValue({ dims: node.shape, role: 'internal', quantization: quantization! });
      const real = this.addValue({ dims: node.shape, role: 'internal' });
      const external = this.addValue({ dims: node.shape, role: 'output', methodValue: index, quantization: this.uint8Of(index) });
      this.externalIds.set(index, external);
      this.pendingConverts.push([id, real], [real, external]);
      this.plain.set(index, id);
      return id;
    }
    const id = this.addValue({
      dims: node.shape,
      role: isOutput ? 'output' : 'internal',
      methodValue: index,
      ...(quantization === undefined ? {} : { quantization }),
    });
    this.plain.set(index, id);
    return id;
  }

  private uint8Of(index: number): XnnQuantization {
    const q = this.quantizations.get(index)!;
    return { kind: 'perTensor', datatype: 'quint8', scale: q.scale, zeroPoint: q.zeroPoint };
  }

  /** A fresh channels-last value holding method value `index` (an NCHW activation). */
  defineChannelsLast(index: number): number {
    const [n, c, h, w] = this.method.tensorNode(index).shape as [number, number, number, number];
    const quantization = this.quantizationOf(index);
    const id = this.addValue({ dims: [n, h, w, c], role: 'internal', ...(quantization === undefined ? {} : { quantization }) });
    this.channelsLast.set(index, id);
    return id;
  }

  /** The delegate value holding method value `index` in its own layout. */
  operand(index: number): number {
    const known = this.plain.get(index);
    if (known !== undefined) return known;
    const nhwc = this.channelsLast.get(index);
    if (nhwc !== undefined) {
      const id = this.define(index);
      this.emitLayoutChange(index, nhwc, id, NHWC_TO_NCHW);
      return id;
    }
    const node = this.method.tensorNode(index);
    if (node.origin.kind === 'constant') {
      const id = this.constantValue(keyOfConstant(node.origin.constant), node.origin.constant.bytes, node.shape);
      this.plain.set(index, id);
      return id;
    }
    const quantization = this.quantizationOf(index);
    this.inputs.push(index);
    if (node.dtype === 'uint8' && quantization !== undefined) {
      // A uint8 input becomes the qint8 value the delegate computes with, through fp32 (exact).
      const external = this.addValue({ dims: node.shape, role: 'input', methodValue: index, quantization: this.uint8Of(index) });
      const real = this.addValue({ dims: node.shape, role: 'internal' });
      const id = this.addValue({ dims: node.shape, role: 'internal', quantization });
      this.emit({ kind: 'unary', code: NodeUnion.XNNConvert, input: external, output: real });
      this.emit({ kind: 'unary', code: NodeUnion.XNNConvert, input: real, output: id });
      this.externalIds.set(index, external);
      this.plain.set(index, id);
      return id;
    }
    const id = this.addValue({
      dims: node.shape,
      role: 'input',
      methodValue: index,
      ...(quantization === undefined ? {} : { quantization }),
    });
    this.plain.set(index, id);
    return id;
  }

  /**
   * Whether an elementwise op on `operands` runs channels-last: one operand
   * is held only channels-last (a convolution or pooling result) and every
   * other one is rank 4 too or a single element, so broadcasting reads the
   * same in either layout. That keeps activations between convolutions out
   * of layout transposes.
   */
  private staysChannelsLast(operands: readonly Operand[], out: number): boolean {
    const values = operands.flatMap((operand) => ('value' in operand ? [operand.value] : []));
    if (this.method.tensorNode(out).shape.length !== 4) return false;
    if (!values.some((index) => this.channelsLast.has(index) && !this.plain.has(index))) return false;
    return values.every((index) => {
      const shape = this.method.tensorNode(index).shape;
      return shape.length === 4 || shape.every((d) => d === 1);
    });
  }

  /** A channels-last operand of an elementwise op (single elements stay as they are). */
  private layoutOperand(operand: Operand): number {
    if ('value' in operand && this.method.tensorNode(operand.value).shape.length === 4) return this.operandChannelsLast(operand.value);
    return this.scalarOperand(operand);
  }

  /** The delegate value holding method value `index` channels-last. */
  operandChannelsLast(index: number): number {
    const known = this.channelsLast.get(index);
    if (known !== undefined) return known;
    const source = this.operand(index);
    const id = this.defineChannelsLast(index);
    this.emitLayoutChange(index, source, id, NCHW_TO_NHWC);
    return id;
  }

  /**
   * Moves method value `index` between NCHW and NHWC. With one channel, or
   * one pixel, both layouts hold the same bytes: a reshape, not a transpose.
   */
  private emitLayoutChange(index: number, input: number, output: number, perm: readonly number[]): void {
    const node = this.method.tensorNode(index);
    const [, c, h, w] = node.shape as [number, number, number, number];
    const dynamic = node.dynamicDims ?? [];
    if ((c === 1 || h * w === 1) && dynamic.length <= 1) {
      // A dim whose size changes per call is the one the delegate infers (0).
      const [dn, dc, dh, dw] = [0, 1, 2, 3].map((d) => (dynamic.includes(d) ? 0 : node.shape[d]!));
      const newShape = perm === NCHW_TO_NHWC ? [dn, dh, dw, dc] : [dn, dc, dh, dw];
      this.emit({ kind: 'reshape', newShape, input, output });
      return;
    }
    this.emit({ kind: 'transpose', perm, input, output });
  }

  /**
   * bmm(a, permute(x, perm)) as bmm(a, permute(x, perm')) with the second
   * operand transposed, perm' being perm with its last two entries swapped:
   * when perm' keeps x's innermost dim innermost, the copy moves whole rows
   * instead of gathering single elements.
   */
  addTransposedBatchMatmul(op: Extract<MatchedOp, { kind: 'binary' }>, transpose: Extract<MatchedOp, { kind: 'transpose' }>): void {
    const r = transpose.perm.length;
    const swapLast = <T>(list: readonly T[]): T[] => [...list.slice(0, r - 2), list[r - 1]!, list[r - 2]!];
    const rows = this.addValue({ dims: swapLast(this.method.tensorNode(transpose.out).shape), role: 'internal' });
    this.emit({ kind: 'transpose', perm: swapLast(transpose.perm), input: this.operand(transpose.input), output: rows });
    const input1 = this.scalarOperand(op.a);
    this.emit({
      kind: 'binary',
      code: NodeUnion.XNNBatchMatrixMultiply,
      input1,
      input2: rows,
      output: this.define(op.out),
      flags: BATCH_MATMUL_TRANSPOSE_B,
    });
  }

  /**
   * Method value `index`'s shape with every dim whose size changes per call
   * as 0, which a reshape reads as "infer" (the partitioner leaves at most
   * one) and a slice as "to the end".
   */
  private runtimeSizes(index: number): number[] {
    const node = this.method.tensorNode(index);
    return node.shape.map((size, d) => (node.dynamicDims?.includes(d) ? 0 : size));
  }

  private scalarOperand(operand: Operand): number {
    if ('value' in operand) return this.operand(operand.value);
    const bytes = float32Bytes(new Float32Array([operand.scalar]));
    return this.constantValue(constantKey(bytes), bytes, [1]);
  }

  /**
   * An elementwise op of one input, channels-last when its input is held so:
   * `emitOn(input, output)` emits its nodes.
   */
  private elementwise(input: number, out: number, emitOn: (input: number, output: number) => void): void {
    if (this.staysChannelsLast([{ value: input }], out)) emitOn(this.operandChannelsLast(input), this.defineChannelsLast(out));
    else emitOn(this.operand(input), this.define(out));
  }

  private internalLike(value: number): number {
    return this.addValue({ dims: this.values[value]!.dims, role: 'internal' });
  }

  /** A constant quantized per channel along `channelDim`: codes as stored, one scale per channel. */
  private quantizedConstant(codes: Int8Array | Int32Array, dims: readonly number[], scales: Float32Array, channelDim: number): number {
    const bytes = new Uint8Array(codes.buffer, codes.byteOffset, codes.byteLength);
    const datatype = codes instanceof Int8Array ? 'qcint8' : 'qcint32';
    return this.constantValue(constantKey(bytes), bytes, dims, { kind: 'perChannel', datatype, scales, channelDim });
  }

  /** The stored codes a dequantized constant reads. */
  private sourceOf(dequantized: DequantizedConstant): ConstantTensor {
    const source = this.method.tensorNode(dequantized.source);
    if (source.origin.kind !== 'constant') throw new EtnaError('INTERNAL', 'xnnpack lowering: dequantized codes are not a constant');
    return source.origin.constant;
  }

  /** A weight or bias: float32 bytes of a constant, or of a dequantized one computed here. */
  private floatWeight(index: number): { values: Float32Array; shape: readonly number[] } {
    const node = this.method.tensorNode(index);
    const dequantized = this.dequantizedConstantOf.get(index);
    if (dequantized !== undefined) return { values: dequantizedValues(this.sourceOf(dequantized), dequantized), shape: node.shape };
    if (node.origin.kind !== 'constant') throw new EtnaError('INTERNAL', 'xnnpack lowering: a weight is not a constant');
    return { values: new Float32Array(node.origin.constant.bytes.slice().buffer), shape: node.shape };
  }

  /** A float32 weight or bias operand in its method layout. */
  private weightOperand(index: number): number {
    if (!this.dequantizedConstantOf.has(index)) return this.operand(index);
    const { values, shape } = this.floatWeight(index);
    const bytes = float32Bytes(values);
    return this.constantValue(constantKey(bytes), bytes, shape);
  }

  /** The int8 codes and per-channel scales behind a dequantized weight or bias. */
  private codes(index: number): { codes: Int8Array | Int32Array; scales: Float32Array } {
    const dequantized = this.dequantizedConstantOf.get(index)!;
    return { codes: codesOf(this.sourceOf(dequantized)), scales: dequantized.scales };
  }

  /**
   * A convolution or linear over 8-bit codes: qint8 input (the dequantize's
   * input), qcint8 filter per output channel, qcint32 bias whose scales are
   * input scale x filter scale, qint8 output (the quantize's output), the
   * requantization XNNPACK does (fp32 multiplier, ties to even).
   */
  addQuantizedProduct(
    op: Extract<MatchedOp, { kind: 'conv2d' | 'fullyConnected' }>,
    plan: QuantizedProduct,
    minMax?: readonly [number, number],
  ): void {
    const inputScale = qint8Of(plan.dequantize) as Extract<XnnQuantization, { kind: 'perTensor' }>;
    const weightIndex = op.kind === 'conv2d' ? op.weight : op.filter;
    const weight = this.codes(weightIndex);
    const biasConstant = (outChannels: number): number => {
      if (op.bias === undefined) return INVALID_VALUE_ID;
      const { codes } = this.codes(op.bias);
      const scales = Float32Array.from({ length: outChannels }, (_, c) => Math.fround(inputScale.scale * weight.scales[c]!));
      return this.quantizedConstant(codes, [outChannels], scales, 0);
    };
    if (op.kind === 'conv2d') {
      const shape = this.method.tensorNode(op.weight).shape;
      const [o, i, kh, kw] = shape as [number, number, number, number];
      const filter = this.quantizedConstant(ohwi(weight.codes as Int8Array, shape), [o, kh, kw, i], weight.scales, 0);
      const bias = biasConstant(o);
      const input = this.operandChannelsLast(plan.dequantize.input);
      const output = this.defineChannelsLast(plan.quantize.out);
      this.emit({ kind: 'conv2d', geometry: op.geometry, input, filter, bias, output }, minMax);
      return;
    }
    // [in, out] codes quantized along dim 1, read transposed.
    const shape = this.method.tensorNode(op.filter).shape;
    const filter = this.quantizedConstant(weight.codes, shape, weight.scales, 1);
    const bias = biasConstant(shape[1]!);
    const input = this.operand(plan.dequantize.input);
    const output = this.define(plan.quantize.out);
    this.emit({ kind: 'fullyConnected', input, filter, bias, output, flags: TRANSPOSE_WEIGHTS_FLAG }, minMax);
  }

  private prelu(op: Extract<MatchedOp, { kind: 'prelu' }>): void {
    const bytes = float32Bytes(op.slope);
    const slope = this.constantValue(constantKey(bytes), bytes, [op.slope.length]);
    const rank = this.method.tensorNode(op.input).shape.length;
    // XNNPACK reads one slope per element of the last dim: NCHW channels go channels-last.
    if (op.channelDim === 1 && rank === 4) {
      this.emit({
        kind: 'binary',
        code: NodeUnion.XNNPReLU,
        input1: this.operandChannelsLast(op.input),
        input2: slope,
        output: this.defineChannelsLast(op.out),
      });
      return;
    }
    if (op.channelDim !== undefined) {
      this.emit({ kind: 'binary', code: NodeUnion.XNNPReLU, input1: this.operand(op.input), input2: slope, output: this.define(op.out) });
      return;
    }
    this.elementwise(op.input, op.out, (input, output) =>
      this.emit({ kind: 'binary', code: NodeUnion.XNNPReLU, input1: input, input2: slope, output }),
    );
  }

  /** Adds one matched op; `fusedOut`/`minMax` come from a clamp folded into it. */
  add(op: MatchedOp, fusedOut: number | undefined, minMax: readonly [number, number] | undefined): void {
    const resultOf = (out: number): number => this.define(fusedOut ?? out);
    switch (op.kind) {
      case 'weightTranspose':
      case 'dequantizedConstant':
      case 'absorbed':
        return;
      case 'quantize':
      case 'dequantize':
        this.elementwise(op.input, op.out, (input, output) => this.emit({ kind: 'unary', code: NodeUnion.XNNConvert, input, output }));
        return;
      case 'prelu':
        this.prelu(op);
        return;
      case 'leakyRelu':
        this.elementwise(op.input, op.out, (input, output) => this.emit({ kind: 'leakyRelu', slope: op.slope, input, output }));
        return;
      case 'elu':
        this.elementwise(op.input, op.out, (input, output) => {
          if (!op.zeroToPositive) {
            this.emit({ kind: 'elu', alpha: op.alpha, input, output });
            return;
          }
          // -0 + +0 is +0; every other value passes unchanged.
          const elu = this.internalLike(output);
          this.emit({ kind: 'elu', alpha: op.alpha, input, output: elu });
          this.emit({ kind: 'binary', code: NodeUnion.XNNAdd, input1: elu, input2: this.scalarOperand({ scalar: 0 }), output });
        });
        return;
      case 'silu':
        this.elementwise(op.input, op.out, (input, output) => {
          const gate = this.internalLike(output);
          this.emit({ kind: 'unary', code: NodeUnion.XNNSigmoid, input, output: gate });
          this.emit({ kind: 'binary', code: NodeUnion.XNNMultiply, input1: input, input2: gate, output });
        });
        return;
      case 'geluTanh':
        this.elementwise(op.input, op.out, (input, output) => {
          const node = (body: (result: number) => XnnNodeSpec['body'], result = this.internalLike(output)): number => {
            this.emit(body(result));
            return result;
          };
          const scalar = (value: number): number => this.scalarOperand({ scalar: value });
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
        return;
      case 'pow':
        this.elementwise(op.input, op.out, (input, output) => {
          if (op.exponent === -1) {
            this.emit({ kind: 'binary', code: NodeUnion.XNNDiv, input1: this.scalarOperand({ scalar: 1 }), input2: input, output });
            return;
          }
          if (op.exponent === 2) {
            this.emit({ kind: 'unary', code: NodeUnion.XNNSquare, input, output });
            return;
          }
          // (x * x) * x, the order onnxruntime and PyTorch multiply in for a cube.
          const square = this.internalLike(output);
          this.emit({ kind: 'unary', code: NodeUnion.XNNSquare, input, output: square });
          this.emit({ kind: 'binary', code: NodeUnion.XNNMultiply, input1: square, input2: input, output });
        });
        return;
      case 'fullyConnected': {
        const weight = this.method.tensorNode(op.filter).origin;
        const int4 = weight.kind === 'constant' && !op.filterIsTransposed ? weight.constant.int4Groups : undefined;
        if (int4 !== undefined) {
          // 8da4w as export_llama writes it: per-token int8 activations, then 4-bit group-quantized weights.
          const input = this.operand(op.input);
          const quantized = this.addValue({
            dims: this.method.tensorNode(op.input).shape,
            role: 'internal',
            quantization: { kind: 'perToken' },
          });
          this.emit({ kind: 'unary', code: NodeUnion.XNNConvert, input, output: quantized });
          const codes = packInt4Rows(int4);
          const filter = this.constantValue(constantKey(codes), codes, [int4.outFeatures, int4.inFeatures], {
            kind: 'int4Groups',
            groupSize: int4.groupSize,
            scalesBf16: int4.scalesBf16,
          });
          const bias = op.bias === undefined ? INVALID_VALUE_ID : this.operand(op.bias);
          this.emit({ kind: 'fullyConnected', input: quantized, filter, bias, output: resultOf(op.out), flags: 0 }, minMax);
          return;
        }
        const input = this.operand(op.input);
        const filter = this.weightOperand(op.filter);
        const bias = op.bias === undefined ? INVALID_VALUE_ID : this.weightOperand(op.bias);
        const flags = op.filterIsTransposed ? TRANSPOSE_WEIGHTS_FLAG : 0;
        this.emit({ kind: 'fullyConnected', input, filter, bias, output: resultOf(op.out), flags }, minMax);
        return;
      }
      case 'binary': {
        if (op.code !== NodeUnion.XNNBatchMatrixMultiply && this.staysChannelsLast([op.a, op.b], op.out)) {
          const [input1, input2] = [this.layoutOperand(op.a), this.layoutOperand(op.b)];
          this.emit({ kind: 'binary', code: op.code, input1, input2, output: this.defineChannelsLast(fusedOut ?? op.out) }, minMax);
          return;
        }
        const input1 = this.scalarOperand(op.a);
        const input2 = this.scalarOperand(op.b);
        this.emit({ kind: 'binary', code: op.code, input1, input2, output: resultOf(op.out) }, minMax);
        return;
      }
      case 'clamp':
        if (this.staysChannelsLast([{ value: op.input }], op.out)) {
          this.emit(
            { kind: 'unary', code: NodeUnion.XNNClamp, input: this.operandChannelsLast(op.input), output: this.defineChannelsLast(op.out) },
            [op.min, op.max],
          );
          return;
        }
        this.emit({ kind: 'unary', code: NodeUnion.XNNClamp, input: this.operand(op.input), output: resultOf(op.out) }, [op.min, op.max]);
        return;
      case 'globalAvgPool': {
        // XNNPACK pools NHWC input into [N, 1, 1, C], which is the kept-dims result channels-last.
        const input = this.operandChannelsLast(op.input);
        this.emit(
          { kind: 'unary', code: NodeUnion.XNNGlobalAvgPooling2d, input, output: this.defineChannelsLast(fusedOut ?? op.out) },
          minMax,
        );
        return;
      }
      case 'pool2d': {
        const input = this.operandChannelsLast(op.input);
        this.emit({ kind: 'pool2d', code: op.code, window: op.window, input, output: this.defineChannelsLast(op.out) });
        return;
      }
      case 'meanLastDim': {
        // Unit weights make each product exact, so the sum is rounded as a plain
        // float32 sum and divided once, as a mean is computed elsewhere.
        const shape = this.method.tensorNode(op.input).shape;
        const count = shape[shape.length - 1]!;
        const ones = float32Bytes(new Float32Array(count).fill(1));
        const sum = this.addValue({ dims: [...shape.slice(0, -1), 1], role: 'internal' });
        const filter = this.constantValue(constantKey(ones), ones, [1, count]);
        this.emit({ kind: 'fullyConnected', input: this.operand(op.input), filter, bias: INVALID_VALUE_ID, output: sum, flags: 0 });
        this.emit({
          kind: 'binary',
          code: NodeUnion.XNNDiv,
          input1: sum,
          input2: this.scalarOperand({ scalar: count }),
          output: resultOf(op.out),
        });
        return;
      }
      case 'unary':
        // Softmax normalises along the last dim, which channels-last would change.
        if (op.code !== NodeUnion.XNNSoftmax && this.staysChannelsLast([{ value: op.input }], op.out)) {
          this.emit({ kind: 'unary', code: op.code, input: this.operandChannelsLast(op.input), output: this.defineChannelsLast(op.out) });
          return;
        }
        this.emit({ kind: 'unary', code: op.code, input: this.operand(op.input), output: resultOf(op.out) });
        return;
      case 'transpose':
        this.emit({ kind: 'transpose', perm: op.perm, input: this.operand(op.input), output: resultOf(op.out) });
        return;
      case 'reshape': {
        const input = this.operand(op.input);
        this.emit({ kind: 'reshape', newShape: this.runtimeSizes(op.out), input, output: resultOf(op.out) });
        return;
      }
      case 'slice': {
        const input = this.operand(op.input);
        this.emit({ kind: 'slice', offsets: op.offsets, sizes: this.runtimeSizes(op.out), input, output: resultOf(op.out) });
        return;
      }
      case 'select': {
        const input = this.operand(op.input);
        const shape = this.method.tensorNode(op.input).shape;
        const sizes = this.runtimeSizes(op.input).map((d, k) => (k === op.dim ? 1 : d));
        const offsets = shape.map((_, k) => (k === op.dim ? op.index : 0));
        const picked = this.addValue({ dims: shape.map((d, k) => (k === op.dim ? 1 : d)), role: 'internal' });
        this.emit({ kind: 'slice', offsets, sizes, input, output: picked });
        this.emit({ kind: 'reshape', newShape: this.runtimeSizes(op.out), input: picked, output: resultOf(op.out) });
        return;
      }
      case 'concatenate': {
        if (
          this.staysChannelsLast(
            op.inputs.map((value) => ({ value })),
            op.out,
          )
        ) {
          const inputs = op.inputs.map((index) => this.operandChannelsLast(index));
          this.emit({ kind: 'concatenate', axis: NHWC_POSITION_OF_NCHW_DIM[op.axis]!, inputs, output: this.defineChannelsLast(op.out) });
          return;
        }
        const inputs = op.inputs.map((index) => this.operand(index));
        this.emit({ kind: 'concatenate', axis: op.axis, inputs, output: resultOf(op.out) });
        return;
      }
      case 'constantPad': {
        const input = this.operand(op.input);
        this.emit({ kind: 'constantPad', before: op.before, after: op.after, value: op.value, input, output: resultOf(op.out) });
        return;
      }
      case 'convTranspose2d': {
        const input = this.operandChannelsLast(op.input);
        const weight = this.method.tensorNode(op.weight);
        if (weight.origin.kind !== 'constant')
          throw new EtnaError('INTERNAL', 'xnnpack lowering: transposed conv weight is not a constant');
        const filterBytes = transposedConvFilter(weight.origin.constant, op.geometry.groups);
        const [, groupOut, kh, kw] = weight.shape as [number, number, number, number];
        const filter = this.constantValue(constantKey(filterBytes), filterBytes, [
          op.geometry.groups * groupOut,
          kh,
          kw,
          op.geometry.groupInputChannels,
        ]);
        const bias = op.bias === undefined ? INVALID_VALUE_ID : this.operand(op.bias);
        const output = this.defineChannelsLast(fusedOut ?? op.out);
        this.emit({ kind: 'convTranspose2d', geometry: op.geometry, adjustment: op.adjustment, input, filter, bias, output }, minMax);
        return;
      }
      case 'resizeBilinear': {
        const [, , height, width] = this.method.tensorNode(op.out).shape as [number, number, number, number];
        const input = this.operandChannelsLast(op.input);
        const flags = op.alignCorners ? RESIZE_ALIGN_CORNERS : 0;
        this.emit({ kind: 'resizeBilinear', height, width, flags, input, output: this.defineChannelsLast(op.out) });
        return;
      }
      case 'repeatPixels': {
        // Columns, then rows, each a broadcast multiply by ones: [N*H*W, 1, C] x [1, fw, 1], then
        // [N*H, 1, W*fw*C] x [1, fh, 1]. Exact, channels-last throughout, and the row copies are long.
        const [n, c, h, w] = this.method.tensorNode(op.input).shape as [number, number, number, number];
        const [fh, fw] = op.factors;
        const repeat = (input: number, dims: readonly [number, number], factor: number, output?: number): number => {
          const split = this.addValue({ dims: [dims[0], 1, dims[1]], role: 'internal' });
          this.emit({ kind: 'reshape', newShape: [dims[0], 1, dims[1]], input, output: split });
          const ones = float32Bytes(new Float32Array(factor).fill(1));
          const repeated = output ?? this.addValue({ dims: [dims[0], factor, dims[1]], role: 'internal' });
          this.emit({
            kind: 'binary',
            code: NodeUnion.XNNMultiply,
            input1: split,
            input2: this.constantValue(constantKey(ones), ones, [1, factor, 1]),
            output: repeated,
          });
          return repeated;
        };
        const columns = fw === 1 ? this.operandChannelsLast(op.input) : repeat(this.operandChannelsLast(op.input), [n * h * w, c], fw);
        const rows = repeat(columns, [n * h, w * fw * c], fh);
        this.emit({ kind: 'reshape', newShape: [n, h * fh, w * fw, c], input: rows, output: this.defineChannelsLast(op.out) });
        return;
      }
      case 'conv2d': {
        const input = this.operandChannelsLast(op.input);
        const weight = this.floatWeight(op.weight);
        const filterBytes = float32Bytes(ohwi(weight.values, weight.shape));
        const [o, i, kh, kw] = weight.shape as [number, number, number, number];
        const filter = this.constantValue(constantKey(filterBytes), filterBytes, [o, kh, kw, i]);
        const bias = op.bias === undefined ? INVALID_VALUE_ID : this.weightOperand(op.bias);
        const output = this.defineChannelsLast(fusedOut ?? op.out);
        this.emit({ kind: 'conv2d', geometry: op.geometry, input, filter, bias, output }, minMax);
        return;
      }
    }
  }

  /** Finishes the graph: outputs still held channels-last are transposed back, external ids assigned. */
  finish(): { payload: Uint8Array; args: number[] } {
    for (const index of this.runOutputs) {
      if (!this.plain.has(index)) this.operand(index);
    }
    for (const [input, output] of this.pendingConverts) this.emit({ kind: 'unary', code: NodeUnion.XNNConvert, input, output });
    const inputCount = this.inputs.length;
    const externalId = (value: RunValue): number | undefined => {
      if (value.role === 'input') return this.inputs.indexOf(value.methodValue!);
      if (value.role === 'output') return inputCount + this.outputs.indexOf(value.methodValue!);
      return undefined;
    };
    const values: XnnValueSpec[] = this.values.map((value) => {
      const id = externalId(value);
      return {
        dims: value.dims,
        role: value.role,
        ...(value.quantization === undefined ? {} : { quantization: value.quantization }),
        ...(value.constant === undefined ? {} : { constant: value.constant }),
        ...(id === undefined ? {} : { externalId: id }),
      };
    });
    const spec: XnnGraphSpec = {
      values,
      nodes: this.nodes,
      numExterns: inputCount + this.outputs.length,
      inputIds: this.inputs.map((index) => this.externalIds.get(index) ?? this.plain.get(index)!),
      outputIds: this.outputs.map((index) => this.externalIds.get(index) ?? this.plain.get(index)!),
      constants: this.constants,
    };
    return { payload: serializeXnnPayload(spec), args: [...this.inputs, ...this.outputs] };
  }
}

// Ops whose node takes fused activation bounds.
const BINARY_WITHOUT_BOUNDS: ReadonlySet<NodeUnion> = new Set([
  NodeUnion.XNNBatchMatrixMultiply,
  NodeUnion.XNNMaximum,
  NodeUnion.XNNMinimum,
  NodeUnion.XNNPReLU,
]);
function takesBounds(op: MatchedOp): boolean {
  return (
    op.kind === 'fullyConnected' ||
    op.kind === 'conv2d' ||
    op.kind === 'convTranspose2d' ||
    (op.kind === 'binary' && !BINARY_WITHOUT_BOUNDS.has(op.code))
  );
}

function producedValue(op: MatchedOp): number {
  return op.out;
}

interface Run {
  readonly start: number;
  readonly end: number; // exclusive
}

/** Lowers one method in place; returns the number of delegate calls it created. */
export function lowerMethodToXnnpack(method: MethodGraph, context: LoweringContext, options: XnnpackLoweringOptions = {}): number {
  const minCompute = options.minComputeNodes ?? 1;
  method.arenaPaddingBytes = Math.max(method.arenaPaddingBytes, XNNPACK_ARENA_PADDING);

  const instructions = method.instructions;
  const weightTransposeOf = new Map<number, number>();
  const dequantizedConstantOf = new Map<number, DequantizedConstant>();
  const matches: (MatchedOp | undefined)[] = instructions.map((instruction) => {
    const op = matchInstruction(method, instruction, weightTransposeOf, dequantizedConstantOf);
    if (op?.kind === 'weightTranspose') weightTransposeOf.set(op.out, op.source);
    if (op?.kind === 'dequantizedConstant') dequantizedConstantOf.set(op.out, op);
    return op;
  });
  fuseActivationPatterns(method, matches);
  const quantizations = quantizationsOf(matches);

  // Who reads each value: matched instructions read their operands, others everything they name.
  const readers = new Map<number, number[]>();
  const addReader = (value: number, step: number): void => {
    const list = readers.get(value);
    if (list === undefined) readers.set(value, [step]);
    else list.push(step);
  };
  instructions.forEach((instruction, step) => {
    const op = matches[step];
    const reads = op === undefined ? method.instructionOperands(instruction) : operandsRead(op);
    for (const value of new Set(reads)) addReader(value, step);
  });
  const methodOutputs = new Set(method.outputs);
  // An op whose kernel writes an extra output the delegate does not produce stays portable when anything reads that output.
  matches.forEach((op, step) => {
    if (
      op?.kind === 'pool2d' &&
      op.unread !== undefined &&
      (methodOutputs.has(op.unread) || (readers.get(op.unread) ?? []).some((reader) => reader !== step))
    )
      matches[step] = undefined;
  });

  const runs: Run[] = [];
  for (let step = 0; step < instructions.length; ) {
    if (matches[step] === undefined) {
      step++;
      continue;
    }
    let end = step;
    while (end < instructions.length && matches[end] !== undefined) end++;
    const compute = matches.slice(step, end).filter((op) => isComputeOp(op!)).length;
    if (compute >= minCompute) runs.push({ start: step, end });
    step = end;
  }
  if (runs.length === 0) return 0;

  const rewritten: GraphInstruction[] = [];
  let cursor = 0;
  for (const run of runs) {
    rewritten.push(...instructions.slice(cursor, run.start));
    const inRun = (step: number): boolean => step >= run.start && step < run.end;
    const readOutside = (value: number): boolean => methodOutputs.has(value) || (readers.get(value) ?? []).some((step) => !inRun(step));

    // A clamp folds into the node producing its input when nothing else reads that value.
    const fused = new Map<number, { out: number; bounds: readonly [number, number] }>(); // producer step -> clamp
    const skipped = new Set<number>();
    const producerStep = new Map<number, number>();
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      if (op.kind === 'clamp') {
        const producer = producerStep.get(op.input);
        const readersOfInput = readers.get(op.input) ?? [];
        if (
          producer !== undefined &&
          !fused.has(producer) &&
          takesBounds(matches[producer]!) &&
          readersOfInput.length === 1 &&
          !methodOutputs.has(op.input)
        ) {
          fused.set(producer, { out: op.out, bounds: [op.min, op.max] });
          skipped.add(step);
          producerStep.set(op.out, producer);
          continue;
        }
      }
      producerStep.set(producedValue(op), step);
    }

    // A transpose whose only reader is a bmm's second operand folds into it when that turns an element gather into row copies.
    const transposedB = new Map<number, number>(); // bmm step -> transpose step
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      if (
        op.kind !== 'binary' ||
        op.code !== NodeUnion.XNNBatchMatrixMultiply ||
        !('value' in op.b) ||
        ('value' in op.a && op.a.value === op.b.value)
      )
        continue;
      const producer = producerStep.get(op.b.value);
      const transpose = producer === undefined ? undefined : matches[producer];
      if (transpose?.kind !== 'transpose' || skipped.has(producer!) || fused.has(producer!)) continue;
      const r = transpose.perm.length;
      const onlyReader = (readers.get(op.b.value) ?? []).length === 1 && !methodOutputs.has(op.b.value);
      if (onlyReader && r >= 3 && transpose.perm[r - 2] === r - 1) {
        transposedB.set(step, producer!);
        skipped.add(producer!);
      }
    }

    // A convolution or linear over dequantized codes whose input is dequantized in the run and whose
    // result (through a fused clamp) only a quantize reads computes on 8-bit codes.
    const quantizedProducts = new Map<number, QuantizedProduct>(); // product step -> its dequantize and quantize
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      if ((op.kind !== 'conv2d' && op.kind !== 'fullyConnected') || skipped.has(step)) continue;
      const weight = dequantizedConstantOf.get(op.kind === 'conv2d' ? op.weight : op.filter);
      const source = weight === undefined ? undefined : method.tensorNode(weight.source);
      if (source?.dtype !== 'int8') continue;
      const dequantize = matches[producerStep.get(op.input) ?? -1];
      const result = fused.get(step)?.out ?? op.out;
      const resultReaders = readers.get(result) ?? [];
      const quantize = resultReaders.length === 1 ? matches[resultReaders[0]!] : undefined;
      if (dequantize?.kind !== 'dequantize' || quantize?.kind !== 'quantize' || !inRun(resultReaders[0]!) || methodOutputs.has(result))
        continue;
      if (op.bias !== undefined && method.tensorNode(dequantizedConstantOf.get(op.bias)?.source ?? op.bias).dtype !== 'int32') continue;
      quantizedProducts.set(step, { dequantize, quantize });
      skipped.add(resultReaders[0]!);
    }
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      if (op.kind !== 'dequantize' || methodOutputs.has(op.out)) continue;
      const outReaders = readers.get(op.out) ?? [];
      if (outReaders.length > 0 && outReaders.every((reader) => quantizedProducts.has(reader))) skipped.add(step);
    }

    const runOutputs = new Set<number>();
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      if (op.kind === 'weightTranspose' || op.kind === 'dequantizedConstant' || op.kind === 'absorbed' || skipped.has(step)) continue;
      const plan = quantizedProducts.get(step);
      const produced = plan?.quantize.out ?? fused.get(step)?.out ?? op.out;
      if (readOutside(produced)) runOutputs.add(produced);
    }

    let currentStep = run.start;
    const builder = new RunBuilder(method, context, runOutputs, () => currentStep, quantizations, dequantizedConstantOf);
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      // Weight transposes and dequantized constants stay as kernel calls (ahead of the delegate) in case
      // something else reads them; unread ones are dropped below.
      if (op.kind === 'weightTranspose' || op.kind === 'dequantizedConstant') rewritten.push(instructions[step]!);
      if (skipped.has(step)) continue;
      currentStep = step;
      const plan = quantizedProducts.get(step);
      if (plan !== undefined) {
        builder.addQuantizedProduct(op as Extract<MatchedOp, { kind: 'conv2d' | 'fullyConnected' }>, plan, fused.get(step)?.bounds);
        continue;
      }
      const folded = transposedB.get(step);
      if (folded !== undefined) {
        builder.addTransposedBatchMatmul(
          op as Extract<MatchedOp, { kind: 'binary' }>,
          matches[folded] as Extract<MatchedOp, { kind: 'transpose' }>,
        );
        continue;
      }
      const clamp = fused.get(step);
      builder.add(op, clamp?.out, clamp?.bounds);
    }
    const { payload, args } = builder.finish();
    const payloadIndex = context.addDelegatePayload(payload);
    method.delegates.push({ backendId: XNNPACK_BACKEND_ID, payload: payloadIndex, compileSpecs: [] });
    rewritten.push({ kind: 'delegate', delegate: method.delegates.length - 1, args });
    cursor = run.end;
  }
  rewritten.push(...instructions.slice(cursor));
  method.instructions.length = 0;
  method.instructions.push(...removeUnreadWeightTransposes(method, rewritten, weightTransposeOf, dequantizedConstantOf));
  releaseUnusedConstants(method);
  return runs.length;
}

/**
 * The quantization of every 8-bit value a matched quantize writes or a
 * matched dequantize reads. A dequantize reading a value with other
 * parameters than its quantize wrote stays portable.
 */
function quantizationsOf(matches: (MatchedOp | undefined)[]): Map<number, TensorQuantization> {
  const quantizations = new Map<number, TensorQuantization>();
  for (const op of matches) if (op?.kind === 'quantize') quantizations.set(op.out, op);
  matches.forEach((op, step) => {
    if (op?.kind !== 'dequantize') return;
    const known = quantizations.get(op.input);
    if (known === undefined) quantizations.set(op.input, op);
    else if (known.scale !== op.scale || known.zeroPoint !== op.zeroPoint || known.dtype !== op.dtype) matches[step] = undefined;
  });
  return quantizations;
}

function removeUnreadWeightTransposes(
  method: MethodGraph,
  list: GraphInstruction[],
  weightTransposeOf: ReadonlyMap<number, number>,
  dequantizedConstantOf: ReadonlyMap<number, DequantizedConstant>,
): GraphInstruction[] {
  const transposeOutput = (instruction: GraphInstruction): number | undefined => {
    if (instruction.kind !== 'kernel') return undefined;
    if (instruction.name === 'quantized_decomposed::dequantize_per_channel') {
      const out = instruction.args[instruction.args.length - 1];
      return out !== undefined && dequantizedConstantOf.has(out) ? out : undefined;
    }
    if (instruction.name !== 'aten::permute_copy') return undefined;
    const out = instruction.args[2];
    return out !== undefined && weightTransposeOf.has(out) ? out : undefined;
  };
  const read = new Set<number>(method.outputs);
  for (const instruction of list) {
    const own = transposeOutput(instruction);
    for (const operand of method.instructionOperands(instruction)) if (operand !== own) read.add(operand);
  }
  return list.filter((instruction) => {
    const own = transposeOutput(instruction);
    return own === undefined || read.has(own);
  });
}

// Constants only lowered nodes read now live in named data; dropping their
// values keeps them out of the constant segment (stored once, not twice).
function releaseUnusedConstants(method: MethodGraph): void {
  const referenced = new Set<number>([...method.inputs, ...method.outputs]);
  for (const instruction of method.instructions) for (const operand of method.instructionOperands(instruction)) referenced.add(operand);
  method.values.forEach((value, index) => {
    if (value.kind === 'tensor' && value.origin.kind === 'constant' && !referenced.has(index)) method.values[index] = { kind: 'null' };
    // A tensor list only a lowered instruction read goes too: it may name a constant released here.
    if ((value.kind === 'tensorList' || value.kind === 'optionalTensorList') && !referenced.has(index))
      method.values[index] = { kind: 'null' };
  });
}

/** The pass for ExportOptions.lowering (or `export({ xnnpack: true })`). */
export function xnnpackLowering(options: XnnpackLoweringOptions = {}): LoweringPass {
  return {
    name: 'xnnpack',
    run(method, context) {
      lowerMethodToXnnpack(method, context, options);
    },
  };
}
