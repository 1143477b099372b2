// The llama-8da4w example at export_llama's `-d bf16` and `-d fp16`: the
// model's parameters and buffers (norm weights, rotary tables) are stored in
// the 16-bit dtype, and every operator outside the XNNPACK delegates runs in
// it. The delegates stay float32, as the exporter's 8da4w linears are: each
// linear's input is converted to float32 (`_to_dim_order_copy`) on the way in
// and its result rounded back on the way out. custom_sdpa takes float32 only,
// so export_llama converts the query, key and value to float32 before it
// (its caches are float32) and the attention's result back after it. Where
// ExecuTorch's modules compute in float32 the graph does too: RMSNorm's
// normalisation (`_norm(x.float())`, then `type_as`), and Meta's rotary
// embedding over pairs (`xq.float()`, rounded back once); transformers'
// rotary embedding over halves (qwen3, gemma3, phi4) runs in the dtype.
// With the quantized KV cache the keys, values and queries are quantized
// from the 16-bit values themselves (choose_qparams_per_token_asymmetric and
// quantize_per_token widen them), and custom_quantized_sdpa's float32 result
// goes to the output projection as it is. SpinQuant's rotation
// (fast_hadamard_transform) runs in the dtype, rounding every butterfly. The
// logits come out in the 16-bit dtype.
//
// The reference below computes the same graph op by op: each operator's
// result is the float32 formula rounded once into the 16-bit dtype (to
// nearest, ties to even), as the portable kernels do.
import { EtnaError } from '../../errors.js';
import { dequantizeInt4Groups, quantizeInt4Groups } from '../../export/quantize.js';
import { roundingTo, type ActivationDtype } from './activation-dtype.js';
import { DecoderReference, type ExampleCall } from './reference.js';
import {
  activationDtypeConflict,
  attendCausally,
  createLlama8da4wWeights,
  downProjection,
  headDim,
  inverseRms,
  linear8da4w,
  llama8da4wSession,
  quantizedEmbedding,
  layerRopeTables,
  type Llama8da4wTransforms,
  type Llama8da4wWeights,
  type QuantizedLinear,
} from './llama-8da4w.js';
import { embeddingScale, gatesWithGelu, normOffset, rotaryDim, rotatesHalves } from './llama-families.js';
import { int8RoundTripRows, roundedHadamardRows } from './llama-transforms.js';

/** A layer's norm weights as the graph multiplies by them: stored in the dtype, (1 + weight) rounded in a family that adds 1. */
interface RoundedNorms {
  readonly attention: Float32Array;
  readonly ffn: Float32Array;
  readonly q: Float32Array | undefined;
  readonly k: Float32Array | undefined;
  readonly postAttention: Float32Array | undefined;
  readonly postFfn: Float32Array | undefined;
}

/** GELU's tanh approximation as the kernel computes it in float32 (each step rounded to float32). */
function geluTanhFloat32(x: number): number {
  const f = Math.fround;
  const inner = f(f(0.7978845608028654) * f(x + f(f(f(f(0.044715) * x) * x) * x)));
  return f(f(f(0.5) * x) * f(1 + f(Math.tanh(inner))));
}

/**
 * The example's graph in a 16-bit activation dtype, operator by operator, in
 * every family: products and sums of two operands in float32, RMSNorm's
 * normalisation and Meta's pairwise rotary embedding in float32, SiLU and
 * GELU in float32, each result rounded into the dtype; the delegates' linears
 * and custom_sdpa in float32 on the rounded values, their results rounded on
 * the way out. `transforms` takes export_llama's quantized KV cache (either
 * dtype) and SpinQuant's rotation (float16).
 */
export class Llama8da4wRoundedReference extends DecoderReference {
  private readonly round: (value: number) => number;
  private readonly embedding: Float32Array;
  /** Each layer's cos and sin tables, stored in the dtype. */
  private readonly ropes: { cos: Float32Array; sin: Float32Array }[];
  private readonly norms: RoundedNorms[];
  private readonly finalNorm: Float32Array;
  private readonly layers: { [K in 'wq' | 'wk' | 'wv' | 'wo' | 'w1' | 'w3' | 'w2']: QuantizedLinear }[];
  private readonly output: QuantizedLinear;

