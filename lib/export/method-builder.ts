// Graph builder for one method. Every op emits one ExecuTorch portable kernel
// call (or a short fixed sequence) with the argument convention of the .pte
// format: schema arguments in order with defaults materialized as values,
// then the out argument(s), then one extra slot for the return value.
import { EtnaError } from '../errors.js';
import { dtypeInfo, type DType } from './dtype.js';
import { ConstantTensor, MethodGraph, SharedBuffer, TensorValue } from './graph.js';
import { checkShape, formatShape, normalizeDim, numel, sameShape, type Shape } from './shape.js';
import {
  advancedIndexShape,
  bmmShape,
  broadcastShapes,
  broadcastsTo,
  catShape,
  conv2dShape,
  expandShape,
  layerNormShapes,
  mmShape,
  permuteShape,
  selectShape,
  sliceShape,
  transposeShape,
  unsqueezeShape,
  viewShape,
} from './shape-inference.js';

/** Anything an op accepts as a tensor operand. */
export type TensorInput = TensorValue | ConstantTensor | SharedBuffer;

export type GeluApproximation = 'none' | 'tanh';

export interface Conv2dOptions {
  stride?: number | [number, number];
  padding?: number | [number, number];
  dilation?: number | [number, number];
  groups?: number;
}

/** A literal argument for `kernel()`: how a value that is not a tensor is serialized. */
export type KernelArgument =
  | TensorInput
  | { int: number | bigint }
  | { double: number }
  | { bool: boolean }
  | { string: string }
  | { intList: readonly number[] }
  | { tensorList: readonly TensorInput[] }
  | null;

// Internally an operand may also be a value that already exists (e.g. a list built by the caller).
type Operand = KernelArgument | { valueIndex: number };

function invalid(message: string): never {
  throw new EtnaError('INVALID_INPUT', message);
}

function isTensorInput(value: unknown): value is TensorInput {
  return value instanceof TensorValue || value instanceof ConstantTensor || value instanceof SharedBuffer;
}

function shapeOfArgument(qualifiedName: string, args: readonly KernelArgument[], i: number): Shape {
  const arg = args[i];
  if (!isTensorInput(arg)) invalid(`kernel ${qualifiedName}: argument ${i} must be a tensor`);
  return arg.shape;
}

const BROADCASTING_KERNELS: ReadonlySet<string> = new Set([
  'aten::add.out',
  'aten::sub.out',
  'aten::mul.out',
  'aten::div.out',
  'aten::div.out_mode',
  'aten::where.self_out',
  'aten::eq.Tensor_out',
  'aten::ne.Tensor_out',
  'aten::gt.Tensor_out',
  'aten::ge.Tensor_out',
  'aten::lt.Tensor_out',
  'aten::le.Tensor_out',
  'aten::maximum.out',
  'aten::minimum.out',
  'aten::pow.Tensor_Tensor_out',
  'aten::logical_and.out',
  'aten::logical_or.out',
]);

/**
 * The operand rules of the kernels whose operands constrain each other, for
 * calls emitted through the escape hatch: the same shape inference the
 * builder's own ops apply, so contradicting operands are refused when the
 * program is written rather than when it loads or runs.
 */
