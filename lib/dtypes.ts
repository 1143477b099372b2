// The one dtype table: for every element type its byte size, the TypedArray
// that holds it in JavaScript, its ScalarType code in a .pte and its kind.
// The runtime (tensor.ts) and authoring (export/dtype.ts) both read it here.
import { ScalarType } from './generated/program/etna/pte/scalar-type.js';

/**
 * The TypedArray that holds each dtype's elements. float16/bfloat16 travel as
 * raw 16-bit patterns; bool as one byte per element.
 */
export interface TensorDataTypes {
  float32: Float32Array;
  float64: Float64Array;
  float16: Uint16Array;
  bfloat16: Uint16Array;
  int64: BigInt64Array;
  int32: Int32Array;
  int16: Int16Array;
  int8: Int8Array;
  uint8: Uint8Array;
  uint16: Uint16Array;
  uint32: Uint32Array;
  uint64: BigUint64Array;
  bool: Uint8Array;
}

/** Element types etna exchanges with JavaScript. */
export type DType = keyof TensorDataTypes;

/** The data array of a `D` tensor; `TensorData` alone is any of them. */
export type TensorData<D extends DType = DType> = TensorDataTypes[D];

export type DTypeKind = 'float' | 'int' | 'bool';

export interface ArrayClass<A> {
  new (length: number): A;
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): A;
  readonly name: string;
}

export interface DTypeEntry<D extends DType = DType> {
  readonly bytes: number;
  readonly array: ArrayClass<TensorDataTypes[D]>;
  readonly scalarType: ScalarType;
  readonly kind: DTypeKind;
  /**
   * The integers an element holds, for every dtype whose array stores
   * integers: int and bool kinds, and float16/bfloat16 (their raw 16-bit
   * patterns). Absent for float32 and float64, which store numbers.
   */
  readonly range?: readonly [min: bigint, max: bigint];
}

const signed = (bits: bigint): readonly [bigint, bigint] => [-(2n ** (bits - 1n)), 2n ** (bits - 1n) - 1n];
const unsigned = (bits: bigint): readonly [bigint, bigint] => [0n, 2n ** bits - 1n];

export const DTYPE_TABLE: { readonly [D in DType]: DTypeEntry<D> } = {
  float32: { bytes: 4, array: Float32Array, scalarType: ScalarType.FLOAT, kind: 'float' },
  float64: { bytes: 8, array: Float64Array, scalarType: ScalarType.DOUBLE, kind: 'float' },
  float16: { bytes: 2, array: Uint16Array, scalarType: ScalarType.HALF, kind: 'float', range: unsigned(16n) },
  bfloat16: { bytes: 2, array: Uint16Array, scalarType: ScalarType.BFLOAT16, kind: 'float', range: unsigned(16n) },
  int8: { bytes: 1, array: Int8Array, scalarType: ScalarType.CHAR, kind: 'int', range: signed(8n) },
  uint8: { bytes: 1, array: Uint8Array, scalarType: ScalarType.BYTE, kind: 'int', range: unsigned(8n) },
  int16: { bytes: 2, array: Int16Array, scalarType: ScalarType.SHORT, kind: 'int', range: signed(16n) },
  int32: { bytes: 4, array: Int32Array, scalarType: ScalarType.INT, kind: 'int', range: signed(32n) },
  int64: { bytes: 8, array: BigInt64Array, scalarType: ScalarType.LONG, kind: 'int', range: signed(64n) },
  uint16: { bytes: 2, array: Uint16Array, scalarType: ScalarType.UINT16, kind: 'int', range: unsigned(16n) },
  uint32: { bytes: 4, array: Uint32Array, scalarType: ScalarType.UINT32, kind: 'int', range: unsigned(32n) },
  uint64: { bytes: 8, array: BigUint64Array, scalarType: ScalarType.UINT64, kind: 'int', range: unsigned(64n) },
  bool: { bytes: 1, array: Uint8Array, scalarType: ScalarType.BOOL, kind: 'bool', range: [0n, 1n] },
};

/** Every dtype name, in table order. */
export const DTYPES: readonly DType[] = Object.keys(DTYPE_TABLE) as DType[];

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && Object.hasOwn(DTYPE_TABLE, value);
}

const DTYPE_OF_SCALAR_TYPE: ReadonlyMap<number, DType> = new Map(DTYPES.map((dtype) => [DTYPE_TABLE[dtype].scalarType, dtype]));

/** The dtype whose ScalarType code (as the addon and the .pte format use) is `code`; undefined for one JS cannot hold. */
export function dtypeOfScalarType(code: number): DType | undefined {
  return DTYPE_OF_SCALAR_TYPE.get(code);
}

export function elementSize(dtype: DType): number {
  return DTYPE_TABLE[dtype].bytes;
}

/** The TypedArray class that holds `dtype` data. */
export function arrayType<D extends DType>(dtype: D): ArrayClass<TensorData<D>> {
  return DTYPE_TABLE[dtype].array;
}

export function arrayTypeName(dtype: DType): string {
  return DTYPE_TABLE[dtype].array.name;
}

/** The value of a float16 bit pattern (subnormals, ±Inf, NaN and -0 included). */
export function float16ToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 31) return mantissa === 0 ? sign * Number.POSITIVE_INFINITY : Number.NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

function roundHalfToEven(x: number): number {
  const floor = Math.floor(x);
  const rest = x - floor;
  if (rest !== 0.5) return rest < 0.5 ? floor : floor + 1;
  return floor % 2 === 0 ? floor : floor + 1;
}

/**
 * The float16 bit pattern nearest `value` once rounded to float32 (as the
 * kernels convert), ties to even; beyond the largest float16 it is ±Inf.
 */
export function numberToFloat16(value: number): number {
  const f = Math.fround(value);
  if (Number.isNaN(f)) return 0x7e00;
  const sign = f < 0 || Object.is(f, -0) ? 0x8000 : 0;
  const magnitude = Math.abs(f);
  if (magnitude >= 65520) return sign | 0x7c00;
  // Subnormal: a multiple of 2^-24 (a result of 1024 is the smallest normal, bits 0x0400).
  if (magnitude < 2 ** -14) return sign | roundHalfToEven(magnitude * 2 ** 24);
  let exponent = Math.floor(Math.log2(magnitude));
  if (2 ** exponent > magnitude) exponent--;
  if (2 ** (exponent + 1) <= magnitude) exponent++;
  // A mantissa that rounds up to 1024 carries into the exponent.
  return sign | (((exponent + 15) << 10) + roundHalfToEven((magnitude / 2 ** exponent - 1) * 1024));
}
