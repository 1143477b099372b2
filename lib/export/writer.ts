// .pte writer: a FlatBuffer (identifier ET12) followed, when there is segment
// data, by 128-aligned segments, with the `eh00` extended header spliced in
// after the identifier (spec section 1.4).
import * as flatbuffers from 'flatbuffers';

import { EtnaError } from '../errors.js';
import {
  AllocationDetails,
  BackendDelegate,
  BackendDelegateDataReference,
  BackendDelegateInlineData,
  BoolList,
  BoolValue,
  Chain,
  CompileSpec,
  ContainerMetadata,
  DataLocation,
  DataSegment,
  DelegateCall,
  DoubleList,
  DoubleValue,
  EValue,
  ExecutionPlan,
  ExtraTensorInfo,
  FreeCall,
  Instruction,
  InstructionArguments,
  IntList,
  IntValue,
  JumpFalseCall,
  KernelCall,
  KernelTypes,
  MoveCall,
  NamedData,
  NullValue,
  Operator,
  OptionalTensorList,
  Program,
  ScalarType,
  StringValue,
  SubsegmentOffsets,
  Tensor,
  TensorList,
  TensorShapeDynamism,
} from '../generated/program/program_generated.js';
import { SCALAR_TYPE_BYTES } from './dtype.js';
import { alignUp } from './shape.js';

export const PTE_FILE_IDENTIFIER = 'ET12';
export const EXTENDED_HEADER_MAGIC = 'eh00';
/** Bytes of the extended header counted from its magic (the current layout, with segment_data_size). */
export const EXTENDED_HEADER_LENGTH = 32;
export const DEFAULT_SEGMENT_ALIGNMENT = 128;
export const DEFAULT_CONSTANT_ALIGNMENT = 16;
/** Largest force_align in the schema (Buffer.storage, BackendDelegateInlineData.data). */
export const SCHEMA_FORCE_ALIGN = 16;

// ------------------------------------------------------------------ wire-level program description

export interface PteTensor {
  readonly kind: 'tensor';
  readonly scalarType: ScalarType;
  readonly sizes: readonly number[];
  /** Defaults to contiguous [0, 1, ..., rank-1]. */
  readonly dimOrder?: readonly number[];
  /** Constant index (no allocation) or initial-value index (with allocation); 0/absent = none. */
  readonly dataBufferIdx?: number;
  readonly allocation?: { readonly memoryId: number; readonly offset: number };
  readonly fullyQualifiedName?: string;
  readonly shapeDynamism?: TensorShapeDynamism;
}

/** Every EValue kind but Tensor, as both the authoring graph and the writer hold them. */
export type NonTensorValue =
  | { readonly kind: 'null' }
  | { readonly kind: 'int'; readonly value: bigint }
  | { readonly kind: 'double'; readonly value: number }
  | { readonly kind: 'bool'; readonly value: boolean }
  | { readonly kind: 'string'; readonly value: string }
  /** Items are indices of Int values. */
  | { readonly kind: 'intList'; readonly items: readonly number[] }
  | { readonly kind: 'doubleList'; readonly items: readonly number[] }
  | { readonly kind: 'boolList'; readonly items: readonly boolean[] }
  /** Items are indices of Tensor values. */
  | { readonly kind: 'tensorList'; readonly items: readonly number[] }
  /** Items are indices of Tensor or Null values. */
  | { readonly kind: 'optionalTensorList'; readonly items: readonly number[] };

export type PteValue = PteTensor | NonTensorValue;

export type PteInstruction =
  | { readonly kind: 'kernel'; readonly opIndex: number; readonly args: readonly number[] }
  | { readonly kind: 'delegate'; readonly delegateIndex: number; readonly args: readonly number[] }
  | { readonly kind: 'move'; readonly from: number; readonly to: number }
  | { readonly kind: 'jumpFalse'; readonly condition: number; readonly destination: number }
  | { readonly kind: 'free'; readonly value: number };

export interface PteOperator {
  readonly name: string;
  readonly overload: string;
}

