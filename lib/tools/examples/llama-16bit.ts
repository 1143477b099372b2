// The llama-8da4w example at export_llama's `-d bf16` and `-d fp16`: the
// model's parameters and buffers (norm weights, rotary tables) are stored in
// the 16-bit dtype, and every operator outside the XNNPACK delegates runs in
// it. The delegates stay float32, as the exporter's 8da4w linears are: each
// linear's input is converted to float32 (`_to_dim_order_copy`) on the way in
// and its result rounded back on the way out. custom_sdpa takes float32 only,
// so export_llama converts the query, key and value to float32 before it
// (its caches are float32) and the attention's result back after it. The
// logits come out in the 16-bit dtype.
//
// The reference below computes the same graph op by op: each operator's
// result is the float32 formula rounded once into the 16-bit dtype (to
// nearest, ties to even), as the portable kernels do.
import { EtnaError } from '../../errors.js';
import { dequantizeInt4Groups, quantizeInt4Groups } from '../../export/quantize.js';
import { roundingTo, type ActivationDtype } from './activation-dtype.js';
import { DecoderReference, softmaxInPlace, type ExampleCall } from './reference.js';
import {
  createLlama8da4wWeights,
  headDim,
  inverseRms,
  linear8da4w,
  llama8da4wSession,
  quantizedEmbedding,
  ropeTables,
  type Llama8da4wWeights,
  type QuantizedLinear,
} from './llama-8da4w.js';

/**
 * The llama family's graph in a 16-bit activation dtype, operator by
 * operator: products and sums of two operands in float32, RMSNorm's mean
 * summed and divided in float32 as the kernel does, rsqrt and SiLU in float32, each
 * result rounded into the dtype; the delegates' linears and custom_sdpa in
 * float32 on the rounded values, their results rounded on the way out.
 */
export class Llama8da4wRoundedReference extends DecoderReference {
  private readonly round: (value: number) => number;
  private readonly embedding: Float32Array;
  private readonly rope: { cos: Float32Array; sin: Float32Array };
  private readonly norms: { attention: Float32Array; ffn: Float32Array }[];
  private readonly finalNorm: Float32Array;
  private readonly layers: { [K in 'wq' | 'wk' | 'wv' | 'wo' | 'w1' | 'w3' | 'w2']: QuantizedLinear }[];
  private readonly output: QuantizedLinear;