function checkOperandShapes(qualifiedName: string, args: readonly KernelArgument[]): void {
  const shape = (i: number): Shape => shapeOfArgument(qualifiedName, args, i);
  const op = qualifiedName.replace(/^aten::/, '').replace(/\..*$/, '');
  if (BROADCASTING_KERNELS.has(qualifiedName)) {
    const tensors = args
      .slice(0, -1)
      .filter(isTensorInput)
      .map((t) => t.shape);
    tensors.reduce((acc, s) => broadcastShapes(op, acc, s), []);
    return;
  }
  switch (qualifiedName) {
    case 'aten::mm.out':
      mmShape(op, shape(0), shape(1));
      return;
    case 'aten::bmm.out':
      bmmShape(op, shape(0), shape(1));
      return;
    case 'aten::addmm.out': {
      const product = mmShape(op, shape(1), shape(2));
      if (!broadcastsTo(shape(0), product))
        invalid(`${op}: bias ${formatShape(shape(0))} does not broadcast to the product ${formatShape(product)}`);
      return;
    }
    case 'aten::view_copy.out': {
      const target = args[1];
      if (target !== null && typeof target === 'object' && 'intList' in target) viewShape(op, shape(0), target.intList);
      return;
    }
    case 'aten::cat.out': {
      const list = args[0];
      const dim = args[1];
      if (
        list === null ||
        typeof list !== 'object' ||
        !('tensorList' in list) ||
        dim === null ||
        typeof dim !== 'object' ||
        !('int' in dim)
      )
        return;
      catShape(
        op,
        list.tensorList.map((t) => t.shape),
        Number(dim.int),
      );
      return;
    }
    case 'aten::convolution.out': {
      const input = shape(0);
      const weight = shape(1);
      const transposed = args[6];
      const groupsArg = args[8];
      const groups = groupsArg !== null && typeof groupsArg === 'object' && 'int' in groupsArg ? Number(groupsArg.int) : 1;
      const isTransposed = transposed !== null && typeof transposed === 'object' && 'bool' in transposed && transposed.bool;
      if (input.length !== weight.length || input.length < 3)
        invalid(`${op}: input ${formatShape(input)} and weight ${formatShape(weight)} must have the same rank, at least 3`);
      const expected = isTransposed ? weight[0]! : weight[1]! * groups;
      if (input[1] !== expected) {
        invalid(
          `${op}: input ${formatShape(input)} has ${input[1]} channels; weight ${formatShape(weight)} with groups ${groups} expects ${expected}`,
        );
      }
      return;
    }
    default:
  }
}

export class MethodBuilder {
  /** @internal */
  constructor(
    readonly graph: MethodGraph,
    private readonly owner: object,
  ) {}

  get name(): string {
    return this.graph.name;
  }

  // ---------------------------------------------------------------- inputs and outputs

  /**
   * Declares the next user input (planned in the activation arena; the runtime
   * copies it in). `name` is stored in the program: `Module.run` feeds it by name.
   */
  input(name: string, dtype: DType, shape: Shape): TensorValue {
    this.checkIoName(
      'input',
      name,
      this.graph.inputs.map((index) => this.graph.tensorNode(index).label),
    );
    dtypeInfo(dtype);
    const checked = checkShape(shape, `method '${this.name}' input '${name}'`);
    const tensor = this.graph.addTensor(dtype, checked, { kind: 'input' }, name);
    this.graph.inputs.push(tensor.index);
    return tensor;
  }

  /**
   * Appends user outputs, in order: `output({ logits, state })` names them by
   * key (names `Module.run` returns them under); `output(a, b)` leaves them
   * `output_<i>`. JavaScript orders index-like keys ('0', '1') first, so call
   * once per output when names like that must keep their place.
   */
  output(named: Readonly<Record<string, TensorInput>>): void;
  output(...tensors: TensorInput[]): void;
  output(...args: (TensorInput | Readonly<Record<string, TensorInput>>)[]): void {
    const first = args[0];
    const named = args.length === 1 && typeof first === 'object' && first !== null && !isTensorInput(first);
    const entries: [string | undefined, unknown][] = named ? Object.entries(first) : args.map((tensor) => [undefined, tensor]);
    for (const [name, tensor] of entries) {
      const resolved = name ?? `output_${this.graph.outputs.length}`;
      this.checkIoName('output', resolved, this.graph.outputNames);
      this.graph.outputs.push(this.use(tensor as TensorInput).index);
      this.graph.outputNames.push(resolved);
    }
  }

  private checkIoName(side: 'input' | 'output', name: unknown, taken: readonly (string | undefined)[]): void {
    if (typeof name !== 'string' || name.length === 0)
      invalid(`method '${this.name}': ${side} names must be non-empty strings, got ${JSON.stringify(name)}`);
    if (taken.includes(name)) invalid(`method '${this.name}': ${side} name '${name}' is already used`);
  }

