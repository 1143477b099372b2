// ONNX model -> multi-method ExecuTorch program. The graph is specialised to
// fixed input shapes and bound constant inputs, folded (shape arithmetic, If
// on known conditions), and lowered op by op onto the authoring builder.
// State pairs become shared buffers at mem_id 2 that the main method reads and
// writes back in place; `reset` zeroes them.
import { EtnaError } from '../errors.js';
import type { DType } from '../export/dtype.js';
import { TensorValue } from '../export/graph.js';
import type { MethodBuilder } from '../export/method-builder.js';
import { ProgramBuilder, type ExportOptions } from '../export/program-builder.js';
import type { MethodGraph, SharedBuffer } from '../export/graph.js';
import { numel } from '../shape.js';
import { constFromProto, fromNumbers, type ConstData, type ConstTensor } from './constant.js';
import { constValue, dtypeOf, ImportContext, NodeView, shapeOf, tensorValue, type OnnxValue } from './context.js';
import { computeDtype, dtypeFromOnnx, onnxDtype, ONNX_DTYPE_CODES } from './dtype.js';
import { rewriteGraph } from './rewrite.js';
import { sortNodes } from './toposort.js';
import { foldNode } from './fold.js';
import { markBoundedDims, probeShapes, shapeBounds, type InputShape, type ShapeBounds } from './bounded.js';
import { OP_HANDLERS } from './ops/index.js';
import { markQuantizedProducts } from './ops/qdq.js';
import { convertInto, reshape, where } from './ops/common.js';
import { decodeModel, type OnnxGraph, type OnnxModel, type OnnxNode, type OnnxTensorProto, type OnnxValueInfo } from './proto.js';

/** The oldest default-domain opset the importer accepts. */
export const MIN_ONNX_OPSET = 7;

/**
 * Ops whose definitions at opsets 1-6 read the same as the versions the
 * importer lowers (their legacy attributes, such as consumed_inputs, change
 * nothing at inference). A model below opset 7 that uses only these imports.
 */
const UNCHANGED_SINCE_OPSET_1_TO_6: ReadonlySet<string> = new Set([
  'Elu',
  'Selu',
  'HardSigmoid',
  'Softplus',
  'Not',
  'GlobalAveragePool',
  'GlobalMaxPool',
  'InstanceNormalization',
  'LeakyRelu',
  'Relu',
  'Sigmoid',
  'Tanh',
  'Exp',
  'Log',
  'Sqrt',
  'Neg',
  'Abs',
  'Reciprocal',
  'Floor',
  'Ceil',
  'Identity',
  'Transpose',
]);

function collectOpTypes(graph: OnnxGraph): string[] {
  const ops = new Set<string>();
  const visit = (g: OnnxGraph): void => {
    for (const node of g.nodes) {
      ops.add(node.opType);
      for (const attr of node.attributes) if (attr.g !== undefined) visit(attr.g);
    }
  };
  visit(graph);
  return [...ops].sort();
}

export interface OnnxStatePair {
  /** Graph input read as the old state. */
  input: string;
  /** Graph output holding the new state, written back into the same buffer. */
  output: string;
}

/**
 * State the model's callers usually keep themselves: the last `keep` elements
 * (along the last dim) of input `input` from the previous call. The method
 * then takes only the new part and prepends the kept context itself.
 */
export interface OnnxContextWindow {
  input: string;
  keep: number;
}

export type BoundValue = number | bigint | ConstTensor;

