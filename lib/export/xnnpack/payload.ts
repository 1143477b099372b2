// Serializes one XnnpackBackend delegate payload: the 32-byte `XH00` header
// followed by an `XN01` FlatBuffer (schema/xnnpack.fbs). Constants are never
// stored in the payload: every constant names a program named-data entry, so
// the constant region is always empty.
import * as flatbuffers from 'flatbuffers';

import { EtnaError } from '../../errors.js';
import {
  Binary,
  Concatenate,
  ConstantDataOffset,
  Convolution,
  Datatype,
  Elu,
  FullyConnected,
  Graph,
  LeakyRelu,
  Node,
  NodeUnion,
  OutputMinMax,
  PerChannelGroupQuant,
  PerChannelQuant,
  PerTensorQuant,
  PerTokenDynamicQuant,
  Pooling2d,
  QuantizedTensorValue,
  QuantParams,
  StaticConstantPad,
  StaticReshape,
  StaticResizeBilinear2d,
  StaticSlice,
  StaticTranspose,
  TensorValue,
  Unary,
  Value,
  ValueUnion,
} from '../../generated/xnnpack/xnnpack_generated.js';

/** The id XNNPACK uses for "no value" (an absent bias, an internal value's external id). */
export const INVALID_VALUE_ID = 0xffff_ffff;
export const EXTERNAL_INPUT_FLAG = 0x1;
export const EXTERNAL_OUTPUT_FLAG = 0x2;
/** FullyConnected flag: the filter is stored [K, N] instead of [N, K]. */
export const TRANSPOSE_WEIGHTS_FLAG = 0x1;

const HEADER_MAGIC = 'XH00';
const HEADER_LENGTH = 30;
const PAYLOAD_ALIGNMENT = 16;
const HEADER_BYTES = 32;
const NAMED_CONSTANT_OFFSET = 0xffff_ffff_ffff_ffffn;

/**
 * How a non-fp32 value is quantized: `perToken` is qdint8 (int8 per row of
 * the last dim, computed at run time by a Convert); `int4Groups` is a qbint4
 * filter [out, in] with one bf16 scale per output channel and group of input
 * channels; `perTensor` is a static qint8 or quint8 activation or a qint32
 * bias (one scale and zero point); `perChannel` is a qcint8 filter or qcint32
 * bias with one scale per index of `channelDim` (zero points 0).
 */
export type XnnQuantization =
  | { readonly kind: 'perToken' }
  | { readonly kind: 'int4Groups'; readonly groupSize: number; readonly scalesBf16: Uint16Array }
  | { readonly kind: 'perTensor'; readonly datatype: 'qint8' | 'quint8' | 'qint32'; readonly scale: number; readonly zeroPoint: number }
  | { readonly kind: 'perChannel'; readonly datatype: 'qcint8' | 'qcint32'; readonly scales: Float32Array; readonly channelDim: number };

function datatypeOf(quantization: XnnQuantization | undefined): Datatype {
  if (quantization === undefined) return Datatype.fp32;
  switch (quantization.kind) {
    case 'perToken':
      return Datatype.qdint8;
    case 'int4Groups':
      return Datatype.qbint4;
    case 'perTensor':
    case 'perChannel':
      return Datatype[quantization.datatype];
  }
}

function quantParams(builder: flatbuffers.Builder, quantization: XnnQuantization): { type: QuantParams; table: flatbuffers.Offset } {
  switch (quantization.kind) {
    case 'perToken':
      return { type: QuantParams.PerTokenDynamicQuant, table: PerTokenDynamicQuant.createPerTokenDynamicQuant(builder, 1) };
    case 'int4Groups':
      return {
        type: QuantParams.PerChannelGroupQuant,
        table: PerChannelGroupQuant.createPerChannelGroupQuant(
          builder,
          0,
          0,
          quantization.groupSize,
          PerChannelGroupQuant.createScaleBf16Vector(builder, quantization.scalesBf16),
          0,
          0,
        ),
      };
    case 'perTensor':
      return {
        type: QuantParams.PerTensorQuant,
        table: PerTensorQuant.createPerTensorQuant(builder, quantization.scale, quantization.zeroPoint),
      };
    case 'perChannel':
      return {
        type: QuantParams.PerChannelQuant,
        table: PerChannelQuant.createPerChannelQuant(
          builder,
          PerChannelQuant.createScaleVector(builder, quantization.scales),
          quantization.channelDim,
          0,
          0,
        ),
      };
  }
}