  /** The method's value for a tensor operand (constants and shared buffers become values on first use). */
  use(tensor: TensorInput): TensorValue {
    if (tensor instanceof TensorValue) {
      if (tensor.graph !== this.graph) {
        invalid(
          `method '${this.name}': ${tensor.toString()} belongs to method '${tensor.graph.name}'; pass constants or shared buffers across methods, not values`,
        );
      }
      return tensor;
    }
    if (tensor instanceof ConstantTensor || tensor instanceof SharedBuffer) {
      if (tensor.owner !== this.owner) invalid(`method '${this.name}': ${tensor.toString()} was declared by another ProgramBuilder`);
      return this.graph.programTensor(tensor);
    }
    return invalid(`method '${this.name}': expected a tensor, got ${String(tensor)}`);
  }

  // ---------------------------------------------------------------- elementwise arithmetic

  /** a + b: `aten::add.out` for two tensors, `aten::add.Scalar_out` with a number. */
  add(a: TensorInput | number, b: TensorInput | number): TensorValue {
    if (typeof a === 'number') [a, b] = [b, a];
    if (typeof a === 'number') return invalid('add: at least one operand must be a tensor');
    return this.arithmetic('add', a, b, true);
  }

  /** a - b: `aten::sub.out`, `aten::sub.Scalar_out`, or `aten::rsub.Scalar_out` for number - tensor. */
  sub(a: TensorInput | number, b: TensorInput | number): TensorValue {
    if (typeof a === 'number') {
      if (typeof b === 'number') return invalid('sub: at least one operand must be a tensor');
      const self = this.use(b);
      return this.emitOut('aten::rsub.Scalar_out', self.dtype, self.shape, [self, this.scalarFor('rsub', self, a), { int: 1 }]);
    }
    return this.arithmetic('sub', a, b, true);
  }

  /** a * b: `aten::mul.out` or `aten::mul.Scalar_out`. */
  mul(a: TensorInput | number, b: TensorInput | number): TensorValue {
    if (typeof a === 'number') [a, b] = [b, a];
    if (typeof a === 'number') return invalid('mul: at least one operand must be a tensor');
    return this.arithmetic('mul', a, b, false);
  }

  /** a / b (true division, floating dtypes): `aten::div.out` or `aten::div.Scalar_out`. */
  div(a: TensorInput, b: TensorInput | number): TensorValue {
    const self = this.use(a);
    if (dtypeInfo(self.dtype).kind !== 'float') invalid(`div: true division needs a floating dtype, got ${self.dtype} (cast first)`);
    return this.arithmetic('div', self, b, false);
  }

  private arithmetic(op: 'add' | 'sub' | 'mul' | 'div', a: TensorInput, b: TensorInput | number, hasAlpha: boolean): TensorValue {
    const self = this.use(a);
    const alpha = hasAlpha ? [{ int: 1 }] : [];
    if (typeof b === 'number') {
      return this.emitOut(`aten::${op}.Scalar_out`, self.dtype, self.shape, [self, this.scalarFor(op, self, b), ...alpha]);
    }
    const other = this.use(b);
    if (other.dtype !== self.dtype) invalid(`${op}: dtypes differ (${self.dtype} vs ${other.dtype}); cast one operand first`);
    return this.emitOut(`aten::${op}.out`, self.dtype, broadcastShapes(op, self.shape, other.shape), [self, other, ...alpha]);
  }

  // A Scalar operand is an Int for integer tensors and a Double for floating ones.
  private scalarFor(op: string, tensor: TensorValue, value: number): KernelArgument {
    if (!Number.isFinite(value)) invalid(`${op}: scalar ${value} is not finite`);
    if (dtypeInfo(tensor.dtype).kind === 'float') return { double: value };
    if (!Number.isInteger(value)) invalid(`${op}: scalar ${value} is not an integer, but the tensor is ${tensor.dtype}`);
    return { int: value };
  }

  // ---------------------------------------------------------------- activations

