// 8da4w weight quantization, as torchao's Int8DynActInt4WeightQuantizer does
// it for ExecuTorch's export_llama: per output channel and group of input
// channels, symmetric 4-bit codes in [-8, 7] with scale = max|w| / 7.5
// (at least float32 epsilon), code = clamp(round_half_even(w / scale)). The
// XNNPACK delegate stores the scales as bf16, so the weights a program
// computes with are code * bf16(scale); `dequantized` holds exactly those.
import { EtnaError } from '../errors.js';

export const INT4_MIN = -8;
export const INT4_MAX = 7;
/** Input channels per scale, export_llama's `--group_size` default for 8da4w. */
export const DEFAULT_8DA4W_GROUP_SIZE = 32;

const FLOAT32_EPSILON = 2 ** -23;

/** 4-bit group-quantized linear weights [out, in]: codes and one bf16 scale per (out, group). */
export interface Int4GroupWeights {
  readonly outFeatures: number;
  readonly inFeatures: number;
  readonly groupSize: number;
  /** Signed codes in [-8, 7], row-major [out, in]. */
  readonly codes: Int8Array;
  /** bf16 bit patterns, row-major [out, in / groupSize]. */
  readonly scalesBf16: Uint16Array;
}

/** The codes of the 8-bit quantized dtypes, lowest and highest. */
export const QUANTIZED_RANGES = { int8: [-128, 127], uint8: [0, 255] } as const;

