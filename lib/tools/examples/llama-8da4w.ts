// A Llama written the way ExecuTorch's export_llama writes one
// (`-kv --use_sdpa_with_kv_cache -X -qmode 8da4w --group_size 32 -d fp32`),
// in one of two layouts. 'prefill-decode' (the default):
//   prefill(tokens int64[1,8], start_pos int64[1]) -> logits float32[1,8,256]
//   decode(token int64[1,1], pos int64[1])         -> logits float32[1,1,256]
//   reset()                                         (zeroes the caches)
// 'forward', export_llama's own: one method over the caches, and the
// constant methods export_llama writes beside it (LLAMA_8DA4W_METADATA):
//   forward(tokens int64[1,n], input_pos int64[1]) -> logits float32[1,vocab]
// where n is 1, or 1 to prefillLength with a bounded prefill (export_llama's
// `--enable_dynamic_shape`). 'optimum', as optimum-executorch's
// text-generation export writes it: one position per token, its constant
// methods (OPTIMUM_METADATA), and transformers' RoPE over halves, q and k
// rows in transformers' order:
//   forward(input_ids int64[1,n], cache_position int64[n]) -> logits float32[1,vocab]
// The presets (LLAMA_8DA4W_PRESETS) are real model shapes whose prefill takes
// 1 to 128 tokens (a bounded dynamic dim, as export_llama's
// `--enable_dynamic_shape`) and returns the last position's logits only, as
// export_llama does by default: prefill(tokens int64[1,1..128], start_pos)
// -> logits float32[1,1,vocab].
// RMSNorm, rotary position embedding (interleaved pairs, as Meta's Llama),
// grouped-query attention, a SiLU-gated MLP. Every linear is 8da4w in the
// XNNPACK delegate, the token embedding is 4-bit
// (`quantized_decomposed::embedding_4bit.dtype_out`), keys and values go into
// caches in shared state with `llama::update_cache`, and attention is
// `llama::custom_sdpa` masked causally from start_pos. Two build options add
// export_llama's transformations (llama-transforms.ts): `hadamard`
// (`--use_spin_quant native`) and `quantizeKvCache` (`--quantize_kv_cache`),
// or `staticQuantizeKvCache` (`--static_quantize_kv_cache`, attention.py's
// SDPA over int8 caches with fixed scales);
// two write the quantized Llama 3.2 checkpoints' layout (`--preq_mode
// 8da4w_output_8da8w --preq_embedding_quantize 8,0`): `outputQuantization:
// '8da8w'` and `embeddingBits: 8` (`quantized_decomposed::embedding_byte`);
// `dtype` writes export_llama's `-d bf16` / `-d fp16` graph (llama-16bit.ts).
import { EtnaError } from '../../errors.js';
import { dtypeInfo } from '../../export/dtype.js';
import type { ConstantTensor, SharedBuffer, TensorValue } from '../../export/graph.js';
import type { MethodBuilder } from '../../export/method-builder.js';
import { ProgramBuilder } from '../../export/program-builder.js';
import {
  bf16Value,
  dequantizeInt4Groups,
  dequantizeInt8Channels,
  INT4_MAX,
  INT4_MIN,
  QUANTIZED_RANGES,
  perTokenInt8Row,
  quantizeInt4Groups,
  quantizeInt8Channels,
  type Int4GroupWeights,
  type Int8ChannelWeights,
} from '../../export/quantize.js';
import {
  defaultBosId,
  defaultEosIds,
  familyRopeTables,
  fusesProjections,
  layerRopeTheta,
  rotaryDim,
  embeddingScale,
  emitRmsNorm,
  emitRope,
  gatesWithGelu,
  geluTanh,
  hasQkNorm,
  hasSandwichNorms,
  isSlidingLayer,
  normOffset,
  ropeRows,
  rotatesHalves,
  slidingWindow,
  tiesEmbeddings,
  type Llama8da4wFamily,
} from './llama-families.js';
import {
  causalMask,
  checkHadamardWidth,
  checkStaticKvCacheScale,
  emitFloatAttention,
  emitHadamard,
  emitQuantizedAttention,
  emitRingStep,
  emitStaticQuantizedAttention,
  hadamardRows,
  int8RoundTripRows,
  quantizedCache,
  quantizedCacheInit,
  resetQuantizedCache,
  ringPositions,
  rotatedWeight,
  STATIC_KV_CACHE_SCALE,
  staticInt8RoundTrip,
  staticQuantizedCache,
  type QuantizedCache,
  type QuantizedCacheInit,
  type RingPositions,
  type StaticQuantizedCache,
} from './llama-transforms.js';
import { activationDtype, storedAs, type ActivationDtype } from './activation-dtype.js';
import { markPrefillLength } from './prefill-length.js';
import { int64Tensor, DecoderReference, SeededRandom, softmaxInPlace, type ExampleCall } from './reference.js';

export interface Llama8da4wConfig {
  readonly layers: number;
  readonly modelDim: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly hiddenDim: number;
  readonly vocab: number;
  readonly context: number;
  /** Tokens a prefill call takes: exactly this many, or 1 to this many when `prefillBounded`. */
  readonly prefillLength: number;
  /** Prefill takes any length from 1 to prefillLength (its token dim is DYNAMIC_BOUND). */
  readonly prefillBounded?: boolean;
  /** Prefill returns logits for every position ('all'), or the last one only ('last', [1,1,vocab]). */
  readonly prefillLogits?: 'all' | 'last';
  readonly groupSize: number;
  readonly normEps: number;
  readonly ropeTheta: number;
  readonly seed: number;
  /** The operator mix (llama-families.ts): 'llama' (the default), 'qwen3', 'gemma3', 'phi4' or 'smollm2'. */
  readonly family?: Llama8da4wFamily | undefined;
  /** Each head's width when it is not modelDim / heads (Gemma 3's 256): q has heads * headDim outputs, k and v kvHeads * headDim. */
  readonly headDim?: number | undefined;
  /** The positions a sliding-window layer's query sees, its own included (gemma3: 512). */
  readonly slidingWindow?: number | undefined;
}

export const LLAMA_8DA4W_CONFIG: Llama8da4wConfig = {
  layers: 2,
  modelDim: 128,
  heads: 4,
  kvHeads: 2,
  hiddenDim: 256,
  vocab: 256,
  context: 256,
  prefillLength: 8,
  groupSize: 32,
  normEps: 1e-5,
  ropeTheta: 10000,
  seed: 0x6c6c_6d34,
};

/** Prefill at export_llama's defaults with dynamic shape: up to 128 tokens, last-position logits. */
const BOUNDED_PREFILL = { prefillLength: 128, prefillBounded: true, prefillLogits: 'last' } as const;

/** Shapes of real models, with seeded random weights: what `etna bench llm` and `--preset` build. */
export const LLAMA_8DA4W_PRESETS = {
  /** The example's own small shapes, with room in the vocabulary for SentencePiece's 256 byte pieces (GGUF needs them). */
  small: { ...LLAMA_8DA4W_CONFIG, ...BOUNDED_PREFILL, vocab: 512 },
  /** The shape of the stories110M checkpoint (llama2.c). */
  stories110m: {
    ...LLAMA_8DA4W_CONFIG,
    ...BOUNDED_PREFILL,
    layers: 12,
    modelDim: 768,
    heads: 12,
    kvHeads: 12,
    hiddenDim: 2048,
    vocab: 32000,
    context: 1024,
  },
  /** The shape of Llama 3.2 1B (grouped-query attention, a 128256-token vocabulary). */
  'llama-1b-shape': {
    ...LLAMA_8DA4W_CONFIG,
    ...BOUNDED_PREFILL,
    layers: 16,
    modelDim: 2048,
    heads: 32,
    kvHeads: 8,
    hiddenDim: 8192,
    vocab: 128256,
    context: 2048,
    ropeTheta: 500000,
  },
  /** The shape of SmolLM2-135M (nine query heads on three key/value heads, a 49152-token vocabulary); `--family smollm2` ties and ropes it as SmolLM2 does. */
  'smollm2-135m-shape': {
    ...LLAMA_8DA4W_CONFIG,
    ...BOUNDED_PREFILL,
    layers: 30,
    modelDim: 576,
    heads: 9,
    kvHeads: 3,
    hiddenDim: 1536,
    vocab: 49152,
    context: 2048,
  },
} as const satisfies Record<string, Llama8da4wConfig>;

