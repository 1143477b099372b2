// Three of export_llama's source transformations, as the llama-8da4w example
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
// - The static quantized KV cache (`--static_quantize_kv_cache`; option
//   `staticQuantizeKvCache`): int8 caches with one fixed float32 scale per
//   column of a head, written from div, round, clamp and a cast, read back
//   whole into float32 by attention.py's SDPA (no custom_sdpa: export_llama
//   takes this cache without --use_sdpa_with_kv_cache).
// Beside them, the plain attention the second replaces (update_cache into
// float32 caches, custom_sdpa), and the ring-buffer caches of sliding-window
// layers (RingKVCache, as optimum-executorch's hybrid cache and export_llama's
// `--local_global_attention` write them): 2 * window rows written at
// position % (2 * window) with `llama::update_cache_with_indices`, the
// position each row holds kept in an int64 buffer, and attention under a mask
// that shows a query the rows of the last `window` positions up to its own.
import { EtnaError } from '../../errors.js';
import { dtypeInfo } from '../../export/dtype.js';
import type { ConstantTensor, SharedBuffer, TensorValue } from '../../export/graph.js';
import type { MethodBuilder } from '../../export/method-builder.js';
import type { ProgramBuilder } from '../../export/program-builder.js';
import { perTokenAsymmetricInt8, roundHalfEven } from '../../export/quantize.js';

/** The widths the example's rotation takes: powers of two (ExecuTorch's kernel also takes 28 times one). */
export function checkHadamardWidth(width: number, what: string): void {
  if (!Number.isSafeInteger(width) || width < 1 || 2 ** Math.round(Math.log2(width)) !== width)
    throw new EtnaError('INVALID_INPUT', `hadamard: ${what} ${width} is not a power of two`);
}

/**
 * Each row of `width` in `out` transformed in place: the radix-2 butterflies,
 * stage by stage, every sum and difference passed through `round`, then every
 * element times `inverse`, rounded too.
 */
function transformRows<T extends Float32Array | Float64Array>(out: T, width: number, inverse: number, round: (value: number) => number): T {
  if (out.length % width !== 0) throw new EtnaError('INVALID_INPUT', `hadamard: ${out.length} values are not rows of ${width}`);
  for (let row = 0; row < out.length; row += width) {
    for (let step = 1; step < width; step *= 2) {
      for (let block = row; block < row + width; block += 2 * step) {
        for (let i = block; i < block + step; i++) {
          const x = out[i]!;
          const y = out[i + step]!;
          out[i] = round(x + y);
          out[i + step] = round(x - y);
        }
      }
    }
    for (let i = row; i < row + width; i++) out[i] = round(out[i]! * inverse);
  }
  return out;
}

/**
 * Rows of `width` (a power of two) Walsh-Hadamard transformed in double and
 * divided by sqrt(width): H x for each row x, with H[i][j] = (-1)^popcount(i & j) / sqrt(width).
 */
export function hadamardRows(values: ArrayLike<number>, width: number): Float64Array {
  checkHadamardWidth(width, 'row width');
  return transformRows(Float64Array.from(values), width, 1 / Math.sqrt(width), (value) => value);
}

/**
 * hadamardRows as llama::fast_hadamard_transform computes it in a 16-bit
 * dtype (float16; ExecuTorch's Half): every butterfly's sum and difference
 * rounded by `round`, and the normalization's constants 2^(k/2), sqrt(2), their
 * product and its reciprocal rounded too, then each element's product.
 */