/** Round half to even, like torch.round and XNNPACK's conversions. */
export function roundHalfEven(value: number): number {
  const floor = Math.floor(value);
  const diff = value - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

const bitsView = new DataView(new ArrayBuffer(4));

/** The bf16 bit pattern nearest a float32 value (ties to even), as torch's `.to(torch.bfloat16)`. */
export function bf16Bits(value: number): number {
  bitsView.setFloat32(0, value, true);
  const bits = bitsView.getUint32(0, true);
  if (Number.isNaN(value)) return (bits >>> 16) | 0x40;
  const rounded = bits + 0x7fff + ((bits >>> 16) & 1);
  return (rounded >>> 16) & 0xffff;
}

export function bf16Value(bits: number): number {
  bitsView.setUint32(0, (bits & 0xffff) << 16, true);
  return bitsView.getFloat32(0, true);
}

/** Quantizes float weights [out, in] to 4-bit groups of `groupSize` input channels. */
export function quantizeInt4Groups(
  weight: ArrayLike<number>,
  outFeatures: number,
  inFeatures: number,
  groupSize: number = DEFAULT_8DA4W_GROUP_SIZE,
): Int4GroupWeights {
  if (!Number.isInteger(groupSize) || groupSize < 2 || inFeatures % groupSize !== 0) {
    throw new EtnaError('INVALID_INPUT', `8da4w: group size ${groupSize} must be an integer >= 2 dividing in_features ${inFeatures}`);
  }
  if (weight.length !== outFeatures * inFeatures) {
    throw new EtnaError(
      'INVALID_INPUT',
      `8da4w: expected ${outFeatures * inFeatures} weights for [${outFeatures}, ${inFeatures}], got ${weight.length}`,
    );
  }
  const groups = inFeatures / groupSize;
  const codes = new Int8Array(outFeatures * inFeatures);
  const scalesBf16 = new Uint16Array(outFeatures * groups);
  for (let n = 0; n < outFeatures; n++) {
    for (let g = 0; g < groups; g++) {
      const start = n * inFeatures + g * groupSize;
      let maxAbs = 0;
      for (let k = 0; k < groupSize; k++) {
        const w = Math.fround(weight[start + k]!);
        if (!Number.isFinite(w)) throw new EtnaError('INVALID_INPUT', `8da4w: weight [${n}, ${g * groupSize + k}] is ${w}`);
        maxAbs = Math.max(maxAbs, Math.abs(w));
      }
      const scale = Math.max(Math.fround(maxAbs / 7.5), FLOAT32_EPSILON);
      for (let k = 0; k < groupSize; k++) {
        const code = roundHalfEven(Math.fround(Math.fround(weight[start + k]!) / scale));
        codes[start + k] = Math.min(INT4_MAX, Math.max(INT4_MIN, code));
      }
      scalesBf16[n * groups + g] = bf16Bits(scale);
    }
  }
  return { outFeatures, inFeatures, groupSize, codes, scalesBf16 };
}

/** The float32 weights [out, in] the quantized layer computes with: code * bf16 scale. */
export function dequantizeInt4Groups(q: Int4GroupWeights): Float32Array {
  const out = new Float32Array(q.codes.length);
  const groups = q.inFeatures / q.groupSize;
  for (let n = 0; n < q.outFeatures; n++) {
    for (let k = 0; k < q.inFeatures; k++) {
      out[n * q.inFeatures + k] = q.codes[n * q.inFeatures + k]! * bf16Value(q.scalesBf16[n * groups + Math.floor(k / q.groupSize)]!);
    }
  }
  return out;
}

/**
 * 8-bit per-channel weights [out, in]: export_llama's 8da8w output layer
 * (`--preq_mode 8da4w_output_8da8w`) and its 8-bit token embedding
 * (`--preq_embedding_quantize 8,0`). Symmetric, as torchao's int8 per-axis
 * mapping: scale = max|row| / 127.5 (at least float32 epsilon), codes in
 * [-128, 127]; the scales stay float32.
 */
export interface Int8ChannelWeights {
  readonly outFeatures: number;
  readonly inFeatures: number;
  /** Signed codes, row-major [out, in]. */
  readonly codes: Int8Array;
  /** One float32 scale per output channel (row). */
  readonly scales: Float32Array;
}

/** Quantizes float weights [out, in] to 8-bit codes with one scale per row. */
export function quantizeInt8Channels(weight: ArrayLike<number>, outFeatures: number, inFeatures: number): Int8ChannelWeights {
  if (weight.length !== outFeatures * inFeatures) {
    throw new EtnaError(
      'INVALID_INPUT',
      `8-bit per-channel: expected ${outFeatures * inFeatures} weights for [${outFeatures}, ${inFeatures}], got ${weight.length}`,
    );
  }
  const [low, high] = QUANTIZED_RANGES.int8;
  const codes = new Int8Array(outFeatures * inFeatures);
  const scales = new Float32Array(outFeatures);
  for (let n = 0; n < outFeatures; n++) {
    const start = n * inFeatures;
    let maxAbs = 0;
    for (let k = 0; k < inFeatures; k++) {
      const w = Math.fround(weight[start + k]!);
      if (!Number.isFinite(w)) throw new EtnaError('INVALID_INPUT', `8-bit per-channel: weight [${n}, ${k}] is ${w}`);
      maxAbs = Math.max(maxAbs, Math.abs(w));
    }
    const scale = Math.max(Math.fround(maxAbs / 127.5), FLOAT32_EPSILON);
    for (let k = 0; k < inFeatures; k++) {
      const code = roundHalfEven(Math.fround(Math.fround(weight[start + k]!) / scale));
      codes[start + k] = Math.min(high, Math.max(low, code));
    }
    scales[n] = scale;
  }
  return { outFeatures, inFeatures, codes, scales };
}

/** The float32 weights [out, in] an 8-bit per-channel layer computes with: code * scale. */
export function dequantizeInt8Channels(q: Int8ChannelWeights): Float32Array {
  const out = new Float32Array(q.codes.length);
  for (let n = 0; n < q.outFeatures; n++) {
    for (let k = 0; k < q.inFeatures; k++) out[n * q.inFeatures + k] = q.codes[n * q.inFeatures + k]! * q.scales[n]!;
  }
  return out;
}

/** export_llama's 4-bit layout: code + 8, two per byte, the even element in the low nibble, rows padded to whole bytes. */
export function packInt4Rows(q: Int4GroupWeights): Uint8Array {
  const rowBytes = Math.ceil(q.inFeatures / 2);
  const bytes = new Uint8Array(q.outFeatures * rowBytes);
  for (let n = 0; n < q.outFeatures; n++) {
    for (let k = 0; k < q.inFeatures; k++) {
      const code = q.codes[n * q.inFeatures + k]! - INT4_MIN;
      bytes[n * rowBytes + (k >> 1)]! |= k % 2 === 0 ? code : code << 4;
    }
  }
  return bytes;
}

/** [min(0, lowest), max(0, highest)] of a row's float32 values: the range the per-token int8 rules span. */
function rangeWithZero(row: ArrayLike<number>): [number, number] {
  let lo = 0;
  let hi = 0;
  for (let k = 0; k < row.length; k++) {
    lo = Math.min(lo, Math.fround(row[k]!));
    hi = Math.max(hi, Math.fround(row[k]!));
  }
  return [lo, hi];
}

/**
 * One row as the delegate sees it after its per-token int8 conversion
 * (XNNPACK's qd8 rule): the range [min(0, lo), max(0, hi)] onto [-128, 127],
 * an integer zero point, values rounded half to even; returned dequantized.
 * Float32 arithmetic throughout, step for step.
 */
export function perTokenInt8Row(row: ArrayLike<number>): Float32Array {
  const f = Math.fround;
  const [lo, hi] = rangeWithZero(row);
  const inverse = lo === hi ? 1 : f(255 / f(hi - lo));
  const fromMin = f(-128 - f(lo * inverse));
  const fromMax = f(127 - f(hi * inverse));
  const zeroReal = f(f(-128 + f(lo * inverse)) + f(127 + f(hi * inverse))) > 0 ? fromMin : fromMax;
  const zero = roundHalfEven(Math.min(127, Math.max(-128, zeroReal)));
  const scale = f(1 / inverse);
  const reciprocal = f(1 / scale);
  const out = new Float32Array(row.length);
  for (let k = 0; k < row.length; k++) {
    const v = Math.min(127 - zero, Math.max(-128 - zero, f(f(row[k]!) * reciprocal)));
    out[k] = f(scale * roundHalfEven(v));
  }
  return out;
}

/** One row as an int8 cache holds it: codes, and the float32 scale and zero point they share. */
export interface AsymmetricInt8Row {
  readonly codes: Int8Array;
  readonly scale: number;
  readonly zeroPoint: number;
}

/**
 * One row as ExecuTorch's `choose_qparams_per_token_asymmetric` and
 * `quantize_per_token` write it (what `--quantize_kv_cache` stores per
 * position and head): the range [min(0, lo), max(0, hi)] over 255 steps in
 * double (0.1 when that is 0, at least 6.1e-5 with the range stretched to
 * match), the zero point from whichever end loses less, rounded in float32;
 * codes clamp(zero + nearbyint(float32(1 / scale) * x)). `scale` is the
 * float32 value the cache stores.
 */
export function perTokenAsymmetricInt8(row: ArrayLike<number>): AsymmetricInt8Row {
  const f = Math.fround;
  let [lo, hi] = rangeWithZero(row);
  let scale = (hi - lo) / 255;
  if (f(scale) === 0 || !Number.isFinite(f(1 / f(scale)))) scale = 0.1;
  const smallest = f(6.1e-5);
  if (scale < smallest) {
    const original = f(scale);
    scale = smallest;
    if (lo === 0) hi = f(smallest * 255);
    else if (hi === 0) lo = f(-smallest * 255);
    else {
      const amplifier = f(smallest / original);
      lo = f(lo * amplifier);
      hi = f(hi * amplifier);
    }
  }
  const fromMin = -128 - lo / scale;
  const fromMax = 127 - hi / scale;
  const initial = 128 - Math.abs(lo / scale) < 127 - Math.abs(hi / scale) ? fromMin : fromMax;
  const zeroPoint = initial < -128 ? -128 : initial > 127 ? 127 : roundHalfEven(f(initial));
  const inverse = f(1 / f(scale));
  const codes = new Int8Array(row.length);
  for (let k = 0; k < row.length; k++) codes[k] = Math.min(127, Math.max(-128, zeroPoint + roundHalfEven(f(inverse * f(row[k]!)))));
  return { codes, scale: f(scale), zeroPoint };
}
