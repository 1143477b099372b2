import { EtnaError } from './errors.js';

/** Element types etna exchanges with JavaScript. */
export type DType =
  | 'float32'
  | 'float64'
  | 'float16'
  | 'bfloat16'
  | 'int64'
  | 'int32'
  | 'int16'
  | 'int8'
  | 'uint8'
  | 'uint16'
  | 'uint32'
  | 'uint64'
  | 'bool';

export type TensorData =
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array
  | Int32Array
  | Int16Array
  | Int8Array
  | Uint8Array
  | Uint16Array
  | Uint32Array;

interface DTypeInfo {
  bytes: number;
  array: {
    new (length: number): TensorData;
    new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): TensorData;
    name: string;
  };
}

// float16/bfloat16 travel as raw 16-bit patterns; bool as one byte per element.
const DTYPES: Record<DType, DTypeInfo> = {
  float32: { bytes: 4, array: Float32Array },
  float64: { bytes: 8, array: Float64Array },
  float16: { bytes: 2, array: Uint16Array },
  bfloat16: { bytes: 2, array: Uint16Array },
  int64: { bytes: 8, array: BigInt64Array },
  int32: { bytes: 4, array: Int32Array },
  int16: { bytes: 2, array: Int16Array },
  int8: { bytes: 1, array: Int8Array },
  uint8: { bytes: 1, array: Uint8Array },
  uint16: { bytes: 2, array: Uint16Array },
  uint32: { bytes: 4, array: Uint32Array },
  uint64: { bytes: 8, array: BigUint64Array },
  bool: { bytes: 1, array: Uint8Array },
};

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(DTYPES, value);
}

export function elementSize(dtype: DType): number {
  return DTYPES[dtype].bytes;
}

/** The TypedArray class that holds `dtype` data. */
export function arrayType(dtype: DType): DTypeInfo['array'] {
  return DTYPES[dtype].array;
}

export function arrayTypeName(dtype: DType): string {
  return DTYPES[dtype].array.name;
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((product, size) => product * size, 1);
}

/**
 * A tensor: dtype, shape and a JS-owned TypedArray (Float32Array for float32,
 * BigInt64Array for int64, Uint8Array for bool, Uint16Array for float16 ...).
 */
export class Tensor<D extends DType = DType> {
  readonly dtype: D;
  readonly shape: readonly number[];
  readonly data: TensorData;

  constructor(dtype: D, shape: readonly number[], data: TensorData) {
    if (!isDType(dtype)) throw new EtnaError('INVALID_INPUT', `unknown dtype '${String(dtype)}'`);
    const expectedType = DTYPES[dtype].array;
    if (!(data instanceof expectedType)) {
      const actual = (data as object | null)?.constructor?.name ?? typeof data;
      throw new EtnaError('INVALID_INPUT', `Tensor.data must be a ${expectedType.name} for ${dtype} tensors, got ${actual}`);
    }
    for (const [i, size] of shape.entries()) {
      if (!Number.isInteger(size) || size < 0) {
        throw new EtnaError('INVALID_INPUT', `shape[${i}] = ${size} is not a non-negative integer`);
      }
    }
    if (data.length !== numel(shape)) {
      throw new EtnaError('INVALID_INPUT', `shape [${shape.join(', ')}] holds ${numel(shape)} elements, data has ${data.length}`);
    }
    this.dtype = dtype;
    this.shape = Object.freeze([...shape]);
    this.data = data;
  }

  /** A zero-filled tensor. */
  static zeros<D extends DType>(dtype: D, shape: readonly number[]): Tensor<D> {
    return new Tensor(dtype, shape, new DTYPES[dtype].array(new ArrayBuffer(numel(shape) * DTYPES[dtype].bytes)));
  }

  /** float32 from plain numbers. */
  static float32(shape: readonly number[], values: ArrayLike<number>): Tensor<'float32'> {
    return new Tensor('float32', shape, Float32Array.from(values));
  }

  /** int64 from numbers or bigints. */
  static int64(shape: readonly number[], values: ArrayLike<number | bigint>): Tensor<'int64'> {
    return new Tensor('int64', shape, BigInt64Array.from(Array.from(values, (v) => BigInt(v))));
  }

  get size(): number {
    return this.data.length;
  }

  /** Elements as plain numbers (int64 converted with Number()). */
  toArray(): number[] {
    return Array.from(this.data as ArrayLike<number | bigint>, (v) => Number(v));
  }
}

/** Wraps `byteLength` bytes at the start of `buffer` as a tensor (no copy). */
export function tensorOver(dtype: DType, shape: readonly number[], buffer: ArrayBufferLike, byteOffset = 0): Tensor {
  const info = DTYPES[dtype];
  return new Tensor(dtype, shape, new info.array(buffer, byteOffset, numel(shape)));
}
