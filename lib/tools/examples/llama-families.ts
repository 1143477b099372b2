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
//   post_feedforward_layernorm); BOS 2, EOS 1. Gemma 3 makes five of every six
//   layers sliding-window layers (window 512, rope theta 1e4) and the sixth
//   global (rope theta 1e6); the example writes only sliding layers within
//   the window (at most 5 layers, context at most 512), where the window
//   masks nothing, and its attention scale 1/sqrt(head_dim) is Gemma 3's
//   query_pre_attn_scalar where that equals head_dim (as in Gemma 3 1B).
import { EtnaError } from '../../errors.js';
import type { ConstantTensor, TensorValue } from '../../export/graph.js';
import type { MethodBuilder } from '../../export/method-builder.js';

export type Llama8da4wFamily = 'llama' | 'qwen3' | 'gemma3';
export const LLAMA_8DA4W_FAMILIES: readonly Llama8da4wFamily[] = ['llama', 'qwen3', 'gemma3'];

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
}

/** Gemma 3's sliding window: the example's layers attend within it. */
const GEMMA3_WINDOW = 512;

/** `config` as `family` writes it: its family, with the family's rope theta and norm epsilon. */
export function withFamily<C extends FamilyShape>(config: C, family: string): C {
  if (!isLlama8da4wFamily(family))
    throw new EtnaError('INVALID_INPUT', `unknown llama-8da4w family '${family}' (available: ${LLAMA_8DA4W_FAMILIES.join(', ')})`);
  if (family === 'gemma3' && (config.layers > 5 || config.context > GEMMA3_WINDOW))
    throw new EtnaError(
      'INVALID_INPUT',
      `llama-8da4w: the gemma3 family is written with sliding-window layers only: at most 5 layers and a context of at most ${GEMMA3_WINDOW} (got ${config.layers} layers, context ${config.context})`,
    );
  if (family === 'qwen3') return { ...config, family, ropeTheta: 1_000_000, normEps: 1e-6 };
  return family === 'gemma3' ? { ...config, family, ropeTheta: 10_000, normEps: 1e-6 } : { ...config, family };
}

type Family = Llama8da4wFamily | undefined;
/** Per-head q/k norms, halves-rotated RoPE and tied embeddings: Qwen3's and Gemma 3's; Llama has none of them. */
export const hasQkNorm = (family: Family): boolean => family === 'qwen3' || family === 'gemma3';
export const rotatesHalves = hasQkNorm;
export const tiesEmbeddings = hasQkNorm;
/** Gemma 3's norms scale by (1 + weight), and it norms the attention's and the MLP's outputs too. */
export const normOffset = (family: Family): number => (family === 'gemma3' ? 1 : 0);
export const hasSandwichNorms = (family: Family): boolean => family === 'gemma3';
/** What the token embedding is multiplied by: sqrt(modelDim) for Gemma 3, as float32. */
export const embeddingScale = (family: Family, modelDim: number): number => (family === 'gemma3' ? Math.fround(Math.sqrt(modelDim)) : 1);
/** The MLP's gate activation. */
export const gatesWithGelu = (family: Family): boolean => family === 'gemma3';
/** The BOS token get_bos_id names by default: Llama's 1, Gemma's 2; Qwen3 has none. */
export const defaultBosId = (family: Family): number | null => (family === 'qwen3' ? null : family === 'gemma3' ? 2 : 1);
/** The EOS tokens get_eos_ids names by default: Llama's 2, Gemma's 1. */
export const defaultEosIds = (family: Family): number[] => (family === 'gemma3' ? [1] : [2]);

/** GELU with the tanh approximation, in double (gelu_pytorch_tanh). */
export function geluTanh(v: number): number {
  return 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
}

/**
 * x [length, heads, headDim] rotated by position: pairs (x[2i], x[2i+1]), or
 * (x[i], x[i + headDim/2]) when `halves`, each by the angle whose cos and sin
 * [length, 1, headDim/2] are given. Returns [1, length, heads, headDim].
 */
export function emitRope(m: MethodBuilder, x: TensorValue, cos: TensorValue, sin: TensorValue, halves: boolean): TensorValue {
  const [length, heads, hd] = x.shape as [number, number, number];
  const half = hd / 2;
  const rotated = (first: TensorValue, second: TensorValue): [TensorValue, TensorValue] => [
    m.sub(m.mul(first, cos), m.mul(second, sin)),
    m.add(m.mul(first, sin), m.mul(second, cos)),
  ];
  if (halves) {
    const [first, second] = rotated(m.slice(x, 2, 0, half), m.slice(x, 2, half, hd));
    return m.reshape(m.cat([first, second], 2), [1, length, heads, hd]);
  }
  const pairs = m.reshape(x, [length, heads, half, 2]);
  const even = m.reshape(m.slice(pairs, 3, 0, 1), [length, heads, half]);
  const odd = m.reshape(m.slice(pairs, 3, 1, 2), [length, heads, half]);
  const [rotatedEven, rotatedOdd] = rotated(even, odd);
  return m.reshape(m.cat([m.unsqueeze(rotatedEven, 3), m.unsqueeze(rotatedOdd, 3)], 3), [1, length, heads, hd]);
}

/** RMSNorm over x's last dim, times `weight` (plus `offset`): x * rsqrt(mean(x^2) + eps) * (offset + weight). */
export function emitRmsNorm(m: MethodBuilder, x: TensorValue, weight: ConstantTensor, eps: number, offset: number): TensorValue {
  const meanSquare = m.graph.addTensor(x.dtype, [...x.shape.slice(0, -1), 1]);
  m.kernel('aten::mean.out', [m.mul(x, x), { intList: [-1] }, { bool: true }, null, meanSquare]);
  const inverse = m.graph.addTensor(x.dtype, meanSquare.shape);
  m.kernel('aten::rsqrt.out', [m.add(meanSquare, eps), inverse]);
  return m.mul(m.mul(x, inverse), offset === 0 ? weight : m.add(weight, offset));
}

/**
 * The reference's rotation, in place, of rows [rows, heads, headDim] at
 * positions start.. (tables [context, headDim/2]), pairs or halves as emitRope.
 */
export function ropeRows(
  x: Float32Array,
  shape: { readonly rows: number; readonly heads: number; readonly headDim: number },
  start: number,
  tables: { readonly cos: Float32Array; readonly sin: Float32Array },
  halves: boolean,
): void {
  const { rows, heads, headDim: hd } = shape;
  const half = hd / 2;
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