export interface ImportOnnxOptions {
  /**
   * Shapes of graph inputs whose shapes are symbolic (the full model shape,
   * context included). A dim given as a range (`{ min: 32, max: 960 }`, or
   * `'1x3x48x32..960'`) varies per call: the program is planned for the
   * largest size and runs any size in the range.
   */
  shapes?: Readonly<Record<string, InputShape>>;
  /** Graph inputs fixed at import time (e.g. Silero's `sr`). */
  bind?: Readonly<Record<string, BoundValue>>;
  state?: readonly OnnxStatePair[];
  context?: readonly OnnxContextWindow[];
  /** Name of the method that runs the graph (default 'forward'). */
  method?: string;
  /** Adds `reset()` zeroing every state buffer (default: when there is state). */
  reset?: boolean;
  /** Adds `get_state()` returning a copy of every state buffer (default: when there is state). */
  stateAccessor?: boolean;
  /**
   * Computes float32 convolutions and matrix products in float64 and rounds
   * the results back: closer to an exact result than float32 sums, at twice
   * the weight bytes. Without it, long float32 dot products are split into
   * blocks that are added pairwise.
   */
  wideAccumulation?: boolean;
  /** Names of intermediate ONNX values to return after the graph outputs (for bisecting a mismatch). */
  debugOutputs?: readonly string[];
  /**
   * Lowers float32 convolutions, matrix products and the arithmetic around
   * them to the XNNPACK delegate (default true). With false every op runs on
   * portable kernels.
   */
  xnnpack?: boolean;
}

export interface ImportedTensorInfo {
  name: string;
  dtype: DType;
  /** The shape, or for a tensor whose size varies per call, its largest shape. */
  shape: number[];
  /** Set when the size varies per call: the shape at the smallest input sizes. */
  minShape?: number[];
}

export interface ImportOnnxResult {
  /** The .pte program. */
  bytes: Uint8Array;
  methods: string[];
  inputs: ImportedTensorInfo[];
  outputs: ImportedTensorInfo[];
  /** Shared buffers in declaration order (state pairs first, then context windows); `get_state` returns them in this order. */
  stateBuffers: ImportedTensorInfo[];
  opset: number;
  /** How many ONNX nodes were folded at import and how many were lowered to kernels. */
  nodes: { folded: number; lowered: number };
  /** Instructions of the main method after XNNPACK lowering: delegate calls and portable kernel calls. */
  calls: { delegate: number; kernel: number };
}

function bufferName(prefix: string, onnxName: string): string {
  return `${prefix}_${onnxName.replace(/[^\w.\-/]/g, '_')}`;
}

function staticShape(info: OnnxValueInfo, given: readonly number[] | undefined): number[] {
  if (given !== undefined) return [...given];
  const shape = info.shape;
  if (shape === undefined || shape.some((d) => typeof d !== 'number' || d < 0)) {
    throw new EtnaError(
      'INVALID_INPUT',
      `ONNX input '${info.name}' has shape ${JSON.stringify(shape ?? '?')}; give a concrete shape (--shape ${info.name}=1x...)`,
    );
  }
  return shape as number[];
}

/**
 * A shape given at import may set the model's symbolic dims but not change a
 * fixed one or the rank: onnxruntime refuses such an input too.
 */
function checkGivenShape(info: OnnxValueInfo, given: readonly number[]): void {
  const declared = info.shape;
  if (declared === undefined) return;
  const describe = (dims: readonly (number | string | null)[]): string => `[${dims.map((d) => (d === null ? '?' : String(d))).join(', ')}]`;
  if (declared.length !== given.length) {
    throw new EtnaError(
      'INVALID_INPUT',
      `shape of input '${info.name}': the model declares rank ${declared.length} ${describe(declared)}, the given shape ` +
        `${given.join('x')} has rank ${given.length}`,
    );
  }
  declared.forEach((size, dim) => {
    if (typeof size === 'number' && size >= 0 && size !== given[dim]) {
      throw new EtnaError(
        'INVALID_INPUT',
        `shape of input '${info.name}': dim ${dim} is fixed at ${size} by the model ${describe(declared)}, the given shape sets it to ` +
          `${given[dim]}; only symbolic dims can be set`,
      );
    }
  });
}

