// Two of export_llama's source transformations, as the llama-8da4w example
// writes them (and its reference computes them):
// - SpinQuant's native rotation (`--use_spin_quant native`; option
//   `hadamard`): `llama::fast_hadamard_transform` on the feed-forward's
//   hidden activations, silu(w1 x) * w3 x, right before the down projection
//   w2, whose weights are stored rotated to match (every row transformed:
//   w2 H, with H orthonormal and symmetric), so the float model computes what
//   it did before; only the quantization of w2 and of its input sees the
//   rotation.
// - The quantized KV cache (`--quantize_kv_cache`; option `quantizeKvCache`):
//   int8 caches with a float32 scale and an int8 zero point per position and
//   head, written by `choose_qparams_per_token_asymmetric`,
//   `quantize_per_token` and `llama::update_cache`, and read by
//   `llama::custom_quantized_sdpa` with the query quantized the same way.
// Beside them, the plain attention the second replaces (update_cache into
// float32 caches, custom_sdpa).
import { EtnaError } from '../../errors.js';
import { dtypeInfo } from '../../export/dtype.js';
import type { ConstantTensor, SharedBuffer, TensorValue } from '../../export/graph.js';
import type { MethodBuilder } from '../../export/method-builder.js';
import type { ProgramBuilder } from '../../export/program-builder.js';
import { perTokenAsymmetricInt8 } from '../../export/quantize.js';

/** The widths the example's rotation takes: powers of two (ExecuTorch's kernel also takes 28 times one). */
export function checkHadamardWidth(width: number, what: string): void {
  if (!Number.isSafeInteger(width) || width < 1 || 2 ** Math.round(Math.log2(width)) !== width)
    throw new EtnaError('INVALID_INPUT', `hadamard: ${what} ${width} is not a power of two`);
}

/**
 * Rows of `width` (a power of two) Walsh-Hadamard transformed in double and
 * divided by sqrt(width): H x for each row x, with H[i][j] = (-1)^popcount(i & j) / sqrt(width).
 */
export function hadamardRows(values: ArrayLike<number>, width: number): Float64Array {
  checkHadamardWidth(width, 'row width');
  const out = Float64Array.from(values);
  if (out.length % width !== 0) throw new EtnaError('INVALID_INPUT', `hadamard: ${out.length} values are not rows of ${width}`);
  const norm = 1 / Math.sqrt(width);
  for (let row = 0; row < out.length; row += width) {
    for (let step = 1; step < width; step *= 2) {
      for (let block = row; block < row + width; block += 2 * step) {
        for (let i = block; i < block + step; i++) {
          const x = out[i]!;
          const y = out[i + step]!;
          out[i] = x + y;
          out[i + step] = x - y;
        }
      }
    }
    for (let i = row; i < row + width; i++) out[i]! *= norm;
  }
  return out;
}

/** A weight [out, in] stored for a rotated input: W H (each row transformed, H being symmetric), in float32. */
export function rotatedWeight(weight: Float32Array, inFeatures: number): Float32Array {
  return Float32Array.from(hadamardRows(weight, inFeatures));
}

/** llama::fast_hadamard_transform.out over x's last dim. */
export function emitHadamard(m: MethodBuilder, x: TensorValue): TensorValue {
  const out = m.graph.addTensor(x.dtype, x.shape);
  m.kernel('llama::fast_hadamard_transform.out', [x, out]);
  return out;
}

/** One quantized cache (keys or values) in shared state. */
export interface QuantizedCache {
  /** int8 [1, context, kvHeads, headDim] */
  readonly codes: SharedBuffer;
  /** float32 [1, context, kvHeads, 1] */
  readonly scales: SharedBuffer;
  /** int8 [1, context, kvHeads, 1] */
  readonly zeroPoints: SharedBuffer;
}

/** What QuantizedKVCache registers: zeroed codes, scales and zero points of 1. */
export function quantizedCache(program: ProgramBuilder, name: string, shape: readonly [number, number, number, number]): QuantizedCache {
  const rows = shape[0] * shape[1] * shape[2];
  const perRow: [number, number, number, number] = [shape[0], shape[1], shape[2], 1];
  return {
    codes: program.sharedBuffer(name, 'int8', shape),
    scales: program.sharedBuffer(`${name}_scales`, 'float32', perRow, new Float32Array(rows).fill(1)),
    zeroPoints: program.sharedBuffer(`${name}_zero_points`, 'int8', perRow, new Int8Array(rows).fill(1)),
  };
}

/** Constants holding a quantized cache's initial contents, for a reset method to copy back. */
export interface QuantizedCacheInit {
  readonly codes: ConstantTensor;
  readonly scales: ConstantTensor;
  readonly zeroPoints: ConstantTensor;
}

export function quantizedCacheInit(program: ProgramBuilder, shape: readonly [number, number, number, number]): QuantizedCacheInit {
  const rows = shape[0] * shape[1] * shape[2];
  const perRow = [shape[0], shape[1], shape[2], 1];
  return {
    codes: program.constant('empty_cache_codes', 'int8', shape, new Int8Array(rows * shape[3])),
    scales: program.constant('empty_cache_scales', 'float32', perRow, new Float32Array(rows).fill(1)),
    zeroPoints: program.constant('empty_cache_zero_points', 'int8', perRow, new Int8Array(rows).fill(1)),
  };
}

export function resetQuantizedCache(m: MethodBuilder, cache: QuantizedCache, init: QuantizedCacheInit): void {
  m.copyInto(cache.codes, init.codes);
  m.copyInto(cache.scales, init.scales);
  m.copyInto(cache.zeroPoints, init.zeroPoints);
}