export type Llama8da4wPreset = keyof typeof LLAMA_8DA4W_PRESETS;
export const LLAMA_8DA4W_PRESET_NAMES = Object.keys(LLAMA_8DA4W_PRESETS) as Llama8da4wPreset[];

export function isLlama8da4wPreset(name: string): name is Llama8da4wPreset {
  return Object.hasOwn(LLAMA_8DA4W_PRESETS, name);
}

export function llama8da4wPreset(name: string): Llama8da4wConfig {
  if (!isLlama8da4wPreset(name))
    throw new EtnaError('INVALID_INPUT', `unknown llama-8da4w preset '${name}' (available: ${LLAMA_8DA4W_PRESET_NAMES.join(', ')})`);
  return LLAMA_8DA4W_PRESETS[name];
}

export const headDim = (C: Llama8da4wConfig): number => C.headDim ?? C.modelDim / C.heads;

/** Float weights [out, in] of the linears, before quantization. */
export interface Llama8da4wLayerWeights {
  readonly attentionNorm: Float32Array;
  readonly wq: Float32Array;
  readonly wk: Float32Array;
  readonly wv: Float32Array;
  readonly wo: Float32Array;
  readonly ffnNorm: Float32Array;
  /** Gate, up and down projections of the MLP: down(silu(gate x) * up x). */
  readonly w1: Float32Array;
  readonly w3: Float32Array;
  readonly w2: Float32Array;
  /** Per-head RMSNorm weights [headDim] of the queries and keys (families with them: qwen3). */
  readonly qNorm?: Float32Array;
  readonly kNorm?: Float32Array;
  /** RMSNorm weights [modelDim] of the attention's and the MLP's outputs (families with them: gemma3). */
  readonly postAttentionNorm?: Float32Array;
  readonly postFfnNorm?: Float32Array;
}

export interface Llama8da4wWeights {
  readonly config: Llama8da4wConfig;
  readonly tokenEmbedding: Float32Array;
  readonly layers: readonly Llama8da4wLayerWeights[];
  readonly finalNorm: Float32Array;
  /** The output projection [vocab, modelDim]: the token embedding itself when the family ties them. */
  readonly output: Float32Array;
}

export function createLlama8da4wWeights(config: Llama8da4wConfig = LLAMA_8DA4W_CONFIG): Llama8da4wWeights {
  const C = config;
  const random = new SeededRandom(C.seed);
  const d = C.modelDim;
  const kv = C.kvHeads * headDim(C);
  const qDim = C.heads * headDim(C);
  const linear = (out: number, inFeatures: number): Float32Array => random.uniform(out * inFeatures, Math.sqrt(3 / inFeatures));
  // A fused matrix [sum of outs, in] split by rows, as Phi-4-mini's converter splits qkv_proj and gate_up_proj.
  const splitRows = (outs: readonly number[], inFeatures: number): Float32Array[] => {
    const fused = linear(
      outs.reduce((a, b) => a + b),
      inFeatures,
    );
    let row = 0;
    return outs.map((out) => fused.subarray(inFeatures * row, inFeatures * (row += out)));
  };
  // Drawn in the same order either way: a fused matrix's rows are the separate matrices' draws, one after another.
  const attention = (): Pick<Llama8da4wLayerWeights, 'wq' | 'wk' | 'wv'> => {
    const [wq, wk, wv] = fusesProjections(C.family) ? splitRows([qDim, kv, kv], d) : [linear(qDim, d), linear(kv, d), linear(kv, d)];
    return { wq: wq!, wk: wk!, wv: wv! };
  };
  const gateUp = (): Pick<Llama8da4wLayerWeights, 'w1' | 'w3'> => {
    const [w1, w3] = fusesProjections(C.family)
      ? splitRows([C.hiddenDim, C.hiddenDim], d)
      : [linear(C.hiddenDim, d), linear(C.hiddenDim, d)];
    return { w1: w1!, w3: w3! };
  };
  // Around 1 as the norms scale: weight, or (1 + weight) in a family whose norms add 1.
  const norm = (width = d): Float32Array => Float32Array.from(random.uniform(width, 0.2), (v) => 1 - normOffset(C.family) + v);
  // Tied, the embedding is drawn as the projection it also is (bound sqrt(3 / d)); at 1 the residual would keep
  // repeating the input token. Gemma 3's is drawn smaller by the square root of its sqrt(d) multiplier: embedded rows
  // of RMS d^(-1/4), small beside the layers' normed outputs, and logits still far enough apart for greedy decoding.
  const tokenEmbedding = random.uniform(
    C.vocab * d,
    tiesEmbeddings(C.family) ? Math.sqrt(3 / d) / Math.sqrt(embeddingScale(C.family, d)) : 1,
  );
  const layers = Array.from({ length: C.layers }, () => ({
    attentionNorm: norm(),
    ...attention(),
    wo: linear(d, qDim),
    ffnNorm: norm(),
    ...gateUp(),
    w2: linear(d, C.hiddenDim),
  }));
  const finalNorm = norm();
  const output = tiesEmbeddings(C.family) ? tokenEmbedding : linear(C.vocab, d);
  // Drawn last, so the weights every family shares are the same draws.
  const extraNorms = (): Partial<Llama8da4wLayerWeights> => ({
    ...(hasQkNorm(C.family) && { qNorm: norm(headDim(C)), kNorm: norm(headDim(C)) }),
    ...(hasSandwichNorms(C.family) && { postAttentionNorm: norm(), postFfnNorm: norm() }),
  });
  return {
    config,
    tokenEmbedding,
    layers: layers.map((layer) => ({ ...layer, ...extraNorms() })),
    finalNorm,
    output,
  };
}

/** cos and sin tables [context, rotary / 2] of the rotary embedding at rope theta `theta`, in float32 (llama-families.ts). */
export function ropeTables(C: Llama8da4wConfig, theta = C.ropeTheta): { cos: Float32Array; sin: Float32Array } {
  return familyRopeTables(C.family, rotaryDim(C.family, headDim(C)), C.context, theta);
}

/**
 * Each layer's cos and sin tables, one pair per rope theta the layers use
 * (Gemma 3's sliding-window layers have their own), each table passed
 * through `stored` (a reference's rounding into its dtype).
 */
export function layerRopeTables(
  C: Llama8da4wConfig,
  stored: (table: Float32Array) => Float32Array = (table) => table,
): { cos: Float32Array; sin: Float32Array }[] {
  const tables = new Map<number, { cos: Float32Array; sin: Float32Array }>();
  return Array.from({ length: C.layers }, (_, l) => {
    const theta = layerRopeTheta(C, l);
    let pair = tables.get(theta);
    if (pair === undefined) {
      const exact = ropeTables(C, theta);
      pair = { cos: stored(exact.cos), sin: stored(exact.sin) };
      tables.set(theta, pair);
    }
    return pair;
  });
}