  relu(x: TensorInput): TensorValue {
    return this.unary('aten::relu.out', x, false);
  }

  tanh(x: TensorInput): TensorValue {
    return this.unary('aten::tanh.out', x, true);
  }

  sigmoid(x: TensorInput): TensorValue {
    return this.unary('aten::sigmoid.out', x, true);
  }

  silu(x: TensorInput): TensorValue {
    return this.unary('aten::silu.out', x, true);
  }

  /** `aten::gelu.out` [self, approximate, out, out]; 'none' is the exact erf form. */
  gelu(x: TensorInput, approximate: GeluApproximation = 'none'): TensorValue {
    if (approximate !== 'none' && approximate !== 'tanh')
      invalid(`gelu: approximate must be 'none' or 'tanh', got '${String(approximate)}'`);
    const self = this.floating('gelu', x);
    return this.emitOut('aten::gelu.out', self.dtype, self.shape, [self, { string: approximate }]);
  }

  private unary(op: string, x: TensorInput, needsFloat: boolean): TensorValue {
    const self = needsFloat ? this.floating(op, x) : this.use(x);
    return this.emitOut(op, self.dtype, self.shape, [self]);
  }

  private floating(op: string, x: TensorInput): TensorValue {
    const self = this.use(x);
    if (dtypeInfo(self.dtype).kind !== 'float') invalid(`${op}: needs a floating tensor, got ${self.toString()}`);
    return self;
  }

  /** `aten::_softmax.out` [self, dim, half_to_float=false, out, out]. */
  softmax(x: TensorInput, dim: number): TensorValue {
    const self = this.floating('softmax', x);
    const d = normalizeDim('softmax', dim, Math.max(self.rank, 1));
    return this.emitOut('aten::_softmax.out', self.dtype, self.shape, [self, { int: d }, { bool: false }]);
  }

  /**
   * `aten::native_layer_norm.out` [input, normalized_shape, weight?, bias?, eps,
   * out, mean, rstd, TensorList[out, mean, rstd]]; returns the normalized tensor.
   */
  layerNorm(
    x: TensorInput,
    normalizedShape: readonly number[],
    weight?: TensorInput | null,
    bias?: TensorInput | null,
    eps = 1e-5,
  ): TensorValue {
    const op = 'layer_norm';
    const input = this.floating(op, x);
    const { stats } = layerNormShapes(op, input.shape, normalizedShape);
    const affine = (t: TensorInput | null | undefined, what: string): TensorValue | null => {
      if (t === null || t === undefined) return null;
      const v = this.use(t);
      if (!sameShape(v.shape, normalizedShape))
        invalid(`${op}: ${what} has shape ${formatShape(v.shape)}, expected normalized_shape ${formatShape(normalizedShape)}`);
      if (v.dtype !== input.dtype) invalid(`${op}: ${what} is ${v.dtype}, input is ${input.dtype}`);
      return v;
    };
    const w = affine(weight, 'weight');
    const b = affine(bias, 'bias');
    if (!(eps > 0)) invalid(`${op}: eps must be positive, got ${eps}`);
    const out = this.graph.addTensor(input.dtype, input.shape);
    const mean = this.graph.addTensor(input.dtype, stats);
    const rstd = this.graph.addTensor(input.dtype, stats);
    const results = this.graph.addValue({ kind: 'tensorList', items: [out.index, mean.index, rstd.index] });
    this.emit('aten::native_layer_norm.out', [input, { intList: normalizedShape }, w, b, { double: eps }, out, mean, rstd], results);
    return out;
  }

  // ---------------------------------------------------------------- matrix products

