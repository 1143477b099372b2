// The model families the llama-8da4w example writes, and the operators in
// which they differ from Llama, as the program emits them and the reference
// computes them:
// - 'llama' (Meta's Llama as export_llama writes it): rotary embedding over
//   interleaved pairs (x[2i], x[2i+1]), an output projection of its own, BOS 1.
// - 'qwen3' (Qwen3 as export_llama and optimum-executorch write it):
//   RMSNorm of each query and key head (q_norm, k_norm, head_dim weights)
//   after the projections and before the rotary embedding; the rotary
//   embedding over halves (transformers' rotate_half: x[i] pairs with
//   x[i + head_dim/2], export_llama's `use_hf_rope`); tied embeddings (the
//   output projection is the token embedding's float matrix, quantized again
//   as an 8da4w linear beside the 4-bit embedding table, as export_llama
//   quantizes a tied output); no BOS token (no get_bos_id); Qwen3's
//   rope_theta 1e6 and rms_norm_eps 1e-6.
// - 'gemma3' (Gemma 3's text decoder as optimum-executorch writes it): the
//   same per-head norms, halves-rotated RoPE and tied embeddings; every RMSNorm
//   scales by (1 + weight); the embedding is scaled by sqrt(modelDim); the
//   MLP's gate is GELU (tanh approximation); the attention's and the MLP's
//   outputs are RMS-normed before their residual adds (post_attention_layernorm,
//   post_feedforward_layernorm); BOS 2, EOS 1. Its head_dim is its own, 256
//   (Gemma 3 1B, 4B and 12B), not modelDim / heads: the query projection has
//   heads * 256 outputs and the output projection as many inputs. Gemma 3
//   makes five of every six layers sliding-window layers (window 512, rope
//   theta 1e4) and the sixth global (rope theta 1e6): a sliding layer keeps
//   its keys and values in a ring of 2 * window rows (optimum-executorch's
//   hybrid cache: CustomRingKVCache, update_cache_with_indices, custom_sdpa
//   under a mask; window = min(512, context), as HybridCache sizes it), a
//   global layer one row per position. Its attention scale 1/sqrt(head_dim)
//   is Gemma 3's query_pre_attn_scalar where that equals head_dim (1B, 4B, 12B).
// - 'phi4' (Phi-4-mini as export_llama writes it, examples/models/phi_4_mini):
//   the checkpoint's fused qkv_proj and gate_up_proj are split by rows into
//   wq, wk, wv and w1, w3 (the converter's split), so the graph has Llama's
//   separate linears; RoPE over halves (`use_hf_rope`) on the first 3/4 of
//   each head (`partial_rotary_factor` 0.75), the rest passed through;
//   LongRoPE: the short factors (all 1) and the attention factor
//   sqrt(1 + ln(131072 / 4096) / ln(4096)) that scales the cos and sin tables,
//   computed in double; export_llama picks the long factors only for a table
//   longer than the original 4096 positions (it builds 2 * max_context_len),
//   so the example refuses contexts past 2048; tied embeddings; rope theta
//   1e4; BOS and EOS <|endoftext|> 199999 and <|end|> 200020 where the
//   vocabulary holds them (Phi-4-mini's 200064 tokens).
// - 'smollm2' (SmolLM2 as export_llama writes it, examples/models/smollm2):
//   Llama's graph (interleaved pairs: `use_hf_rope` false, the converter puts
//   the checkpoint in Meta's layout) with tied embeddings, rope theta 1e5 and
//   BOS and EOS <|endoftext|> 0, which its tokenizer (GPT-2's) does not add.
import { EtnaError } from '../../errors.js';
import type { ConstantTensor, TensorValue } from '../../export/graph.js';
import type { MethodBuilder } from '../../export/method-builder.js';

export type Llama8da4wFamily = 'llama' | 'qwen3' | 'gemma3' | 'phi4' | 'smollm2';
export const LLAMA_8DA4W_FAMILIES: readonly Llama8da4wFamily[] = ['llama', 'qwen3', 'gemma3', 'phi4', 'smollm2'];

export function isLlama8da4wFamily(name: string): name is Llama8da4wFamily {
  return (LLAMA_8DA4W_FAMILIES as readonly string[]).includes(name);
}

/** The configuration fields a family sets. */
interface FamilyShape {
  readonly family?: Llama8da4wFamily | undefined;
  readonly layers: number;
  readonly context: number;
  readonly normEps: number;
  readonly ropeTheta: number;
  readonly headDim?: number | undefined;
  readonly slidingWindow?: number | undefined;
}

