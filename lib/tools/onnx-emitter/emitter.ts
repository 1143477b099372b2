// Writes each method of an authored program as its own ONNX model, the way
// onnxruntime users run several entry points: one InferenceSession per
// method. Shared buffers become explicit graph inputs (the state before the
// call) and outputs (the state after it); the caller carries them between
// calls. Constants are embedded as initializers in every model that uses them.
import { EtnaError } from '../../errors.js';
import type { DType } from '../../export/dtype.js';
import type { ConstantTensor, GraphInstruction, MethodGraph, ProgramGraph, SharedBuffer } from '../../export/graph.js';
import type { ProgramBuilder } from '../../export/program-builder.js';
import { ONNX_DTYPE_CODES } from '../../onnx/dtype.js';
import { padsByDim } from '../../export/shape.js';
import { ProtoWriter } from './protobuf.js';

/** LayerNormalization needs opset 17; everything else emitted here is older. */
export const ONNX_OPSET = 17;
export const ONNX_IR_VERSION = 8;

export interface OnnxTensorSignature {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
}

export interface OnnxStateBinding {
  /** The shared buffer's name in the program. */
  readonly buffer: string;
  /** Graph input or output name carrying it. */
  readonly name: string;
}

export interface OnnxMethodModel {
  readonly method: string;
  /** Serialized ModelProto. */
  readonly bytes: Uint8Array;
  /** The method's own inputs, in call order. */
  readonly inputs: readonly OnnxTensorSignature[];
  /** The method's own outputs, in result order. */
  readonly outputs: readonly OnnxTensorSignature[];
  /** State read by the method: feed the current value under this input name. */
  readonly stateInputs: readonly OnnxStateBinding[];
  /** State written by the method: the new value comes back under this output name. */
  readonly stateOutputs: readonly OnnxStateBinding[];
  /** Bytes of initializers embedded in this model. */
  readonly initializerBytes: number;
}

export interface OnnxStateBuffer {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Initial bytes, or undefined for zeros. */
  readonly init: Uint8Array | undefined;
}

export interface OnnxProgram {
  readonly methods: readonly OnnxMethodModel[];
  readonly state: readonly OnnxStateBuffer[];
}

export function stateInputName(buffer: string): string {
  return buffer;
}

export function stateOutputName(buffer: string): string {
  return `${buffer}.next`;
}

function unsupported(method: string, message: string): never {
  throw new EtnaError('UNSUPPORTED_OPERATOR', `ONNX emitter, method '${method}': ${message}`);
}

interface OnnxNode {
  readonly opType: string;
  inputs: string[];
  outputs: string[];
  readonly attributes: readonly OnnxAttribute[];
}

type OnnxAttribute =
  | { readonly name: string; readonly kind: 'int'; readonly value: number }
  | { readonly name: string; readonly kind: 'float'; readonly value: number }
  | { readonly name: string; readonly kind: 'ints'; readonly value: readonly number[] }
  | { readonly name: string; readonly kind: 'string'; readonly value: string };

interface Initializer {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly bytes: Uint8Array;
}

function scalarBytes(dtype: DType, value: number | bigint): Uint8Array {
  switch (dtype) {
    case 'float32':
      return new Uint8Array(Float32Array.of(Number(value)).buffer);
    case 'float64':
      return new Uint8Array(Float64Array.of(Number(value)).buffer);
    case 'int64':
      return new Uint8Array(BigInt64Array.of(BigInt(value)).buffer);
    case 'int32':
      return new Uint8Array(Int32Array.of(Number(value)).buffer);
    default:
      throw new EtnaError('UNSUPPORTED_OPERATOR', `ONNX emitter: no scalar constants of dtype ${dtype}`);
  }
}

