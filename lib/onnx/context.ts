// The state of lowering one ONNX graph into one method: the value of every
// ONNX name (an import-time constant or a tensor of the method), and helpers
// that emit kernel calls with static shapes.
import { EtnaError } from '../errors.js';
import type { DType } from '../export/dtype.js';
import type { KernelArgument, MethodBuilder, TensorInput } from '../export/method-builder.js';
import type { ProgramBuilder } from '../export/program-builder.js';
import type { TensorValue } from '../export/graph.js';
import { fromNumbers, toNumbers, type ConstTensor } from './constant.js';
import type { OnnxAttribute, OnnxGraph, OnnxNode } from './proto.js';

/** An ONNX value: known at import time, or a tensor computed by the method. */
export type OnnxValue =
  | { readonly kind: 'const'; readonly tensor: ConstTensor }
  | { readonly kind: 'tensor'; readonly tensor: TensorInput; readonly dtype: DType; readonly shape: readonly number[] };

export function constValue(tensor: ConstTensor): OnnxValue {
  return { kind: 'const', tensor };
}

export function tensorValue(tensor: TensorValue): OnnxValue {
  return { kind: 'tensor', tensor, dtype: tensor.dtype, shape: tensor.shape };
}

export function shapeOf(value: OnnxValue): readonly number[] {
  return value.kind === 'const' ? value.tensor.shape : value.shape;
}

export function dtypeOf(value: OnnxValue): DType {
  return value.kind === 'const' ? value.tensor.dtype : value.dtype;
}

export function isFloat(dtype: DType): boolean {
  return dtype === 'float32' || dtype === 'float64' || dtype === 'float16' || dtype === 'bfloat16';
}

/** An 8-bit integer value also held as float32 values minus its zero point, the form integer products read. */
export interface CenteredForm {
  readonly centered: OnnxValue;
  readonly zeroPoint: OnnxValue;
}

/**
 * A node of a statically quantized convolution or linear the XNNPACK path
 * computes on 8-bit codes (ops/qdq.ts): the product, the DequantizeLinear of
 * its activation, of its weight or bias (`constant`), and a QuantizeLinear of
 * its result or of an activation only such products read.
 */
export type QuantizedRole = 'product' | 'activation' | 'constant' | 'quantize';

/** A constant DequantizeLinear computed from codes (int8 weights, int32 biases): one scale per index of `axis`. */
export interface DequantizedCodes {
  readonly codes: ConstTensor;
  readonly scales: readonly number[];
  readonly axis: number;
}

/** One graph being imported into one method (export/lowering.ts's LoweringContext is another thing: passes over a built program). */
export class ImportContext {
  readonly values = new Map<string, OnnxValue>();
  /** Which node produced each name, for error messages. */
  readonly producers = new Map<string, string>();
  /** The input shapes given at import (e.g. `x=1x5`), named when a node's operand shapes contradict each other. */
  givenShapes = '';
  /** Quantized values (DynamicQuantizeLinear's y) an integer product reads in float32 without converting them back. */
  readonly centeredForms = new WeakMap<OnnxValue, CenteredForm>();
  /** Integer results (ConvInteger's, MatMulInteger's) that hold integers a float32 tensor holds too: a Cast to float32 returns it. */
  readonly floatForms = new WeakMap<OnnxValue, OnnxValue>();
  /** The role of each node of a statically quantized product (set on the XNNPACK path only). */
  readonly quantizedRoles = new Map<OnnxNode, QuantizedRole>();
  /** Dequantized constants with the codes they came from, which a quantized product reads instead. */
  readonly dequantizedConstants = new WeakMap<OnnxValue, DequantizedCodes>();
  private readonly materialized = new WeakMap<ConstTensor, TensorInput>();
  /** Kernels that produce deferred tensors, emitted when something first reads the tensor. */
  private readonly pending = new Map<TensorInput, () => void>();
  private constantCount = 0;

  constructor(
    readonly program: ProgramBuilder,
    readonly m: MethodBuilder,
    readonly opset: number,
    private readonly constantPrefix: string,
    /** Run float32 convolutions and matrix products in float64 (more exact; weights stored twice as wide). */
    readonly wideAccumulation = false,
    /** The program is lowered to XNNPACK: emit float32 products in the forms its partitioner takes, unsplit. */
    readonly xnnpack = false,
    /** The program runs a range of input sizes: prefer kernels that follow their input's size over import-time index maps. */
    readonly followsInputSize = false,
  ) {}

  /** A tensor operand for a value; constants become program constants on first use, deferred tensors are computed. */
  tensor(value: OnnxValue): TensorInput {
    if (value.kind === 'tensor') {
      const produce = this.pending.get(value.tensor);
      if (produce !== undefined) {
        this.pending.delete(value.tensor);
        produce();
      }
      return value.tensor;
    }
    const cached = this.materialized.get(value.tensor);
    if (cached !== undefined) return cached;
    const t = value.tensor;
    const made = this.program.constant(`${this.constantPrefix}${this.constantCount++}`, t.dtype, t.shape, t.data);
    this.materialized.set(t, made);
    return made;
  }

