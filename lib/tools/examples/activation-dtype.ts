// The activation dtypes of export_llama's `-d` (fp32, bf16, fp16), and how
// values are stored and rounded in them.
import { EtnaError } from '../../errors.js';
import { float16ToNumber, numberToFloat16 } from '../../dtypes.js';
import { bf16Bits, bf16Value } from '../../export/quantize.js';

/** The activation dtypes export_llama's `-d` writes. */
export type ActivationDtype = 'float32' | 'bfloat16' | 'float16';

/** export_llama's `-d` names, and etna's own, for each activation dtype. */
const DTYPE_NAMES: Readonly<Record<string, ActivationDtype>> = {
  fp32: 'float32',
  float32: 'float32',
  bf16: 'bfloat16',
  bfloat16: 'bfloat16',
  fp16: 'float16',
  float16: 'float16',
};

export const ACTIVATION_DTYPE_NAMES = ['fp32', 'bf16', 'fp16'] as const;

export function isActivationDtypeName(name: string): boolean {
  return Object.hasOwn(DTYPE_NAMES, name);
}

/** The activation dtype `-d NAME` asks for (fp32, bf16, fp16, or etna's dtype names). */
export function activationDtype(name: string): ActivationDtype {
  const dtype = Object.hasOwn(DTYPE_NAMES, name) ? DTYPE_NAMES[name] : undefined;
  if (dtype === undefined)
    throw new EtnaError('INVALID_INPUT', `unknown activation dtype '${name}' (available: ${ACTIVATION_DTYPE_NAMES.join(', ')})`);
  return dtype;
}

/** A number rounded as a kernel stores it into `dtype`: through float32, then to nearest (ties to even) in 16 bits. */
export function roundingTo(dtype: ActivationDtype): (value: number) => number {
  if (dtype === 'bfloat16') return (value) => bf16Value(bf16Bits(value));
  if (dtype === 'float16') return (value) => float16ToNumber(numberToFloat16(value));
  return Math.fround;
}

/** float32 values stored as `dtype`: the 16-bit bit patterns, or the values themselves. */
export function storedAs(dtype: ActivationDtype, values: Float32Array): Float32Array | Uint16Array {
  if (dtype === 'bfloat16') return Uint16Array.from(values, bf16Bits);
  if (dtype === 'float16') return Uint16Array.from(values, numberToFloat16);
  return values;
}