export interface PteDelegate {
  readonly backendId: string;
  /** Index into PteProgram.delegatePayloads. */
  readonly payload: number;
  readonly compileSpecs?: readonly { readonly key: string; readonly value: Uint8Array }[];
}

export interface PteMethod {
  readonly name: string;
  readonly values: readonly PteValue[];
  readonly inputs: readonly number[];
  readonly outputs: readonly number[];
  readonly instructions: readonly PteInstruction[];
  readonly operators: readonly PteOperator[];
  readonly delegates: readonly PteDelegate[];
  readonly nonConstBufferSizes: readonly number[];
  /**
   * Names of the inputs and outputs, in order (unique, non-empty). When given,
   * they are stored as PyTorch pytree specs in container_meta_type: inputs as
   * keyword arguments `((), {name: ...})`, outputs as a dict.
   */
  readonly inputNames?: readonly string[];
  readonly outputNames?: readonly string[];
}

export interface PteProgram {
  readonly methods: readonly PteMethod[];
  /** Constant blobs; blob k is data_buffer_idx k+1 (index 0 is the reserved placeholder). */
  readonly constants: readonly Uint8Array[];
  /** Initial values of planned mutable tensors; blob k is data_buffer_idx k+1. */
  readonly mutableData?: readonly Uint8Array[];
  readonly delegatePayloads?: readonly Uint8Array[];
  readonly namedData?: readonly { readonly key: string; readonly data: Uint8Array; readonly alignment?: number }[];
}

export interface PteWriteOptions {
  /** Alignment of every segment relative to the segment base (default 128). */
  segmentAlignment?: number;
  /** Alignment of each constant inside the constant segment (default 16). */
  constantAlignment?: number;
  /** 'segment' (default, like the reference exporter) moves non-empty delegate payloads into segments; 'inline' keeps them in backend_delegate_data. */
  delegatePlacement?: 'segment' | 'inline';
}

export type SegmentPurpose = 'constants' | 'mutable-data' | 'delegate' | 'named-data';

export interface PteSegmentLayout {
  readonly purpose: SegmentPurpose;
  /** Relative to segment_base_offset. */
  readonly offset: number;
  readonly size: number;
}

export interface PteLayout {
  /** Size of the FlatBuffer as built, before the header was spliced in. */
  readonly flatbufferSize: number;
  /** 0 when the file has no extended header. */
  readonly headerLength: number;
  readonly programSize: number;
  /** 0 when there is no segment data. */
  readonly segmentBaseOffset: number;
  readonly segmentDataSize: number;
  readonly fileSize: number;
  readonly segments: readonly PteSegmentLayout[];
  /** constant_segment.offsets (entry 0 is the placeholder). */
  readonly constantOffsets: readonly number[];
  /** mutable_data_segments[0].offsets, or null when there are no initial values. */
  readonly mutableDataOffsets: readonly number[] | null;
}

// ------------------------------------------------------------------ validation

function isPowerOfTwo(value: number): boolean {
  return Number.isInteger(value) && value > 0 && (value & (value - 1)) === 0;
}