  /**
   * A tensor whose kernels `produce` emits only when something reads it (through tensor()): an
   * integer form the following op usually skips for the float32 one beside it. Unread, it costs
   * neither a kernel nor memory.
   */
  deferred(dtype: DType, shape: readonly number[], produce: (out: TensorValue) => void): OnnxValue {
    const out = this.out(dtype, shape);
    this.pending.set(out, () => produce(out));
    return tensorValue(out);
  }

  /** A fresh activation tensor. */
  out(dtype: DType, shape: readonly number[]): TensorValue {
    return this.m.graph.addTensor(dtype, [...shape]);
  }

  kernel(name: string, args: readonly KernelArgument[], ret?: TensorValue): void {
    this.m.kernel(name, args, ret);
  }

  /** Emits `name` with `args` followed by one fresh out tensor, and returns it. */
  emit(name: string, args: readonly KernelArgument[], dtype: DType, shape: readonly number[]): OnnxValue {
    const out = this.out(dtype, shape);
    this.kernel(name, [...args, out]);
    return tensorValue(out);
  }

  /** A Scalar argument typed for a tensor of `dtype`. */
  scalar(dtype: DType, value: number): KernelArgument {
    if (isFloat(dtype)) return { double: value };
    if (dtype === 'bool') return { bool: value !== 0 };
    return { int: Math.trunc(value) };
  }

  /** A fresh constant value from numbers. */
  constant(dtype: DType, shape: readonly number[], values: ArrayLike<number>): OnnxValue {
    return constValue(fromNumbers(dtype, shape, values));
  }
}

/** One node being lowered: its inputs, attributes and error helpers. */
export class NodeView {
  constructor(
    readonly node: OnnxNode,
    readonly inputs: readonly (OnnxValue | undefined)[],
    readonly ctx: ImportContext,
  ) {}

  get op(): string {
    return this.node.opType;
  }

  get opset(): number {
    return this.ctx.opset;
  }

  get label(): string {
    return `node '${this.node.name || this.node.outputs[0] || '?'}' (${this.node.opType})`;
  }

  fail(message: string): never {
    throw new EtnaError('UNSUPPORTED_OPERATOR', `${this.label}: ${message}`);
  }

  /** Refuses operands whose shapes contradict each other (the model, or the shapes given at import, are wrong). */
  invalid(message: string): never {
    throw new EtnaError('INVALID_INPUT', `${this.label}: ${message}`);
  }

  input(i: number): OnnxValue {
    const value = this.inputs[i];
    if (value === undefined) this.fail(`input ${i} is required`);
    return value;
  }

  optional(i: number): OnnxValue | undefined {
    return this.inputs[i];
  }

  /** An input that must be known at import time (shapes, axes, pads ...). */
  constInput(i: number, what: string): ConstTensor {
    const value = this.input(i);
    if (value.kind !== 'const') {
      const name = this.node.inputs[i]!;
      const producer = this.ctx.producers.get(name);
      this.fail(
        `${what} (input ${i}, '${name}'${producer ? `, from ${producer}` : ''}) must be known at import time; bind it with a constant or fix the input shapes`,
      );
    }
    return value.tensor;
  }

  constInts(i: number, what: string): number[] | undefined {
    if (this.inputs[i] === undefined) return undefined;
    return toNumbers(this.constInput(i, what));
  }

  attribute(name: string): OnnxAttribute | undefined {
    return this.node.attributes.find((a) => a.name === name);
  }

  int(name: string, fallback: number): number {
    const a = this.attribute(name);
    return a?.i === undefined ? fallback : Number(a.i);
  }

  float(name: string, fallback: number): number {
    const a = this.attribute(name);
    return a?.f === undefined ? fallback : a.f;
  }

  ints(name: string): number[] | undefined {
    const a = this.attribute(name);
    return a === undefined ? undefined : a.ints.map(Number);
  }

  floats(name: string): number[] | undefined {
    return this.attribute(name)?.floats;
  }

  string(name: string, fallback: string): string {
    const a = this.attribute(name);
    return a?.s === undefined ? fallback : new TextDecoder().decode(a.s);
  }

  strings(name: string): string[] | undefined {
    const a = this.attribute(name);
    return a === undefined ? undefined : a.strings.map((s) => new TextDecoder().decode(s));
  }

  graph(name: string): OnnxGraph {
    const g = this.attribute(name)?.g;
    if (g === undefined) this.fail(`attribute '${name}' (a graph) is missing`);
    return g;
  }
}