/** Translates one method graph, instruction by instruction, into ONNX nodes. */
class MethodEmitter {
  private readonly nodes: OnnxNode[] = [];
  private readonly initializers = new Map<string, Initializer>();
  /** Current ONNX name of each tensor value (shared buffers are rebound when written). */
  private readonly names = new Map<number, string>();
  private readonly stateRead = new Set<SharedBuffer>();
  private readonly stateWritten = new Map<SharedBuffer, number>();
  private temporaries = 0;

  constructor(private readonly graph: MethodGraph) {}

  emit(): OnnxMethodModel {
    const graph = this.graph;
    const inputs: OnnxTensorSignature[] = graph.inputs.map((index, i) => {
      const node = graph.tensorNode(index);
      const name = node.label ?? `input_${i}`;
      this.names.set(index, name);
      return { name, dtype: node.dtype, shape: [...node.shape] };
    });
    for (const instruction of graph.instructions) this.instruction(instruction);

    const finalNames = new Map<string, string>();
    const bind = (current: string, wanted: string): void => {
      // Rename the producing node's output when it is ours to rename; otherwise copy.
      const producedHere = this.nodes.some((n) => n.outputs.includes(current));
      if (producedHere && !finalNames.has(current) && !inputs.some((i) => i.name === current)) finalNames.set(current, wanted);
      else this.nodes.push({ opType: 'Identity', inputs: [current], outputs: [wanted], attributes: [] });
    };
    const outputs: OnnxTensorSignature[] = graph.outputs.map((index, i) => {
      const node = graph.tensorNode(index);
      const name = graph.outputs.length === 1 ? 'output' : `output_${i}`;
      bind(this.name(index), name);
      return { name, dtype: node.dtype, shape: [...node.shape] };
    });
    const stateOutputs: OnnxStateBinding[] = [];
    for (const [buffer, index] of this.stateWritten) {
      const name = stateOutputName(buffer.name);
      bind(this.name(index), name);
      stateOutputs.push({ buffer: buffer.name, name });
    }
    for (const node of this.nodes) {
      node.inputs = node.inputs.map((n) => finalNames.get(n) ?? n);
      node.outputs = node.outputs.map((n) => finalNames.get(n) ?? n);
    }
    const stateInputs: OnnxStateBinding[] = [...this.stateRead].map((buffer) => ({
      buffer: buffer.name,
      name: stateInputName(buffer.name),
    }));
    const stateSignature = (buffer: string, name: string): OnnxTensorSignature => {
      const shared = this.sharedBuffers().find((b) => b.name === buffer)!;
      return { name, dtype: shared.dtype, shape: [...shared.shape] };
    };
    const graphInputs = [...inputs, ...stateInputs.map((s) => stateSignature(s.buffer, s.name))];
    const graphOutputs = [...outputs, ...stateOutputs.map((s) => stateSignature(s.buffer, s.name))];
    const bytes = this.serialize(graphInputs, graphOutputs);
    let initializerBytes = 0;
    for (const init of this.initializers.values()) initializerBytes += init.bytes.byteLength;
    return { method: graph.name, bytes, inputs, outputs, stateInputs, stateOutputs, initializerBytes };
  }

  private sharedBuffers(): SharedBuffer[] {
    const found: SharedBuffer[] = [];
    for (const value of this.graph.values) {
      if (value.kind !== 'tensor' || value.origin.kind !== 'shared') continue;
      if (!found.includes(value.origin.buffer)) found.push(value.origin.buffer);
    }
    return found;
  }

  // ---------------------------------------------------------------- values

  /** The ONNX name holding a tensor value's current contents. */
  private name(index: number): string {
    const known = this.names.get(index);
    if (known !== undefined) return known;
    const node = this.graph.tensorNode(index);
    switch (node.origin.kind) {
      case 'constant':
        return this.constant(node.origin.constant, index);
      case 'shared': {
        const buffer = node.origin.buffer;
        this.stateRead.add(buffer);
        const name = stateInputName(buffer.name);
        this.names.set(index, name);
        return name;
      }
      default:
        return unsupported(this.graph.name, `value ${index} is read before it is written`);
    }
  }