/** x [..., width] quantized per row: int8 codes, float32 scales and int8 zero points [..., 1]. */
function quantizePerToken(m: MethodBuilder, x: TensorValue): { codes: TensorValue; scales: TensorValue; zeroPoints: TensorValue } {
  const g = m.graph;
  const perRow = [...x.shape.slice(0, -1), 1];
  const int8Code = dtypeInfo('int8').scalarType;
  const int8 = g.addValue({ kind: 'int', value: BigInt(int8Code) });
  // The ops' outs as ExecuTorch's kernels take them: float64 scales, int64 zero points.
  const scales = g.addTensor('float64', perRow);
  const zeroPoints = g.addTensor('int64', perRow);
  const both = g.addValue({ kind: 'tensorList', items: [scales.index, zeroPoints.index] });
  g.addKernelCall('quantized_decomposed::choose_qparams_per_token_asymmetric.out', [x.index, int8, scales.index, zeroPoints.index, both]);
  const codes = g.addTensor('int8', x.shape);
  m.kernel('quantized_decomposed::quantize_per_token.out', [x, scales, zeroPoints, { int: -128 }, { int: 127 }, { int: int8Code }, codes]);
  return { codes, scales: m.cast(scales, 'float32'), zeroPoints: m.cast(zeroPoints, 'int8') };
}

/** llama::update_cache.out of each (rows, cache) pair at `start` (a value the call reads at run time). */
function updateCaches(m: MethodBuilder, pairs: readonly (readonly [TensorValue, SharedBuffer])[], start: number): void {
  for (const [rows, cache] of pairs) {
    const placeholder = m.graph.addTensor(rows.dtype, [1]);
    m.graph.addKernelCall('llama::update_cache.out', [rows.index, m.use(cache).index, start, placeholder.index, placeholder.index]);
  }
}

/**
 * `name`(query, key, value, start_pos, attn_mask=None, dropout_p=0, is_causal=True, scale=None, ...rest, out)
 * into a new float32 tensor shaped as the query. start_pos is a value the call reads at run time, so the
 * arguments go in as value indices.
 */
function emitCausalAttention(
  m: MethodBuilder,
  name: string,
  [query, key, value]: readonly [TensorValue, SharedBuffer, SharedBuffer],
  start: number,
  rest: readonly number[],
): TensorValue {
  const g = m.graph;
  const out = g.addTensor('float32', query.shape);
  const none = (): number => g.addValue({ kind: 'null' });
  const options = [none(), g.addValue({ kind: 'double', value: 0 }), g.addValue({ kind: 'bool', value: true }), none()];
  g.addKernelCall(name, [...[query, key, value].map((t) => m.use(t).index), start, ...options, ...rest, out.index, out.index]);
  return out;
}

/** Writes k and v [1, length, kvHeads, headDim] into float32 caches at `start`, then custom_sdpa over them. */
export function emitFloatAttention(
  m: MethodBuilder,
  caches: { readonly key: SharedBuffer; readonly value: SharedBuffer },
  q: TensorValue,
  k: TensorValue,
  v: TensorValue,
  start: number,
): TensorValue {
  updateCaches(
    m,
    [
      [k, caches.key],
      [v, caches.value],
    ],
    start,
  );
  return emitCausalAttention(m, 'llama::custom_sdpa.out', [q, caches.key, caches.value], start, []);
}

/**
 * Writes k and v [1, length, kvHeads, headDim] into the int8 caches at
 * `start` and attends q [1, length, heads, headDim] over them, causally from
 * `start`: QuantizedKVCache then QuantizedSDPA, op for op. Returns float32
 * [1, length, heads, headDim].
 */
export function emitQuantizedAttention(
  m: MethodBuilder,
  caches: { readonly key: QuantizedCache; readonly value: QuantizedCache },
  q: TensorValue,
  k: TensorValue,
  v: TensorValue,
  start: number,
): TensorValue {
  for (const [rows, cache] of [
    [k, caches.key],
    [v, caches.value],
  ] as const) {
    const quantized = quantizePerToken(m, rows);
    updateCaches(
      m,
      [
        [quantized.codes, cache.codes],
        [quantized.scales, cache.scales],
        [quantized.zeroPoints, cache.zeroPoints],
      ],
      start,
    );
  }
  const query = quantizePerToken(m, q);
  const { key, value } = caches;
  const parameters = [query.zeroPoints, query.scales, key.zeroPoints, key.scales, value.zeroPoints, value.scales];
  const isSeqAtDim2 = m.graph.addValue({ kind: 'bool', value: false });
  return emitCausalAttention(m, 'llama::custom_quantized_sdpa.out', [query.codes, key.codes, value.codes], start, [
    ...parameters.map((t) => m.use(t).index),
    isSeqAtDim2,
  ]);
}

/**
 * The reference's view of a quantized cache row: the values `rows` [n, width]
 * come back as after int8 quantization per row, scale * (code - zero point),
 * with the float32 scale the cache stores.
 */
export function int8RoundTripRows(rows: Float32Array, width: number): Float32Array {
  const out = new Float32Array(rows.length);
  for (let at = 0; at < rows.length; at += width) {
    const { codes, scale, zeroPoint } = perTokenAsymmetricInt8(rows.subarray(at, at + width));
    for (let i = 0; i < width; i++) out[at + i] = scale * (codes[i]! - zeroPoint);
  }
  return out;
}