function boundTensor(info: OnnxValueInfo, value: BoundValue): ConstTensor {
  if (typeof value === 'object') return value;
  const dtype = computeDtype(dtypeFromOnnx(info.elemType, `input '${info.name}'`));
  const shape = info.shape?.every((d) => typeof d === 'number') ? (info.shape as number[]) : [];
  if (numel(shape) !== 1) {
    throw new EtnaError(
      'INVALID_INPUT',
      `input '${info.name}' has shape ${JSON.stringify(shape)}; bind a scalar only to a one-element input`,
    );
  }
  return fromNumbers(dtype, shape, [Number(value)]);
}

/** Each node in lowering order with the main method's instruction count after it. */
type NodeSpans = { label: string; end: number }[];

interface RunStats {
  folded: number;
  lowered: number;
  spans: NodeSpans;
}

/** Lowers (or folds) every node of `graph` in order, binding outputs in `ctx.values`. */
function runGraph(graph: OnnxGraph, ctx: ImportContext, stats: RunStats): void {
  for (const init of graph.initializers) ctx.values.set(init.name, constValue(readInitializer(graph, init)));
  const { nodes, constants, folded } = rewriteGraph({ ...graph, nodes: sortNodes(graph) }, ctx.opset);
  for (const [name, tensor] of constants) ctx.values.set(name, constValue(tensor));
  if (ctx.xnnpack) markQuantizedProducts(nodes, ctx, new Set(graph.outputs.map((output) => output.name)));
  stats.folded += folded;
  for (const node of nodes) runNode(node, ctx, stats);
}

/** An initializer's value; one of an element type etna has no dtype for (float8, 4-bit) is refused naming a node that reads it. */
function readInitializer(graph: OnnxGraph, init: OnnxTensorProto): ConstTensor {
  try {
    return constFromProto(init, `initializer '${init.name}'`);
  } catch (error) {
    const reader = graph.nodes.find((node) => node.inputs.includes(init.name));
    if (reader === undefined || onnxDtype(init.dataType) !== undefined) throw error;
    throw new EtnaError(
      'UNSUPPORTED_OPERATOR',
      `${nodeLabel(reader)}: input '${init.name}' has ONNX element type ${init.dataType}, which etna does not support (float8 and 4-bit types among them)`,
    );
  }
}

function nodeLabel(node: OnnxNode): string {
  return `node '${node.name || node.outputs[0] || '?'}' (${node.opType})`;
}

function runNode(node: OnnxNode, ctx: ImportContext, stats: RunStats): void {
  const label = nodeLabel(node);
  if (node.domain !== '' && node.domain !== 'ai.onnx') {
    throw new EtnaError('UNSUPPORTED_OPERATOR', `${label}: operator domain '${node.domain}' is not supported`);
  }
  const inputs = node.inputs.map((name) => {
    if (name === '') return undefined;
    const value = ctx.values.get(name);
    if (value === undefined) throw new EtnaError('INVALID_INPUT', `${label}: input '${name}' is not defined before the node`);
    return value;
  });
  const view = new NodeView(node, inputs, ctx);
  let results: (OnnxValue | undefined)[];
  if (node.opType === 'Constant') {
    results = [constantNode(view)];
    stats.folded++;
  } else if (node.opType === 'If') {
    results = ifNode(view, ctx, stats);
  } else {
    const known = inputs.every((v) => v === undefined || v.kind === 'const');
    const folded =
      known && inputs.length > 0
        ? foldNode(
            node.opType,
            inputs.map((v) => (v === undefined ? undefined : (v as { tensor: ConstTensor }).tensor)),
            view,
          )
        : undefined;
    if (folded !== undefined) {
      results = folded.map(constValue);
      stats.folded++;
    } else {
      const handler = OP_HANDLERS[node.opType];
      if (handler === undefined) throw new EtnaError('UNSUPPORTED_OPERATOR', `${label}: ONNX operator '${node.opType}' has no lowering`);
      try {
        results = handler(view);
      } catch (error) {
        throw atNode(label, ctx, error);
      }
      if (results.every((r) => r === undefined || r.kind === 'const')) stats.folded++;
      else stats.lowered++;
    }
  }
  stats.spans.push({ label, end: ctx.m.graph.instructions.length });
  node.outputs.forEach((name, i) => {
    if (name === '') return;
    const value = results[i];
    if (value === undefined) {
      throw new EtnaError('UNSUPPORTED_OPERATOR', `${label}: output ${i} ('${name}') is not produced by the importer`);
    }
    ctx.values.set(name, value);
    ctx.producers.set(name, label);
  });
}