  private constant(constant: ConstantTensor, index: number): string {
    this.initializers.set(constant.name, { name: constant.name, dtype: constant.dtype, shape: [...constant.shape], bytes: constant.bytes });
    this.names.set(index, constant.name);
    return constant.name;
  }

  private fresh(hint: string): string {
    return `${hint}_${this.temporaries++}`;
  }

  private scalarConstant(dtype: DType, value: number | bigint): string {
    const name = `scalar_${dtype}_${String(value).replace(/[^\w.-]/g, '_')}`;
    if (!this.initializers.has(name)) this.initializers.set(name, { name, dtype, shape: [], bytes: scalarBytes(dtype, value) });
    return name;
  }

  private int64Vector(values: readonly number[]): string {
    const name = `ints_${values.map((v) => String(v).replace('-', 'm')).join('_') || 'empty'}`;
    if (!this.initializers.has(name)) {
      this.initializers.set(name, {
        name,
        dtype: 'int64',
        shape: [values.length],
        bytes: new Uint8Array(BigInt64Array.from(values, (v) => BigInt(v)).buffer),
      });
    }
    return name;
  }

  private int(index: number): number {
    const value = this.graph.value(index);
    if (value.kind !== 'int') return unsupported(this.graph.name, `value ${index} should be an int, is ${value.kind}`);
    return Number(value.value);
  }

  private scalar(index: number): number {
    const value = this.graph.value(index);
    if (value.kind === 'int') return Number(value.value);
    if (value.kind === 'double') return value.value;
    return unsupported(this.graph.name, `value ${index} should be a scalar, is ${value.kind}`);
  }

  private ints(index: number): number[] {
    const value = this.graph.value(index);
    if (value.kind !== 'intList') return unsupported(this.graph.name, `value ${index} should be an int list, is ${value.kind}`);
    return value.items.map((item) => this.int(item));
  }

  private shape(index: number): readonly number[] {
    return this.graph.tensorNode(index).shape;
  }

  private dtype(index: number): DType {
    return this.graph.tensorNode(index).dtype;
  }

  private node(opType: string, inputs: readonly string[], output: string, attributes: readonly OnnxAttribute[] = []): string {
    this.nodes.push({ opType, inputs: [...inputs], outputs: [output], attributes });
    return output;
  }

  /** Emits the node that defines activation `out`. */
  private define(out: number, opType: string, inputs: readonly string[], attributes: readonly OnnxAttribute[] = []): void {
    this.names.set(out, this.node(opType, inputs, `v${out}`, attributes));
  }

  private reshapeTo(source: string, shape: readonly number[]): string {
    return this.node('Reshape', [source, this.int64Vector(shape)], this.fresh('reshaped'));
  }

  /** An ONNX name holding `source` converted and broadcast to the given tensor's dtype and shape. */
  private conformTo(source: number, target: number): string {
    let name = this.name(source);
    if (this.dtype(source) !== this.dtype(target)) {
      name = this.node('Cast', [name], this.fresh('cast'), [{ name: 'to', kind: 'int', value: ONNX_DTYPE_CODES[this.dtype(target)] }]);
    }
    const from = this.shape(source);
    const to = this.shape(target);
    if (from.length !== to.length || from.some((d, i) => d !== to[i])) {
      name = this.node('Expand', [name, this.int64Vector(to)], this.fresh('expanded'));
    }
    return name;
  }

  private writeState(target: number, newName: string): void {
    const node = this.graph.tensorNode(target);
    if (node.origin.kind !== 'shared') {
      return unsupported(this.graph.name, `in-place write into value ${target}, which is not a shared buffer`);
    }
    this.names.set(target, newName);
    this.stateWritten.set(node.origin.buffer, target);
  }

  // ---------------------------------------------------------------- instructions