  /** `aten::mm.out` for matrices, `aten::bmm.out` for rank 3; higher ranks with equal batch dims are viewed as rank 3. A rank>2 left operand with a matrix on the right is viewed as a matrix. */
  matmul(a: TensorInput, b: TensorInput): TensorValue {
    const left = this.floating('matmul', a);
    const right = this.use(b);
    if (right.dtype !== left.dtype) invalid(`matmul: dtypes differ (${left.dtype} vs ${right.dtype})`);
    if (left.rank === 2 && right.rank === 2) return this.mm(left, right);
    if (left.rank === 3 && right.rank === 3) return this.bmm(left, right);
    if (left.rank > 2 && right.rank === 2) {
      const rows = numel(left.shape.slice(0, -1));
      const flat = this.reshape(left, [rows, left.shape[left.rank - 1]!]);
      const product = this.mm(flat, right);
      return this.reshape(product, [...left.shape.slice(0, -1), right.shape[1]!]);
    }
    if (left.rank > 3 && right.rank === left.rank) {
      const batch = left.shape.slice(0, -2);
      if (!sameShape(batch, right.shape.slice(0, -2))) {
        invalid(
          `matmul: batch dims differ: ${formatShape(left.shape)} x ${formatShape(right.shape)} (broadcast batch dims are not supported)`,
        );
      }
      const count = numel(batch);
      const l3 = this.reshape(left, [count, ...left.shape.slice(-2)]);
      const r3 = this.reshape(right, [count, ...right.shape.slice(-2)]);
      const product = this.bmm(l3, r3);
      return this.reshape(product, [...batch, ...product.shape.slice(-2)]);
    }
    return invalid(`matmul: unsupported operand ranks ${formatShape(left.shape)} x ${formatShape(right.shape)}`);
  }

  private mm(a: TensorValue, b: TensorValue): TensorValue {
    return this.emitOut('aten::mm.out', a.dtype, mmShape('mm', a.shape, b.shape), [a, b]);
  }

  private bmm(a: TensorValue, b: TensorValue): TensorValue {
    return this.emitOut('aten::bmm.out', a.dtype, bmmShape('bmm', a.shape, b.shape), [a, b]);
  }

  /**
   * y = x W^T + b for weight [out, in]. Emitted like the reference exporter's
   * decomposition: `aten::permute_copy.out` of the weight, then
   * `aten::addmm.out` (or `aten::mm.out` without bias); inputs of rank != 2 are
   * viewed as a matrix and the result viewed back.
   */
  linear(x: TensorInput, weight: TensorInput, bias?: TensorInput | null): TensorValue {
    const op = 'linear';
    const input = this.floating(op, x);
    const w = this.use(weight);
    if (w.rank !== 2) invalid(`${op}: weight must be [out_features, in_features], got ${formatShape(w.shape)}`);
    const [outFeatures, inFeatures] = w.shape as [number, number];
    if (input.rank === 0 || input.shape[input.rank - 1] !== inFeatures) {
      invalid(`${op}: input ${formatShape(input.shape)} must end in in_features ${inFeatures} (weight ${formatShape(w.shape)})`);
    }
    if (w.dtype !== input.dtype) invalid(`${op}: weight is ${w.dtype}, input is ${input.dtype}`);
    const rows = numel(input.shape.slice(0, -1));
    const matrix = input.rank === 2 ? input : this.reshape(input, [rows, inFeatures]);
    const weightT = this.permute(w, [1, 0]);
    let product: TensorValue;
    if (bias === null || bias === undefined) {
      product = this.mm(matrix, weightT);
    } else {
      const b = this.use(bias);
      if (!sameShape(b.shape, [outFeatures]) || b.dtype !== input.dtype) {
        invalid(`${op}: bias must be ${input.dtype}[${outFeatures}], got ${b.toString()}`);
      }
      product = this.graph.addTensor(input.dtype, [rows, outFeatures]);
      this.emit('aten::addmm.out', [b, matrix, weightT, { int: 1 }, { int: 1 }, product], product);
    }
    return input.rank === 2 ? product : this.reshape(product, [...input.shape.slice(0, -1), outFeatures]);
  }