/**
 * If. A condition known at import runs only its branch. A condition computed
 * at run time runs both branches and selects each output with Where, which
 * needs each output pair to agree in dtype and shape (ONNX lets them differ
 * in shape; such an If is refused). Both branches then run on every call, so
 * the unselected one must only compute: ONNX operators have no side effects.
 */
function ifNode(view: NodeView, ctx: ImportContext, stats: RunStats): (OnnxValue | undefined)[] {
  const condition = view.input(0);
  if (condition.kind === 'const') {
    stats.folded++;
    return runBranch(view.graph(condition.tensor.data[0] ? 'then_branch' : 'else_branch'), ctx, stats);
  }
  if (dtypeOf(condition) !== 'bool' || numel(shapeOf(condition)) !== 1) {
    view.invalid(`condition '${view.node.inputs[0]}' must be one bool, got ${dtypeOf(condition)} ${JSON.stringify(shapeOf(condition))}`);
  }
  const both = (name: 'then_branch' | 'else_branch'): (OnnxValue | undefined)[] => {
    try {
      return runBranch(view.graph(name), ctx, stats);
    } catch (error) {
      if (!(error instanceof EtnaError)) throw error;
      throw new EtnaError(
        error.code,
        `${view.label}: condition '${view.node.inputs[0]}' depends on runtime data, so both branches must import, and ${name} ` +
          `does not: ${error.message}. Binding the inputs the condition reads imports only the branch it selects`,
        { cause: error },
      );
    }
  };
  const thenOutputs = both('then_branch');
  const elseOutputs = both('else_branch');
  if (thenOutputs.length !== elseOutputs.length) {
    view.invalid(`then_branch has ${thenOutputs.length} outputs and else_branch ${elseOutputs.length}`);
  }
  // A scalar condition broadcasts to any output shape (reshape keeps one that is already a scalar).
  const selector = reshape(ctx, condition, []);
  stats.lowered++;
  return thenOutputs.map((whenTrue, i) => {
    const whenFalse = elseOutputs[i];
    if (whenTrue === undefined || whenFalse === undefined) view.fail(`output ${i} of a branch is not a tensor`);
    const [trueShape, falseShape] = [shapeOf(whenTrue), shapeOf(whenFalse)];
    if (dtypeOf(whenTrue) !== dtypeOf(whenFalse) || trueShape.join() !== falseShape.join()) {
      view.fail(
        `output ${i} is ${dtypeOf(whenTrue)} ${JSON.stringify(trueShape)} in then_branch and ${dtypeOf(whenFalse)} ` +
          `${JSON.stringify(falseShape)} in else_branch; a condition computed at run time needs them to agree`,
      );
    }
    return where(ctx, view, selector, whenTrue, whenFalse);
  });
}

/** Runs a subgraph in its own scope: names it defines do not outlive it. Returns its outputs. */
function runBranch(branch: OnnxGraph, ctx: ImportContext, stats: RunStats): (OnnxValue | undefined)[] {
  const values = new Map(ctx.values);
  const producers = new Map(ctx.producers);
  runGraph(branch, ctx, stats);
  const outputs = branch.outputs.map((o) => ctx.values.get(o.name));
  restoreScope(ctx.values, values);
  restoreScope(ctx.producers, producers);
  return outputs;
}

function restoreScope<T>(scope: Map<string, T>, saved: ReadonlyMap<string, T>): void {
  scope.clear();
  for (const [name, value] of saved) scope.set(name, value);
}

/**
 * Names the node in an error raised while lowering it. Operand shapes that
 * contradict each other (INVALID_INPUT from shape inference) also name the
 * input shapes given at import, the usual cause.
 */