  private instruction(instruction: GraphInstruction): void {
    if (instruction.kind !== 'kernel') return unsupported(this.graph.name, 'delegate calls have no ONNX form');
    const a = instruction.args;
    const op = `${instruction.name}.${instruction.overload}`;
    const binary: Record<string, string> = { add: 'Add', sub: 'Sub', mul: 'Mul', div: 'Div' };
    const unary: Record<string, string> = {
      relu: 'Relu',
      tanh: 'Tanh',
      sigmoid: 'Sigmoid',
      exp: 'Exp',
      neg: 'Neg',
      sqrt: 'Sqrt',
      abs: 'Abs',
      hardswish: 'HardSwish',
    };
    const [, base] = instruction.name.split('::') as [string, string];

    if (instruction.overload === 'out' && base in binary) {
      const hasAlpha = base === 'add' || base === 'sub';
      const out = a[hasAlpha ? 3 : 2]!;
      let other = this.name(a[1]!);
      if (hasAlpha && this.scalar(a[2]!) !== 1) {
        other = this.node('Mul', [other, this.scalarConstant(this.dtype(out), this.scalar(a[2]!))], this.fresh('scaled'));
      }
      this.define(out, binary[base]!, [this.name(a[0]!), other]);
      return;
    }
    if (instruction.overload === 'Scalar_out' && (base in binary || base === 'rsub')) {
      const hasAlpha = base === 'add' || base === 'sub' || base === 'rsub';
      const out = a[hasAlpha ? 3 : 2]!;
      const dtype = this.dtype(out);
      const alpha = hasAlpha ? this.scalar(a[2]!) : 1;
      const scalar = this.scalarConstant(dtype, this.scalar(a[1]!) * (base === 'rsub' ? 1 : alpha));
      let self = this.name(a[0]!);
      if (base === 'rsub') {
        if (alpha !== 1) self = this.node('Mul', [self, this.scalarConstant(dtype, alpha)], this.fresh('scaled'));
        this.define(out, 'Sub', [scalar, self]);
      } else {
        this.define(out, binary[base]!, [self, scalar]);
      }
      return;
    }
    if (instruction.overload === 'out' && base in unary) {
      this.define(a[1]!, unary[base]!, [this.name(a[0]!)]);
      return;
    }

    switch (op) {
      case 'aten::silu.out': {
        const x = this.name(a[0]!);
        this.define(a[1]!, 'Mul', [x, this.node('Sigmoid', [x], this.fresh('sigmoid'))]);
        return;
      }
      case 'aten::gelu.out': {
        const approximate = this.graph.value(a[1]!);
        const exact = approximate.kind !== 'string' || approximate.value === 'none';
        const dtype = this.dtype(a[2]!);
        const x = this.name(a[0]!);
        const c = (v: number) => this.scalarConstant(dtype, v);
        let inner: string;
        if (exact) {
          // 0.5 x (1 + erf(x / sqrt 2))
          inner = this.node('Erf', [this.node('Mul', [x, c(Math.SQRT1_2)], this.fresh('gelu'))], this.fresh('gelu'));
        } else {
          // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
          const cube = this.node('Mul', [x, this.node('Mul', [x, x], this.fresh('gelu'))], this.fresh('gelu'));
          const sum = this.node('Add', [x, this.node('Mul', [cube, c(0.044715)], this.fresh('gelu'))], this.fresh('gelu'));
          inner = this.node('Tanh', [this.node('Mul', [sum, c(Math.sqrt(2 / Math.PI))], this.fresh('gelu'))], this.fresh('gelu'));
        }
        const half = this.node('Mul', [x, c(0.5)], this.fresh('gelu'));
        this.define(a[2]!, 'Mul', [half, this.node('Add', [inner, c(1)], this.fresh('gelu'))]);
        return;
      }
      case 'aten::_softmax.out':
        this.define(a[3]!, 'Softmax', [this.name(a[0]!)], [{ name: 'axis', kind: 'int', value: this.int(a[1]!) }]);
        return;
      case 'aten::_log_softmax.out':
        this.define(a[3]!, 'LogSoftmax', [this.name(a[0]!)], [{ name: 'axis', kind: 'int', value: this.int(a[1]!) }]);
        return;
      case 'aten::native_layer_norm.out': {
        const normalized = this.ints(a[1]!);
        const out = a[5]!;
        const dtype = this.dtype(out);
        const width = normalized.reduce((p, d) => p * d, 1);
        const ones = (fill: number): string => {
          const name = `${fill === 1 ? 'ones' : 'zeros'}_${dtype}_${normalized.join('x')}`;
          const data = new Float32Array(width).fill(fill);
          if (dtype !== 'float32') return unsupported(this.graph.name, `layer_norm without affine parameters needs float32, got ${dtype}`);
          if (!this.initializers.has(name)) {
            this.initializers.set(name, { name, dtype, shape: normalized, bytes: new Uint8Array(data.buffer) });
          }
          return name;
        };
        const weight = this.graph.value(a[2]!).kind === 'null' ? ones(1) : this.name(a[2]!);
        const bias = this.graph.value(a[3]!).kind === 'null' ? ones(0) : this.name(a[3]!);
        this.define(
          out,
          'LayerNormalization',
          [this.name(a[0]!), weight, bias],
          [
            { name: 'axis', kind: 'int', value: -normalized.length },
            { name: 'epsilon', kind: 'float', value: this.scalar(a[4]!) },
          ],
        );
        return;
      }
      case 'aten::mm.out':
      case 'aten::bmm.out':
        this.define(a[2]!, 'MatMul', [this.name(a[0]!), this.name(a[1]!)]);
        return;
      case 'aten::addmm.out':
        this.define(
          a[5]!,
          'Gemm',
          [this.name(a[1]!), this.name(a[2]!), this.name(a[0]!)],
          [
            { name: 'beta', kind: 'float', value: this.scalar(a[3]!) },
            { name: 'alpha', kind: 'float', value: this.scalar(a[4]!) },
          ],
        );
        return;
      case 'aten::embedding.out':
        this.define(a[5]!, 'Gather', [this.name(a[0]!), this.name(a[1]!)], [{ name: 'axis', kind: 'int', value: 0 }]);
        return;
      case 'aten::view_copy.out':
      case 'aten::unsqueeze_copy.out':
      case 'aten::squeeze_copy.dims_out': {
        const out = a[2]!;
        this.define(out, 'Reshape', [this.name(a[0]!), this.int64Vector(this.shape(out))]);
        return;
      }
      case 'aten::expand_copy.out': {
        const out = a[3]!;
        this.define(out, 'Expand', [this.name(a[0]!), this.int64Vector(this.shape(out))]);
        return;
      }
      case 'aten::permute_copy.out':
        this.define(a[2]!, 'Transpose', [this.name(a[0]!)], [{ name: 'perm', kind: 'ints', value: this.ints(a[1]!) }]);
        return;
      case 'aten::transpose_copy.int_out': {
        const rank = this.shape(a[0]!).length;
        const perm = Array.from({ length: rank }, (_, i) => i);
        const d0 = (this.int(a[1]!) + rank) % rank;
        const d1 = (this.int(a[2]!) + rank) % rank;
        [perm[d0], perm[d1]] = [perm[d1]!, perm[d0]!];
        this.define(a[3]!, 'Transpose', [this.name(a[0]!)], [{ name: 'perm', kind: 'ints', value: perm }]);
        return;
      }
      case 'aten::slice_copy.Tensor_out': {
        const [dim, start, end, step] = [a[1]!, a[2]!, a[3]!, a[4]!].map((i) => this.int(i)) as [number, number, number, number];
        this.define(a[5]!, 'Slice', [
          this.name(a[0]!),
          this.int64Vector([start]),
          this.int64Vector([end]),
          this.int64Vector([dim]),
          this.int64Vector([step]),
        ]);
        return;
      }
      case 'aten::select_copy.int_out': {
        const index = this.scalarConstant('int64', this.int(a[2]!));
        this.define(a[3]!, 'Gather', [this.name(a[0]!), index], [{ name: 'axis', kind: 'int', value: this.int(a[1]!) }]);
        return;
      }
      case 'aten::cat.out': {
        const list = this.graph.value(a[0]!);
        if (list.kind !== 'tensorList') return unsupported(this.graph.name, 'cat needs a tensor list');
        this.define(
          a[2]!,
          'Concat',
          list.items.map((i) => this.name(i)),
          [{ name: 'axis', kind: 'int', value: this.int(a[1]!) }],
        );
        return;
      }
      case 'dim_order_ops::_to_dim_order_copy.out':
        this.define(a[3]!, 'Cast', [this.name(a[0]!)], [{ name: 'to', kind: 'int', value: ONNX_DTYPE_CODES[this.dtype(a[3]!)] }]);
        return;
      case 'aten::index_select.out':
        this.define(a[3]!, 'Gather', [this.name(a[0]!), this.name(a[2]!)], [{ name: 'axis', kind: 'int', value: this.int(a[1]!) }]);
        return;
      case 'aten::clone.out':
        this.define(a[2]!, 'Identity', [this.name(a[0]!)]);
        return;
      case 'aten::full.out': {
        const out = a[2]!;
        this.define(out, 'Expand', [this.scalarConstant(this.dtype(out), this.scalar(a[1]!)), this.int64Vector(this.shape(out))]);
        return;
      }
      case 'aten::mean.out': {
        const rank = this.shape(a[0]!).length;
        const dims = this.graph.value(a[1]!).kind === 'null' ? [] : this.ints(a[1]!);
        const axes = dims.length === 0 ? Array.from({ length: rank }, (_, i) => i) : dims.map((d) => (d + rank) % rank);
        const keep = this.graph.value(a[2]!);
        this.define(
          a[4]!,
          'ReduceMean',
          [this.name(a[0]!)],
          [
            { name: 'axes', kind: 'ints', value: axes },
            { name: 'keepdims', kind: 'int', value: keep.kind === 'bool' && keep.value ? 1 : 0 },
          ],
        );
        return;
      }
      case 'aten::constant_pad_nd.out': {
        // ONNX wants all begins, then all ends.
        const pads = padsByDim(this.ints(a[1]!), this.shape(a[0]!).length);
        if (pads === undefined) return unsupported(this.graph.name, 'constant_pad_nd with negative or malformed padding');
        const out = a[3]!;
        this.define(out, 'Pad', [
          this.name(a[0]!),
          this.int64Vector([...pads.before, ...pads.after]),
          this.scalarConstant(this.dtype(out), this.scalar(a[2]!)),
        ]);
        return;
      }
      case 'aten::convolution.out': {
        const transposed = this.graph.value(a[6]!);
        const isTransposed = transposed.kind === 'bool' && transposed.value;
        const padding = this.ints(a[4]!);
        const inputs = [this.name(a[0]!), this.name(a[1]!)];
        if (this.graph.value(a[2]!).kind !== 'null') inputs.push(this.name(a[2]!));
        this.define(a[9]!, isTransposed ? 'ConvTranspose' : 'Conv', inputs, [
          { name: 'strides', kind: 'ints', value: this.ints(a[3]!) },
          { name: 'pads', kind: 'ints', value: [...padding, ...padding] },
          { name: 'dilations', kind: 'ints', value: this.ints(a[5]!) },
          { name: 'group', kind: 'int', value: this.int(a[8]!) },
          ...(isTransposed ? [{ name: 'output_padding', kind: 'ints', value: this.ints(a[7]!) } as const] : []),
        ]);
        return;
      }
      case 'aten::max_pool2d_with_indices.out':
      case 'aten::avg_pool2d.out': {
        // The values only: torch's indices count within each plane, ONNX's over the whole tensor.
        const max = op === 'aten::max_pool2d_with_indices.out';
        const padding = this.ints(a[3]!);
        const flag = (index: number): number => {
          const value = this.graph.value(index);
          return value.kind === 'bool' && (value as { value: boolean }).value ? 1 : 0;
        };
        if (!max && this.graph.value(a[6]!).kind !== 'null') return unsupported(this.graph.name, 'avg_pool2d with divisor_override');
        this.define(
          a[max ? 6 : 7]!,
          max ? 'MaxPool' : 'AveragePool',
          [this.name(a[0]!)],
          [
            { name: 'kernel_shape', kind: 'ints', value: this.ints(a[1]!) },
            { name: 'strides', kind: 'ints', value: this.ints(a[2]!) },
            { name: 'pads', kind: 'ints', value: [...padding, ...padding] },
            { name: 'ceil_mode', kind: 'int', value: flag(a[max ? 5 : 4]!) },
            max
              ? { name: 'dilations', kind: 'ints', value: this.ints(a[4]!) }
              : { name: 'count_include_pad', kind: 'int', value: flag(a[5]!) },
          ],
        );
        return;
      }
      case 'aten::clamp.out':
      case 'aten::hardtanh.out': {
        // Clip's bounds are inputs; an absent one is ''.
        const out = a[3]!;
        const bound = (index: number): string =>
          this.graph.value(index).kind === 'null' ? '' : this.scalarConstant(this.dtype(out), this.scalar(index));
        this.define(out, 'Clip', [this.name(a[0]!), bound(a[1]!), bound(a[2]!)]);
        return;
      }
      case 'aten::upsample_nearest2d.vec_out':
      case 'aten::upsample_bilinear2d.vec_out': {
        // PyTorch's grids in ONNX terms: nearest reads floor(x * in / out); bilinear uses half-pixel centres or aligned corners.
        const nearest = instruction.name === 'aten::upsample_nearest2d';
        const out = a[nearest ? 3 : 4]!;
        const alignCorners = !nearest && this.graph.value(a[2]!).kind === 'bool' && (this.graph.value(a[2]!) as { value: boolean }).value;
        const attributes: OnnxAttribute[] = nearest
          ? [
              { name: 'mode', kind: 'string', value: 'nearest' },
              { name: 'coordinate_transformation_mode', kind: 'string', value: 'asymmetric' },
              { name: 'nearest_mode', kind: 'string', value: 'floor' },
            ]
          : [
              { name: 'mode', kind: 'string', value: 'linear' },
              { name: 'coordinate_transformation_mode', kind: 'string', value: alignCorners ? 'align_corners' : 'half_pixel' },
            ];
        this.define(out, 'Resize', [this.name(a[0]!), '', '', this.int64Vector(this.shape(out))], attributes);
        return;
      }
      case 'aten::index_put_.':
      case 'aten::index_put.out': {
        const updated = this.scatterRows(a[0]!, a[1]!, a[2]!);
        if (instruction.overload === 'out') this.names.set(a[4]!, updated);
        else this.writeState(a[0]!, updated);
        return;
      }
      case 'aten::copy_.':
        this.writeState(a[0]!, this.conformTo(a[1]!, a[0]!));
        return;
      default:
        return unsupported(this.graph.name, `no ONNX translation for ${op}`);
    }
  }