  /** `aten::convolution.out` [input, weight, bias?, stride, padding, dilation, transposed=false, output_padding=[0,0], groups, out, out]. */
  conv2d(x: TensorInput, weight: TensorInput, bias?: TensorInput | null, options: Conv2dOptions = {}): TensorValue {
    const op = 'conv2d';
    const input = this.floating(op, x);
    const w = this.use(weight);
    if (w.dtype !== input.dtype) invalid(`${op}: weight is ${w.dtype}, input is ${input.dtype}`);
    const pair = (v: number | [number, number] | undefined, fallback: number): [number, number] =>
      v === undefined ? [fallback, fallback] : typeof v === 'number' ? [v, v] : [v[0], v[1]];
    const params = {
      stride: pair(options.stride, 1),
      padding: pair(options.padding, 0),
      dilation: pair(options.dilation, 1),
      groups: options.groups ?? 1,
    };
    const shape = conv2dShape(op, input.shape, w.shape, params);
    let b: TensorValue | null = null;
    if (bias !== null && bias !== undefined) {
      b = this.use(bias);
      if (!sameShape(b.shape, [shape[1]!])) invalid(`${op}: bias must have shape [${shape[1]}], got ${formatShape(b.shape)}`);
    }
    return this.emitOut('aten::convolution.out', input.dtype, shape, [
      input,
      w,
      b,
      { intList: params.stride },
      { intList: params.padding },
      { intList: params.dilation },
      { bool: false },
      { intList: [0, 0] },
      { int: params.groups },
    ]);
  }

  // ---------------------------------------------------------------- lookups

  /** `aten::embedding.out` [weight, indices, padding_idx=-1, scale_grad_by_freq=false, sparse=false, out, out]. */
  embedding(weight: TensorInput, indices: TensorInput): TensorValue {
    const op = 'embedding';
    const table = this.use(weight);
    const idx = this.use(indices);
    if (table.rank !== 2) invalid(`${op}: weight must be [num_embeddings, dim], got ${formatShape(table.shape)}`);
    if (idx.dtype !== 'int64' && idx.dtype !== 'int32') invalid(`${op}: indices must be int64 or int32, got ${idx.toString()}`);
    return this.emitOut(
      'aten::embedding.out',
      table.dtype,
      [...idx.shape, table.shape[1]!],
      [table, idx, { int: -1 }, { bool: false }, { bool: false }],
    );
  }

  // ---------------------------------------------------------------- shape ops

  /** `aten::view_copy.out` [self, size, out, out]; one size may be -1. */
  reshape(x: TensorInput, shape: readonly number[]): TensorValue {
    const self = this.use(x);
    const target = viewShape('reshape', self.shape, shape);
    return this.emitOut('aten::view_copy.out', self.dtype, target, [self, { intList: target }]);
  }

  /** `aten::permute_copy.out` [self, dims, out, out]. */
  permute(x: TensorInput, dims: readonly number[]): TensorValue {
    const self = this.use(x);
    const p = permuteShape('permute', self.shape, dims);
    return this.emitOut('aten::permute_copy.out', self.dtype, p.shape, [self, { intList: p.dims }]);
  }

  /** `aten::transpose_copy.int_out` [self, dim0, dim1, out, out]. */
  transpose(x: TensorInput, dim0: number, dim1: number): TensorValue {
    const self = this.use(x);
    const t = transposeShape('transpose', self.shape, dim0, dim1);
    return this.emitOut('aten::transpose_copy.int_out', self.dtype, t.shape, [self, { int: t.dim0 }, { int: t.dim1 }]);
  }

  /** `aten::slice_copy.Tensor_out` [self, dim, start, end, step, out, out] with Python slice clamping. */
  slice(x: TensorInput, dim: number, start: number, end: number, step = 1): TensorValue {
    const self = this.use(x);
    const s = sliceShape('slice', self.shape, dim, start, end, step);
    return this.emitOut('aten::slice_copy.Tensor_out', self.dtype, s.shape, [
      self,
      { int: s.dim },
      { int: s.start },
      { int: s.end },
      { int: step },
    ]);
  }

  /** `aten::select_copy.int_out` [self, dim, index, out, out]; drops `dim`. */
  select(x: TensorInput, dim: number, index: number): TensorValue {
    const self = this.use(x);
    const s = selectShape('select', self.shape, dim, index);
    return this.emitOut('aten::select_copy.int_out', self.dtype, s.shape, [self, { int: s.dim }, { int: s.index }]);
  }