/** A tensor of the delegate graph (fp32 unless quantized). Ids are positions in XnnGraphSpec.values. */
export interface XnnValueSpec {
  readonly dims: readonly number[];
  readonly quantization?: XnnQuantization;
  /** 1-based index into XnnGraphSpec.constants; absent for non-constants. */
  readonly constant?: number;
  /** Position in the DelegateCall arguments (inputs first, then outputs). */
  readonly externalId?: number;
  readonly role: 'input' | 'output' | 'internal' | 'constant';
}

/** XNNPReLU's second input is its slope: a constant with one value, or one per channel (the last dim). */
export type BinaryCode =
  | NodeUnion.XNNAdd
  | NodeUnion.XNNSubtract
  | NodeUnion.XNNMultiply
  | NodeUnion.XNNDiv
  | NodeUnion.XNNMaximum
  | NodeUnion.XNNMinimum
  | NodeUnion.XNNPReLU
  | NodeUnion.XNNBatchMatrixMultiply;
/** XNNConvert from fp32 to a perToken (qdint8) value, or between fp32 and a perTensor qint8 or quint8 one. */
export type UnaryCode =
  | NodeUnion.XNNConvert
  | NodeUnion.XNNClamp
  | NodeUnion.XNNSigmoid
  | NodeUnion.XNNTanh
  | NodeUnion.XNNGelu
  | NodeUnion.XNNSoftmax
  | NodeUnion.XNNSquareRoot
  | NodeUnion.XNNSquare
  | NodeUnion.XNNGlobalAvgPooling2d
  | NodeUnion.XNNHardswish
  | NodeUnion.XNNAbs
  | NodeUnion.XNNNegate
  | NodeUnion.XNNExp
  | NodeUnion.XNNLog
  | NodeUnion.XNNReciprocalSquareRoot
  | NodeUnion.XNNSin
  | NodeUnion.XNNCos;

export type PoolingCode = NodeUnion.XNNMaxPooling2d | NodeUnion.XNNAvgPooling2d;

/** A pooling window over H and W; padding is symmetric ([top = bottom, left = right]). */
export interface PoolingWindow {
  readonly kernel: readonly [number, number];
  readonly stride: readonly [number, number];
  /** Top and left; also bottom and right unless `paddingEnd` says otherwise. */
  readonly padding: readonly [number, number];
  /** Bottom and right, where they differ from the top and left (a max pool in ceil mode). */
  readonly paddingEnd?: readonly [number, number];
  readonly dilation: readonly [number, number];
}

export interface ConvolutionGeometry {
  readonly padding: readonly [number, number];
  readonly kernel: readonly [number, number];
  readonly stride: readonly [number, number];
  readonly dilation: readonly [number, number];
  readonly groupInputChannels: number;
  readonly groupOutputChannels: number;
  readonly groups: number;
}

/** constant_pad_nd's amounts per dim (before and after) and its fill value. */
export interface ConstantPadding {
  readonly before: readonly number[];
  readonly after: readonly number[];
  readonly value: number;
}