  /** target[index] = values for one index tensor on dim 0: ScatterND over rows. */
  private scatterRows(target: number, indexList: number, values: number): string {
    const list = this.graph.value(indexList);
    const items = list.kind === 'optionalTensorList' || list.kind === 'tensorList' ? list.items : [];
    const first = items[0];
    if (items.length !== 1 || first === undefined || first < 0 || this.graph.value(first).kind !== 'tensor') {
      return unsupported(this.graph.name, 'index_put is emitted only for a single index tensor on dim 0');
    }
    const indexShape = this.shape(first);
    if (indexShape.length !== 1) return unsupported(this.graph.name, 'index_put is emitted only for a 1-D index tensor');
    const rows = indexShape[0]!;
    let indices = this.name(first);
    if (this.dtype(first) !== 'int64') {
      indices = this.node('Cast', [indices], this.fresh('index'), [{ name: 'to', kind: 'int', value: ONNX_DTYPE_CODES.int64 }]);
    }
    const targetShape = this.shape(target);
    const updateShape = [rows, ...targetShape.slice(1)];
    let updates = this.name(values);
    const valueShape = this.shape(values);
    if (valueShape.length !== updateShape.length || valueShape.some((d, i) => d !== updateShape[i])) {
      updates = this.node('Expand', [updates, this.int64Vector(updateShape)], this.fresh('updates'));
    }
    return this.node('ScatterND', [this.name(target), this.reshapeTo(indices, [rows, 1]), updates], this.fresh('scattered'));
  }