/** float16 bits of a bf16 value: exact, as long as it is a normal float16. */
function float16BitsOfBf16(bits: number): number {
  const exponent = ((bits >> 7) & 0xff) - 127 + 15;
  if (exponent < 1 || exponent > 30)
    throw new EtnaError('INVALID_INPUT', `embedding scale ${bf16Value(bits)} is outside the float16 normal range`);
  return ((bits & 0x8000) | (exponent << 10) | ((bits & 0x7f) << 3)) & 0xffff;
}

/** embedding_4bit's layout: code + 8, two per byte, the even element in the high nibble. */
function packEmbeddingRows(q: Int4GroupWeights): Uint8Array {
  const bytes = new Uint8Array((q.outFeatures * q.inFeatures) / 2);
  q.codes.forEach((code, i) => {
    bytes[i >> 1]! |= i % 2 === 0 ? (code - INT4_MIN) << 4 : code - INT4_MIN;
  });
  return bytes;
}

/** The 8-bit token embedding table (embedding_byte): one float32 scale per row, as `--preq_embedding_quantize 8,0`. */
export function byteEmbedding(weights: Llama8da4wWeights): Int8ChannelWeights {
  const C = weights.config;
  return quantizeInt8Channels(weights.tokenEmbedding, C.vocab, C.modelDim);
}

/** The 4-bit token embedding table: the same group quantization as the linears, scales stored as float16. */
export function quantizedEmbedding(weights: Llama8da4wWeights): Int4GroupWeights {
  const C = weights.config;
  return quantizeInt4Groups(weights.tokenEmbedding, C.vocab, C.modelDim, C.groupSize);
}

// ------------------------------------------------------------------ program

/** The token embedding's codes and scales: 4-bit groups (embedding_4bit) or 8-bit rows (embedding_byte). */
function embeddingConstants(
  program: ProgramBuilder,
  weights: Llama8da4wWeights,
  byteTable: boolean,
): { embeddingCodes: ConstantTensor; embeddingScales: ConstantTensor } {
  const C = weights.config;
  if (byteTable) {
    const table = byteEmbedding(weights);
    return {
      embeddingCodes: program.constant('tok_embeddings.weight', 'int8', [C.vocab, C.modelDim], table.codes),
      embeddingScales: program.constant('tok_embeddings.scales', 'float32', [C.vocab], table.scales),
    };
  }
  const embedding = quantizedEmbedding(weights);
  return {
    embeddingCodes: program.constant('tok_embeddings.weight', 'uint8', [C.vocab, C.modelDim / 2], packEmbeddingRows(embedding)),
    embeddingScales: program.constant(
      'tok_embeddings.scales',
      'float16',
      [C.vocab, C.modelDim / C.groupSize],
      Uint16Array.from(embedding.scalesBf16, float16BitsOfBf16),
    ),
  };
}

interface LayerConstants {
  attentionNorm: ConstantTensor;
  wq: ConstantTensor;
  wk: ConstantTensor;
  wv: ConstantTensor;
  wo: ConstantTensor;
  ffnNorm: ConstantTensor;
  w1: ConstantTensor;
  w3: ConstantTensor;
  w2: ConstantTensor;
  qkNorms: { readonly q: ConstantTensor; readonly k: ConstantTensor } | undefined;
  postNorms: { readonly attention: ConstantTensor; readonly ffn: ConstantTensor } | undefined;
  /** The cos and sin tables of the layer's rope theta. */
  rope: { readonly cos: ConstantTensor; readonly sin: ConstantTensor };
  caches: LayerCaches;
}

/**
 * A layer's key and value caches: float32 (update_cache, custom_sdpa), int8 (quantizeKvCache) or static int8
 * (staticQuantizeKvCache), rings in sliding-window layers.
 */
type LayerCaches = (
  | { readonly kind: 'float32'; readonly key: SharedBuffer; readonly value: SharedBuffer }
  | { readonly kind: 'int8'; readonly key: QuantizedCache; readonly value: QuantizedCache }
  | { readonly kind: 'static'; readonly key: StaticQuantizedCache; readonly value: StaticQuantizedCache }
) & { readonly rows: number; readonly ring: RingPositions | undefined };

/** 'prefill-decode': two methods sharing the caches at mem_id 2; 'forward': export_llama's single method with its metadata. */
export type Llama8da4wLayout = 'prefill-decode' | 'forward' | 'optimum';
export const LLAMA_8DA4W_LAYOUTS: readonly Llama8da4wLayout[] = ['prefill-decode', 'forward', 'optimum'];

export interface Llama8da4wBuildOptions {
  /** Default 'prefill-decode'. */
  readonly layout?: Llama8da4wLayout;
  /** The begin-of-sequence token the forward layout's `get_bos_id` names (default 1 as export_llama, none for qwen3); null writes no such method. */
  readonly bosId?: number | null;
  /** The end tokens its `get_eos_ids` names (default [2], as export_llama); [] writes no such method. */
  readonly eosIds?: readonly number[];
  /** SpinQuant's rotation before each down projection (export_llama `--use_spin_quant native`); hiddenDim must be a power of two. */
  readonly hadamard?: boolean;
  /** int8 KV caches read by custom_quantized_sdpa (export_llama `--quantize_kv_cache`). */
  readonly quantizeKvCache?: boolean;
  /**
   * int8 caches with one fixed scale per head column, dequantized whole for attention.py's SDPA (export_llama
   * `--static_quantize_kv_cache`, which writes `forward` over one token and use_sdpa_with_kv_cache false).
   */
  readonly staticQuantizeKvCache?: boolean;
  /** Those caches' scale (`--static_quantize_kv_cache_scale`; default 1 / 127): finite and positive. */
  readonly staticQuantizeKvCacheScale?: number;
  /** The activation dtype (export_llama `-d`, default float32); 16-bit dtypes convert around the float32 delegates (llama-16bit.ts). */
  readonly dtype?: ActivationDtype;
  /** The output projection's weights: 4-bit groups as the other linears ('8da4w', the default), or 8-bit per channel ('8da8w', `--preq_mode 8da4w_output_8da8w`). */
  readonly outputQuantization?: OutputQuantization;
  /** The token embedding's bits: 4 (embedding_4bit, groups of groupSize; the default) or 8 (embedding_byte, one scale per row, `--preq_embedding_quantize 8,0`). */
  readonly embeddingBits?: EmbeddingBits;
}

export type OutputQuantization = '8da4w' | '8da8w';
export type EmbeddingBits = 4 | 8;
export const OUTPUT_QUANTIZATIONS: readonly OutputQuantization[] = ['8da4w', '8da8w'];
export const EMBEDDING_BITS: readonly EmbeddingBits[] = [4, 8];

/**
 * Rows [heads * headDim, inFeatures] of q or k in Meta's order (row 2i + j of
 * a head: pair i, part j) put in transformers' order (row j * headDim/2 + i),
 * where rotating halves computes what rotating pairs did.
 */
export function pairsToHalves(w: Float32Array, heads: number, headDim: number, inFeatures: number): Float32Array {
  const out = new Float32Array(w.length);
  const half = headDim / 2;
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (let j = 0; j < 2; j++) {
        const from = (h * headDim + 2 * i + j) * inFeatures;
        out.set(w.subarray(from, from + inFeatures), (h * headDim + j * half + i) * inFeatures);
      }
    }
  }
  return out;
}