export type XnnNodeBody =
  /** BatchMatrixMultiply takes BATCH_MATMUL_TRANSPOSE_B in `flags`: input2 is [..., n, k]. */
  | {
      readonly kind: 'binary';
      readonly code: BinaryCode;
      readonly input1: number;
      readonly input2: number;
      readonly output: number;
      readonly flags?: number;
    }
  | { readonly kind: 'unary'; readonly code: UnaryCode; readonly input: number; readonly output: number }
  /** x for x >= 0, slope * x below (XNNPACK picks by the sign bit). */
  | { readonly kind: 'leakyRelu'; readonly slope: number; readonly input: number; readonly output: number }
  /** x for x >= 0, alpha * (e^x - 1) below. */
  | { readonly kind: 'elu'; readonly alpha: number; readonly input: number; readonly output: number }
  | {
      readonly kind: 'fullyConnected';
      readonly input: number;
      readonly filter: number;
      readonly bias: number;
      readonly output: number;
      readonly flags: number;
    }
  | {
      readonly kind: 'conv2d';
      readonly geometry: ConvolutionGeometry;
      readonly input: number;
      readonly filter: number;
      readonly bias: number;
      readonly output: number;
    }
  /** Filter [groups * groupOutputChannels, kh, kw, groupInputChannels]; `adjustment` adds rows/columns at the bottom/right (output_padding). */
  | {
      readonly kind: 'convTranspose2d';
      readonly geometry: ConvolutionGeometry;
      readonly adjustment: readonly [number, number];
      readonly input: number;
      readonly filter: number;
      readonly bias: number;
      readonly output: number;
    }
  /** NHWC input resized to [N, height, width, C]; `flags` picks the sampling grid (RESIZE_ALIGN_CORNERS, or none for half-pixel centres). */
  | {
      readonly kind: 'resizeBilinear';
      readonly height: number;
      readonly width: number;
      readonly flags: number;
      readonly input: number;
      readonly output: number;
    }
  /** NHWC input pooled to NHWC output. */
  | { readonly kind: 'pool2d'; readonly code: PoolingCode; readonly window: PoolingWindow; readonly input: number; readonly output: number }
  | { readonly kind: 'transpose'; readonly perm: readonly number[]; readonly input: number; readonly output: number }
  | { readonly kind: 'reshape'; readonly newShape: readonly number[]; readonly input: number; readonly output: number }
  | {
      readonly kind: 'slice';
      readonly offsets: readonly number[];
      readonly sizes: readonly number[];
      readonly input: number;
      readonly output: number;
    }
  /** 2 to 5 inputs joined along `axis`. */
  | { readonly kind: 'concatenate'; readonly axis: number; readonly inputs: readonly number[]; readonly output: number }
  | ({ readonly kind: 'constantPad'; readonly input: number; readonly output: number } & ConstantPadding);

const CONCATENATE_CODES: readonly NodeUnion[] = [
  NodeUnion.XNNConcatenate2,
  NodeUnion.XNNConcatenate3,
  NodeUnion.XNNConcatenate4,
  NodeUnion.XNNConcatenate5,
];
/** BatchMatrixMultiply flag: the second operand is stored transposed. */
export const BATCH_MATMUL_TRANSPOSE_B = 0x1;
/** StaticResizeBilinear2D flag (XNN_FLAG_ALIGN_CORNERS): corner pixels map onto corner pixels. */
export const RESIZE_ALIGN_CORNERS = 0x8;
/** The most inputs one Concatenate node takes. */
export const MAX_CONCATENATE_INPUTS = 5;

export interface XnnNodeSpec {
  readonly body: XnnNodeBody;
  /** Fused activation bounds; absent means unbounded. */
  minMax?: readonly [number, number];
  /** Links the node back to the method instruction it came from. */
  readonly debugHandle: number;
}

export interface XnnGraphSpec {
  readonly values: readonly XnnValueSpec[];
  readonly nodes: readonly XnnNodeSpec[];
  readonly numExterns: number;
  readonly inputIds: readonly number[];
  readonly outputIds: readonly number[];
  /** Named-data entries, in constant_data order starting at index 1 (index 0 is the reserved empty entry). */
  readonly constants: readonly { readonly key: string; readonly size: number }[];
}

function checkDims(dims: readonly number[], what: string): readonly number[] {
  if (dims.length > 6) throw new EtnaError('INVALID_INPUT', `${what}: rank ${dims.length} exceeds the delegate's limit of 6`);
  // The format writes rank-0 tensors as [1].
  return dims.length === 0 ? [1] : dims;
}