/** Gemma 3's sliding window (1B; 1024 in 4B and larger). */
const GEMMA3_WINDOW = 512;
/** Gemma 3's head_dim (1B, 4B and 12B), whatever the model width. */
export const GEMMA3_HEAD_DIM = 256;
/** The rope theta of Gemma 3's sliding-window layers; its global layers use the config's ropeTheta (1e6). */
export const GEMMA3_LOCAL_ROPE_THETA = 10_000;
/** Phi-4-mini's LongRoPE: the context it was trained at, the one it extends to. */
const PHI4_ORIGINAL_CONTEXT = 4096;
const PHI4_MAX_POSITIONS = 131_072;

/** `config` as `family` writes it: its family, with the family's rope theta, norm epsilon and head_dim. */
export function withFamily<C extends FamilyShape>(config: C, family: string): C {
  if (!isLlama8da4wFamily(family))
    throw new EtnaError('INVALID_INPUT', `unknown llama-8da4w family '${family}' (available: ${LLAMA_8DA4W_FAMILIES.join(', ')})`);
  // export_llama's table has 2 * max_context_len rows (the params set ffn_dim_multiplier); past 4096 it takes the long factors.
  if (family === 'phi4' && 2 * config.context > PHI4_ORIGINAL_CONTEXT)
    throw new EtnaError(
      'INVALID_INPUT',
      `llama-8da4w: the phi4 family is written with LongRoPE's short factors: a context of at most ${PHI4_ORIGINAL_CONTEXT / 2} (got ${config.context})`,
    );
  switch (family) {
    case 'qwen3':
      return { ...config, family, ropeTheta: 1_000_000, normEps: 1e-6 };
    case 'gemma3':
      return {
        ...config,
        family,
        ropeTheta: 1_000_000,
        normEps: 1e-6,
        headDim: GEMMA3_HEAD_DIM,
        slidingWindow: config.slidingWindow ?? GEMMA3_WINDOW,
      };
    case 'phi4':
      return { ...config, family, ropeTheta: 10_000, normEps: 1e-5 };
    case 'smollm2':
      return { ...config, family, ropeTheta: 100_000, normEps: 1e-5 };
    default:
      return { ...config, family };
  }
}

type Family = Llama8da4wFamily | undefined;
/** Per-head q/k norms: Qwen3's and Gemma 3's; Llama has none. */
export const hasQkNorm = (family: Family): boolean => family === 'qwen3' || family === 'gemma3';
/** RoPE over halves (`use_hf_rope`): every family but Llama and SmolLM2, whose checkpoints are converted to Meta's pairs. */
export const rotatesHalves = (family: Family): boolean => hasQkNorm(family) || family === 'phi4';
/** The output projection is the token embedding in every family but Llama. */
export const tiesEmbeddings = (family: Family): boolean => family !== undefined && family !== 'llama';
/** Gemma 3's norms scale by (1 + weight), and it norms the attention's and the MLP's outputs too. */
export const normOffset = (family: Family): number => (family === 'gemma3' ? 1 : 0);
export const hasSandwichNorms = (family: Family): boolean => family === 'gemma3';
/** What the token embedding is multiplied by: sqrt(modelDim) for Gemma 3, as float32. */
export const embeddingScale = (family: Family, modelDim: number): number => (family === 'gemma3' ? Math.fround(Math.sqrt(modelDim)) : 1);
/** The MLP's gate activation. */
export const gatesWithGelu = (family: Family): boolean => family === 'gemma3';
/** Phi-4-mini's checkpoint fuses q, k and v, and gate and up, into one matrix each, which the converter splits by rows. */
export const fusesProjections = (family: Family): boolean => family === 'phi4';

/** Phi-4-mini's special tokens: <|endoftext|> (its BOS, and an EOS) and <|end|>, the chat turn's end. */
const PHI4_ENDOFTEXT = 199_999;
const PHI4_END = 200_020;

/** The BOS token get_bos_id names by default: Llama's 1, Gemma's 2, SmolLM2's 0, Phi-4-mini's where the vocabulary holds it; Qwen3 has none. */
export function defaultBosId(family: Family, vocab = Number.POSITIVE_INFINITY): number | null {
  switch (family) {
    case 'qwen3':
      return null;
    case 'gemma3':
      return 2;
    case 'smollm2':
      return 0;
    case 'phi4':
      return PHI4_ENDOFTEXT < vocab ? PHI4_ENDOFTEXT : null;
    default:
      return 1;
  }
}

