// The delegate graph of one run: the values it defines for method values (in
// their own layout or channels-last, with the layout changes between them),
// its constants, inputs and outputs, and the payload it serializes to. The
// nodes each matched op becomes are written by emitters.ts.
import { EtnaError } from '../../errors.js';
import type { ConstantTensor, MethodGraph } from '../graph.js';
import type { LoweringContext } from '../lowering.js';
import { NodeUnion } from '../../generated/xnnpack/xnnpack_generated.js';
import type { DequantizedConstant, Operand, TensorQuantization } from './partition.js';
import { serializeXnnPayload, type XnnGraphSpec, type XnnNodeSpec, type XnnQuantization, type XnnValueSpec } from './payload.js';
import { codesOf, constantKey, dequantizedValues, float32Bytes, keyOfConstant, qint8Of } from './weights.js';

/** Alignment of named-data blobs holding delegate constants. */
export const XNNPACK_CONSTANT_ALIGNMENT = 64;

const NCHW_TO_NHWC = [0, 2, 3, 1] as const;
/** Where each NCHW dim sits in NHWC. */
export const NHWC_POSITION_OF_NCHW_DIM = [0, 3, 1, 2] as const;
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
export class RunBuilder {
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
    readonly method: MethodGraph,
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

  addValue(value: RunValue): number {
    this.values.push(value);
    return this.values.length - 1;
  }

  constantValue(key: string, bytes: Uint8Array, dims: readonly number[], quantization?: XnnQuantization): number {
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

  emit(body: XnnNodeSpec['body'], minMax?: readonly [number, number]): void {
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
  staysChannelsLast(operands: readonly Operand[], out: number): boolean {
    const values = operands.flatMap((operand) => ('value' in operand ? [operand.value] : []));
    if (this.method.tensorNode(out).shape.length !== 4) return false;
    if (!values.some((index) => this.channelsLast.has(index) && !this.plain.has(index))) return false;
    return values.every((index) => {
      const shape = this.method.tensorNode(index).shape;
      return shape.length === 4 || shape.every((d) => d === 1);
    });
  }

  /** A channels-last operand of an elementwise op (single elements stay as they are). */
  layoutOperand(operand: Operand): number {
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
   * Method value `index`'s shape with every dim whose size changes per call
   * as 0, which a reshape reads as "infer" (the partitioner leaves at most
   * one) and a slice as "to the end".
   */
  runtimeSizes(index: number): number[] {
    const node = this.method.tensorNode(index);
    return node.shape.map((size, d) => (node.dynamicDims?.includes(d) ? 0 : size));
  }

  scalarOperand(operand: Operand): number {
    if ('value' in operand) return this.operand(operand.value);
    const bytes = float32Bytes(new Float32Array([operand.scalar]));
    return this.constantValue(constantKey(bytes), bytes, [1]);
  }

  /**
   * An elementwise op of one input, channels-last when its input is held so:
   * `emitOn(input, output)` emits its nodes.
   */
  elementwise(input: number, out: number, emitOn: (input: number, output: number) => void): void {
    if (this.staysChannelsLast([{ value: input }], out)) emitOn(this.operandChannelsLast(input), this.defineChannelsLast(out));
    else emitOn(this.operand(input), this.define(out));
  }

  /** The declared dims of delegate value `value`. */
  dimsOf(value: number): readonly number[] {
    return this.values[value]!.dims;
  }

  internalLike(value: number): number {
    return this.addValue({ dims: this.values[value]!.dims, role: 'internal' });
  }

  /** A constant quantized per channel along `channelDim`: codes as stored, one scale per channel. */
  quantizedConstant(codes: Int8Array | Int32Array, dims: readonly number[], scales: Float32Array, channelDim: number): number {
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
  floatWeight(index: number): { values: Float32Array; shape: readonly number[] } {
    const node = this.method.tensorNode(index);
    const dequantized = this.dequantizedConstantOf.get(index);
    if (dequantized !== undefined) return { values: dequantizedValues(this.sourceOf(dequantized), dequantized), shape: node.shape };
    if (node.origin.kind !== 'constant') throw new EtnaError('INTERNAL', 'xnnpack lowering: a weight is not a constant');
    return { values: new Float32Array(node.origin.constant.bytes.slice().buffer), shape: node.shape };
  }

  /** A float32 weight or bias operand in its method layout. */
  weightOperand(index: number): number {
    if (!this.dequantizedConstantOf.has(index)) return this.operand(index);
    const { values, shape } = this.floatWeight(index);
    const bytes = float32Bytes(values);
    return this.constantValue(constantKey(bytes), bytes, shape);
  }

  /** The int8 codes and per-channel scales behind a dequantized weight or bias. */
  codes(index: number): { codes: Int8Array | Int32Array; scales: Float32Array } {
    const dequantized = this.dequantizedConstantOf.get(index)!;
    return { codes: codesOf(this.sourceOf(dequantized)), scales: dequantized.scales };
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
