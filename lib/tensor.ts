import { describeValue, EtnaError } from './errors.js';

import { DTYPE_TABLE, DTYPES, isDType, type DType, type TensorData } from './dtypes.js';
import { numel } from './shape.js';

export { arrayType, arrayTypeName, elementSize, isDType } from './dtypes.js';
export type { DType, TensorData, TensorDataTypes } from './dtypes.js';

function invalid(message: string): never {
  throw new EtnaError('INVALID_INPUT', message);
}

function checkDType(dtype: unknown): DType {
  if (!isDType(dtype)) invalid(`unknown dtype ${describeValue(dtype)} (one of ${DTYPES.join(', ')})`);
  return dtype;
}

function checkShape(shape: unknown): readonly number[] {
  if (!Array.isArray(shape)) invalid(`shape must be an array of sizes, got ${describeValue(shape)}`);
  for (const [i, size] of (shape as unknown[]).entries()) {
    if (typeof size !== 'number' || !Number.isInteger(size) || size < 0) {
      invalid(`shape[${i}] = ${describeValue(size)} is not a non-negative integer`);
    }
  }
  return shape as readonly number[];
}

function checkValues(values: unknown, dtype: DType): ArrayLike<unknown> {
  const arrayLike = Array.isArray(values) || (ArrayBuffer.isView(values) && !(values instanceof DataView));
  if (!arrayLike) invalid(`${dtype} values must be an array, got ${describeValue(values)}`);
  return values as ArrayLike<unknown>;
}

/** What `Tensor.from` converts into one element (see there for the rules per dtype). */
export type ElementValue = number | bigint | string | boolean;

// The strings JSON carries for the float values it cannot write as numbers.
const FLOAT_WORDS: ReadonlyMap<string, number> = new Map([
  ['NaN', Number.NaN],
  ['Infinity', Number.POSITIVE_INFINITY],
  ['-Infinity', Number.NEGATIVE_INFINITY],
]);
const DECIMAL_INTEGER = /^[+-]?\d+$/;

// Why an element was refused, naming it as `name` or `name[index]`.
function refuse(value: unknown, name: string, index: number, problem: string): never {
  return invalid(`${index < 0 ? name : `${name}[${index}]`} = ${describeValue(value)} ${problem}`);
}

type ElementConverter = (value: unknown, name: string, index: number) => number | bigint;

function floatConverter(): ElementConverter {
  return (value, name, index) => {
    if (typeof value === 'number') return value;
    const word = typeof value === 'string' ? FLOAT_WORDS.get(value) : undefined;
    return word ?? refuse(value, name, index, `is not a number`);
  };
}

function integerConverter(dtype: DType, [min, max]: readonly [bigint, bigint]): ElementConverter {
  const wide = DTYPE_TABLE[dtype].bytes === 8;
  // Safe integers between these are inside the range (the bounds of 64-bit
  // dtypes round outwards, past every safe integer, so they never decide).
  const low = Number(min);
  const high = Number(max);
  const patterns = dtype === 'float16' || dtype === 'bfloat16' ? ` (${dtype} elements are raw 16-bit patterns, integers 0 to 65535)` : '';
  const inRange = (integer: bigint, value: unknown, name: string, index: number): number | bigint => {
    if (integer < min || integer > max) refuse(value, name, index, `is outside the ${dtype} range [${min}, ${max}]${patterns}`);
    return wide ? integer : Number(integer);
  };
  return (value, name, index) => {
    if (typeof value === 'number') {
      if (Number.isSafeInteger(value) && value >= low && value <= high) return wide ? BigInt(value) : value;
      if (!Number.isInteger(value)) return refuse(value, name, index, `is not an integer${patterns}`);
      const integer = BigInt(value);
      if (!Number.isSafeInteger(value) && integer >= min && integer <= max) {
        return refuse(
          value,
          name,
          index,
          `is past 2^53 - 1, where numbers stop being exact integers: give it as a bigint or a decimal string`,
        );
      }
      return inRange(integer, value, name, index);
    }
    if (typeof value === 'bigint') return inRange(value, value, name, index);
    if (typeof value === 'string' && DECIMAL_INTEGER.test(value)) return inRange(BigInt(value), value, name, index);
    if (typeof value === 'boolean' && dtype === 'bool') return value ? 1 : 0;
    return refuse(value, name, index, `is not an integer${patterns}`);
  };
}

// One converter per dtype, made once.
const CONVERTERS = new Map<DType, ElementConverter>(
  DTYPES.map((dtype) => {
    const range = DTYPE_TABLE[dtype].range;
    return [dtype, range === undefined ? floatConverter() : integerConverter(dtype, range)];
  }),
);

/**
 * The one conversion of a JS or JSON value into an element of `dtype`, as its
 * array stores it (a bigint for the 64-bit integer dtypes, else a number).
 * Anything that would be rounded, wrapped or truncated is INVALID_INPUT naming
 * `name` (with `[index]` when index >= 0). The rules are those of `Tensor.from`.
 */
export function elementOf(dtype: DType, value: unknown, name: string, index = -1): number | bigint {
  return (CONVERTERS.get(dtype) as ElementConverter)(value, name, index);
}

// A zero-filled array of `length` elements; INVALID_INPUT when it cannot be
// allocated (too many elements for a TypedArray, or for memory).
function allocate<D extends DType>(dtype: D, length: number, shape: readonly number[]): TensorData<D> {
  const { array, bytes } = DTYPE_TABLE[dtype];
  try {
    return new array(length);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return invalid(
      `shape [${shape.join(', ')}] holds ${length} ${dtype} elements (${length * bytes} bytes), more than one ${array.name} ` +
        `can hold (${error.message})`,
    );
  }
}