/** The EOS tokens get_eos_ids names by default: Llama's 2, Gemma's 1, SmolLM2's 0, Phi-4-mini's (generation_config's) where the vocabulary holds them. */
export function defaultEosIds(family: Family, vocab = Number.POSITIVE_INFINITY): number[] {
  switch (family) {
    case 'gemma3':
      return [1];
    case 'smollm2':
      return [0];
    case 'phi4':
      return PHI4_END < vocab ? [PHI4_END, PHI4_ENDOFTEXT] : [];
    default:
      return [2];
  }
}

/** Gemma 3's layer kinds: five sliding-window layers, then one global, repeating. */
export const isGlobalLayer = (family: Family, layer: number): boolean => family === 'gemma3' && (layer + 1) % 6 === 0;
export const isSlidingLayer = (family: Family, layer: number): boolean => family === 'gemma3' && !isGlobalLayer(family, layer);

/**
 * The window of the config's sliding-window layers, if it has any: its
 * slidingWindow, or the context when that is shorter (a sliding layer's
 * cache, as transformers' HybridCache sizes it, is min(window, context)).
 */
export function slidingWindow(config: {
  readonly family?: Family;
  readonly layers: number;
  readonly context: number;
  readonly slidingWindow?: number | undefined;
}): number | undefined {
  if (
    config.slidingWindow === undefined ||
    !Array.from({ length: config.layers }, (_, l) => isSlidingLayer(config.family, l)).some(Boolean)
  )
    return undefined;
  if (!Number.isSafeInteger(config.slidingWindow) || config.slidingWindow < 1)
    throw new EtnaError('INVALID_INPUT', `llama-8da4w: a sliding window of ${config.slidingWindow} positions`);
  return Math.min(config.slidingWindow, config.context);
}

/** The rope theta of layer `layer`: Gemma 3's sliding-window layers have their own. */
export function layerRopeTheta(config: { readonly family?: Family; readonly ropeTheta: number }, layer: number): number {
  return isSlidingLayer(config.family, layer) ? GEMMA3_LOCAL_ROPE_THETA : config.ropeTheta;
}

/** The dims of each head the rotary embedding turns: the first int(0.75 * headDim) in Phi-4-mini, all of them elsewhere. */
export function rotaryDim(family: Family, headDim: number): number {
  if (family !== 'phi4') return headDim;
  const rotary = Math.trunc(headDim * 0.75);
  if (rotary % 2 !== 0)
    throw new EtnaError('INVALID_INPUT', `llama-8da4w: phi4's rotary part of a head_dim of ${headDim} is ${rotary}, not even`);
  return rotary;
}

/**
 * cos and sin tables [context, rotary / 2] of the rotary embedding, in
 * float32. Phi-4-mini's (LongRoPE, short factors of 1) are computed in double
 * and scaled by the attention factor, as export_llama's hf_precompute_freqs_cis
 * does; the others take float32 frequencies.
 */
export function familyRopeTables(family: Family, rotary: number, context: number, theta: number): { cos: Float32Array; sin: Float32Array } {
  const half = rotary / 2;
  const longRope = family === 'phi4';
  const scale = longRope ? Math.sqrt(1 + Math.log(PHI4_MAX_POSITIONS / PHI4_ORIGINAL_CONTEXT) / Math.log(PHI4_ORIGINAL_CONTEXT)) : 1;
  const cos = new Float32Array(context * half);
  const sin = new Float32Array(context * half);
  for (let i = 0; i < half; i++) {
    const exact = 1 / theta ** ((2 * i) / rotary);
    const frequency = longRope ? exact : Math.fround(exact);
    for (let p = 0; p < context; p++) {
      cos[p * half + i] = Math.cos(p * frequency) * scale;
      sin[p * half + i] = Math.sin(p * frequency) * scale;
    }
  }
  return { cos, sin };
}

/** GELU with the tanh approximation, in double (gelu_pytorch_tanh). */
export function geluTanh(v: number): number {
  return 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
}

/**
 * x [length, heads, headDim] rotated by position: pairs (x[2i], x[2i+1]), or
 * (x[i], x[i + rotary/2]) when `halves`, each by the angle whose cos and sin
 * [length, 1, rotary/2] are given; the dims past `rotary` (twice the tables'
 * width) pass through. Returns [1, length, heads, headDim].
 */