  constructor(
    readonly dtype: ActivationDtype,
    readonly weights: Llama8da4wWeights = createLlama8da4wWeights(),
    private readonly transforms: Pick<Llama8da4wTransforms, 'hadamard' | 'quantizeKvCache'> = {},
  ) {
    const C = weights.config;
    if (dtype === 'float32')
      throw new EtnaError('INVALID_INPUT', 'the rounding reference computes a 16-bit dtype; float32 has Llama8da4wReference');
    const conflict = activationDtypeConflict(dtype, transforms);
    if (conflict !== undefined) throw new EtnaError('INVALID_INPUT', `llama-8da4w: ${conflict}`);
    const caches = (): Float32Array[] => weights.layers.map(() => new Float32Array(C.context * C.kvHeads * headDim(C)));
    super('llama-8da4w', C, caches(), caches());
    const round = roundingTo(dtype);
    this.round = round;
    const rounded = (values: Float32Array): Float32Array => Float32Array.from(values, round);
    const offset = normOffset(C.family);
    const norm = (values: Float32Array): Float32Array =>
      offset === 0 ? rounded(values) : Float32Array.from(values, (v) => round(offset + round(v)));
    const optionalNorm = (values: Float32Array | undefined): Float32Array | undefined => (values === undefined ? undefined : norm(values));
    const d = C.modelDim;
    const kv = C.kvHeads * headDim(C);
    const qDim = C.heads * headDim(C);
    const quantized = (data: Float32Array, out: number, inFeatures: number): QuantizedLinear => ({
      out,
      in: inFeatures,
      weight: dequantizeInt4Groups(quantizeInt4Groups(data, out, inFeatures, C.groupSize)),
      float: false,
    });
    // embedding_4bit computes code * scale in float32 and rounds it into the dtype.
    this.embedding = rounded(dequantizeInt4Groups(quantizedEmbedding(weights)));
    this.ropes = layerRopeTables(C, rounded);
    this.norms = weights.layers.map((w) => ({
      attention: norm(w.attentionNorm),
      ffn: norm(w.ffnNorm),
      q: optionalNorm(w.qNorm),
      k: optionalNorm(w.kNorm),
      postAttention: optionalNorm(w.postAttentionNorm),
      postFfn: optionalNorm(w.postFfnNorm),
    }));
    this.finalNorm = norm(weights.finalNorm);
    this.layers = weights.layers.map((w) => ({
      wq: quantized(w.wq, qDim, d),
      wk: quantized(w.wk, kv, d),
      wv: quantized(w.wv, kv, d),
      wo: quantized(w.wo, d, qDim),
      w1: quantized(w.w1, C.hiddenDim, d),
      w3: quantized(w.w3, C.hiddenDim, d),
      w2: quantized(downProjection(w, C, transforms), d, C.hiddenDim),
    }));
    this.output = quantized(weights.output, C.vocab, d);
  }

  session(): ExampleCall[] {
    return llama8da4wSession(this.weights.config);
  }

  /** A float32 result of a delegate or of custom_sdpa, rounded on the way out. */
  private roundAll(values: Float32Array): Float32Array {
    return values.map(this.round);
  }

  /** Rows of weight.length: the normalisation in float32 (ExecuTorch's `_norm(x.float())`), rounded once to the dtype, then mul(weight), rounded. */
  private rmsNorm(x: Float32Array, weight: Float32Array): Float32Array {
    const r = this.round;
    const f = Math.fround;
    const d = weight.length;
    const eps = this.weights.config.normEps;
    const y = new Float32Array(x.length);
    for (let at = 0; at < x.length; at += d) {
      const inverse = inverseRms(x, at, d, eps);
      for (let i = 0; i < d; i++) y[at + i] = r(f(r(f(x[at + i]! * inverse)) * weight[i]!));
    }
    return y;
  }