// Runs `body`, prefixing the message of an EtnaError it throws with `context`.
function within<T>(context: string | undefined, body: () => T): T {
  if (context === undefined) return body();
  try {
    return body();
  } catch (error) {
    if (error instanceof EtnaError) throw new EtnaError(error.code, `${context}: ${error.message}`);
    throw error;
  }
}

// What `new Tensor(dtype, shape, data)` checks: INVALID_INPUT unless `data`
// is the dtype's TypedArray holding exactly the shape's elements.
function checkTensor(dtype: DType, shape: readonly number[], data: TensorData): void {
  checkDType(dtype);
  const expected = DTYPE_TABLE[dtype].array;
  if (!(data instanceof expected)) {
    if (looksLikeOnnxruntimeOrder(shape, data)) {
      invalid(`etna takes new Tensor(dtype, shape, data); these arguments look like onnxruntime's order new Tensor(type, data, dims)`);
    }
    const hint = Array.isArray(data) ? ` (Tensor.float32(shape, values) and Tensor.int64(shape, values) take plain arrays)` : '';
    invalid(`Tensor.data must be a ${expected.name} for ${dtype} tensors, got ${describeValue(data)}${hint}`);
  }
  checkShape(shape);
  if (data.length !== numel(shape)) {
    invalid(`shape [${shape.join(', ')}] holds ${numel(shape)} elements, data has ${data.length}`);
  }
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

// Set only while tensorOver wraps an output the addon wrote: its dtype, shape
// and data already agree, so the constructor skips the checks users' tensors get.
let addonOutput = false;

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
    if (!addonOutput) checkTensor(dtype, shape, data);
    this.dtype = dtype;
    this.shape = Object.freeze([...shape]);
    this.data = data;
  }

  /** A zero-filled tensor; INVALID_INPUT when its elements cannot be allocated. */
  static zeros<D extends DType>(dtype: D, shape: readonly number[]): Tensor<D> {
    checkDType(dtype);
    return new Tensor(dtype, shape, allocate(dtype, numel(checkShape(shape)), shape));
  }

  /**
   * A tensor of `dtype` from plain values (an array or a TypedArray), each
   * converted exactly or refused with INVALID_INPUT naming the element:
   * - float32, float64: numbers (float32 rounds them to nearest), and the
   *   strings 'NaN', 'Infinity' and '-Infinity' (as JSON carries them);
   * - integer dtypes: integers inside the dtype's range, as numbers up to
   *   2^53 - 1 in magnitude (past it numbers are not exact), bigints or
   *   decimal strings ("18446744073709551615" for uint64); bool also takes
   *   true and false;
   * - float16, bfloat16: their raw 16-bit patterns (integers 0 to 65535), as
   *   their Uint16Array holds them.
   * `name` (default "<dtype> values") is what error messages call the values:
   * element i is `name[i]`.
   */
  static from<D extends DType>(dtype: D, shape: readonly number[], values: ArrayLike<ElementValue>, name?: string): Tensor<D> {
    const [checked, data] = within(name, () => {
      checkDType(dtype);
      checkShape(shape);
      const checked = checkValues(values, dtype);
      return [checked, allocate(dtype, checked.length, shape)] as const;
    });
    // Element errors name the element themselves (`name[i]`).
    const elements = data as unknown as { [i: number]: number | bigint };
    const label = name ?? `${dtype} values`;
    const convert = CONVERTERS.get(dtype) as ElementConverter;
    for (let i = 0; i < checked.length; i++) elements[i] = convert(checked[i], label, i);
    return within(name, () => new Tensor(dtype, shape, data));
  }

  /** float32 from plain numbers: `Tensor.from('float32', shape, values)`. */
  static float32(shape: readonly number[], values: ArrayLike<number>): Tensor<'float32'> {
    return Tensor.from('float32', shape, values);
  }

  /** int64 from integers (numbers, bigints or decimal strings): `Tensor.from('int64', shape, values)`. */
  static int64(shape: readonly number[], values: ArrayLike<number | bigint | string>): Tensor<'int64'> {
    return Tensor.from('int64', shape, values);
  }

  /** The dtype under onnxruntime's name for it (`ort.Tensor.type`). */
  get type(): D {
    return this.dtype;
  }

  /** The shape under onnxruntime's name for it (`ort.Tensor.dims`). */
  get dims(): readonly number[] {
    return this.shape;
  }

  /** Where the data is, in onnxruntime's words: always 'cpu' (a JS-owned array). */
  get location(): 'cpu' {
    return 'cpu';
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

/**
 * An output the addon wrote: `numel(shape)` elements at `byteOffset` of
 * `buffer` as a tensor, without a copy and without the constructor's checks
 * (the addon reported this dtype and shape for these bytes).
 */
export function tensorOver<D extends DType>(dtype: D, shape: readonly number[], buffer: ArrayBufferLike, byteOffset = 0): Tensor<D> {
  const data = new DTYPE_TABLE[dtype].array(buffer, byteOffset, numel(shape));
  addonOutput = true;
  try {
    return new Tensor(dtype, shape, data);
  } finally {
    addonOutput = false;
  }
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
  return invalid(`${what}: ${expected}, got ${describeValue(value)}`);
}