  /** `aten::cat.out` [tensors, dim, out, out]. */
  cat(tensors: readonly TensorInput[], dim: number): TensorValue {
    const values = tensors.map((t) => this.use(t));
    const c = catShape(
      'cat',
      values.map((v) => v.shape),
      dim,
    );
    const dtype = values[0]!.dtype;
    const odd = values.find((v) => v.dtype !== dtype);
    if (odd !== undefined) invalid(`cat: all tensors must be ${dtype}, got ${odd.toString()}`);
    return this.emitOut('aten::cat.out', dtype, c.shape, [{ tensorList: values }, { int: c.dim }]);
  }

  /** `aten::unsqueeze_copy.out` [self, dim, out, out]. */
  unsqueeze(x: TensorInput, dim: number): TensorValue {
    const self = this.use(x);
    const u = unsqueezeShape('unsqueeze', self.shape, dim);
    return this.emitOut('aten::unsqueeze_copy.out', self.dtype, u.shape, [self, { int: u.dim }]);
  }

  /** `aten::expand_copy.out` [self, size, implicit=false, out, out]. */
  expand(x: TensorInput, shape: readonly number[]): TensorValue {
    const self = this.use(x);
    const target = expandShape('expand', self.shape, shape);
    return this.emitOut('aten::expand_copy.out', self.dtype, target, [self, { intList: target }, { bool: false }]);
  }

  /** `dim_order_ops::_to_dim_order_copy.out` [self, non_blocking=false, dim_order, out, out]: dtype conversion. */
  cast(x: TensorInput, dtype: DType): TensorValue {
    const self = this.use(x);
    dtypeInfo(dtype);
    const contiguous = self.shape.map((_, i) => i);
    return this.emitOut('dim_order_ops::_to_dim_order_copy.out', dtype, self.shape, [self, { bool: false }, { intList: contiguous }]);
  }

  // ---------------------------------------------------------------- writes into buffers

  /**
   * target[indices] = values, in place: `aten::index_put_` [self, indices,
   * values, accumulate=false, ret=self]. `null` index entries keep a dim.
   * This is how a KV cache row is written into a shared buffer.
   */
  indexPutInPlace(target: TensorInput, indices: readonly (TensorInput | null)[], values: TensorInput): TensorValue {
    const self = this.writable('index_put_', target);
    const { list, src } = this.indexPutOperands('index_put_', self, indices, values);
    this.emit('aten::index_put_', [self, { valueIndex: list }, src, { bool: false }], self.index);
    return self;
  }

  /** Functional form: `aten::index_put.out` [self, indices, values, accumulate=false, out, out]. */
  indexPut(target: TensorInput, indices: readonly (TensorInput | null)[], values: TensorInput): TensorValue {
    const self = this.use(target);
    const { list, src } = this.indexPutOperands('index_put', self, indices, values);
    return this.emitOut('aten::index_put.out', self.dtype, self.shape, [self, { valueIndex: list }, src, { bool: false }]);
  }

  private indexPutOperands(
    op: string,
    self: TensorValue,
    indices: readonly (TensorInput | null)[],
    values: TensorInput,
  ): { list: number; src: TensorValue } {
    const resolved = indices.map((index) => (index === null ? null : this.use(index)));
    for (const index of resolved) {
      if (index !== null && index.dtype !== 'int64' && index.dtype !== 'int32')
        invalid(`${op}: index tensors must be int64 or int32, got ${index.toString()}`);
    }
    const indexed = advancedIndexShape(
      op,
      self.shape,
      resolved.map((i) => (i === null ? null : i.shape)),
    );
    const src = this.use(values);
    if (src.dtype !== self.dtype) invalid(`${op}: values are ${src.dtype}, target is ${self.dtype}`);
    if (!broadcastsTo(src.shape, indexed)) {
      invalid(
        `${op}: values ${formatShape(src.shape)} do not broadcast to the indexed shape ${formatShape(indexed)} of ${formatShape(self.shape)}`,
      );
    }
    const items = resolved.map((index) => (index === null ? this.graph.addValue({ kind: 'null' }) : index.index));
    const list = this.graph.addValue({ kind: 'optionalTensorList', items });
    return { list, src };
  }