/** Rejects descriptions a runtime would refuse to load; the message names the method and value. */
export function validatePteProgram(program: PteProgram): void {
  const constants = program.constants.length;
  const mutable = program.mutableData?.length ?? 0;
  const payloads = program.delegatePayloads?.length ?? 0;
  const names = new Set<string>();
  for (const method of program.methods) {
    const where = `method '${method.name}'`;
    const fail = (message: string): never => {
      throw new EtnaError('INVALID_PROGRAM', `${where}: ${message}`);
    };
    if (names.has(method.name)) fail('name is used twice');
    names.add(method.name);
    const count = method.values.length;
    const kindAt = (index: number): string | undefined =>
      Number.isInteger(index) && index >= 0 && index < count ? method.values[index]!.kind : undefined;
    const sizes = method.nonConstBufferSizes;
    if (sizes.length === 0 || sizes.some((s) => !Number.isSafeInteger(s) || s < 0))
      fail(`non_const_buffer_sizes [${sizes.join(', ')}] is invalid`);
    method.values.forEach((value, i) => {
      const at = `value ${i}`;
      if (value.kind === 'tensor') {
        const order = value.dimOrder ?? value.sizes.map((_, d) => d);
        if (order.length !== value.sizes.length || [...order].sort((a, b) => a - b).some((d, k) => d !== k))
          fail(`${at}: dim_order is not a permutation of the dims`);
        if (value.sizes.some((s) => !Number.isInteger(s) || s < 0 || s > 0x7fffffff))
          fail(`${at}: invalid sizes [${value.sizes.join(', ')}]`);
        const element = SCALAR_TYPE_BYTES[value.scalarType];
        if (element === undefined) fail(`${at}: unknown scalar type ${value.scalarType}`);
        const nbytes = value.sizes.reduce((n, s) => n * s, 1) * element!;
        const idx = value.dataBufferIdx ?? 0;
        if (value.allocation !== undefined) {
          const { memoryId, offset } = value.allocation;
          if (!Number.isInteger(memoryId) || memoryId < 1 || memoryId >= sizes.length)
            fail(`${at}: memory_id ${memoryId} has no arena in [${sizes.join(', ')}]`);
          if (!Number.isSafeInteger(offset) || offset < 0 || offset + nbytes > sizes[memoryId]!) {
            fail(`${at}: bytes [${offset}, ${offset + nbytes}) exceed arena ${memoryId} of ${sizes[memoryId]} bytes`);
          }
          if (idx > mutable) fail(`${at}: initial value ${idx} is out of range (${mutable} stored)`);
        } else if (idx > constants) {
          fail(`${at}: constant ${idx} is out of range (${constants} stored)`);
        }
      } else if (value.kind === 'intList') {
        for (const item of value.items) if (kindAt(item) !== 'int') fail(`${at}: IntList item ${item} is not an Int value`);
      } else if (value.kind === 'tensorList') {
        for (const item of value.items) if (kindAt(item) !== 'tensor') fail(`${at}: TensorList item ${item} is not a Tensor value`);
      } else if (value.kind === 'optionalTensorList') {
        for (const item of value.items) {
          if (item !== -1 && kindAt(item) !== 'tensor' && kindAt(item) !== 'null')
            fail(`${at}: OptionalTensorList item ${item} is not a Tensor or Null value`);
        }
      }
    });
    for (const index of [...method.inputs, ...method.outputs])
      if (kindAt(index) === undefined) fail(`input/output ${index} is not a value index`);
    for (const [side, indices, ioNames] of [
      ['input', method.inputs, method.inputNames],
      ['output', method.outputs, method.outputNames],
    ] as const) {
      if (ioNames === undefined) continue;
      if (ioNames.length !== indices.length) fail(`${ioNames.length} ${side} names for ${indices.length} ${side}s`);
      const seen = new Set<string>();
      for (const ioName of ioNames) {
        if (typeof ioName !== 'string' || ioName.length === 0) fail(`${side} names must be non-empty strings`);
        if (seen.has(ioName)) fail(`${side} name '${ioName}' is used twice`);
        seen.add(ioName);
      }
    }
    method.instructions.forEach((instruction, i) => {
      const at = `instruction ${i}`;
      const indices =
        instruction.kind === 'kernel' || instruction.kind === 'delegate'
          ? instruction.args
          : instruction.kind === 'move'
            ? [instruction.from, instruction.to]
            : instruction.kind === 'jumpFalse'
              ? [instruction.condition]
              : [instruction.value];
      for (const index of indices) if (kindAt(index) === undefined) fail(`${at}: argument ${index} is not a value index`);
      if (instruction.kind === 'kernel' && !(instruction.opIndex >= 0 && instruction.opIndex < method.operators.length))
        fail(`${at}: op_index ${instruction.opIndex} is out of range`);
      if (instruction.kind === 'delegate' && !(instruction.delegateIndex >= 0 && instruction.delegateIndex < method.delegates.length))
        fail(`${at}: delegate_index ${instruction.delegateIndex} is out of range`);
      if (instruction.kind === 'jumpFalse' && !(instruction.destination >= 0 && instruction.destination <= method.instructions.length))
        fail(`${at}: jump destination ${instruction.destination} is out of range`);
    });
    for (const delegate of method.delegates) {
      if (!(delegate.payload >= 0 && delegate.payload < payloads))
        fail(`delegate '${delegate.backendId}' names payload ${delegate.payload}, but ${payloads} are stored`);
    }
  }
  const keys = new Set<string>();
  for (const blob of program.namedData ?? []) {
    if (keys.has(blob.key)) throw new EtnaError('INVALID_PROGRAM', `named data key '${blob.key}' is used twice`);
    keys.add(blob.key);
    if (blob.alignment !== undefined && !isPowerOfTwo(blob.alignment))
      throw new EtnaError('INVALID_PROGRAM', `named data '${blob.key}': alignment ${blob.alignment} is not a power of two`);
  }
}