function atNode(label: string, ctx: ImportContext, error: unknown): unknown {
  if (!(error instanceof EtnaError)) return error;
  const named = error.message.startsWith(label) ? error.message : `${label}: ${error.message}`;
  if (error.code !== 'INVALID_INPUT' || ctx.givenShapes === '') {
    return named === error.message ? error : new EtnaError(error.code, named, { cause: error });
  }
  return new EtnaError(error.code, `${named} (with the input shapes given at import: ${ctx.givenShapes})`, { cause: error });
}

function constantNode(view: NodeView): OnnxValue {
  const attr = view.node.attributes[0];
  if (attr === undefined) view.fail('has no value');
  switch (attr.name) {
    case 'value':
      return constValue(constFromProto(attr.t!, view.label));
    case 'value_float':
      return view.ctx.constant('float32', [], [attr.f ?? 0]);
    case 'value_floats':
      return view.ctx.constant('float32', [attr.floats.length], attr.floats);
    case 'value_int':
      return view.ctx.constant('int64', [], [Number(attr.i ?? 0n)]);
    case 'value_ints':
      return view.ctx.constant('int64', [attr.ints.length], attr.ints.map(Number));
    default:
      return view.fail(`attribute '${attr.name}' is not supported`);
  }
}

/** A new activation holding `value` converted to `dtype`. */
function convertTo(ctx: ImportContext, value: OnnxValue, dtype: DType): TensorValue {
  const out = ctx.out(dtype, shapeOf(value));
  convertInto(ctx, value, out);
  return out;
}

/** A program input as the graph reads it: float16 converted to float32 (computeDtype), other dtypes as they are. */
function widenInput(ctx: ImportContext, input: TensorValue): OnnxValue {
  if (input.dtype !== 'float16') return tensorValue(input);
  return tensorValue(convertTo(ctx, tensorValue(input), 'float32'));
}

/** A copy of `value` as an activation, so outputs never alias inputs, constants or state. */
function ownedTensor(ctx: ImportContext, value: OnnxValue): TensorValue {
  const tensor = ctx.tensor(value);
  if (value.kind === 'tensor' && tensor instanceof TensorValue && ctx.m.graph.tensorNode(tensor.index).origin.kind === 'activation') {
    return tensor;
  }
  const out = ctx.out(dtypeOf(value), shapeOf(value));
  ctx.kernel('aten::clone.out', [tensor, null, out]);
  return out;
}

function zeroBuffers(m: MethodBuilder, buffers: readonly SharedBuffer[]): void {
  for (const buffer of buffers) {
    const zeros = m.graph.addTensor(buffer.dtype, buffer.shape);
    const fill = buffer.dtype === 'float32' || buffer.dtype === 'float64' ? { double: 0 } : { int: 0 };
    m.kernel('aten::full.out', [{ intList: buffer.shape }, fill, zeros]);
    m.copyInto(buffer, zeros);
  }
}

/** Parses an ONNX model without importing it. */
export function readOnnxModel(bytes: Uint8Array): OnnxModel {
  return decodeModel(bytes);
}

/** An imported model before export: its graph (e.g. to write back as ONNX) and how importOnnx exports it. */
export interface ImportedOnnxGraph extends Omit<ImportOnnxResult, 'bytes' | 'calls'> {
  builder: ProgramBuilder;
  exportOptions: ExportOptions;
}

export function importOnnx(bytes: Uint8Array, options: ImportOnnxOptions = {}): ImportOnnxResult {
  const { builder, exportOptions, ...info } = importOnnxGraph(bytes, options);
  const exported = builder.export(exportOptions).bytes;
  const main = builder.programGraph.methods.find((m) => m.name === info.methods[0])!;
  const calls = { delegate: 0, kernel: 0 };
  for (const instruction of main.instructions) {
    if (instruction.kind === 'delegate') calls.delegate++;
    else if (instruction.kind === 'kernel') calls.kernel++;
  }
  return { bytes: exported, ...info, calls };
}

