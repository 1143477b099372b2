import { EtnaError } from './errors.js';

import { DTYPE_TABLE, DTYPES, isDType, type DType, type TensorData } from './dtypes.js';

export { arrayType, arrayTypeName, elementSize, isDType } from './dtypes.js';
export type { DType, TensorData, TensorDataTypes } from './dtypes.js';

export function numel(shape: readonly number[]): number {
  return shape.reduce((product, size) => product * size, 1);
}

function invalid(message: string): never {
  throw new EtnaError('INVALID_INPUT', message);
}

/** A short description of a value for error messages. */
function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object' || typeof value === 'function') return (value as object).constructor?.name ?? 'object';
  if (typeof value === 'string') return `'${value}'`;
  return `${typeof value} ${String(value)}`;
}

function checkDType(dtype: unknown): DType {
  if (!isDType(dtype)) invalid(`unknown dtype ${describe(dtype)} (one of ${DTYPES.join(', ')})`);
  return dtype;
}

function checkShape(shape: unknown): readonly number[] {
  if (!Array.isArray(shape)) invalid(`shape must be an array of sizes, got ${describe(shape)}`);
  for (const [i, size] of (shape as unknown[]).entries()) {
    if (typeof size !== 'number' || !Number.isInteger(size) || size < 0) {
      invalid(`shape[${i}] = ${describe(size)} is not a non-negative integer`);
    }
  }
  return shape as readonly number[];
}