function buildNodeTable(builder: flatbuffers.Builder, body: XnnNodeBody): { type: NodeUnion; table: flatbuffers.Offset } {
  switch (body.kind) {
    case 'binary':
      return { type: body.code, table: Binary.createBinary(builder, body.input1, body.input2, body.output, body.flags ?? 0) };
    case 'unary':
      return { type: body.code, table: Unary.createUnary(builder, body.input, body.output, 0) };
    case 'leakyRelu':
      return { type: NodeUnion.XNNLeakyReLU, table: LeakyRelu.createLeakyRelu(builder, body.slope, body.input, body.output, 0) };
    case 'elu':
      return { type: NodeUnion.XNNELU, table: Elu.createElu(builder, body.alpha, body.input, body.output, 0) };
    case 'fullyConnected':
      return {
        type: NodeUnion.XNNFullyConnected,
        table: FullyConnected.createFullyConnected(builder, body.input, body.filter, body.bias, body.output, body.flags),
      };
    case 'conv2d':
    case 'convTranspose2d': {
      const g = body.geometry;
      const adjustment = body.kind === 'convTranspose2d' ? body.adjustment : [0, 0];
      const table = Convolution.createConvolution(
        builder,
        g.padding[0],
        g.padding[1],
        g.padding[0],
        g.padding[1],
        g.kernel[0],
        g.kernel[1],
        g.stride[0],
        g.stride[1],
        g.dilation[0],
        g.dilation[1],
        g.groupInputChannels,
        g.groupOutputChannels,
        g.groups,
        adjustment[0]!,
        adjustment[1]!,
        body.input,
        body.filter,
        body.bias,
        body.output,
        0,
      );
      return { type: body.kind === 'conv2d' ? NodeUnion.XNNConv2d : NodeUnion.XNNConvTranspose2d, table };
    }
    case 'resizeBilinear':
      return {
        type: NodeUnion.XNNStaticResizeBilinear2D,
        table: StaticResizeBilinear2d.createStaticResizeBilinear2d(builder, body.height, body.width, body.input, body.output, body.flags),
      };
    case 'pool2d': {
      const { kernel, stride, padding, dilation } = body.window;
      const paddingEnd = body.window.paddingEnd ?? padding;
      const table = Pooling2d.createPooling2d(
        builder,
        padding[0],
        paddingEnd[1],
        paddingEnd[0],
        padding[1],
        kernel[0],
        kernel[1],
        stride[0],
        stride[1],
        dilation[0],
        dilation[1],
        body.input,
        body.output,
        0,
      );
      return { type: body.code, table };
    }
    case 'transpose': {
      const perm = StaticTranspose.createPermVector(builder, [...body.perm]);
      return {
        type: NodeUnion.XNNStaticTranspose,
        table: StaticTranspose.createStaticTranspose(builder, body.perm.length, perm, body.input, body.output, 0),
      };
    }
    case 'reshape': {
      const shape = StaticReshape.createNewShapeVector(builder, [...body.newShape]);
      return {
        type: NodeUnion.XNNStaticReshape,
        table: StaticReshape.createStaticReshape(builder, body.newShape.length, shape, body.input, body.output, 0),
      };
    }
    case 'slice': {
      const offsets = StaticSlice.createOffsetsVector(builder, [...body.offsets]);
      const sizes = StaticSlice.createSizesVector(builder, [...body.sizes]);
      return {
        type: NodeUnion.XNNStaticSlice,
        table: StaticSlice.createStaticSlice(builder, body.offsets.length, offsets, sizes, body.input, body.output, 0),
      };
    }
    case 'concatenate': {
      const count = body.inputs.length;
      if (count < 2 || count > MAX_CONCATENATE_INPUTS) throw new EtnaError('INTERNAL', `xnnpack payload: concatenate of ${count} inputs`);
      const id = (i: number): number => body.inputs[i] ?? INVALID_VALUE_ID;
      const table = Concatenate.createConcatenate(builder, body.axis, id(0), id(1), id(2), id(3), body.output, 0, id(4));
      return { type: CONCATENATE_CODES[count - 2]!, table };
    }
    case 'constantPad': {
      const before = StaticConstantPad.createPrePaddingsVector(builder, [...body.before]);
      const after = StaticConstantPad.createPostPaddingsVector(builder, [...body.after]);
      return {
        type: NodeUnion.XNNStaticConstantPad,
        table: StaticConstantPad.createStaticConstantPad(builder, before, after, body.value, body.input, body.output, 0),
      };
    }
  }
}

