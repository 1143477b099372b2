// The authoring IR: one MethodGraph per method, held by a ProgramGraph with the
// program-wide constants, shared buffers, delegate payloads and named data.
// Values and instructions mirror the .pte values table and KernelCall/DelegateCall
// instructions one to one, so lowering passes, the planner and the writer all
// work on the same indices.
import { EtnaError } from '../errors.js';
import type { DType } from './dtype.js';
import { dtypeInfo } from './dtype.js';
import type { Int4GroupWeights, Int8ChannelWeights } from './quantize.js';
import { formatShape, numel, type Shape } from './shape.js';
import type { NonTensorValue } from './writer.js';

/** A weight declared once per program; every method that reads it refers to the same stored bytes. */
export class ConstantTensor {
  readonly kind = 'constant' as const;

  /** @internal */
  constructor(
    readonly owner: object,
    readonly name: string,
    readonly dtype: DType,
    readonly shape: Shape,
    readonly bytes: Uint8Array,
    /** Set for 8da4w linear weights: `bytes` are their dequantized values, the XNNPACK lowering writes these codes. */
    readonly int4Groups?: Int4GroupWeights,
    /** Set for 8da8w linear weights: `bytes` are their dequantized values, the XNNPACK lowering writes these codes. */
    readonly int8Channels?: Int8ChannelWeights,
  ) {}

  get nbytes(): number {
    return this.bytes.byteLength;
  }

  toString(): string {
    return `constant '${this.name}' ${this.dtype}${formatShape(this.shape)}`;
  }
}

/** Mutable state declared once per program, placed at one offset of mem_id 2 for every method. */
export class SharedBuffer {
  readonly kind = 'shared' as const;

  /** @internal */
  constructor(
    readonly owner: object,
    readonly name: string,
    readonly dtype: DType,
    readonly shape: Shape,
    /** Initial bytes (serialized as a mutable-data segment entry), or undefined for zeros. */
    readonly init: Uint8Array | undefined,
  ) {}

  get nbytes(): number {
    return numel(this.shape) * dtypeInfo(this.dtype).byteSize;
  }

  toString(): string {
    return `shared buffer '${this.name}' ${this.dtype}${formatShape(this.shape)}`;
  }
}

/** Where a tensor value's bytes come from. */
export type TensorOrigin =
  | { readonly kind: 'activation' }
  | { readonly kind: 'input' }
  | { readonly kind: 'constant'; readonly constant: ConstantTensor }
  | { readonly kind: 'shared'; readonly buffer: SharedBuffer };

export interface TensorNode {
  readonly kind: 'tensor';
  readonly dtype: DType;
  readonly shape: Shape;
  readonly origin: TensorOrigin;
  /** Set for method inputs: the input's name (stored in the program, used in error messages). */
  readonly label?: string;
  /**
   * Dims whose size may be smaller at run time: `shape` holds their upper
   * bound, the memory plan reserves it, and the program marks the tensor
   * DYNAMIC_BOUND so kernels and delegates resize it within that capacity.
   */
  readonly dynamicDims?: readonly number[];
}

/** Whether a tensor's size can change from call to call (within its planned bound). */
export function isBounded(node: TensorNode): boolean {
  return node.dynamicDims !== undefined && node.dynamicDims.length > 0;
}

export type GraphValue = TensorNode | NonTensorValue;

export type GraphInstruction =
  | { readonly kind: 'kernel'; readonly name: string; readonly overload: string; readonly args: readonly number[] }
  | { readonly kind: 'delegate'; readonly delegate: number; readonly args: readonly number[] };

export interface CompileSpec {
  readonly key: string;
  readonly value: Uint8Array;
}

export interface GraphDelegate {
  readonly backendId: string;
  /** Index into ProgramGraph.delegatePayloads. */
  readonly payload: number;
  readonly compileSpecs: readonly CompileSpec[];
}

export interface NamedBlob {
  readonly key: string;
  readonly data: Uint8Array;
  /** Alignment the consumer needs for the blob's first byte (the segment is aligned to lcm(128, this)). */
  readonly alignment: number;
}

/** A typed handle on a tensor value of one method. */
export class TensorValue {
  /** @internal */
  constructor(
    readonly graph: MethodGraph,
    readonly index: number,
    readonly dtype: DType,
    readonly shape: Shape,
  ) {}

  get rank(): number {
    return this.shape.length;
  }

  toString(): string {
    return `v${this.index}: ${this.dtype}${formatShape(this.shape)}`;
  }
}