/** The options that change what the model computes, which its reference takes too. */
export type Llama8da4wTransforms = Pick<
  Llama8da4wBuildOptions,
  'hadamard' | 'quantizeKvCache' | 'staticQuantizeKvCache' | 'staticQuantizeKvCacheScale' | 'outputQuantization' | 'embeddingBits'
>;

/** The static int8 caches' scale when the options ask for them (checked as export_llama checks it), else undefined. */
function staticKvCacheScale(options: Llama8da4wTransforms): number | undefined {
  if (options.staticQuantizeKvCache !== true) {
    if (options.staticQuantizeKvCacheScale !== undefined)
      throw new EtnaError('INVALID_INPUT', 'llama-8da4w: a static KV cache scale is given without the static int8 KV caches');
    return undefined;
  }
  if (options.quantizeKvCache === true)
    throw new EtnaError('INVALID_INPUT', 'llama-8da4w: the KV caches are quantized per token or statically, not both');
  const scale = options.staticQuantizeKvCacheScale ?? STATIC_KV_CACHE_SCALE;
  checkStaticKvCacheScale(scale);
  return scale;
}

/** Checks the quantization options before anything is built; returns the static int8 caches' scale when they are asked for. */
function checkQuantizationOptions(options: Llama8da4wTransforms): number | undefined {
  if (options.outputQuantization !== undefined && !OUTPUT_QUANTIZATIONS.includes(options.outputQuantization))
    throw new EtnaError(
      'INVALID_INPUT',
      `llama-8da4w: unknown output quantization '${String(options.outputQuantization)}' (available: ${OUTPUT_QUANTIZATIONS.join(', ')})`,
    );
  if (options.embeddingBits !== undefined && !EMBEDDING_BITS.includes(options.embeddingBits))
    throw new EtnaError(
      'INVALID_INPUT',
      `llama-8da4w: the token embedding is written in ${EMBEDDING_BITS.join(' or ')} bits, not ${String(options.embeddingBits)}`,
    );
  return staticKvCacheScale(options);
}

/**
 * Why export_llama's 16-bit `dtype` does not go with these options, or
 * undefined when it does. A pre-quantized checkpoint's 8-bit output and
 * embedding (--preq_mode, --preq_embedding_quantize) come with linears
 * export_llama builds at the checkpoint's dtype, which this example does not
 * write. The quantized KV cache takes either 16-bit dtype: its quantize ops
 * read the 16-bit keys, values and queries, widened; so does the Hadamard
 * rotation (etna's kernel rounds each butterfly to the dtype; ExecuTorch's
 * has no bfloat16 case).
 */
export function activationDtypeConflict(dtype: ActivationDtype, options: Llama8da4wTransforms): string | undefined {
  if (dtype === 'float32') return undefined;
  if (options.outputQuantization === '8da8w' || options.embeddingBits === 8)
    return `${dtype} activations are written without --output-8da8w and --embedding-8bit: export_llama builds a pre-quantized checkpoint's linears in the checkpoint's dtype, a graph this example does not write`;
  return undefined;
}

/** w2 as stored: rotated to take the transformed activations when `hadamard` is set. */
export function downProjection(w: Llama8da4wLayerWeights, C: Llama8da4wConfig, transforms: Llama8da4wTransforms): Float32Array {
  if (transforms.hadamard !== true) return w.w2;
  checkHadamardWidth(C.hiddenDim, 'llama-8da4w hiddenDim');
  return rotatedWeight(w.w2, C.hiddenDim);
}

/** The constant methods export_llama writes beside `forward`, in the order it lists them. */
export const LLAMA_8DA4W_METADATA = [
  'get_bos_id',
  'get_eos_ids',
  'get_max_seq_len',
  'get_max_context_len',
  'get_n_layers',
  'get_vocab_size',
  'use_kv_cache',
  'use_sdpa_with_kv_cache',
  'enable_dynamic_shape',
] as const;

/**
 * What the forward layout's constant methods return. The token dim is
 * bounded by get_max_seq_len when the prefill is (enable_dynamic_shape), and
 * a forward call then takes 1 to that many tokens; otherwise it takes one.
 */
export function llama8da4wMetadata(
  C: Llama8da4wConfig,
  options: Pick<Llama8da4wBuildOptions, 'bosId' | 'eosIds' | 'staticQuantizeKvCache'> = {},
): Record<string, (number | boolean)[]> {
  const bosId = options.bosId === undefined ? defaultBosId(C.family, C.vocab) : options.bosId;
  const eosIds = options.eosIds ?? defaultEosIds(C.family, C.vocab);
  for (const id of [...(bosId === null ? [] : [bosId]), ...eosIds]) {
    if (!Number.isInteger(id) || id < 0 || id >= C.vocab)
      throw new EtnaError('INVALID_INPUT', `llama-8da4w: token ${id} named as BOS or EOS is outside the vocabulary 0..${C.vocab - 1}`);
  }
  const values: Record<string, (number | boolean)[]> = {
    get_bos_id: bosId === null ? [] : [bosId],
    get_eos_ids: [...eosIds],
    get_max_seq_len: [C.prefillLength],
    get_max_context_len: [C.context],
    get_n_layers: [C.layers],
    get_vocab_size: [C.vocab],
    use_kv_cache: [true],
    use_sdpa_with_kv_cache: [options.staticQuantizeKvCache !== true],
    enable_dynamic_shape: [C.prefillBounded === true],
  };
  // A vocabulary without such tokens gets no method, so the runner asks the tokenizer, as it does for a program without one.
  if (bosId === null) delete values['get_bos_id'];
  if (eosIds.length === 0) delete values['get_eos_ids'];
  return values;
}

/**
 * What optimum-executorch's text-generation export writes beside `forward`
 * (its `save_config_to_constant_methods`): `get_max_seq_len` is the cache's
 * length, and there is no `get_max_context_len`; `get_head_dim` is a float.
 */
export function optimumMetadata(
  C: Llama8da4wConfig,
  options: Pick<Llama8da4wBuildOptions, 'bosId' | 'eosIds'> = {},
): Record<string, (number | boolean)[]> {
  const { get_bos_id, get_eos_ids, get_vocab_size, get_n_layers } = llama8da4wMetadata(C, options);
  const values: Record<string, (number | boolean)[] | undefined> = {
    get_dtype: [6],
    get_bos_id,
    get_eos_id: get_eos_ids?.slice(0, 1),
    get_eos_ids,
    get_head_dim: [headDim(C)],
    get_n_kv_heads: [C.kvHeads],
    get_n_layers,
    get_vocab_size,
    get_max_batch_size: [1],
    get_max_seq_len: [C.context],
    use_kv_cache: [true],
    use_sdpa_with_kv_cache: [true],
    enable_dynamic_shape: [C.prefillBounded === true],
  };
  return Object.fromEntries(Object.entries(values).filter((entry): entry is [string, (number | boolean)[]] => entry[1] !== undefined));
}

/**
 * Adds a method with no inputs returning these values, as export_llama writes
 * its metadata: ints and bools, and floats where `floats` names the method.
 */
export function addConstantMethod(program: ProgramBuilder, name: string, values: readonly (number | boolean)[], floats = false): void {
  program.method(name, (m) => {
    for (const value of values) {
      const index = m.graph.addValue(
        typeof value === 'boolean' ? { kind: 'bool', value } : floats ? { kind: 'double', value } : { kind: 'int', value: BigInt(value) },
      );
      m.graph.outputs.push(index);
      m.graph.outputNames.push(`output_${m.graph.outputNames.length}`);
    }
  });
}