/** The FlatBuffer region alone (identifier `XN01`). */
export function buildXnnFlatbuffer(spec: XnnGraphSpec): Uint8Array {
  const builder = new flatbuffers.Builder(1024);

  const values = spec.values.map((value, id) => {
    const dims = checkDims(value.dims, `delegate value ${id}`);
    const dimsVector = TensorValue.createDimsVector(builder, [...dims]);
    const flags = value.role === 'input' ? EXTERNAL_INPUT_FLAG : value.role === 'output' ? EXTERNAL_OUTPUT_FLAG : 0;
    const external = value.role === 'input' || value.role === 'output' ? value.externalId! : INVALID_VALUE_ID;
    const quantization = value.quantization;
    const datatype = datatypeOf(quantization);
    const tensor = TensorValue.createTensorValue(
      builder,
      datatype,
      dims.length,
      dimsVector,
      value.constant ?? 0,
      external,
      flags,
      id,
      Datatype.invalid,
    );
    if (quantization === undefined) return Value.createValue(builder, ValueUnion.TensorValue, tensor);
    const params = quantParams(builder, quantization);
    const quantized = QuantizedTensorValue.createQuantizedTensorValue(builder, tensor, params.type, params.table);
    return Value.createValue(builder, ValueUnion.QuantizedTensorValue, quantized);
  });

  const nodes = spec.nodes.map((node) => {
    const { type, table } = buildNodeTable(builder, node.body);
    const bounds = node.minMax === undefined ? 0 : OutputMinMax.createOutputMinMax(builder, node.minMax[0], node.minMax[1]);
    Node.startNode(builder);
    Node.addNodeType(builder, type);
    Node.addNode(builder, table);
    Node.addDebugHandle(builder, node.debugHandle);
    if (bounds !== 0) Node.addOutputMinMax(builder, bounds);
    return Node.endNode(builder);
  });

  const reserved = ConstantDataOffset.createConstantDataOffset(builder, 0n, 0n, 0);
  const constants = spec.constants.map((constant) => {
    const key = builder.createString(constant.key);
    return ConstantDataOffset.createConstantDataOffset(builder, NAMED_CONSTANT_OFFSET, BigInt(constant.size), key);
  });

  const version = builder.createString('0');
  const nodesVector = Graph.createNodesVector(builder, nodes);
  const valuesVector = Graph.createValuesVector(builder, values);
  const inputIds = Graph.createInputIdsVector(builder, [...spec.inputIds]);
  const outputIds = Graph.createOutputIdsVector(builder, [...spec.outputIds]);
  const constantData = Graph.createConstantDataVector(builder, [reserved, ...constants]);
  Graph.startGraph(builder);
  Graph.addVersion(builder, version);
  Graph.addNodes(builder, nodesVector);
  Graph.addValues(builder, valuesVector);
  Graph.addNumExterns(builder, spec.numExterns);
  Graph.addInputIds(builder, inputIds);
  Graph.addOutputIds(builder, outputIds);
  Graph.addConstantData(builder, constantData);
  Graph.finishGraphBuffer(builder, Graph.endGraph(builder));
  return builder.asUint8Array();
}

function roundUp(value: number, alignment: number): number {
  return Math.ceil(value / alignment) * alignment;
}

/** The whole delegate payload: header, FlatBuffer padded to 16 bytes, empty constant region. */
export function serializeXnnPayload(spec: XnnGraphSpec): Uint8Array {
  const flatbuffer = buildXnnFlatbuffer(spec);
  const constantOffset = HEADER_BYTES + roundUp(flatbuffer.byteLength, PAYLOAD_ALIGNMENT);
  const blob = new Uint8Array(constantOffset);
  const view = new DataView(blob.buffer);
  for (let i = 0; i < 4; i++) blob[4 + i] = HEADER_MAGIC.charCodeAt(i);
  view.setUint16(8, HEADER_LENGTH, true);
  view.setUint32(10, HEADER_BYTES, true);
  view.setUint32(14, flatbuffer.byteLength, true);
  view.setUint32(18, constantOffset, true);
  view.setBigUint64(22, 0n, true);
  blob.set(flatbuffer, HEADER_BYTES);
  return blob;
}