  // ---------------------------------------------------------------- serialization

  private serialize(inputs: readonly OnnxTensorSignature[], outputs: readonly OnnxTensorSignature[]): Uint8Array {
    const valueInfo = (w: ProtoWriter, signature: OnnxTensorSignature): void => {
      w.string(1, signature.name);
      w.message(2, (type) =>
        type.message(1, (tensor) => {
          tensor.int(1, ONNX_DTYPE_CODES[signature.dtype]);
          tensor.message(2, (shape) => {
            for (const dim of signature.shape) shape.message(1, (d) => d.int(1, dim));
          });
        }),
      );
    };
    const model = new ProtoWriter();
    model.int(1, ONNX_IR_VERSION);
    model.string(2, 'etna');
    model.message(7, (graph) => {
      this.nodes.forEach((node, i) => {
        graph.message(1, (n) => {
          for (const input of node.inputs) n.string(1, input);
          for (const output of node.outputs) n.string(2, output);
          n.string(3, `${node.opType}_${i}`);
          n.string(4, node.opType);
          for (const attribute of node.attributes) {
            n.message(5, (at) => {
              at.string(1, attribute.name);
              if (attribute.kind === 'int') at.int(3, attribute.value).int(20, 2);
              else if (attribute.kind === 'float') at.float(2, attribute.value).int(20, 1);
              else if (attribute.kind === 'string') at.string(4, attribute.value).int(20, 3);
              else at.packedInts(8, attribute.value).int(20, 7);
            });
          }
        });
      });
      graph.string(2, this.graph.name);
      for (const init of this.initializers.values()) {
        graph.message(5, (t) => {
          t.packedInts(1, init.shape);
          t.int(2, ONNX_DTYPE_CODES[init.dtype]);
          t.string(8, init.name);
          t.bytes(9, init.bytes);
        });
      }
      for (const input of inputs) graph.message(11, (w) => valueInfo(w, input));
      for (const output of outputs) graph.message(12, (w) => valueInfo(w, output));
    });
    model.message(8, (opset) => opset.string(1, '').int(2, ONNX_OPSET));
    return model.finish();
  }
}

/** Emits one ONNX model per method of the program graph. */
export function emitOnnxProgram(program: ProgramGraph): OnnxProgram {
  const methods = program.methods.map((method) => new MethodEmitter(method).emit());
  const state = program.sharedBuffers.map((b) => ({ name: b.name, dtype: b.dtype, shape: [...b.shape], init: b.init }));
  return { methods, state };
}

/** Emits a builder's program as authored (before any lowering pass). */
export function builderToOnnx(builder: ProgramBuilder): OnnxProgram {
  return emitOnnxProgram(builder.programGraph);
}