/** What export_llama takes with --static_quantize_kv_cache: static shapes, no ring caches, float32 here. */
function checkStaticKvCacheLayout(C: Llama8da4wConfig, layout: Llama8da4wLayout, dtype: ActivationDtype): void {
  const refuse = (what: string): never => {
    throw new EtnaError('INVALID_INPUT', `llama-8da4w: the static int8 KV caches are written without ${what}`);
  };
  if (C.prefillBounded === true) refuse('a dynamic prefill length (export_llama requires static shapes)');
  if (slidingWindow(C) !== undefined) refuse(`the ${C.family ?? 'llama'} family's sliding-window ring caches`);
  if (layout === 'optimum') refuse("optimum-executorch's layout");
  if (dtype !== 'float32') refuse(`${dtype} activations`);
}

export function buildLlama8da4w(
  weights: Llama8da4wWeights = createLlama8da4wWeights(),
  options: Llama8da4wBuildOptions = {},
): ProgramBuilder {
  const C = weights.config;
  const layout = options.layout ?? 'prefill-decode';
  if (!LLAMA_8DA4W_LAYOUTS.includes(layout))
    throw new EtnaError('INVALID_INPUT', `unknown llama-8da4w layout '${String(layout)}' (available: ${LLAMA_8DA4W_LAYOUTS.join(', ')})`);
  const twoMethods = layout === 'prefill-decode';
  // Checked before anything is built, so a bad token id or width costs nothing.
  const metadata = twoMethods ? undefined : layout === 'optimum' ? optimumMetadata(C, options) : llama8da4wMetadata(C, options);
  if (options.hadamard === true) checkHadamardWidth(C.hiddenDim, 'llama-8da4w hiddenDim');
  const staticScale = checkQuantizationOptions(options);
  const byteEmbeddingTable = options.embeddingBits === 8;
  const quantizeKvCache = options.quantizeKvCache === true;
  const dtype = activationDtype(options.dtype ?? 'float32');
  if (staticScale !== undefined) checkStaticKvCacheLayout(C, layout, dtype);
  const conflict = activationDtypeConflict(dtype, options);
  if (conflict !== undefined) throw new EtnaError('INVALID_INPUT', `llama-8da4w: ${conflict}`);
  const program = new ProgramBuilder();
  const d = C.modelDim;
  const hd = headDim(C);
  const kv = C.kvHeads * hd;
  const qDim = C.heads * hd;
  // optimum-executorch writes transformers' graph: RoPE over halves, on q and k rows in transformers' order. A
  // family whose export_llama graph rotates pairs (its converter permutes the checkpoint into Meta's order) gets
  // its rows back in that order there: the same function.
  const transformersOrder = layout === 'optimum' && !rotatesHalves(C.family);
  const halves = rotatesHalves(C.family) || transformersOrder;
  const headRows = (w: Float32Array, heads: number): Float32Array => (transformersOrder ? pairsToHalves(w, heads, hd, d) : w);
  const linear = (name: string, data: Float32Array, out: number, inFeatures: number): ConstantTensor =>
    program.linear8da4wWeight(name, [out, inFeatures], data, { groupSize: C.groupSize });
  // Parameters and buffers are stored in the activation dtype, as the exporter casts the model to it.
  const vector = (name: string, data: Float32Array): ConstantTensor => program.constant(name, dtype, [data.length], storedAs(dtype, data));

  const { embeddingCodes, embeddingScales } = embeddingConstants(program, weights, byteEmbeddingTable);
  // One pair of tables per rope theta the layers use (Gemma 3's sliding-window layers have their own).
  const ropeConstants = new Map<number, { cos: ConstantTensor; sin: ConstantTensor }>();
  const ropeOf = (layer: number): { cos: ConstantTensor; sin: ConstantTensor } => {
    const theta = layerRopeTheta(C, layer);
    const known = ropeConstants.get(theta);
    if (known !== undefined) return known;
    const tables = ropeTables(C, theta);
    const prefix = theta === C.ropeTheta ? 'rope' : 'rope_local';
    const shape = [C.context, tables.cos.length / C.context];
    const made = {
      cos: program.constant(`${prefix}.cos`, dtype, shape, storedAs(dtype, tables.cos)),
      sin: program.constant(`${prefix}.sin`, dtype, shape, storedAs(dtype, tables.sin)),
    };
    ropeConstants.set(theta, made);
    return made;
  };
  // Only the two-method layout has a fixed-length chunk and a reset.
  const chunkOffsets = twoMethods
    ? program.constant(
        'prefill_offsets',
        'int64',
        [C.prefillLength],
        Array.from({ length: C.prefillLength }, (_, i) => i),
      )
    : undefined;
  // A sliding-window layer's cache is a ring of 2 * window rows (llama-transforms.ts), the others one row per position.
  const window = slidingWindow(C);
  if (window !== undefined && C.prefillLength > window)
    throw new EtnaError(
      'INVALID_INPUT',
      `llama-8da4w: a prefill of ${C.prefillLength} tokens does not fit the sliding window of ${window} (a chunk must not overwrite rows it still sees)`,
    );
  // What the two-method layout's reset copies back, one set per cache length.
  type EmptyCaches = { float: ConstantTensor | undefined; int8: QuantizedCacheInit | undefined; codes: ConstantTensor | undefined };
  const empties = new Map<number, EmptyCaches>();
  const emptyOf = (rows: number): EmptyCaches => {
    let empty = empties.get(rows);
    if (empty === undefined) {
      const shape = [1, rows, C.kvHeads, hd] as const;
      const name = rows === C.context ? 'empty_cache' : 'empty_ring_cache';
      empty = {
        float:
          twoMethods && !quantizeKvCache && staticScale === undefined
            ? program.constant(name, 'float32', shape, new Float32Array(rows * kv))
            : undefined,
        int8: twoMethods && quantizeKvCache ? quantizedCacheInit(program, shape, name) : undefined,
        codes: twoMethods && staticScale !== undefined ? program.constant(name, 'int8', shape, new Int8Array(rows * kv)) : undefined,
      };
      empties.set(rows, empty);
    }
    return empty;
  };
  const caches = (l: number): LayerCaches => {
    const name = (which: 'k' | 'v'): string => `layers.${l}.attention.${which}_cache`;
    const sliding = window !== undefined && isSlidingLayer(C.family, l);
    const rows = sliding ? 2 * window : C.context;
    const cacheShape = [1, rows, C.kvHeads, hd] as const;
    emptyOf(rows);
    const ring = sliding ? ringPositions(program, `layers.${l}.attention.cache_positions`, window) : undefined;
    if (staticScale !== undefined)
      return {
        kind: 'static',
        key: staticQuantizedCache(program, name('k'), cacheShape, staticScale),
        value: staticQuantizedCache(program, name('v'), cacheShape, staticScale),
        rows,
        ring,
      };
    return quantizeKvCache
      ? {
          kind: 'int8',
          key: quantizedCache(program, name('k'), cacheShape),
          value: quantizedCache(program, name('v'), cacheShape),
          rows,
          ring,
        }
      : {
          kind: 'float32',
          key: program.sharedBuffer(name('k'), 'float32', cacheShape),
          value: program.sharedBuffer(name('v'), 'float32', cacheShape),
          rows,
          ring,
        };
  };
  const emptyPositions =
    window === undefined || !twoMethods
      ? undefined
      : program.constant('empty_cache_positions', 'int64', [2 * window], new BigInt64Array(2 * window));
  const layers: LayerConstants[] = weights.layers.map((w, l) => ({
    attentionNorm: vector(`layers.${l}.attention_norm.weight`, w.attentionNorm),
    wq: linear(`layers.${l}.attention.wq.weight`, headRows(w.wq, C.heads), qDim, d),
    wk: linear(`layers.${l}.attention.wk.weight`, headRows(w.wk, C.kvHeads), kv, d),
    wv: linear(`layers.${l}.attention.wv.weight`, w.wv, kv, d),
    wo: linear(`layers.${l}.attention.wo.weight`, w.wo, d, qDim),
    rope: ropeOf(l),
    ffnNorm: vector(`layers.${l}.ffn_norm.weight`, w.ffnNorm),
    w1: linear(`layers.${l}.feed_forward.w1.weight`, w.w1, C.hiddenDim, d),
    w3: linear(`layers.${l}.feed_forward.w3.weight`, w.w3, C.hiddenDim, d),
    w2: linear(`layers.${l}.feed_forward.w2.weight`, downProjection(w, C, options), d, C.hiddenDim),
    qkNorms:
      w.qNorm === undefined || w.kNorm === undefined
        ? undefined
        : { q: vector(`layers.${l}.attention.q_norm_fn.weight`, w.qNorm), k: vector(`layers.${l}.attention.k_norm_fn.weight`, w.kNorm) },
    postNorms:
      w.postAttentionNorm === undefined || w.postFfnNorm === undefined
        ? undefined
        : {
            attention: vector(`layers.${l}.post_attention_norm.weight`, w.postAttentionNorm),
            ffn: vector(`layers.${l}.post_ffn_norm.weight`, w.postFfnNorm),
          },
    caches: caches(l),
  }));
  const finalNorm = vector('norm.weight', weights.finalNorm);
  // attention.py's SDPA reads its rows of the causal mask, self.mask[input_pos].
  const mask = staticScale === undefined ? undefined : causalMask(program, C.context);
  if (
    layers.some(
      (layer) => hasQkNorm(C.family) !== (layer.qkNorms !== undefined) || hasSandwichNorms(C.family) !== (layer.postNorms !== undefined),
    )
  )
    throw new EtnaError('INVALID_INPUT', `llama-8da4w: the layers' norms are not those of the ${C.family ?? 'llama'} family`);
  // A tied output is quantized again from the embedding's float matrix, as a linear of its own.
  const output =
    options.outputQuantization === '8da8w'
      ? program.linear8da8wWeight('output.weight', [C.vocab, d], weights.output)
      : linear('output.weight', weights.output, C.vocab, d);

  const pass = (
    m: MethodBuilder,
    tokens: TensorValue,
    startPos: TensorValue,
    positions: TensorValue,
    length: number,
    logits: 'all' | 'last',
  ): TensorValue => {
    const g = m.graph;
    const start = g.addValue({ kind: 'int', value: 0n });
    g.addKernelCall('aten::_local_scalar_dense', [startPos.index, start]);
    const int = (value: number): number => g.addValue({ kind: 'int', value: BigInt(value) });

    const rmsNorm = (x: TensorValue, weight: ConstantTensor): TensorValue => emitRmsNorm(m, x, weight, C.normEps, normOffset(C.family));
    // Each table's rows at the positions, looked up once per pass.
    const angles = new Map<ConstantTensor, TensorValue>();
    const at = (table: ConstantTensor): TensorValue => {
      let rows = angles.get(table);
      if (rows === undefined) {
        rows = m.reshape(m.embedding(table, positions), [length, 1, table.shape[1]!]);
        angles.set(table, rows);
      }
      return rows;
    };
    // Heads [length, heads, hd], each RMS-normed first when the family does (q_norm, k_norm), then rotated.
    const rotate = (x: TensorValue, heads: number, norm: ConstantTensor | undefined, rope: LayerConstants['rope']): TensorValue => {
      const perHead = m.reshape(x, [length, heads, hd]);
      return emitRope(m, norm === undefined ? perHead : rmsNorm(perHead, norm), at(rope.cos), at(rope.sin), halves);
    };

    const embedded = g.addTensor(dtype, [1, length, d]);
    g.addKernelCall(`quantized_decomposed::${byteEmbeddingTable ? 'embedding_byte' : 'embedding_4bit'}.dtype_out`, [
      m.use(embeddingCodes).index,
      m.use(embeddingScales).index,
      g.addValue({ kind: 'null' }),
      int(byteEmbeddingTable ? QUANTIZED_RANGES.int8[0] : INT4_MIN),
      int(byteEmbeddingTable ? QUANTIZED_RANGES.int8[1] : INT4_MAX),
      tokens.index,
      int(dtypeInfo(dtype).scalarType),
      embedded.index,
      embedded.index,
    ]);
    const scale = embeddingScale(C.family, d);
    let x = scale === 1 ? m.reshape(embedded, [length, d]) : m.mul(m.reshape(embedded, [length, d]), scale);
    // In a 16-bit dtype, what the float32 delegates and custom_sdpa read is converted on the way in (once per
    // tensor, so the linears sharing an input stay in one delegate) and their results rounded on the way out.
    const asFloat32 = new Map<TensorValue, TensorValue>();
    const toFloat32 = (y: TensorValue): TensorValue => {
      if (y.dtype === 'float32') return y;
      const converted = asFloat32.get(y) ?? m.cast(y, 'float32');
      asFloat32.set(y, converted);
      return converted;
    };
    const fromFloat32 = (y: TensorValue): TensorValue => (dtype === 'float32' ? y : m.cast(y, dtype));
    const linear = (y: TensorValue, weight: ConstantTensor): TensorValue => fromFloat32(m.linear(toFloat32(y), weight));
    for (const layer of layers) {
      const h = rmsNorm(x, layer.attentionNorm);
      const q = rotate(linear(h, layer.wq), C.heads, layer.qkNorms?.q, layer.rope);
      const k = rotate(linear(h, layer.wk), C.kvHeads, layer.qkNorms?.k, layer.rope);
      const v = m.reshape(linear(h, layer.wv), [1, length, C.kvHeads, hd]);
      const ring = layer.caches.ring === undefined ? undefined : emitRingStep(m, layer.caches.ring, m.reshape(positions, [length]), start);
      const attention =
        layer.caches.kind === 'static'
          ? emitStaticQuantizedAttention(
              m,
              layer.caches,
              mask!,
              m.reshape(q, [1, length, C.heads, hd]),
              m.reshape(k, [1, length, C.kvHeads, hd]),
              v,
              m.reshape(positions, [length]),
              start,
            )
          : layer.caches.kind === 'int8'
            ? emitQuantizedAttention(m, layer.caches, q, k, v, start, ring)
            : fromFloat32(emitFloatAttention(m, layer.caches, toFloat32(q), toFloat32(k), toFloat32(v), start, ring));
      const post = (y: TensorValue, norm: ConstantTensor | undefined): TensorValue => (norm === undefined ? y : rmsNorm(y, norm));
      x = m.add(x, post(linear(m.reshape(attention, [length, qDim]), layer.wo), layer.postNorms?.attention));
      const h2 = rmsNorm(x, layer.ffnNorm);
      const gate = linear(h2, layer.w1);
      const hidden = m.mul(gatesWithGelu(C.family) ? m.gelu(gate, 'tanh') : m.silu(gate), linear(h2, layer.w3));
      x = m.add(x, post(linear(options.hadamard === true ? emitHadamard(m, hidden) : hidden, layer.w2), layer.postNorms?.ffn));
    }
    if (logits === 'all') return m.reshape(linear(rmsNorm(x, finalNorm), output), [1, length, C.vocab]);
    // h[:, -1, :] as export_llama takes it: index -1 follows the call's length.
    lengthEnd = g.values.length;
    const last = g.addTensor(dtype, [d]);
    m.kernel('aten::select_copy.int_out', [x, { int: 0 }, { int: -1 }, last]);
    const lastRow = m.reshape(last, [1, d]);
    return m.reshape(linear(rmsNorm(lastRow, finalNorm), output), [1, 1, C.vocab]);
  };
  // Values created before this index may carry the prefill's length (see markPrefillLength).
  let lengthEnd = 0;

  /**
   * (tokens [1, 1..prefillLength], start [1] or positions [1..prefillLength]) -> logits: one call over any number of
   * tokens up to the bound. Given every token's position, the first is the start (the runner counts up from it).
   */
  const boundedPass = (
    m: MethodBuilder,
    tokenName: string,
    startName: string,
    logits: 'all' | 'last',
    eachPosition = false,
  ): TensorValue => {
    const tokens = m.input(tokenName, 'int64', [1, C.prefillLength]);
    const position = m.input(startName, 'int64', [eachPosition ? C.prefillLength : 1]);
    if (eachPosition) m.graph.markDynamic(position.index, [0]);
    const start = eachPosition ? m.slice(position, 0, 0, 1) : position;
    // Positions start..start+n-1 for any n: a running count over the tokens' shape, so they follow its length.
    const firstInstruction = m.graph.instructions.length;
    const count = m.graph.addTensor('int64', [1, C.prefillLength]);
    m.kernel('aten::cumsum.out', [m.add(m.mul(tokens, 0), 1), { int: 1 }, null, count]);
    lengthEnd = Number.MAX_SAFE_INTEGER;
    const out = pass(m, tokens, start, m.sub(m.add(count, start), 1), C.prefillLength, logits);
    m.graph.markDynamic(tokens.index, [1]);
    markPrefillLength(m.graph, tokens.index, C.prefillLength, lengthEnd, firstInstruction);
    return out;
  };

  if (!twoMethods) {
    const optimum = layout === 'optimum';
    const [tokenName, positionName] = optimum ? ['input_ids', 'cache_position'] : ['tokens', 'input_pos'];
    program.method('forward', (m) => {
      let logits: TensorValue;
      if (C.prefillBounded === true) logits = boundedPass(m, tokenName, positionName, 'last', optimum);
      else {
        const tokens = m.input(tokenName, 'int64', [1, 1]);
        const position = m.input(positionName, 'int64', [1]);
        logits = pass(m, tokens, position, position, 1, 'all');
      }
      // export_llama keeps h[:, -1, :], so its logits are [1, vocab].
      m.output({ logits: m.reshape(logits, [1, C.vocab]) });
    });
    for (const [name, values] of Object.entries(metadata!)) addConstantMethod(program, name, values, name === 'get_head_dim');
    return program;
  }

  program.method('prefill', (m) => {
    const logits = C.prefillLogits ?? 'all';
    if (C.prefillBounded === true) {
      m.output({ logits: boundedPass(m, 'tokens', 'start_pos', logits) });
      return;
    }
    const tokens = m.input('tokens', 'int64', [1, C.prefillLength]);
    const start = m.input('start_pos', 'int64', [1]);
    m.output({ logits: pass(m, tokens, start, m.add(start, chunkOffsets!), C.prefillLength, logits) });
  });
  program.method('decode', (m) => {
    const token = m.input('token', 'int64', [1, 1]);
    const pos = m.input('pos', 'int64', [1]);
    m.output({ logits: pass(m, token, pos, pos, 1, 'all') });
  });
  program.method('reset', (m) => {
    for (const { caches } of layers) {
      const empty = emptyOf(caches.rows);
      if (caches.kind === 'int8') {
        resetQuantizedCache(m, caches.key, empty.int8!);
        resetQuantizedCache(m, caches.value, empty.int8!);
      } else if (caches.kind === 'static') {
        m.copyInto(caches.key.codes, empty.codes!);
        m.copyInto(caches.value.codes, empty.codes!);
      } else {
        m.copyInto(caches.key, empty.float!);
        m.copyInto(caches.value, empty.float!);
      }
      if (caches.ring !== undefined) m.copyInto(caches.ring.positions, emptyPositions!);
    }
  });
  return program;
}

