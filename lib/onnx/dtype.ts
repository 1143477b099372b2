// ONNX TensorProto.DataType codes: the one table between them and etna's
// dtypes, read by the proto reader, Cast, ConstantOfShape and the ONNX writer
// of the tools.
import { EtnaError } from '../errors.js';
import type { DType } from '../export/dtype.js';

/** The ONNX element type code of every etna dtype. */
export const ONNX_DTYPE_CODES: Readonly<Record<DType, number>> = {
  float32: 1,
  uint8: 2,
  int8: 3,
  uint16: 4,
  int16: 5,
  int32: 6,
  int64: 7,
  bool: 9,
  float16: 10,
  float64: 11,
  uint32: 12,
  uint64: 13,
  bfloat16: 16,
};

const DTYPES_BY_CODE: ReadonlyMap<number, DType> = new Map(
  (Object.entries(ONNX_DTYPE_CODES) as [DType, number][]).map(([dtype, code]) => [code, dtype]),
);

/** The etna dtype of ONNX element type `code`, or undefined when etna has none. */
export function onnxDtype(code: number): DType | undefined {
  return DTYPES_BY_CODE.get(code);
}

export function dtypeFromOnnx(code: number, what: string): DType {
  const dtype = onnxDtype(code);
  if (dtype === undefined) throw new EtnaError('UNSUPPORTED_OPERATOR', `${what}: ONNX element type ${code} is not supported`);
  return dtype;
}

/**
 * The dtype an imported program holds values of ONNX dtype `dtype` in:
 * float16 values are computed in float32 (weights widened at import, float16
 * graph inputs and outputs converted at the program's edges), so every
 * float op and the XNNPACK delegate see float32.
 */
export function computeDtype(dtype: DType): DType {
  return dtype === 'float16' ? 'float32' : dtype;
}

// The dtypes Cast converts to, folded at import or lowered to a kernel.
const CAST_DTYPES: ReadonlySet<DType> = new Set<DType>([
  'float32',
  'float16',
  'uint8',
  'int8',
  'int16',
  'int32',
  'int64',
  'bool',
  'float64',
]);

/**
 * The dtype Cast's `to` attribute names as held in the program (a Cast to
 * float16 yields float32, see computeDtype), or undefined when Cast to it is
 * not supported.
 */
export function castTarget(code: number): DType | undefined {
  const dtype = onnxDtype(code);
  return dtype !== undefined && CAST_DTYPES.has(dtype) ? computeDtype(dtype) : undefined;
}
