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
import { EtnaError } from '../../errors.js';
import type { ConstantTensor, TensorValue } from '../../export/graph.js';
import type { MethodBuilder } from '../../export/method-builder.js';

export type Llama8da4wFamily = 'llama' | 'qwen3';
export const LLAMA_8DA4W_FAMILIES: readonly Llama8da4wFamily[] = ['llama', 'qwen3'];

export function isLlama8da4wFamily(name: string): name is Llama8da4wFamily {
  return (LLAMA_8DA4W_FAMILIES as readonly string[]).includes(name);
}

/** The configuration fields a family sets. */
interface FamilyShape {
  readonly family?: Llama8da4wFamily | undefined;
  readonly normEps: number;
  readonly ropeTheta: number;
}

/** `config` as `family` writes it: its family, with Qwen3's rope theta and norm epsilon for 'qwen3'. */
export function withFamily<C extends FamilyShape>(config: C, family: string): C {
  if (!isLlama8da4wFamily(family))
    throw new EtnaError('INVALID_INPUT', `unknown llama-8da4w family '${family}' (available: ${LLAMA_8DA4W_FAMILIES.join(', ')})`);
  return family === 'qwen3' ? { ...config, family, ropeTheta: 1_000_000, normEps: 1e-6 } : { ...config, family };
}

/** Qwen3's per-head norms and halves-rotated RoPE; Llama's interleaved pairs. */
export const hasQkNorm = (family: Llama8da4wFamily | undefined): boolean => family === 'qwen3';
export const rotatesHalves = (family: Llama8da4wFamily | undefined): boolean => family === 'qwen3';
/** Qwen3's output projection is its token embedding. */
export const tiesEmbeddings = (family: Llama8da4wFamily | undefined): boolean => family === 'qwen3';
/** The BOS token get_bos_id names by default: Llama's 1; Qwen3 has none. */
export const defaultBosId = (family: Llama8da4wFamily | undefined): number | null => (family === 'qwen3' ? null : 1);

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

/** RMSNorm over x's last dim, times `weight`: x * rsqrt(mean(x^2) + eps) * weight. */
export function emitRmsNorm(m: MethodBuilder, x: TensorValue, weight: ConstantTensor, eps: number): TensorValue {
  const meanSquare = m.graph.addTensor('float32', [...x.shape.slice(0, -1), 1]);
  m.kernel('aten::mean.out', [m.mul(x, x), { intList: [-1] }, { bool: true }, null, meanSquare]);
  const inverse = m.graph.addTensor('float32', meanSquare.shape);
  m.kernel('aten::rsqrt.out', [m.add(meanSquare, eps), inverse]);
  return m.mul(m.mul(x, inverse), weight);
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