// ------------------------------------------------------------------ reference

export interface QuantizedLinear {
  readonly out: number;
  readonly in: number;
  readonly weight: Float32Array;
  /** Float arithmetic: the activations are not quantized. */
  readonly float: boolean;
}

/**
 * How the reference computes: '8da4w' as the program does (the default), or
 * 'float', the unquantized model the peers' 4-bit formats are compared with.
 */
export type Llama8da4wArithmetic = '8da4w' | 'float';

/**
 * rows x in -> rows x out: per-token int8 activations times the dequantized
 * 4-bit weights, as the delegate computes; in float arithmetic, the float
 * activations times the weights as given.
 */
export function linear8da4w(x: Float32Array, rows: number, w: QuantizedLinear): Float32Array {
  const y = new Float32Array(rows * w.out);
  for (let r = 0; r < rows; r++) {
    const input = x.subarray(r * w.in, (r + 1) * w.in);
    const row = w.float ? input : perTokenInt8Row(input);
    for (let n = 0; n < w.out; n++) {
      let sum = 0;
      for (let k = 0; k < w.in; k++) sum += row[k]! * w.weight[n * w.in + k]!;
      y[r * w.out + n] = sum;
    }
  }
  return y;
}

/** RMSNorm's 1 / sqrt(mean(x^2) + eps) of the `d` values of x from `start`, in double. */
export function inverseRms(x: Float32Array, start: number, d: number, eps: number): number {
  let sum = 0;
  for (let i = 0; i < d; i++) sum += x[start + i]! ** 2;
  return 1 / Math.sqrt(sum / d + eps);
}