export function roundedHadamardRows(values: Float32Array, width: number, round: (value: number) => number): Float32Array {
  checkHadamardWidth(width, 'row width');
  const log2 = Math.round(Math.log2(width));
  const root = round(round(2 ** Math.floor(log2 / 2)) * (log2 % 2 === 1 ? round(Math.SQRT2) : 1));
  return transformRows(Float32Array.from(values), width, round(1 / root), round);
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

export function quantizedCacheInit(
  program: ProgramBuilder,
  shape: readonly [number, number, number, number],
  name = 'empty_cache',
): QuantizedCacheInit {
  const rows = shape[0] * shape[1] * shape[2];
  const perRow = [shape[0], shape[1], shape[2], 1];
  return {
    codes: program.constant(`${name}_codes`, 'int8', shape, new Int8Array(rows * shape[3])),
    scales: program.constant(`${name}_scales`, 'float32', perRow, new Float32Array(rows).fill(1)),
    zeroPoints: program.constant(`${name}_zero_points`, 'int8', perRow, new Int8Array(rows).fill(1)),
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

/** A sliding-window layer's ring: its window, and the position each of the 2 * window cache rows holds (-1: none). */
export interface RingPositions {
  readonly window: number;
  /** int64 [2 * window] */
  readonly positions: SharedBuffer;
}

/** What CachePositionsManager registers: positions of 0, which the first call (at position 0) marks empty. */
export function ringPositions(program: ProgramBuilder, name: string, window: number): RingPositions {
  return { window, positions: program.sharedBuffer(name, 'int64', [2 * window], new BigInt64Array(2 * window)) };
}

/** Where a pass writes into a ring, and what each query may see there. */
export interface RingStep {
  /** int64 [1, length]: the rows the pass's positions go to */
  readonly indices: TensorValue;
  /** float32 [length, 2 * window]: 0 where a query sees a row, -inf elsewhere */
  readonly mask: TensorValue;
}

/**
 * CachePositionsManager's update and _create_causal_mask_for_ring_buffer for
 * the pass's positions [length] starting at `start`: rows at index >= start
 * are marked empty first (a sequence starting again), then each position
 * goes to row position % (2 * window), `aten::remainder.Scalar_out` as the
 * exporter writes the `%`. A query at p sees the rows holding
 * p - window < position <= p.
 */
export function emitRingStep(m: MethodBuilder, ring: RingPositions, positions: TensorValue, start: number): RingStep {
  const g = m.graph;
  const rows = 2 * ring.window;
  const [length] = positions.shape as [number];
  const indices = g.addTensor('int64', [length]);
  m.kernel('aten::remainder.Scalar_out', [positions, { int: rows }, indices]);
  // where(arange(rows) < start_pos, cache_positions, -1)
  const rowNumbers = m.graph.addTensor('int64', [rows]);
  m.kernel('aten::arange.start_out', [{ int: 0 }, { int: rows }, { int: 1 }, rowNumbers]);
  const kept = g.addTensor('bool', [rows]);
  g.addKernelCall('aten::lt.Scalar_out', [rowNumbers.index, start, kept.index, kept.index]);
  const emptied = g.addTensor('int64', [rows]);
  const none = g.addTensor('int64', [rows]);
  m.kernel('aten::full.out', [{ intList: [rows] }, { int: -1 }, none]);
  m.kernel('aten::where.self_out', [kept, ring.positions, none, emptied]);
  m.copyInto(ring.positions, emptied);
  m.indexPutInPlace(ring.positions, [indices], positions);
  // delta = query position - row position; seen where the row holds one and 0 <= delta < window.
  const delta = m.sub(m.reshape(positions, [length, 1]), ring.positions);
  const compare = (name: string, a: TensorValue | SharedBuffer, b: number): TensorValue => {
    const out = g.addTensor('bool', a.shape);
    m.kernel(name, [a, { int: b }, out]);
    return out;
  };
  const both = (a: TensorValue, b: TensorValue): TensorValue => {
    const out = g.addTensor('bool', [length, rows]);
    m.kernel('aten::logical_and.out', [a, b, out]);
    return out;
  };
  const holds = compare('aten::ge.Scalar_out', ring.positions, 0);
  const seen = both(both(holds, compare('aten::ge.Scalar_out', delta, 0)), compare('aten::lt.Scalar_out', delta, ring.window));
  const filled = (value: number): TensorValue => {
    const out = g.addTensor('float32', [1]);
    m.kernel('aten::full.out', [{ intList: [1] }, { double: value }, out]);
    return out;
  };
  const mask = g.addTensor('float32', [length, rows]);
  m.kernel('aten::where.self_out', [seen, filled(0), filled(Number.NEGATIVE_INFINITY), mask]);
  return { indices: m.unsqueeze(indices, 0), mask };
}

/** llama::update_cache.out of each (rows, cache) pair at `start` (a value the call reads at run time), or update_cache_with_indices into a ring. */
function updateCaches(
  m: MethodBuilder,
  pairs: readonly (readonly [TensorValue, SharedBuffer])[],
  start: number,
  ring: RingStep | undefined,
): void {
  for (const [rows, cache] of pairs) {
    const placeholder = m.graph.addTensor(rows.dtype, [1]);
    const operands = [rows.index, m.use(cache).index, start, ...(ring === undefined ? [] : [ring.indices.index])];
    const name = ring === undefined ? 'llama::update_cache.out' : 'llama::update_cache_with_indices.out';
    m.graph.addKernelCall(name, [...operands, placeholder.index, placeholder.index]);
  }
}

/**
 * `name`(query, key, value, start_pos, attn_mask=None, dropout_p=0, is_causal=True, scale=None, ...rest, out)
 * into a new float32 tensor shaped as the query. start_pos is a value the call reads at run time, so the
 * arguments go in as value indices. Over a ring, the mask decides alone: start_pos 0, attn_mask, is_causal false.
 */
function emitCausalAttention(
  m: MethodBuilder,
  name: string,
  [query, key, value]: readonly [TensorValue, SharedBuffer, SharedBuffer],
  start: number,
  rest: readonly number[],
  ring: RingStep | undefined,
): TensorValue {
  const g = m.graph;
  const out = g.addTensor('float32', query.shape);
  const none = (): number => g.addValue({ kind: 'null' });
  const startPos = ring === undefined ? start : g.addValue({ kind: 'int', value: 0n });
  const options = [
    ring === undefined ? none() : ring.mask.index,
    g.addValue({ kind: 'double', value: 0 }),
    g.addValue({ kind: 'bool', value: ring === undefined }),
    none(),
  ];
  g.addKernelCall(name, [...[query, key, value].map((t) => m.use(t).index), startPos, ...options, ...rest, out.index, out.index]);
  return out;
}

/** Writes k and v [1, length, kvHeads, headDim] into float32 caches at `start` (or a ring's rows), then custom_sdpa over them. */
export function emitFloatAttention(
  m: MethodBuilder,
  caches: { readonly key: SharedBuffer; readonly value: SharedBuffer },
  q: TensorValue,
  k: TensorValue,
  v: TensorValue,
  start: number,
  ring?: RingStep,
): TensorValue {
  updateCaches(
    m,
    [
      [k, caches.key],
      [v, caches.value],
    ],
    start,
    ring,
  );
  return emitCausalAttention(m, 'llama::custom_sdpa.out', [q, caches.key, caches.value], start, [], ring);
}

/**
 * Writes k and v [1, length, kvHeads, headDim] into the int8 caches at
 * `start` and attends q [1, length, heads, headDim] over them, causally from
 * `start`: QuantizedKVCache then QuantizedSDPA, op for op (into a ring's
 * rows, under its mask, as QuantizedRingKVCache). Returns float32
 * [1, length, heads, headDim].
 */
export function emitQuantizedAttention(
  m: MethodBuilder,
  caches: { readonly key: QuantizedCache; readonly value: QuantizedCache },
  q: TensorValue,
  k: TensorValue,
  v: TensorValue,
  start: number,
  ring?: RingStep,
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
      ring,
    );
  }
  const query = quantizePerToken(m, q);
  const { key, value } = caches;
  const parameters = [query.zeroPoints, query.scales, key.zeroPoints, key.scales, value.zeroPoints, value.scales];
  const isSeqAtDim2 = m.graph.addValue({ kind: 'bool', value: false });
  return emitCausalAttention(
    m,
    'llama::custom_quantized_sdpa.out',
    [query.codes, key.codes, value.codes],
    start,
    [...parameters.map((t) => m.use(t).index), isSeqAtDim2],
    ring,
  );
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

// ------------------------------------------------------------------ static int8 caches

/** export_llama's default `--static_quantize_kv_cache_scale`: 1 / 127, so values in [-1, 1] fill the int8 range. */
export const STATIC_KV_CACHE_SCALE = 1 / 127;

/** Refuses what export_llama refuses: a static KV cache scale must be finite and positive. */
export function checkStaticKvCacheScale(scale: number): void {
  if (typeof scale !== 'number' || !Number.isFinite(scale) || scale <= 0)
    throw new EtnaError('INVALID_INPUT', `static KV cache: the scale must be finite and positive, got ${String(scale)}`);
}

/**
 * One static-qparams cache (keys or values), as StaticQuantizedKVCache
 * registers it: int8 codes in shared state, and a float32 scale per column
 * of a head, fixed at export.
 */
export interface StaticQuantizedCache {
  /** int8 [1, rows, kvHeads, headDim] */
  readonly codes: SharedBuffer;
  /** float32 [1, 1, 1, headDim] */
  readonly scales: ConstantTensor;
}

export function staticQuantizedCache(
  program: ProgramBuilder,
  name: string,
  shape: readonly [number, number, number, number],
  scale: number,
): StaticQuantizedCache {
  checkStaticKvCacheScale(scale);
  return {
    codes: program.sharedBuffer(name, 'int8', shape),
    scales: program.constant(`${name}_scales`, 'float32', [1, 1, 1, shape[3]], new Float32Array(shape[3]).fill(scale)),
  };
}

/** The model's causal mask [context, context]: 0 where a query at the row's position sees the column's, -inf elsewhere. */
export function causalMask(program: ProgramBuilder, context: number): ConstantTensor {
  const data = new Float32Array(context * context);
  for (let row = 0; row < context; row++) data.fill(Number.NEGATIVE_INFINITY, row * context + row + 1, (row + 1) * context);
  return program.constant('mask', 'float32', [context, context], data);
}

/**
 * StaticQuantizedKVCache.update then attention.py's SDPA, op for op, for the
 * rows k and v [1, length, kvHeads, headDim] at `start` and the query q
 * [1, length, heads, headDim]: the rows quantized as
 * clamp(round(x / scales), -128, 127).to(int8) and written into the int8
 * caches with llama::update_cache; the whole caches dequantized
 * (int8.to(float32) * scales) into temporaries that then take the call's
 * float rows; keys and values repeated per query head; then
 * scaled_dot_product_attention as it decomposes (q and k each times
 * sqrt(1 / sqrt(headDim)), bmm, + mask[positions], softmax, bmm). Returns
 * float32 [1, length, heads, headDim].
 */
export function emitStaticQuantizedAttention(
  m: MethodBuilder,
  caches: { readonly key: StaticQuantizedCache; readonly value: StaticQuantizedCache },
  mask: ConstantTensor,
  q: TensorValue,
  k: TensorValue,
  v: TensorValue,
  positions: TensorValue,
  start: number,
): TensorValue {
  const g = m.graph;
  const [, length, heads, headDim] = q.shape as [number, number, number, number];
  const [, rows, kvHeads] = caches.key.codes.shape as [number, number, number, number];
  const update = (values: TensorValue, cache: TensorValue | SharedBuffer): void => {
    const placeholder = g.addTensor(values.dtype, [1]);
    g.addKernelCall('llama::update_cache.out', [values.index, m.use(cache).index, start, placeholder.index, placeholder.index]);
  };
  const floats = ([values, cache]: readonly [TensorValue, StaticQuantizedCache]): TensorValue => {
    const rounded = g.addTensor('float32', values.shape);
    m.kernel('aten::round.out', [m.div(values, cache.scales), rounded]);
    const clamped = g.addTensor('float32', values.shape);
    m.kernel('aten::clamp.out', [rounded, { int: -128 }, { int: 127 }, clamped]);
    update(m.cast(clamped, 'int8'), cache.codes);
    const dequantized = m.mul(m.cast(cache.codes, 'float32'), cache.scales);
    update(values, dequantized);
    return dequantized;
  };
  const [keys, values] = (
    [
      [k, caches.key],
      [v, caches.value],
    ] as const
  ).map(floats) as [TensorValue, TensorValue];
  // repeat_interleave(heads / kvHeads, dim=1) over [1, kvHeads, rows, headDim].
  const perQueryHead = (x: TensorValue): TensorValue => {
    const byHead = m.unsqueeze(m.transpose(x, 1, 2), 2);
    return m.reshape(m.expand(byHead, [1, kvHeads, heads / kvHeads, rows, headDim]), [1, heads, rows, headDim]);
  };
  const factor = Math.sqrt(1 / Math.sqrt(headDim));
  const query = m.mul(m.transpose(q, 1, 2), factor);
  const keysT = m.mul(m.transpose(perQueryHead(keys), 2, 3), factor);
  const rowsMask = g.addTensor('float32', [length, rows]);
  const indices = g.addValue({ kind: 'optionalTensorList', items: [positions.index] });
  g.addKernelCall('aten::index.Tensor_out', [m.use(mask).index, indices, rowsMask.index, rowsMask.index]);
  const weights = m.softmax(m.add(m.matmul(query, keysT), rowsMask), -1);
  return m.transpose(m.matmul(weights, perQueryHead(values)), 1, 2);
}

/** What a static int8 cache gives back for `values`: clamp(round(x / scale), -128, 127) * scale, in float32 as the graph computes it. */
export function staticInt8RoundTrip(values: Float32Array, scale: number): Float32Array {
  const s = Math.fround(scale);
  return values.map((x) => Math.fround(Math.min(127, Math.max(-128, roundHalfEven(Math.fround(x / s)))) * s));
}
