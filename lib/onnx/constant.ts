// Import-time tensors: ONNX initializers, Constant nodes, bound inputs and the
// results of folding, held as typed arrays with a static shape.
import { EtnaError } from '../errors.js';
import type { DType } from '../export/dtype.js';
import { numel } from '../shape.js';
import { DTYPE_TABLE, float16ToNumber, type TensorData } from '../dtypes.js';
import { dtypeFromOnnx } from './dtype.js';
import type { OnnxTensorProto } from './proto.js';

/** A constant's elements: the typed array of its dtype, as a tensor holds them. */
export type ConstData = TensorData;

export interface ConstTensor {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly data: ConstData;
}

export function allocate(dtype: DType, length: number): ConstData {
  return new DTYPE_TABLE[dtype].array(length);
}

function isBigData(data: ConstData): data is BigInt64Array | BigUint64Array {
  return data instanceof BigInt64Array || data instanceof BigUint64Array;
}

/** Element i as a JS number (int64 beyond 2^53 loses precision, which shape math tolerates). */
export function elementAt(t: ConstTensor, i: number): number {
  const v = t.data[i]!;
  return typeof v === 'bigint' ? Number(v) : v;
}

export function toNumbers(t: ConstTensor): number[] {
  const out = new Array<number>(t.data.length);
  for (let i = 0; i < t.data.length; i++) out[i] = elementAt(t, i);
  return out;
}

/** Builds a tensor of `dtype` from numbers, converting like a C cast (truncation for integers, 0/1 for bool). */
export function fromNumbers(dtype: DType, shape: readonly number[], values: ArrayLike<number>): ConstTensor {
  const data = allocate(dtype, values.length);
  if (isBigData(data)) {
    for (let i = 0; i < values.length; i++) {
      const v = values[i]!;
      data[i] = Number.isFinite(v) ? BigInt(Math.trunc(v)) : v > 0 ? 2n ** 63n - 1n : -(2n ** 63n);
    }
  } else if (dtype === 'bool') {
    for (let i = 0; i < values.length; i++) data[i] = values[i] !== 0 ? 1 : 0;
  } else if (dtype === 'float32' || dtype === 'float64') {
    for (let i = 0; i < values.length; i++) data[i] = values[i]!;
  } else {
    for (let i = 0; i < values.length; i++) data[i] = Math.trunc(values[i]!);
  }
  return { dtype, shape: [...shape], data };
}

export function scalarConst(dtype: DType, value: number): ConstTensor {
  return fromNumbers(dtype, [], [value]);
}

/** float16 weights and constants are held as float32, the dtype the program computes them in (computeDtype). */
function widenHalf(t: ConstTensor): ConstTensor {
  if (t.dtype !== 'float16') return t;
  return { dtype: 'float32', shape: t.shape, data: Float32Array.from(t.data as Uint16Array, float16ToNumber) };
}

/** Reads an initializer or Constant value; float16 data comes back as float32. */
export function constFromProto(proto: OnnxTensorProto, what: string): ConstTensor {
  return widenHalf(readProto(proto, what));
}

function readProto(proto: OnnxTensorProto, what: string): ConstTensor {
  if (proto.external) throw new EtnaError('UNSUPPORTED_OPERATOR', `${what}: tensors stored in external files are not supported`);
  const dtype = dtypeFromOnnx(proto.dataType, what);
  const shape = proto.dims;
  const count = numel(shape);
  const data = allocate(dtype, count);
  if (proto.rawData !== undefined && proto.rawData.length > 0) {
    const bytes = new Uint8Array(data.buffer, 0, data.byteLength);
    if (proto.rawData.length !== data.byteLength) {
      throw new EtnaError(
        'INVALID_INPUT',
        `${what}: raw data has ${proto.rawData.length} bytes, ${dtype}${JSON.stringify(shape)} needs ${data.byteLength}`,
      );
    }
    bytes.set(proto.rawData);
    return { dtype, shape, data };
  }
  const source: ArrayLike<number | bigint> =
    dtype === 'float32'
      ? proto.floatData
      : dtype === 'float64'
        ? proto.doubleData
        : dtype === 'int64'
          ? proto.int64Data
          : dtype === 'uint32' || dtype === 'uint64'
            ? proto.uint64Data
            : proto.int32Data;
  if (source.length !== count) {
    throw new EtnaError('INVALID_INPUT', `${what}: has ${source.length} values for shape ${JSON.stringify(shape)}`);
  }
  for (let i = 0; i < count; i++) {
    const v = source[i]!;
    if (isBigData(data)) data[i] = BigInt(v);
    else data[i] = Number(v);
  }
  return { dtype, shape, data };
}

/** Row-major strides. */
export function stridesOf(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length).fill(1);
  for (let d = shape.length - 2; d >= 0; d--) strides[d] = strides[d + 1]! * shape[d + 1]!;
  return strides;
}

/** Copies elements of `t` picked by `sourceIndex(outFlat)` into a new tensor of `shape`. */
export function gatherElements(t: ConstTensor, shape: readonly number[], sourceIndex: (outIndex: number[]) => number): ConstTensor {
  const count = numel(shape);
  const data = allocate(t.dtype, count);
  const index = new Array<number>(shape.length).fill(0);
  for (let i = 0; i < count; i++) {
    (data as unknown as unknown[])[i] = t.data[sourceIndex(index)];
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++index[d]! < shape[d]!) break;
      index[d] = 0;
    }
  }
  return { dtype: t.dtype, shape: [...shape], data };
}