  constructor(
    readonly dtype: ActivationDtype,
    readonly weights: Llama8da4wWeights = createLlama8da4wWeights(),
  ) {
    const C = weights.config;
    if ((C.family ?? 'llama') !== 'llama')
      throw new EtnaError('INVALID_INPUT', `the 16-bit reference computes the llama family only, not ${C.family}`);
    const caches = (): Float32Array[] => weights.layers.map(() => new Float32Array(C.context * C.kvHeads * headDim(C)));
    super('llama-8da4w', C, caches(), caches());
    const round = roundingTo(dtype);
    this.round = round;
    const rounded = (values: Float32Array): Float32Array => Float32Array.from(values, round);
    const d = C.modelDim;
    const kv = C.kvHeads * headDim(C);
    const quantized = (data: Float32Array, out: number, inFeatures: number): QuantizedLinear => ({
      out,
      in: inFeatures,
      weight: dequantizeInt4Groups(quantizeInt4Groups(data, out, inFeatures, C.groupSize)),
      float: false,
    });
    // embedding_4bit computes code * scale in float32 and rounds it into the dtype.
    this.embedding = rounded(dequantizeInt4Groups(quantizedEmbedding(weights)));
    const tables = ropeTables(C);
    this.rope = { cos: rounded(tables.cos), sin: rounded(tables.sin) };
    this.norms = weights.layers.map((w) => ({ attention: rounded(w.attentionNorm), ffn: rounded(w.ffnNorm) }));
    this.finalNorm = rounded(weights.finalNorm);
    this.layers = weights.layers.map((w) => ({
      wq: quantized(w.wq, d, d),
      wk: quantized(w.wk, kv, d),
      wv: quantized(w.wv, kv, d),
      wo: quantized(w.wo, d, d),
      w1: quantized(w.w1, C.hiddenDim, d),
      w3: quantized(w.w3, C.hiddenDim, d),
      w2: quantized(w.w2, d, C.hiddenDim),
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

  /** The normalisation in float32 (ExecuTorch's `_norm(x.float())`), rounded once to the dtype, then mul(weight), rounded. */
  private rmsNorm(x: Float32Array, rows: number, weight: Float32Array): Float32Array {
    const r = this.round;
    const f = Math.fround;
    const d = weight.length;
    const eps = this.weights.config.normEps;
    const y = new Float32Array(x.length);
    for (let row = 0; row < rows; row++) {
      const inverse = inverseRms(x, row * d, d, eps);
      for (let i = 0; i < d; i++) y[row * d + i] = r(f(r(f(x[row * d + i]! * inverse)) * weight[i]!));
    }
    return y;
  }

  /** Rotary embedding over interleaved pairs: mul, mul, sub and mul, mul, add, each rounded. */
  private rotate(x: Float32Array, rows: number, heads: number, start: number): void {
    const r = this.round;
    const f = Math.fround;
    const product = (a: number, b: number): number => r(f(a * b));
    const hd = headDim(this.weights.config);
    const half = hd / 2;
    const { cos, sin } = this.rope;
    for (let t = 0; t < rows; t++) {
      for (let h = 0; h < heads; h++) {
        for (let i = 0; i < half; i++) {
          const at = (t * heads + h) * hd + 2 * i;
          const [even, odd] = [x[at]!, x[at + 1]!];
          const [c, s] = [cos[(start + t) * half + i]!, sin[(start + t) * half + i]!];
          x[at] = r(f(product(even, c) - product(odd, s)));
          x[at + 1] = r(f(product(even, s) + product(odd, c)));
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
    const linear = (input: Float32Array, w: QuantizedLinear): Float32Array => this.roundAll(linear8da4w(input, rows, w));
    const x = new Float32Array(rows * d);
    tokens.forEach((token, t) => x.set(this.embedding.subarray(token * d, (token + 1) * d), t * d));
    this.layers.forEach((layer, l) => {
      const norms = this.norms[l]!;
      const h = this.rmsNorm(x, rows, norms.attention);
      const q = linear(h, layer.wq);
      const k = linear(h, layer.wk);
      const v = linear(h, layer.wv);
      this.rotate(q, rows, C.heads, start);
      this.rotate(k, rows, C.kvHeads, start);
      // The caches are float32 and hold the rounded keys and values exactly.
      this.keyCaches[l]!.set(k, start * kv);
      this.valueCaches[l]!.set(v, start * kv);
      const attention = new Float32Array(rows * d);
      for (let t = 0; t < rows; t++) {
        const visible = start + t + 1;
        const scores = new Float32Array(visible);
        for (let head = 0; head < C.heads; head++) {
          const kvHead = Math.floor(head / (C.heads / C.kvHeads));
          for (let c = 0; c < visible; c++) {
            let dot = 0;
            for (let i = 0; i < hd; i++) dot += q[(t * C.heads + head) * hd + i]! * this.keyCaches[l]![c * kv + kvHead * hd + i]!;
            scores[c] = dot / Math.sqrt(hd);
          }
          softmaxInPlace(scores, 0, visible);
          for (let i = 0; i < hd; i++) {
            let sum = 0;
            for (let c = 0; c < visible; c++) sum += scores[c]! * this.valueCaches[l]![c * kv + kvHead * hd + i]!;
            attention[(t * C.heads + head) * hd + i] = sum;
          }
        }
      }
      const attended = linear(this.roundAll(attention), layer.wo);
      for (let i = 0; i < x.length; i++) x[i] = r(f(x[i]! + attended[i]!));
      const h2 = this.rmsNorm(x, rows, norms.ffn);
      const gate = linear(h2, layer.w1);
      const up = linear(h2, layer.w3);
      const hidden = new Float32Array(gate.length);
      for (let i = 0; i < gate.length; i++) {
        const g = gate[i]!;
        const silu = r(f(g * f(1 / f(1 + f(Math.exp(-g))))));
        hidden[i] = r(f(silu * up[i]!));
      }
      const down = linear(hidden, layer.w2);
      for (let i = 0; i < x.length; i++) x[i] = r(f(x[i]! + down[i]!));
    });
    return linear(this.rmsNorm(x, rows, this.finalNorm), this.output);
  }
}