export function importOnnxGraph(bytes: Uint8Array, options: ImportOnnxOptions = {}): ImportedOnnxGraph {
  const bounds = new Map(
    Object.entries(options.shapes ?? {}).map(([name, shape]): [string, ShapeBounds] => [name, shapeBounds(name, shape)]),
  );
  for (const [name, b] of bounds) {
    const varies = b.min.some((lo, d) => lo !== b.max[d]);
    const kept = (options.state ?? []).some((p) => p.input === name) || (options.context ?? []).some((c) => c.input === name);
    if (varies && kept) throw new EtnaError('INVALID_INPUT', `shape of input '${name}': a state or context input cannot have a size range`);
  }
  const probes = probeShapes(bounds);
  const ranged = probes.length > 0;
  const upper = importAtShapes(bytes, options, new Map([...bounds].map(([name, b]) => [name, b.max])), ranged);
  if (!ranged) return upper.imported;
  const methodName = upper.imported.methods[0]!;
  const mainOf = (imported: ImportedOnnxGraph): MethodGraph => imported.builder.programGraph.method(methodName);
  const probed = probes.map((shapes) => {
    try {
      return importAtShapes(bytes, options, shapes, true).imported;
    } catch (error) {
      if (!(error instanceof EtnaError)) throw error;
      const at = [...shapes].map(([name, shape]) => `${name}=${shape.join('x')}`).join(' ');
      throw new EtnaError(error.code, `at ${at} (inside the given range): ${error.message}`, { cause: error });
    }
  });
  const spans = upper.spans;
  const nodeOf = (index: number): string => spans.find((span) => span.end > index)?.label ?? 'a graph output';
  markBoundedDims(mainOf(upper.imported), probed.map(mainOf), nodeOf);
  const smallest = probed[0]!;
  const withMin = (list: ImportedTensorInfo[], smallList: ImportedTensorInfo[]): ImportedTensorInfo[] =>
    list.map((info, i) => {
      const min = smallList[i]!.shape;
      return min.every((size, d) => size === info.shape[d]) ? info : { ...info, minShape: [...min] };
    });
  return {
    ...upper.imported,
    inputs: withMin(upper.imported.inputs, smallest.inputs),
    outputs: withMin(upper.imported.outputs, smallest.outputs),
  };
}

