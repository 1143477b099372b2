// Authoring entry point: declare constants and shared buffers once, add methods,
// then lower, plan and write the program.
import { EtnaError } from '../errors.js';
import { assembleProgram } from './assemble.js';
import { dtypeInfo, encodeTensorData, type DType, type TensorInitData } from './dtype.js';
import { ConstantTensor, MethodGraph, ProgramGraph, SharedBuffer } from './graph.js';
import { runLoweringPasses, type LoweringPass } from './lowering.js';
import { MethodBuilder } from './method-builder.js';
import { planProgram, type PlannerOptions, type ProgramMemoryPlan } from './planner.js';
import {
  DEFAULT_8DA4W_GROUP_SIZE,
  dequantizeInt4Groups,
  dequantizeInt8Channels,
  quantizeInt4Groups,
  quantizeInt8Channels,
  type Int4GroupWeights,
  type Int8ChannelWeights,
} from './quantize.js';
import { checkShape, numel, type Shape } from './shape.js';
import { serializePte, type PteLayout, type PteProgram, type PteWriteOptions } from './writer.js';
import { xnnpackLowering, type XnnpackLoweringOptions } from './xnnpack/lowering.js';

export interface ExportOptions {
  /** Passes run on every method before planning (the seam for backend lowering). */
  lowering?: readonly LoweringPass[];
  /**
   * Runs the XNNPACK lowering pass after `lowering`: runs of supported
   * operators become XnnpackBackend delegate calls. Off by default (every
   * instruction stays a portable kernel call).
   */
  xnnpack?: boolean | XnnpackLoweringOptions;
  planner?: PlannerOptions;
  writer?: PteWriteOptions;
}

export interface ExportResult {
  bytes: Uint8Array;
  plan: ProgramMemoryPlan;
  /** The wire-level description that was serialized. */
  program: PteProgram;
  layout: PteLayout;
}

const NAME_PATTERN = /^[A-Za-z_][\w.\-/]*$/;

export class ProgramBuilder {
  private readonly graph = new ProgramGraph();
  private readonly constantNames = new Set<string>();
  private readonly sharedNames = new Set<string>();
  private exported = false;

  /**
   * Declares a constant (a weight). It is stored once in the constant segment
   * and every method that uses it refers to the same entry.
   */
  constant(name: string, dtype: DType, shape: Shape, data: TensorInitData): ConstantTensor {
    this.checkOpen();
    const what = `constant '${name}'`;
    this.checkName(name, 'constant', this.constantNames);
    dtypeInfo(dtype);
    const checked = checkShape(shape, what);
    const bytes = encodeTensorData(dtype, numel(checked), data, what);
    return this.addConstant(new ConstantTensor(this, name, dtype, checked, bytes));
  }

  private addConstant(constant: ConstantTensor): ConstantTensor {
    this.graph.constants.push(constant);
    this.constantNames.add(constant.name);
    return constant;
  }

  /**
   * Declares the weight [out, in] of an 8da4w linear (int8 dynamic
   * activations, 4-bit weights), quantized here as export_llama's `-qmode
   * 8da4w` does. Use it as the weight of `MethodBuilder.linear`: the XNNPACK
   * lowering writes that linear as a per-token int8 Convert feeding a
   * FullyConnected over the 4-bit codes with bf16 group scales. Without the
   * lowering the linear runs in float32 on the dequantized weights.
   */
  linear8da4wWeight(
    name: string,
    shape: readonly [number, number],
    data: ArrayLike<number>,
    options: { groupSize?: number } = {},
  ): ConstantTensor {
    return this.quantizedLinearWeight(name, shape, (outFeatures, inFeatures) => {
      const int4 = quantizeInt4Groups(data, outFeatures, inFeatures, options.groupSize ?? DEFAULT_8DA4W_GROUP_SIZE);
      return { values: dequantizeInt4Groups(int4), int4 };
    });
  }

  /**
   * Declares the weight [out, in] of an 8da8w linear (int8 dynamic
   * activations, 8-bit weights with one scale per output channel), as
   * export_llama's `--preq_mode 8da4w_output_8da8w` writes the output layer.
   * The XNNPACK lowering writes that linear as a per-token int8 Convert
   * feeding a FullyConnected over qcint8 codes; without it the linear runs
   * in float32 on the dequantized weights.
   */
  linear8da8wWeight(name: string, shape: readonly [number, number], data: ArrayLike<number>): ConstantTensor {
    return this.quantizedLinearWeight(name, shape, (outFeatures, inFeatures) => {
      const int8 = quantizeInt8Channels(data, outFeatures, inFeatures);
      return { values: dequantizeInt8Channels(int8), int8 };
    });
  }