function rmsNormRows(x: Float32Array, rows: number, d: number, weight: Float32Array, eps: number, offset: number): Float32Array {
  const y = new Float32Array(x.length);
  for (let r = 0; r < rows; r++) {
    const inverse = inverseRms(x, r * d, d, eps);
    for (let i = 0; i < d; i++) y[r * d + i] = x[r * d + i]! * inverse * Math.fround(offset + weight[i]!);
  }
  return y;
}

/**
 * Layer `layer`'s attention of the queries q [rows, heads, headDim] at
 * positions start.. over the caches [context, kvHeads, headDim] holding every
 * position up to each query's: grouped-query heads, scores scaled by
 * 1/sqrt(headDim), a softmax over the positions the query sees (the last
 * `window` ones, its own included, in a sliding-window layer), in double.
 */
export function attendCausally(
  C: Llama8da4wConfig,
  layer: number,
  q: Float32Array,
  keys: Float32Array,
  values: Float32Array,
  rows: number,
  start: number,
): Float32Array {
  const hd = headDim(C);
  const kv = C.kvHeads * hd;
  const attention = new Float32Array(rows * C.heads * hd);
  const window = isSlidingLayer(C.family, layer) ? slidingWindow(C) : undefined;
  for (let t = 0; t < rows; t++) {
    const visible = start + t + 1;
    const first = window === undefined ? 0 : Math.max(0, visible - window);
    const scores = new Float32Array(visible);
    for (let head = 0; head < C.heads; head++) {
      const kvHead = Math.floor(head / (C.heads / C.kvHeads));
      for (let c = first; c < visible; c++) {
        let dot = 0;
        for (let i = 0; i < hd; i++) dot += q[(t * C.heads + head) * hd + i]! * keys[c * kv + kvHead * hd + i]!;
        scores[c] = dot / Math.sqrt(hd);
      }
      softmaxInPlace(scores, first, visible - first);
      for (let i = 0; i < hd; i++) {
        let sum = 0;
        for (let c = first; c < visible; c++) sum += scores[c]! * values[c * kv + kvHead * hd + i]!;
        attention[(t * C.heads + head) * hd + i] = sum;
      }
    }
  }
  return attention;
}