export class MethodGraph {
  readonly values: GraphValue[] = [];
  readonly instructions: GraphInstruction[] = [];
  readonly inputs: number[] = [];
  readonly outputs: number[] = [];
  /** One per output: the name given to `MethodBuilder.output`, or `output_<i>`. */
  readonly outputNames: string[] = [];
  readonly delegates: GraphDelegate[] = [];
  /**
   * Extra bytes appended to every planned arena of this method; a backend that
   * reads past tensor ends (XNNPACK: 64) sets it during lowering.
   */
  arenaPaddingBytes = 0;
  private readonly programTensors = new Map<ConstantTensor | SharedBuffer, TensorValue>();

  constructor(readonly name: string) {}

  addValue(value: GraphValue): number {
    this.values.push(value);
    return this.values.length - 1;
  }

  value(index: number): GraphValue {
    const value = this.values[index];
    if (value === undefined) {
      throw new EtnaError('INTERNAL', `method '${this.name}': value index ${index} is out of range (${this.values.length} values)`);
    }
    return value;
  }

  tensorNode(index: number): TensorNode {
    const value = this.value(index);
    if (value.kind !== 'tensor') {
      throw new EtnaError('INTERNAL', `method '${this.name}': value ${index} is a ${value.kind}, not a tensor`);
    }
    return value;
  }

  /** A new tensor value; activations are written by the instruction that names them as an out argument. */
  addTensor(dtype: DType, shape: Shape, origin: TensorOrigin = { kind: 'activation' }, label?: string): TensorValue {
    const node: TensorNode =
      label === undefined ? { kind: 'tensor', dtype, shape, origin } : { kind: 'tensor', dtype, shape, origin, label };
    return new TensorValue(this, this.addValue(node), dtype, shape);
  }

  /** Marks the dims of tensor `index` whose size may shrink at run time (see TensorNode.dynamicDims). */
  markDynamic(index: number, dims: readonly number[]): void {
    const node = this.tensorNode(index);
    if (node.origin.kind === 'constant' || node.origin.kind === 'shared') {
      throw new EtnaError(
        'INVALID_INPUT',
        `method '${this.name}': tensor v${index} is a ${node.origin.kind}; only inputs and activations can have a dynamic shape`,
      );
    }
    const rank = node.shape.length;
    const sorted = [...new Set(dims)].sort((a, b) => a - b);
    if (sorted.some((d) => !Number.isInteger(d) || d < 0 || d >= rank)) {
      throw new EtnaError(
        'INVALID_INPUT',
        `method '${this.name}': dynamic dims ${JSON.stringify(dims)} are outside tensor v${index} of rank ${rank}`,
      );
    }
    this.values[index] = { ...node, dynamicDims: sorted };
  }

  /** The method's tensor value for a program-level constant or shared buffer, created on first use. */
  programTensor(handle: ConstantTensor | SharedBuffer): TensorValue {
    let tensor = this.programTensors.get(handle);
    if (tensor === undefined) {
      const origin: TensorOrigin = handle.kind === 'constant' ? { kind: 'constant', constant: handle } : { kind: 'shared', buffer: handle };
      tensor = this.addTensor(handle.dtype, handle.shape, origin);
      this.programTensors.set(handle, tensor);
    }
    return tensor;
  }

  addKernelCall(qualifiedName: string, args: readonly number[]): void {
    const dot = qualifiedName.indexOf('.', qualifiedName.indexOf('::') + 2);
    const name = dot < 0 ? qualifiedName : qualifiedName.slice(0, dot);
    const overload = dot < 0 ? '' : qualifiedName.slice(dot + 1);
    if (!/^[A-Za-z_][\w]*::[A-Za-z_]\w*$/.test(name)) {
      throw new EtnaError('INVALID_INPUT', `'${qualifiedName}' is not an operator name of the form namespace::op[.overload]`);
    }
    this.instructions.push({ kind: 'kernel', name, overload, args: [...args] });
  }

  /** Value indices an instruction reads or writes, with list values expanded to their items. */
  instructionOperands(instruction: GraphInstruction): number[] {
    const operands: number[] = [];
    for (const arg of instruction.args) {
      operands.push(arg);
      const value = this.value(arg);
      if (value.kind === 'tensorList' || value.kind === 'optionalTensorList' || value.kind === 'intList') {
        for (const item of value.items) if (item >= 0) operands.push(item);
      }
    }
    return operands;
  }
}

export class ProgramGraph {
  readonly methods: MethodGraph[] = [];
  readonly constants: ConstantTensor[] = [];
  readonly sharedBuffers: SharedBuffer[] = [];
  readonly delegatePayloads: Uint8Array[] = [];
  readonly namedData: NamedBlob[] = [];

  method(name: string): MethodGraph {
    const method = this.methods.find((m) => m.name === name);
    if (method === undefined)
      throw new EtnaError('METHOD_NOT_FOUND', `no method '${name}' (have ${this.methods.map((m) => m.name).join(', ')})`);
    return method;
  }
}