  /**
   * Heads x [rows, heads, headDim] of layer `layer`, RMS-normed first when the family does, then rotated in place:
   * halves as transformers' rotate_half in the dtype (mul, mul, sub and mul, mul, add, each rounded), the dims past
   * the rotary part passed through; pairs as Meta's apply_rotary_emb in float32, rounded once.
   */
  private rotate(x: Float32Array, rows: number, heads: number, start: number, norm: Float32Array | undefined, layer: number): void {
    const C = this.weights.config;
    const r = this.round;
    const f = Math.fround;
    const product = (a: number, b: number): number => r(f(a * b));
    const hd = headDim(C);
    if (norm !== undefined) x.set(this.rmsNorm(x, norm));
    const half = rotaryDim(C.family, hd) / 2;
    const halves = rotatesHalves(C.family);
    const { cos, sin } = this.ropes[layer]!;
    for (let t = 0; t < rows; t++) {
      for (let h = 0; h < heads; h++) {
        const base = (t * heads + h) * hd;
        for (let i = 0; i < half; i++) {
          const [a, b] = halves ? [base + i, base + half + i] : [base + 2 * i, base + 2 * i + 1];
          const [first, second] = [x[a]!, x[b]!];
          const [c, s] = [cos[(start + t) * half + i]!, sin[(start + t) * half + i]!];
          if (halves) {
            x[a] = r(f(product(first, c) - product(second, s)));
            x[b] = r(f(product(first, s) + product(second, c)));
          } else {
            x[a] = r(f(f(first * c) - f(second * s)));
            x[b] = r(f(f(first * s) + f(second * c)));
          }
        }
      }
    }
  }

  protected pass(tokens: readonly number[], start: number): Float32Array {
    const C = this.weights.config;
    const r = this.round;
    const f = Math.fround;
    const rows = tokens.length;
    const d = C.modelDim;
    const hd = headDim(C);
    const kv = C.kvHeads * hd;
    const int8 = this.transforms.quantizeKvCache === true;
    const linear = (input: Float32Array, w: QuantizedLinear): Float32Array => this.roundAll(linear8da4w(input, rows, w));
    const residual = (x: Float32Array, y: Float32Array, norm: Float32Array | undefined): void => {
      const added = norm === undefined ? y : this.rmsNorm(y, norm);
      for (let i = 0; i < x.length; i++) x[i] = r(f(x[i]! + added[i]!));
    };
    const x = new Float32Array(rows * d);
    tokens.forEach((token, t) => x.set(this.embedding.subarray(token * d, (token + 1) * d), t * d));
    const scale = embeddingScale(C.family, d);
    if (scale !== 1) for (let i = 0; i < x.length; i++) x[i] = r(f(x[i]! * scale));
    this.layers.forEach((layer, l) => {
      const norms = this.norms[l]!;
      const h = this.rmsNorm(x, norms.attention);
      const q = linear(h, layer.wq);
      const k = linear(h, layer.wk);
      const v = linear(h, layer.wv);
      this.rotate(q, rows, C.heads, start, norms.q, l);
      this.rotate(k, rows, C.kvHeads, start, norms.k, l);
      // float32 caches hold the rounded keys and values exactly; int8 ones as their codes give them back, the
      // query quantized alike, and custom_quantized_sdpa's float32 result is not rounded.
      this.keyCaches[l]!.set(int8 ? int8RoundTripRows(k, hd) : k, start * kv);
      this.valueCaches[l]!.set(int8 ? int8RoundTripRows(v, hd) : v, start * kv);
      const attention = attendCausally(C, l, int8 ? int8RoundTripRows(q, hd) : q, this.keyCaches[l]!, this.valueCaches[l]!, rows, start);
      residual(x, linear(int8 ? attention : this.roundAll(attention), layer.wo), norms.postAttention);
      const h2 = this.rmsNorm(x, norms.ffn);
      const gate = linear(h2, layer.w1);
      const up = linear(h2, layer.w3);
      let hidden: Float32Array = new Float32Array(gate.length);
      const gelu = gatesWithGelu(C.family);
      for (let i = 0; i < gate.length; i++) {
        const g = gate[i]!;
        const activation = r(gelu ? geluTanhFloat32(g) : f(g * f(1 / f(1 + f(Math.exp(-g))))));
        hidden[i] = r(f(activation * up[i]!));
      }
      if (this.transforms.hadamard === true) hidden = roundedHadamardRows(hidden, C.hiddenDim, r);
      residual(x, linear(hidden, layer.w2), norms.postFfn);
    });
    return linear(this.rmsNorm(x, this.finalNorm), this.output);
  }
}