function checkValues(values: unknown, dtype: DType): ArrayLike<unknown> {
  const arrayLike = Array.isArray(values) || ArrayBuffer.isView(values);
  if (!arrayLike) invalid(`${dtype} values must be an array, got ${describe(values)}`);
  return values as ArrayLike<unknown>;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function int64Element(value: unknown, index: number): bigint {
  if (typeof value === 'bigint') {
    if (value < INT64_MIN || value > INT64_MAX) invalid(`int64 values[${index}] = ${value}n is outside the int64 range`);
    return value;
  }
  if (typeof value !== 'number' || !Number.isInteger(value)) invalid(`int64 values[${index}] = ${describe(value)} is not an integer`);
  return int64Element(BigInt(value), index);
}

// A call in onnxruntime's order (type, data, dims) puts the data in `shape`'s
// place (a TypedArray, or a plain array as many elements long as the dims
// in `data`'s place describe).
function looksLikeOnnxruntimeOrder(shape: unknown, data: unknown): boolean {
  if (ArrayBuffer.isView(shape)) return true;
  if (!Array.isArray(shape) || !Array.isArray(data)) return false;
  const dims = data as unknown[];
  return dims.every((d) => Number.isInteger(d) && (d as number) >= 0) && numel(dims as number[]) === shape.length;
}

/**
 * A tensor: dtype, shape and a JS-owned TypedArray typed by dtype
 * (`Tensor<'float32'>` holds a Float32Array, `Tensor<'int64'>` a BigInt64Array ...).
 * Arguments go in the order `new Tensor(dtype, shape, data)`.
 */
export class Tensor<D extends DType = DType> {
  readonly dtype: D;
  readonly shape: readonly number[];
  readonly data: TensorData<D>;

  constructor(dtype: D, shape: readonly number[], data: TensorData<D>) {
    checkDType(dtype);
    const expected = DTYPE_TABLE[dtype].array;
    if (!(data instanceof expected)) {
      if (looksLikeOnnxruntimeOrder(shape, data)) {
        invalid(`etna takes new Tensor(dtype, shape, data); these arguments look like onnxruntime's order new Tensor(type, data, dims)`);
      }
      const hint = Array.isArray(data) ? ` (Tensor.float32(shape, values) and Tensor.int64(shape, values) take plain arrays)` : '';
      invalid(`Tensor.data must be a ${expected.name} for ${dtype} tensors, got ${describe(data)}${hint}`);
    }
    checkShape(shape);
    if (data.length !== numel(shape)) {
      invalid(`shape [${shape.join(', ')}] holds ${numel(shape)} elements, data has ${data.length}`);
    }
    this.dtype = dtype;
    this.shape = Object.freeze([...shape]);
    this.data = data;
  }

  /** A zero-filled tensor. */
  static zeros<D extends DType>(dtype: D, shape: readonly number[]): Tensor<D> {
    const info = DTYPE_TABLE[checkDType(dtype) as D];
    return new Tensor(dtype, shape, new info.array(numel(checkShape(shape))));
  }

  /** float32 from plain numbers. */
  static float32(shape: readonly number[], values: ArrayLike<number>): Tensor<'float32'> {
    const checked = checkValues(values, 'float32');
    const data = new Float32Array(checked.length);
    for (let i = 0; i < checked.length; i++) {
      const value = checked[i];
      if (typeof value !== 'number') invalid(`float32 values[${i}] = ${describe(value)} is not a number`);
      data[i] = value;
    }
    return new Tensor('float32', shape, data);
  }

  /** int64 from integers (numbers or bigints). */
  static int64(shape: readonly number[], values: ArrayLike<number | bigint>): Tensor<'int64'> {
    const checked = checkValues(values, 'int64');
    const data = new BigInt64Array(checked.length);
    for (let i = 0; i < checked.length; i++) data[i] = int64Element(checked[i], i);
    return new Tensor('int64', shape, data);
  }

  get size(): number {
    return this.data.length;
  }

  /** Narrows the tensor's type: `if (t.is('float32')) t.data` is a Float32Array. */
  is<E extends DType>(dtype: E): this is Tensor<E> {
    return (this.dtype as DType) === dtype;
  }

  /** Elements as plain numbers (int64 converted with Number()). */
  toArray(): number[] {
    return Array.from(this.data as ArrayLike<number | bigint>, (v) => Number(v));
  }
}

/** Wraps `numel(shape)` elements at `byteOffset` of `buffer` as a tensor (no copy). */
export function tensorOver<D extends DType>(dtype: D, shape: readonly number[], buffer: ArrayBufferLike, byteOffset = 0): Tensor<D> {
  return new Tensor(dtype, shape, new DTYPE_TABLE[dtype].array(buffer, byteOffset, numel(shape)));
}

/** A tensor in etna's own field names; `data` must match `dtype` (one member per dtype). */
export type TensorFields<D extends DType = DType> = {
  [K in D]: { readonly dtype: K; readonly shape: readonly number[]; readonly data: TensorData<K> };
}[D];

/** An onnxruntime tensor (`new ort.Tensor(type, data, dims)`) read through its public fields. */
export interface OnnxruntimeTensorLike {
  readonly type: string;
  readonly dims: readonly number[];
  readonly data: unknown;
  readonly location?: string;
}

/** Anything etna accepts where a tensor is expected. */
export type TensorSource = Tensor | TensorFields | OnnxruntimeTensorLike;

function hasFields<K extends string>(value: object, keys: readonly K[]): value is Record<K, unknown> {
  return keys.every((key) => key in value);
}

// onnxruntime's float16 data may be a Float16Array where the runtime has one;
// etna keeps raw 16-bit patterns, so view the same bytes.
function onnxruntimeData(type: DType, data: unknown): unknown {
  if (type === 'float16' && ArrayBuffer.isView(data) && !(data instanceof Uint16Array) && (data as Uint16Array).BYTES_PER_ELEMENT === 2) {
    const view = data as Uint16Array;
    return new Uint16Array(view.buffer, view.byteOffset, view.length);
  }
  return data;
}

/**
 * The one conversion of tensor-like values into etna Tensors: an etna Tensor
 * as is, `{ dtype, shape, data }`, or an onnxruntime tensor `{ type, dims, data }`
 * (CPU data). `what` prefixes error messages (e.g. "method 'forward': input 0").
 */
export function toTensor(value: unknown, what = 'tensor'): Tensor {
  if (value instanceof Tensor) return value;
  const expected = `expected a tensor (an etna Tensor, { dtype, shape, data } or an onnxruntime Tensor)`;
  if (typeof value !== 'object' || value === null) invalid(`${what}: ${expected}, got ${value === null ? 'null' : typeof value}`);
  try {
    if (hasFields(value, ['dtype', 'shape', 'data'])) {
      return new Tensor(checkDType(value.dtype), value.shape as readonly number[], value.data as TensorData);
    }
    if (hasFields(value, ['type', 'dims', 'data'])) {
      if (value.type === 'string') invalid(`onnxruntime string tensors have no etna dtype`);
      if ('location' in value && value.location !== undefined && value.location !== 'cpu') {
        invalid(`onnxruntime tensor data is on '${String(value.location)}'; download it to the CPU first (getData())`);
      }
      const dtype = checkDType(value.type);
      return new Tensor(dtype, value.dims as readonly number[], onnxruntimeData(dtype, value.data) as TensorData);
    }
  } catch (error) {
    if (error instanceof EtnaError) throw new EtnaError(error.code, `${what}: ${error.message}`);
    throw error;
  }
  return invalid(`${what}: ${expected}, got ${describe(value)}`);
}