  /** dst := src (broadcast, converting dtype), in place: `aten::copy_` [self, src, non_blocking=false, ret=self]. Used to write state back. */
  copyInto(target: TensorInput, source: TensorInput): TensorValue {
    const self = this.writable('copy_', target);
    const src = this.use(source);
    if (!broadcastsTo(src.shape, self.shape))
      invalid(`copy_: source ${formatShape(src.shape)} does not broadcast to target ${formatShape(self.shape)}`);
    this.emit('aten::copy_', [self, src, { bool: false }], self.index);
    return self;
  }

  private writable(op: string, target: TensorInput): TensorValue {
    const self = this.use(target);
    const origin = this.graph.tensorNode(self.index).origin;
    if (origin.kind === 'constant') invalid(`${op}: ${origin.constant.toString()} is read-only`);
    return self;
  }

  // ---------------------------------------------------------------- escape hatch

  /**
   * Emits a kernel call with explicit arguments, for operators the builder has
   * no helper for. Pass every schema argument (defaults included) and the out
   * tensor(s); the extra return slot is added here (the single out tensor, or
   * `returnValue` when given).
   */
  kernel(qualifiedName: string, args: readonly KernelArgument[], returnValue?: TensorValue): void {
    checkOperandShapes(qualifiedName, args);
    const indices = args.map((arg) => this.argument(arg));
    const last = args[args.length - 1];
    const ret = returnValue !== undefined ? this.use(returnValue).index : last instanceof TensorValue ? last.index : undefined;
    if (ret === undefined) invalid(`kernel ${qualifiedName}: cannot infer the return slot; pass returnValue`);
    this.graph.addKernelCall(qualifiedName, [...indices, ret]);
  }

  // Serializes `args` in order and appends the return slot.
  /**
   * Emits an out-variant kernel call into a new tensor of `dtype` and `shape`:
   * the tensor is the call's last argument (`out`) and its return value.
   */
  private emitOut(qualifiedName: string, dtype: DType, shape: readonly number[], args: readonly Operand[]): TensorValue {
    const out = this.graph.addTensor(dtype, shape);
    this.emit(qualifiedName, [...args, out], out);
    return out;
  }

  private emit(qualifiedName: string, args: readonly Operand[], returnValue: TensorValue | number): void {
    const ret = typeof returnValue === 'number' ? returnValue : returnValue.index;
    this.graph.addKernelCall(qualifiedName, [...args.map((arg) => this.argument(arg)), ret]);
  }

  private argument(arg: Operand): number {
    if (arg === null) return this.graph.addValue({ kind: 'null' });
    if ('valueIndex' in arg) return arg.valueIndex;
    if (arg instanceof TensorValue || arg instanceof ConstantTensor || arg instanceof SharedBuffer) return this.use(arg).index;
    if ('int' in arg) return this.intValue(arg.int);
    if ('double' in arg) return this.graph.addValue({ kind: 'double', value: arg.double });
    if ('bool' in arg) return this.graph.addValue({ kind: 'bool', value: arg.bool });
    if ('string' in arg) return this.graph.addValue({ kind: 'string', value: arg.string });
    if ('intList' in arg) return this.graph.addValue({ kind: 'intList', items: arg.intList.map((v) => this.intValue(v)) });
    if ('tensorList' in arg) return this.graph.addValue({ kind: 'tensorList', items: arg.tensorList.map((t) => this.use(t).index) });
    return invalid(`unsupported kernel argument ${JSON.stringify(arg)}`);
  }

  private intValue(value: number | bigint): number {
    if (typeof value === 'number' && !Number.isSafeInteger(value)) invalid(`${value} is not an integer`);
    return this.graph.addValue({ kind: 'int', value: BigInt(value) });
  }
}
