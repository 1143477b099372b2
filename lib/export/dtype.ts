// Element types an authored program can use, and how their bytes are laid out.
import { EtnaError } from '../errors.js';
import { ScalarType } from '../generated/program/etna/pte/scalar-type.js';
import { arrayType, DTYPE_TABLE, DTYPES, type DType, type DTypeKind } from '../dtypes.js';

export type { DType, DTypeKind } from '../dtypes.js';
export { DTYPES, isDType } from '../dtypes.js';

/** How an authored tensor of a dtype is written: its ScalarType code, element size and kind. */
export interface DTypeInfo {
  readonly scalarType: ScalarType;
  readonly byteSize: number;
  readonly kind: DTypeKind;
}

// Views of the one dtype table (lib/dtypes.ts), in the shape authoring reads.
const DTYPE_INFO: Readonly<Record<DType, DTypeInfo>> = Object.fromEntries(
  DTYPES.map((dtype) => {
    const { scalarType, bytes, kind } = DTYPE_TABLE[dtype];
    return [dtype, { scalarType, byteSize: bytes, kind }];
  }),
) as Record<DType, DTypeInfo>;

export function dtypeInfo(dtype: DType): DTypeInfo {
  const info = DTYPE_INFO[dtype];
  if (info === undefined) {
    throw new EtnaError('INVALID_INPUT', `unknown dtype '${String(dtype)}' (expected one of ${DTYPES.join(', ')})`);
  }
  return info;
}

/** Data accepted for a constant or an initial value: a matching typed array, raw bytes, or plain numbers. */
export type TensorInitData = ArrayBufferView | readonly number[] | readonly bigint[];

/**
 * Little-endian bytes of a tensor of `dtype` and `elementCount` elements.
 * A Uint8Array is taken as raw bytes for any dtype; other typed arrays must
 * match the dtype; plain arrays are converted element by element.
 */
export function encodeTensorData(dtype: DType, elementCount: number, data: TensorInitData, what: string): Uint8Array {
  const info = dtypeInfo(dtype);
  const expectedBytes = elementCount * info.byteSize;
  if (ArrayBuffer.isView(data)) {
    const isRawBytes = data instanceof Uint8Array && !(dtype === 'uint8' || dtype === 'bool');
    if (!isRawBytes && !(data instanceof arrayType(dtype))) {
      throw new EtnaError(
        'INVALID_INPUT',
        `${what}: ${data.constructor.name} does not hold ${dtype} elements (use ${arrayType(dtype).name} or raw bytes in a Uint8Array)`,
      );
    }
    if (data.byteLength !== expectedBytes) {
      throw new EtnaError(
        'INVALID_INPUT',
        `${what}: expected ${expectedBytes} bytes (${elementCount} ${dtype} elements), got ${data.byteLength}`,
      );
    }
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
  }
  if (!Array.isArray(data)) {
    throw new EtnaError('INVALID_INPUT', `${what}: data must be a typed array or an array of numbers`);
  }
  const values = data as readonly (number | bigint)[];
  if (values.length !== elementCount) {
    throw new EtnaError('INVALID_INPUT', `${what}: expected ${elementCount} elements, got ${values.length}`);
  }
  if (dtype === 'float16' || dtype === 'bfloat16') {
    throw new EtnaError('INVALID_INPUT', `${what}: pass ${dtype} data as raw bits in a Uint16Array`);
  }
  const ArrayType = arrayType(dtype);
  if (ArrayType === BigInt64Array || ArrayType === BigUint64Array) {
    const out = new (ArrayType as BigInt64ArrayConstructor)(elementCount);
    values.forEach((v, i) => {
      if (typeof v === 'number' && !Number.isInteger(v)) {
        throw new EtnaError('INVALID_INPUT', `${what}: element ${i} (${v}) is not an integer`);
      }
      out[i] = BigInt(v);
    });
    return new Uint8Array(out.buffer);
  }
  const out = new (ArrayType as Float64ArrayConstructor)(elementCount);
  values.forEach((v, i) => {
    if (info.kind === 'int' && !Number.isInteger(Number(v))) {
      throw new EtnaError('INVALID_INPUT', `${what}: element ${i} (${v}) is not an integer`);
    }
    out[i] = dtype === 'bool' ? (v ? 1 : 0) : Number(v);
  });
  return new Uint8Array(out.buffer);
}

// Element sizes of the ScalarTypes no dtype stands for: complex, quantized,
// bit-packed and float8 elements, which a .pte may carry but JavaScript does not.
const OTHER_SCALAR_TYPE_BYTES: readonly (readonly [ScalarType, number])[] = [
  [ScalarType.COMPLEXHALF, 4],
  [ScalarType.COMPLEXFLOAT, 8],
  [ScalarType.COMPLEXDOUBLE, 16],
  [ScalarType.QINT8, 1],
  [ScalarType.QUINT8, 1],
  [ScalarType.QINT32, 4],
  [ScalarType.QUINT4X2, 1],
  [ScalarType.QUINT2X4, 1],
  [ScalarType.BITS1X8, 1],
  [ScalarType.BITS2X4, 1],
  [ScalarType.BITS4X2, 1],
  [ScalarType.BITS8, 1],
  [ScalarType.BITS16, 2],
  [ScalarType.FLOAT8E5M2, 1],
  [ScalarType.FLOAT8E4M3FN, 1],
  [ScalarType.FLOAT8E5M2FNUZ, 1],
  [ScalarType.FLOAT8E4M3FNUZ, 1],
];

/** Bytes per element of every ScalarType code a .pte may carry (spec section 3): the dtype table's, then the others. */
export const SCALAR_TYPE_BYTES: Readonly<Record<number, number>> = Object.fromEntries([
  ...DTYPES.map((dtype) => [DTYPE_TABLE[dtype].scalarType, DTYPE_TABLE[dtype].bytes] as const),
  ...OTHER_SCALAR_TYPE_BYTES,
]);