/**
 * The same model in float32 arrays, step for step: dequantized weights, the
 * delegate's per-token activation quantization before every linear, fixed
 * caches written at each position and attention over positions <= the query's.
 */
export class Llama8da4wReference extends DecoderReference {
  private readonly embedding: Float32Array;
  /** Each layer's cos and sin tables (layers of one rope theta share them). */
  private readonly ropes: { cos: Float32Array; sin: Float32Array }[];
  private readonly layers: { [K in 'wq' | 'wk' | 'wv' | 'wo' | 'w1' | 'w3' | 'w2']: QuantizedLinear }[];
  private readonly output: QuantizedLinear;
  /** The static int8 caches' scale, when the model has them. */
  private readonly staticScale: number | undefined;

  constructor(
    readonly weights: Llama8da4wWeights = createLlama8da4wWeights(),
    arithmetic: Llama8da4wArithmetic = '8da4w',
    private readonly transforms: Llama8da4wTransforms = {},
  ) {
    const C = weights.config;
    const caches = (): Float32Array[] => weights.layers.map(() => new Float32Array(C.context * C.kvHeads * headDim(C)));
    super('llama-8da4w', C, caches(), caches());
    const d = C.modelDim;
    const kv = C.kvHeads * headDim(C);
    const qDim = C.heads * headDim(C);
    const float = arithmetic === 'float';
    const quantized = (data: Float32Array, out: number, inFeatures: number): QuantizedLinear => ({
      out,
      in: inFeatures,
      weight: float ? data : dequantizeInt4Groups(quantizeInt4Groups(data, out, inFeatures, C.groupSize)),
      float,
    });
    this.staticScale = checkQuantizationOptions(transforms);
    this.embedding = float
      ? weights.tokenEmbedding
      : transforms.embeddingBits === 8
        ? dequantizeInt8Channels(byteEmbedding(weights))
        : dequantizeInt4Groups(quantizedEmbedding(weights));
    this.ropes = layerRopeTables(C);
    this.layers = weights.layers.map((w) => ({
      wq: quantized(w.wq, qDim, d),
      wk: quantized(w.wk, kv, d),
      wv: quantized(w.wv, kv, d),
      wo: quantized(w.wo, d, qDim),
      w1: quantized(w.w1, C.hiddenDim, d),
      w3: quantized(w.w3, C.hiddenDim, d),
      w2: quantized(downProjection(w, C, transforms), d, C.hiddenDim),
    }));
    this.output =
      transforms.outputQuantization === '8da8w' && !float
        ? { out: C.vocab, in: d, weight: dequantizeInt8Channels(quantizeInt8Channels(weights.output, C.vocab, d)), float }
        : quantized(weights.output, C.vocab, d);
  }

  session(): ExampleCall[] {
    return llama8da4wSession(this.weights.config);
  }

  /** Each head of layer `layer`'s x [rows, heads, headDim] RMS-normed when the family does, then rotated, in place. */
  private rotate(x: Float32Array, rows: number, heads: number, start: number, norm: Float32Array | undefined, layer: number): void {
    const C = this.weights.config;
    const hd = headDim(C);
    if (norm !== undefined) x.set(rmsNormRows(x, rows * heads, hd, norm, C.normEps, normOffset(C.family)));
    const shape = { rows, heads, headDim: hd, rotary: rotaryDim(C.family, hd) };
    ropeRows(x, shape, start, this.ropes[layer]!, rotatesHalves(C.family));
  }

  protected pass(tokens: readonly number[], start: number): Float32Array {
    const C = this.weights.config;
    const rows = tokens.length;
    const d = C.modelDim;
    const hd = headDim(C);
    const kv = C.kvHeads * hd;
    const x = new Float32Array(rows * d);
    tokens.forEach((token, t) => x.set(this.embedding.subarray(token * d, (token + 1) * d), t * d));
    const scale = embeddingScale(C.family, d);
    if (scale !== 1) for (let i = 0; i < x.length; i++) x[i]! *= scale;
    const norm = (y: Float32Array, weight: Float32Array): Float32Array => rmsNormRows(y, rows, d, weight, C.normEps, normOffset(C.family));
    const post = (y: Float32Array, weight: Float32Array | undefined): Float32Array => (weight === undefined ? y : norm(y, weight));
    this.weights.layers.forEach((w, l) => {
      const layer = this.layers[l]!;
      const h = norm(x, w.attentionNorm);
      const q = linear8da4w(h, rows, layer.wq);
      const k = linear8da4w(h, rows, layer.wk);
      const v = linear8da4w(h, rows, layer.wv);
      this.rotate(q, rows, C.heads, start, w.qNorm, l);
      this.rotate(k, rows, C.kvHeads, start, w.kNorm, l);
      // An int8 cache holds each (position, head) row as its codes give it back; the query is quantized alike.
      const int8 = this.transforms.quantizeKvCache === true;
      if (int8) q.set(int8RoundTripRows(q, hd));
      this.keyCaches[l]!.set(int8 ? int8RoundTripRows(k, hd) : k, start * kv);
      this.valueCaches[l]!.set(int8 ? int8RoundTripRows(v, hd) : v, start * kv);
      const attention = attendCausally(C, l, q, this.keyCaches[l]!, this.valueCaches[l]!, rows, start);
      // A static int8 cache attends over the call's own rows as they are and keeps them as its codes give them back.
      if (this.staticScale !== undefined) {
        this.keyCaches[l]!.set(staticInt8RoundTrip(k, this.staticScale), start * kv);
        this.valueCaches[l]!.set(staticInt8RoundTrip(v, this.staticScale), start * kv);
      }
      const attended = post(linear8da4w(attention, rows, layer.wo), w.postAttentionNorm);
      for (let i = 0; i < x.length; i++) x[i]! += attended[i]!;
      const h2 = norm(x, w.ffnNorm);
      const gate = linear8da4w(h2, rows, layer.w1);
      const up = linear8da4w(h2, rows, layer.w3);
      const activation = gatesWithGelu(C.family) ? geluTanh : (v: number): number => v / (1 + Math.exp(-v));
      for (let i = 0; i < gate.length; i++) gate[i] = activation(gate[i]!) * up[i]!;
      if (this.transforms.hadamard === true) gate.set(hadamardRows(gate, C.hiddenDim));
      const down = post(linear8da4w(gate, rows, layer.w2), w.postFfnNorm);
      for (let i = 0; i < x.length; i++) x[i]! += down[i]!;
    });
    return linear8da4w(norm(x, this.weights.finalNorm), rows, this.output);
  }
}

/** reset, a prompt chunk at position 0, one decode step after it. */
export function llama8da4wSession(C: Llama8da4wConfig = LLAMA_8DA4W_CONFIG, seed = 11): ExampleCall[] {
  const random = new SeededRandom(seed);
  const prompt = Array.from({ length: C.prefillLength }, () => random.integer(C.vocab));
  return [
    { method: 'reset', inputs: [] },
    { method: 'prefill', inputs: [int64Tensor([1, C.prefillLength], prompt), int64Tensor([1], [0])] },
    { method: 'decode', inputs: [int64Tensor([1, 1], [random.integer(C.vocab)]), int64Tensor([1], [C.prefillLength])] },
  ];
}