// ------------------------------------------------------------------ segments

interface PendingSegment {
  purpose: SegmentPurpose;
  data: Uint8Array;
  alignment: number;
}

function concatenate(blobs: readonly Uint8Array[], alignment: number): { data: Uint8Array; offsets: number[] } {
  // Entry 0 is the empty placeholder; it and the first real blob both start at 0.
  const offsets = [0];
  let cursor = 0;
  for (const blob of blobs) {
    cursor = alignUp(cursor, alignment);
    offsets.push(cursor);
    cursor += blob.byteLength;
  }
  const data = new Uint8Array(cursor);
  blobs.forEach((blob, k) => data.set(blob, offsets[k + 1]!));
  return { data, offsets };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

// ------------------------------------------------------------------ FlatBuffer building

function alignedByteVector(builder: flatbuffers.Builder, bytes: Uint8Array, alignment: number): flatbuffers.Offset {
  // The generated helpers align [ubyte] vectors to 1 and ignore force_align; start the vector by hand.
  builder.startVector(1, bytes.byteLength, alignment);
  for (let i = bytes.byteLength - 1; i >= 0; i--) builder.writeInt8(bytes[i]!);
  return builder.endVector();
}

function buildValue(builder: flatbuffers.Builder, value: PteValue): flatbuffers.Offset {
  switch (value.kind) {
    case 'null':
      return EValue.createEValue(builder, KernelTypes.NullValue, NullValue.createNullValue(builder));
    case 'int':
      return EValue.createEValue(builder, KernelTypes.IntValue, IntValue.createIntValue(builder, BigInt.asIntN(64, value.value)));
    case 'bool':
      return EValue.createEValue(builder, KernelTypes.BoolValue, BoolValue.createBoolValue(builder, value.value));
    case 'double':
      return EValue.createEValue(builder, KernelTypes.DoubleValue, DoubleValue.createDoubleValue(builder, value.value));
    case 'string': {
      const text = builder.createString(value.value);
      return EValue.createEValue(builder, KernelTypes.StringValue, StringValue.createStringValue(builder, text));
    }
    case 'intList': {
      const items = IntList.createItemsVector(
        builder,
        value.items.map((i) => BigInt(i)),
      );
      return EValue.createEValue(builder, KernelTypes.IntList, IntList.createIntList(builder, items));
    }
    case 'doubleList': {
      const items = DoubleList.createItemsVector(builder, [...value.items]);
      return EValue.createEValue(builder, KernelTypes.DoubleList, DoubleList.createDoubleList(builder, items));
    }
    case 'boolList': {
      const items = BoolList.createItemsVector(builder, [...value.items]);
      return EValue.createEValue(builder, KernelTypes.BoolList, BoolList.createBoolList(builder, items));
    }
    case 'tensorList': {
      const items = TensorList.createItemsVector(builder, [...value.items]);
      return EValue.createEValue(builder, KernelTypes.TensorList, TensorList.createTensorList(builder, items));
    }
    case 'optionalTensorList': {
      const items = OptionalTensorList.createItemsVector(builder, [...value.items]);
      return EValue.createEValue(builder, KernelTypes.OptionalTensorList, OptionalTensorList.createOptionalTensorList(builder, items));
    }
    case 'tensor':
      return EValue.createEValue(builder, KernelTypes.Tensor, buildTensor(builder, value));
  }
}

function buildTensor(builder: flatbuffers.Builder, tensor: PteTensor): flatbuffers.Offset {
  const sizes = Tensor.createSizesVector(builder, [...tensor.sizes]);
  const dimOrder = Tensor.createDimOrderVector(builder, [...(tensor.dimOrder ?? tensor.sizes.map((_, i) => i))]);
  let allocation = 0;
  if (tensor.allocation !== undefined) {
    const { memoryId, offset } = tensor.allocation;
    const low = offset % 0x1_0000_0000;
    const high = Math.floor(offset / 0x1_0000_0000);
    allocation = AllocationDetails.createAllocationDetails(builder, memoryId, low, high);
  }
  let extra = 0;
  if (tensor.fullyQualifiedName !== undefined) {
    const fqn = builder.createString(tensor.fullyQualifiedName);
    ExtraTensorInfo.startExtraTensorInfo(builder);
    ExtraTensorInfo.addFullyQualifiedName(builder, fqn);
    extra = ExtraTensorInfo.endExtraTensorInfo(builder);
  }
  Tensor.startTensor(builder);
  Tensor.addScalarType(builder, tensor.scalarType);
  Tensor.addSizes(builder, sizes);
  Tensor.addDimOrder(builder, dimOrder);
  if (tensor.dataBufferIdx) Tensor.addDataBufferIdx(builder, tensor.dataBufferIdx);
  if (allocation) Tensor.addAllocationInfo(builder, allocation);
  if (tensor.shapeDynamism !== undefined) Tensor.addShapeDynamism(builder, tensor.shapeDynamism);
  if (extra) Tensor.addExtraTensorInfo(builder, extra);
  return Tensor.endTensor(builder);
}

function buildInstruction(builder: flatbuffers.Builder, instruction: PteInstruction): flatbuffers.Offset {
  switch (instruction.kind) {
    case 'kernel': {
      const args = KernelCall.createArgsVector(builder, [...instruction.args]);
      return Instruction.createInstruction(
        builder,
        InstructionArguments.KernelCall,
        KernelCall.createKernelCall(builder, instruction.opIndex, args),
      );
    }
    case 'delegate': {
      const args = DelegateCall.createArgsVector(builder, [...instruction.args]);
      return Instruction.createInstruction(
        builder,
        InstructionArguments.DelegateCall,
        DelegateCall.createDelegateCall(builder, instruction.delegateIndex, args),
      );
    }
    case 'move':
      return Instruction.createInstruction(
        builder,
        InstructionArguments.MoveCall,
        MoveCall.createMoveCall(builder, instruction.from, instruction.to),
      );
    case 'jumpFalse':
      return Instruction.createInstruction(
        builder,
        InstructionArguments.JumpFalseCall,
        JumpFalseCall.createJumpFalseCall(builder, instruction.condition, instruction.destination),
      );
    case 'free':
      return Instruction.createInstruction(builder, InstructionArguments.FreeCall, FreeCall.createFreeCall(builder, instruction.value));
  }
}

type DelegateReference = { location: DataLocation; index: number };

// PyTorch pytree specs (protocol 1) in the spacing Python's json.dumps uses.
const PYTREE_LEAF = '{"type": null, "context": null, "children_spec": []}';

function pytreeNode(type: string, context: string, children: readonly string[]): string {
  return `{"type": ${JSON.stringify(type)}, "context": ${JSON.stringify(context)}, "children_spec": [${children.join(', ')}]}`;
}

/** A dict of leaves keyed by `names` (its context is the JSON text of the key list). */
function pytreeDict(names: readonly string[]): string {
  const keys = `[${names.map((key) => JSON.stringify(key)).join(', ')}]`;
  return pytreeNode(
    'builtins.dict',
    keys,
    names.map(() => PYTREE_LEAF),
  );
}

function pytreeTuple(count: number): string {
  return pytreeNode(
    'builtins.tuple',
    'null',
    Array.from({ length: count }, () => PYTREE_LEAF),
  );
}

// Named inputs are keyword arguments `((), {name: ...})`, unnamed ones
// positional `((...), {})`; named outputs a dict, unnamed ones a tuple.
function buildContainerMetadata(builder: flatbuffers.Builder, method: PteMethod): flatbuffers.Offset {
  const { inputNames, outputNames } = method;
  const args = inputNames === undefined ? [pytreeTuple(method.inputs.length), pytreeDict([])] : [pytreeTuple(0), pytreeDict(inputNames)];
  const inputs = builder.createString(`[1, ${pytreeNode('builtins.tuple', 'null', args)}]`);
  const outputs = builder.createString(`[1, ${outputNames === undefined ? pytreeTuple(method.outputs.length) : pytreeDict(outputNames)}]`);
  return ContainerMetadata.createContainerMetadata(builder, inputs, outputs);
}

function buildMethod(
  builder: flatbuffers.Builder,
  method: PteMethod,
  payloadReference: (payload: number) => DelegateReference,
): flatbuffers.Offset {
  const name = builder.createString(method.name);
  const names = method.inputNames !== undefined || method.outputNames !== undefined ? buildContainerMetadata(builder, method) : undefined;
  const values = ExecutionPlan.createValuesVector(
    builder,
    method.values.map((v) => buildValue(builder, v)),
  );
  const inputs = ExecutionPlan.createInputsVector(builder, [...method.inputs]);
  const outputs = ExecutionPlan.createOutputsVector(builder, [...method.outputs]);
  const instructions = Chain.createInstructionsVector(
    builder,
    method.instructions.map((i) => buildInstruction(builder, i)),
  );
  const chain = Chain.createChain(builder, Chain.createInputsVector(builder, []), Chain.createOutputsVector(builder, []), instructions, 0);
  const chains = ExecutionPlan.createChainsVector(builder, [chain]);
  const operators = ExecutionPlan.createOperatorsVector(
    builder,
    method.operators.map((op) => Operator.createOperator(builder, builder.createString(op.name), builder.createString(op.overload))),
  );
  const delegates = ExecutionPlan.createDelegatesVector(
    builder,
    method.delegates.map((delegate) => {
      const id = builder.createString(delegate.backendId);
      const ref = payloadReference(delegate.payload);
      const processed = BackendDelegateDataReference.createBackendDelegateDataReference(builder, ref.location, ref.index);
      const specs = BackendDelegate.createCompileSpecsVector(
        builder,
        (delegate.compileSpecs ?? []).map((spec) =>
          CompileSpec.createCompileSpec(builder, builder.createString(spec.key), CompileSpec.createValueVector(builder, spec.value)),
        ),
      );
      BackendDelegate.startBackendDelegate(builder);
      BackendDelegate.addId(builder, id);
      BackendDelegate.addProcessed(builder, processed);
      BackendDelegate.addCompileSpecs(builder, specs);
      return BackendDelegate.endBackendDelegate(builder);
    }),
  );
  const bufferSizes = ExecutionPlan.createNonConstBufferSizesVector(
    builder,
    method.nonConstBufferSizes.map((s) => BigInt(s)),
  );
  ExecutionPlan.startExecutionPlan(builder);
  ExecutionPlan.addName(builder, name);
  if (names !== undefined) ExecutionPlan.addContainerMetaType(builder, names);
  ExecutionPlan.addValues(builder, values);
  ExecutionPlan.addInputs(builder, inputs);
  ExecutionPlan.addOutputs(builder, outputs);
  ExecutionPlan.addChains(builder, chains);
  ExecutionPlan.addOperators(builder, operators);
  ExecutionPlan.addDelegates(builder, delegates);
  ExecutionPlan.addNonConstBufferSizes(builder, bufferSizes);
  return ExecutionPlan.endExecutionPlan(builder);
}

function subsegmentOffsets(builder: flatbuffers.Builder, segmentIndex: number, offsets: readonly number[]): flatbuffers.Offset {
  const vector = SubsegmentOffsets.createOffsetsVector(
    builder,
    offsets.map((o) => BigInt(o)),
  );
  return SubsegmentOffsets.createSubsegmentOffsets(builder, segmentIndex, vector);
}

// ------------------------------------------------------------------ entry points

export interface SerializedPte {
  readonly bytes: Uint8Array;
  readonly layout: PteLayout;
}

export function serializePte(program: PteProgram, options: PteWriteOptions = {}): SerializedPte {
  const segmentAlignment = options.segmentAlignment ?? DEFAULT_SEGMENT_ALIGNMENT;
  const constantAlignment = options.constantAlignment ?? DEFAULT_CONSTANT_ALIGNMENT;
  const placement = options.delegatePlacement ?? 'segment';
  for (const [label, value] of [
    ['segmentAlignment', segmentAlignment],
    ['constantAlignment', constantAlignment],
  ] as const) {
    if (!isPowerOfTwo(value)) throw new EtnaError('INVALID_INPUT', `${label} must be a power of two, got ${String(value)}`);
  }
  validatePteProgram(program);

  // 1. Segments in the reference order: constants, initial values, delegate payloads, named data.
  const pending: PendingSegment[] = [];
  const constants = concatenate(program.constants, constantAlignment);
  pending.push({ purpose: 'constants', data: constants.data, alignment: 1 });
  const constantSegmentIndex = 0;
  let mutable: { index: number; offsets: number[] } | null = null;
  if ((program.mutableData?.length ?? 0) > 0) {
    const concatenated = concatenate(program.mutableData!, 1);
    mutable = { index: pending.length, offsets: concatenated.offsets };
    pending.push({ purpose: 'mutable-data', data: concatenated.data, alignment: 1 });
  }
  const payloads = program.delegatePayloads ?? [];
  const inlineBlobs: Uint8Array[] = [];
  const payloadReferences = payloads.map((payload): DelegateReference => {
    if (placement === 'inline' || payload.byteLength === 0) {
      inlineBlobs.push(payload);
      return { location: DataLocation.INLINE, index: inlineBlobs.length - 1 };
    }
    const existing = pending.findIndex((s) => s.purpose === 'delegate' && sameBytes(s.data, payload));
    if (existing >= 0) return { location: DataLocation.SEGMENT, index: existing };
    pending.push({ purpose: 'delegate', data: payload, alignment: 1 });
    return { location: DataLocation.SEGMENT, index: pending.length - 1 };
  });
  const namedEntries = (program.namedData ?? []).map((blob) => {
    const existing = pending.findIndex((s) => s.purpose === 'named-data' && sameBytes(s.data, blob.data));
    if (existing >= 0) {
      pending[existing]!.alignment = Math.max(pending[existing]!.alignment, blob.alignment ?? 1);
      return { key: blob.key, segmentIndex: existing };
    }
    pending.push({ purpose: 'named-data', data: blob.data, alignment: blob.alignment ?? 1 });
    return { key: blob.key, segmentIndex: pending.length - 1 };
  });

  // 2. Offsets relative to the segment base; an empty segment does not advance the cursor.
  let cursor = 0;
  const segments = pending.map((segment): PteSegmentLayout => {
    const alignment = (segmentAlignment * segment.alignment) / gcd(segmentAlignment, segment.alignment);
    const offset = alignUp(cursor, alignment);
    cursor = offset + segment.data.byteLength;
    return { purpose: segment.purpose, offset, size: segment.data.byteLength };
  });
  const segmentDataSize = segments.reduce((end, s) => Math.max(end, s.offset + s.size), 0);

  // 3. The FlatBuffer.
  const builder = new flatbuffers.Builder(64 * 1024);
  const plans = program.methods.map((method) => buildMethod(builder, method, (p) => payloadReferences[p]!));
  const executionPlan = Program.createExecutionPlanVector(builder, plans);
  const segmentTables = Program.createSegmentsVector(
    builder,
    segments.map((s) => DataSegment.createDataSegment(builder, BigInt(s.offset), BigInt(s.size))),
  );
  const constantSegment = subsegmentOffsets(builder, constantSegmentIndex, constants.offsets);
  const mutableSegments =
    mutable === null ? 0 : Program.createMutableDataSegmentsVector(builder, [subsegmentOffsets(builder, mutable.index, mutable.offsets)]);
  const inlineData =
    inlineBlobs.length === 0
      ? 0
      : Program.createBackendDelegateDataVector(
          builder,
          inlineBlobs.map((blob) =>
            BackendDelegateInlineData.createBackendDelegateInlineData(builder, alignedByteVector(builder, blob, SCHEMA_FORCE_ALIGN)),
          ),
        );
  const namedData =
    namedEntries.length === 0
      ? 0
      : Program.createNamedDataVector(
          builder,
          namedEntries.map((entry) => NamedData.createNamedData(builder, builder.createString(entry.key), entry.segmentIndex)),
        );
  Program.startProgram(builder);
  Program.addVersion(builder, 0);
  Program.addExecutionPlan(builder, executionPlan);
  if (inlineData) Program.addBackendDelegateData(builder, inlineData);
  Program.addSegments(builder, segmentTables);
  Program.addConstantSegment(builder, constantSegment);
  if (mutableSegments) Program.addMutableDataSegments(builder, mutableSegments);
  if (namedData) Program.addNamedData(builder, namedData);
  Program.finishProgramBuffer(builder, Program.endProgram(builder));
  const flatbuffer = builder.asUint8Array();

  // 4. Without segment data the file is the FlatBuffer alone.
  if (segmentDataSize === 0) {
    const bytes = flatbuffer.slice();
    return {
      bytes,
      layout: {
        flatbufferSize: flatbuffer.byteLength,
        headerLength: 0,
        programSize: bytes.byteLength,
        segmentBaseOffset: 0,
        segmentDataSize: 0,
        fileSize: bytes.byteLength,
        segments,
        constantOffsets: constants.offsets,
        mutableDataOffsets: mutable?.offsets ?? null,
      },
    };
  }

  // 5. Splice the extended header in after the identifier. Its padded length keeps
  //    every force_align'ed vector aligned, so only the root offset changes.
  const paddedHeader = alignUp(EXTENDED_HEADER_LENGTH, SCHEMA_FORCE_ALIGN);
  const programSize = flatbuffer.byteLength + paddedHeader;
  const segmentBaseOffset = alignUp(programSize, segmentAlignment);
  const bytes = new Uint8Array(segmentBaseOffset + segmentDataSize);
  const view = new DataView(bytes.buffer);
  const rootOffset = new DataView(flatbuffer.buffer, flatbuffer.byteOffset, 8).getUint32(0, true);
  view.setUint32(0, rootOffset + paddedHeader, true);
  bytes.set(flatbuffer.subarray(4, 8), 4);
  bytes.set(new TextEncoder().encode(EXTENDED_HEADER_MAGIC), 8);
  view.setUint32(12, EXTENDED_HEADER_LENGTH, true);
  view.setBigUint64(16, BigInt(programSize), true);
  view.setBigUint64(24, BigInt(segmentBaseOffset), true);
  view.setBigUint64(32, BigInt(segmentDataSize), true);
  bytes.set(flatbuffer.subarray(8), 8 + paddedHeader);
  pending.forEach((segment, i) => bytes.set(segment.data, segmentBaseOffset + segments[i]!.offset));
  return {
    bytes,
    layout: {
      flatbufferSize: flatbuffer.byteLength,
      headerLength: EXTENDED_HEADER_LENGTH,
      programSize,
      segmentBaseOffset,
      segmentDataSize,
      fileSize: bytes.byteLength,
      segments,
      constantOffsets: constants.offsets,
      mutableDataOffsets: mutable?.offsets ?? null,
    },
  };
}

/** Serializes a program description to .pte bytes. */
export function writePte(program: PteProgram, options?: PteWriteOptions): Uint8Array {
  return serializePte(program, options).bytes;
}