function importAtShapes(
  bytes: Uint8Array,
  options: ImportOnnxOptions,
  shapes: ReadonlyMap<string, readonly number[]>,
  followsInputSize: boolean,
): { imported: ImportedOnnxGraph; spans: NodeSpans } {
  const model = decodeModel(bytes);
  const opset = model.opsets.get('');
  if (opset === undefined) throw new EtnaError('UNSUPPORTED_OPERATOR', 'the model imports no default-domain (ai.onnx) opset');
  if (opset < MIN_ONNX_OPSET) {
    const changed = collectOpTypes(model.graph).filter((op) => !UNCHANGED_SINCE_OPSET_1_TO_6.has(op));
    if (changed.length > 0) {
      throw new EtnaError(
        'UNSUPPORTED_OPERATOR',
        `opset ${opset} is older than ${MIN_ONNX_OPSET}, the oldest supported for ${changed.join(', ')} (their older versions differ)`,
      );
    }
  }
  const graph = model.graph;
  const methodName = options.method ?? 'forward';
  // Wide accumulation runs in float64, which the delegate does not take.
  const xnnpack = options.xnnpack !== false && options.wideAccumulation !== true;
  const bind = options.bind ?? {};
  const statePairs = options.state ?? [];
  const contexts = options.context ?? [];
  const initializerNames = new Set(graph.initializers.map((t) => t.name));
  const runtimeInputs = graph.inputs.filter((i) => !initializerNames.has(i.name));
  const inputInfo = new Map(runtimeInputs.map((i) => [i.name, i]));
  const outputNames = new Set(graph.outputs.map((o) => o.name));

  for (const name of Object.keys(bind)) {
    if (!inputInfo.has(name)) throw new EtnaError('INVALID_INPUT', `--bind ${name}: the model has no input named '${name}'`);
  }
  for (const [name, given] of shapes) {
    const info = inputInfo.get(name);
    if (info === undefined) throw new EtnaError('INVALID_INPUT', `--shape ${name}: the model has no input named '${name}'`);
    checkGivenShape(info, given);
  }
  for (const pair of statePairs) {
    if (!inputInfo.has(pair.input)) {
      throw new EtnaError('INVALID_INPUT', `--state ${pair.input}:${pair.output}: the model has no input named '${pair.input}'`);
    }
    if (!outputNames.has(pair.output)) {
      throw new EtnaError('INVALID_INPUT', `--state ${pair.input}:${pair.output}: the model has no output named '${pair.output}'`);
    }
  }
  for (const c of contexts) {
    if (!inputInfo.has(c.input)) throw new EtnaError('INVALID_INPUT', `--context ${c.input}: the model has no input named '${c.input}'`);
    if (!Number.isInteger(c.keep) || c.keep <= 0) {
      throw new EtnaError('INVALID_INPUT', `--context ${c.input}: keep must be a positive integer`);
    }
  }

  const program = new ProgramBuilder();
  const stateBuffers: { buffer: SharedBuffer; info: ImportedTensorInfo }[] = [];
  const stateByInput = new Map<string, SharedBuffer>();
  for (const pair of statePairs) {
    const info = inputInfo.get(pair.input)!;
    // float16 state is kept in float32, the dtype the program computes it in.
    const dtype = computeDtype(dtypeFromOnnx(info.elemType, `state input '${pair.input}'`));
    const shape = staticShape(info, shapes.get(pair.input));
    const name = bufferName('state', pair.input);
    const buffer = program.sharedBuffer(name, dtype, shape);
    stateBuffers.push({ buffer, info: { name, dtype, shape } });
    stateByInput.set(pair.input, buffer);
  }
  const contextByInput = new Map<string, { buffer: SharedBuffer; keep: number }>();
  for (const c of contexts) {
    const info = inputInfo.get(c.input)!;
    const dtype = computeDtype(dtypeFromOnnx(info.elemType, `input '${c.input}'`));
    const full = staticShape(info, shapes.get(c.input));
    const last = full[full.length - 1]!;
    if (c.keep >= last) {
      throw new EtnaError('INVALID_INPUT', `--context ${c.input}:${c.keep}: must be shorter than the input's last dim ${last}`);
    }
    const shape = [...full.slice(0, -1), c.keep];
    const name = bufferName('context', c.input);
    const buffer = program.sharedBuffer(name, dtype, shape);
    stateBuffers.push({ buffer, info: { name, dtype, shape } });
    contextByInput.set(c.input, { buffer, keep: c.keep });
  }

  const inputs: ImportedTensorInfo[] = [];
  const outputs: ImportedTensorInfo[] = [];
  const stats: RunStats = { folded: 0, lowered: 0, spans: [] };
  program.method(methodName, (m) => {
    const ctx = new ImportContext(program, m, opset, 'onnx_', options.wideAccumulation === true, xnnpack, followsInputSize);
    ctx.givenShapes = [...shapes].map(([name, shape]) => `${name}=${shape.join('x')}`).join(' ');
    const contextWrites: { buffer: SharedBuffer; full: OnnxValue; keep: number }[] = [];
    for (const info of runtimeInputs) {
      const bound = bind[info.name];
      if (bound !== undefined) {
        ctx.values.set(info.name, constValue(boundTensor(info, bound)));
        continue;
      }
      const buffer = stateByInput.get(info.name);
      if (buffer !== undefined) {
        ctx.values.set(info.name, { kind: 'tensor', tensor: buffer, dtype: buffer.dtype, shape: buffer.shape });
        continue;
      }
      const dtype = dtypeFromOnnx(info.elemType, `input '${info.name}'`);
      const full = staticShape(info, shapes.get(info.name));
      const context = contextByInput.get(info.name);
      if (context !== undefined) {
        const chunkShape = [...full.slice(0, -1), full[full.length - 1]! - context.keep];
        const chunk = m.input(info.name, dtype, chunkShape);
        inputs.push({ name: info.name, dtype, shape: chunkShape });
        const joined = m.cat([context.buffer, widenInput(ctx, chunk).tensor as TensorValue], full.length - 1);
        ctx.values.set(info.name, tensorValue(joined));
        contextWrites.push({ buffer: context.buffer, full: tensorValue(joined), keep: context.keep });
        continue;
      }
      const tensor = m.input(info.name, dtype, full);
      inputs.push({ name: info.name, dtype, shape: full });
      ctx.values.set(info.name, widenInput(ctx, tensor));
    }
    runGraph(graph, ctx, stats);
    const stateOutputs = new Set(statePairs.map((p) => p.output));
    // Outputs keep their ONNX names (Module.run returns them under these keys).
    const results: { name: string; tensor: TensorValue }[] = [];
    for (const out of graph.outputs) {
      if (stateOutputs.has(out.name)) continue;
      const value = ctx.values.get(out.name);
      if (value === undefined) throw new EtnaError('INVALID_INPUT', `graph output '${out.name}' is never produced`);
      const tensor =
        out.elemType === ONNX_DTYPE_CODES.float16 && dtypeOf(value) === 'float32'
          ? convertTo(ctx, value, 'float16')
          : ownedTensor(ctx, value);
      results.push({ name: out.name, tensor });
      outputs.push({ name: out.name, dtype: tensor.dtype, shape: [...tensor.shape] });
    }
    for (const name of options.debugOutputs ?? []) {
      const value = ctx.values.get(name);
      if (value === undefined) throw new EtnaError('INVALID_INPUT', `debug output '${name}' is not a value of the main graph`);
      const tensor = ownedTensor(ctx, value);
      results.push({ name, tensor });
      outputs.push({ name, dtype: tensor.dtype, shape: [...tensor.shape] });
    }
    // State is written back after every read of the old value: all reads are above.
    for (const pair of statePairs) {
      const value = ctx.values.get(pair.output)!;
      m.copyInto(stateByInput.get(pair.input)!, ctx.tensor(value));
    }
    for (const write of contextWrites) {
      const fullShape = shapeOf(write.full);
      const lastDim = fullShape.length - 1;
      m.copyInto(write.buffer, m.slice(write.full.tensor as TensorValue, lastDim, fullShape[lastDim]! - write.keep, fullShape[lastDim]!));
    }
    // One call per output: an object literal would put index-like names first.
    for (const { name, tensor } of results) m.output({ [name]: tensor });
  });

  const buffers = stateBuffers.map((s) => s.buffer);
  const methods = [methodName];
  if (buffers.length > 0 && options.reset !== false) {
    program.method('reset', (m) => zeroBuffers(m, buffers));
    methods.push('reset');
  }
  if (buffers.length > 0 && options.stateAccessor !== false) {
    program.method('get_state', (m) => {
      for (const { buffer, info } of stateBuffers) {
        const out = m.graph.addTensor(buffer.dtype, buffer.shape);
        m.kernel('aten::clone.out', [buffer, null, out]);
        m.output({ [info.name]: out });
      }
    });
    methods.push('get_state');
  }
  const imported: ImportedOnnxGraph = {
    builder: program,
    exportOptions: { xnnpack },
    methods,
    inputs,
    outputs,
    stateBuffers: stateBuffers.map((s) => s.info),
    opset,
    nodes: { folded: stats.folded, lowered: stats.lowered },
  };
  return { imported, spans: stats.spans };
}

/** Wraps typed data as an import-time tensor for `bind`. */
export function boundConstant(dtype: DType, shape: readonly number[], data: ConstData): ConstTensor {
  return { dtype, shape: [...shape], data };
}