export function emitRope(m: MethodBuilder, x: TensorValue, cos: TensorValue, sin: TensorValue, halves: boolean): TensorValue {
  const [length, heads, hd] = x.shape as [number, number, number];
  const half = cos.shape[2]!;
  const rotated = (first: TensorValue, second: TensorValue): [TensorValue, TensorValue] => [
    m.sub(m.mul(first, cos), m.mul(second, sin)),
    m.add(m.mul(first, sin), m.mul(second, cos)),
  ];
  if (halves) {
    const [first, second] = rotated(m.slice(x, 2, 0, half), m.slice(x, 2, half, 2 * half));
    const parts = 2 * half === hd ? [first, second] : [first, second, m.slice(x, 2, 2 * half, hd)];
    return m.reshape(m.cat(parts, 2), [1, length, heads, hd]);
  }
  if (2 * half !== hd) throw new EtnaError('INVALID_INPUT', 'llama-8da4w: a partial rotary embedding rotates halves');
  // Meta's apply_rotary_emb rotates pairs in float32 (`xq.float()`, the tables widened to meet it) and rounds the
  // result back to a 16-bit input's dtype once (`type_as`).
  if (x.dtype !== 'float32') {
    const wide = (t: TensorValue): TensorValue => m.cast(t, 'float32');
    return m.cast(emitRope(m, wide(x), wide(cos), wide(sin), false), x.dtype);
  }
  const pairs = m.reshape(x, [length, heads, half, 2]);
  const even = m.reshape(m.slice(pairs, 3, 0, 1), [length, heads, half]);
  const odd = m.reshape(m.slice(pairs, 3, 1, 2), [length, heads, half]);
  const [rotatedEven, rotatedOdd] = rotated(even, odd);
  return m.reshape(m.cat([m.unsqueeze(rotatedEven, 3), m.unsqueeze(rotatedOdd, 3)], 3), [1, length, heads, hd]);
}

/** RMSNorm over x's last dim, times `weight` (plus `offset`): x * rsqrt(mean(x^2) + eps) * (offset + weight). */
export function emitRmsNorm(m: MethodBuilder, x: TensorValue, weight: ConstantTensor, eps: number, offset: number): TensorValue {
  // As ExecuTorch's RMSNorm: `_norm(x.float()).type_as(x) * weight`, the
  // normalisation in float32 whatever the activations' dtype.
  const wide = x.dtype === 'float32' ? x : m.cast(x, 'float32');
  const meanSquare = m.graph.addTensor('float32', [...wide.shape.slice(0, -1), 1]);
  m.kernel('aten::mean.out', [m.mul(wide, wide), { intList: [-1] }, { bool: true }, null, meanSquare]);
  const inverse = m.graph.addTensor('float32', meanSquare.shape);
  m.kernel('aten::rsqrt.out', [m.add(meanSquare, eps), inverse]);
  const normed = m.mul(wide, inverse);
  return m.mul(x.dtype === 'float32' ? normed : m.cast(normed, x.dtype), offset === 0 ? weight : m.add(weight, offset));
}

/**
 * The reference's rotation, in place, of rows [rows, heads, headDim] at
 * positions start.. (tables [context, rotary/2]; rotary defaults to headDim),
 * pairs or halves as emitRope, the dims past rotary left as they are.
 */
export function ropeRows(
  x: Float32Array,
  shape: { readonly rows: number; readonly heads: number; readonly headDim: number; readonly rotary?: number },
  start: number,
  tables: { readonly cos: Float32Array; readonly sin: Float32Array },
  halves: boolean,
): void {
  const { rows, heads, headDim: hd } = shape;
  const half = (shape.rotary ?? hd) / 2;
  for (let t = 0; t < rows; t++) {
    for (let h = 0; h < heads; h++) {
      const base = (t * heads + h) * hd;
      for (let i = 0; i < half; i++) {
        const [a, b] = halves ? [base + i, base + half + i] : [base + 2 * i, base + 2 * i + 1];
        const [first, second] = [x[a]!, x[b]!];
        const cos = tables.cos[(start + t) * half + i]!;
        const sin = tables.sin[(start + t) * half + i]!;
        x[a] = first * cos - second * sin;
        x[b] = first * sin + second * cos;
      }
    }
  }
}