  // A quantized linear's weight constant: the float32 values its codes stand
  // for, which the float path computes with, and the codes the XNNPACK
  // lowering writes.
  private quantizedLinearWeight(
    name: string,
    shape: readonly [number, number],
    quantize: (outFeatures: number, inFeatures: number) => { values: Float32Array; int4?: Int4GroupWeights; int8?: Int8ChannelWeights },
  ): ConstantTensor {
    this.checkOpen();
    this.checkName(name, 'constant', this.constantNames);
    const [outFeatures, inFeatures] = checkShape(shape, `constant '${name}'`) as [number, number];
    const { values, int4, int8 } = quantize(outFeatures, inFeatures);
    const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    return this.addConstant(new ConstantTensor(this, name, 'float32', [outFeatures, inFeatures], bytes, int4, int8));
  }

  /**
   * Declares mutable state shared by all methods: placed once in mem_id 2 at
   * the same offset for every method, read and written in place. With `init`
   * the runtime copies those bytes in when a method using it is loaded;
   * without, it starts as zeros.
   */
  sharedBuffer(name: string, dtype: DType, shape: Shape, init?: TensorInitData): SharedBuffer {
    this.checkOpen();
    const what = `shared buffer '${name}'`;
    this.checkName(name, 'shared buffer', this.sharedNames);
    dtypeInfo(dtype);
    const checked = checkShape(shape, what);
    const bytes = init === undefined ? undefined : encodeTensorData(dtype, numel(checked), init, `${what} init`);
    const buffer = new SharedBuffer(this, name, dtype, checked, bytes);
    this.graph.sharedBuffers.push(buffer);
    this.sharedNames.add(name);
    return buffer;
  }

  /** Adds a method; `build` declares inputs, emits ops and sets outputs. */
  method(name: string, build: (method: MethodBuilder) => void): this {
    this.checkOpen();
    if (typeof name !== 'string' || name.length === 0) throw new EtnaError('INVALID_INPUT', 'a method needs a non-empty name');
    if (this.graph.methods.some((m) => m.name === name)) throw new EtnaError('INVALID_INPUT', `method '${name}' is already defined`);
    const graph = new MethodGraph(name);
    build(new MethodBuilder(graph, this));
    this.graph.methods.push(graph);
    return this;
  }

  get methodNames(): string[] {
    return this.graph.methods.map((m) => m.name);
  }

  /** The program graph as authored so far (read it; do not keep building through it). */
  get programGraph(): ProgramGraph {
    return this.graph;
  }

  /** Memory plan of the program as authored (no lowering). */
  plan(options?: PlannerOptions): ProgramMemoryPlan {
    return planProgram(this.graph, options);
  }

  /**
   * Lowers, plans and serializes the program. Lowering passes rewrite the
   * graphs, so a builder exports once.
   */
  export(options: ExportOptions = {}): ExportResult {
    this.checkOpen();
    if (this.graph.methods.length === 0) throw new EtnaError('INVALID_INPUT', 'a program needs at least one method');
    this.exported = true;
    const xnnpack =
      options.xnnpack === undefined || options.xnnpack === false ? [] : [xnnpackLowering(options.xnnpack === true ? {} : options.xnnpack)];
    runLoweringPasses(this.graph, [...(options.lowering ?? []), ...xnnpack]);
    const plan = planProgram(this.graph, options.planner);
    const program = assembleProgram(this.graph, plan);
    const { bytes, layout } = serializePte(program, options.writer);
    return { bytes, plan, program, layout };
  }

  /** Shorthand for `export(options).bytes`: the .pte file. */
  toPte(options?: ExportOptions): Uint8Array {
    return this.export(options).bytes;
  }

  private checkOpen(): void {
    if (this.exported)
      throw new EtnaError('INVALID_INPUT', 'this ProgramBuilder has been exported; create a new one to author another program');
  }

  private checkName(name: string, what: string, taken: Set<string>): void {
    if (typeof name !== 'string' || !NAME_PATTERN.test(name)) {
      throw new EtnaError(
        'INVALID_INPUT',
        `${what} name '${String(name)}' must start with a letter or '_' and contain only letters, digits, '_', '.', '-', '/'`,
      );
    }
    if (taken.has(name)) throw new EtnaError('INVALID_INPUT', `${what} '${name}' is already declared`);
  }
}
