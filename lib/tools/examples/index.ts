// Example programs and their reference implementations, by name.
import { EtnaError } from '../../errors.js';
import type { ExportOptions, ProgramBuilder } from '../../export/program-builder.js';
import { buildEncoderDecoder, EncoderDecoderReference } from './encoder-decoder.js';
import { buildGruStream, GruStreamReference } from './gru-stream.js';
import {
  buildKvDecoder,
  createKvDecoderWeights,
  KV_DECODER_CONFIG as KV,
  KV_DECODER_LARGE_CONFIG,
  KvDecoderReference,
  type KvDecoderConfig,
} from './kv-decoder.js';
import {
  buildLlama8da4w,
  createLlama8da4wWeights,
  LLAMA_8DA4W_CONFIG as LLAMA,
  LLAMA_8DA4W_PRESET_NAMES,
  llama8da4wPreset,
  Llama8da4wReference,
  type EmbeddingBits,
  type Llama8da4wLayout,
  type OutputQuantization,
} from './llama-8da4w.js';
import { activationDtype } from './activation-dtype.js';
import { LLAMA_8DA4W_FAMILIES, withFamily } from './llama-families.js';
import type { ExampleReference } from './reference.js';

/** A tokenizer's vocabulary, for an example that can take it: its size and the tokens that begin and end a sequence. */
export interface ExampleVocabulary {
  readonly size: number;
  readonly bosId?: number | undefined;
  readonly eosId?: number | undefined;
}

/** How to write an example, beside its size (the preset). */
export interface ExampleVariant {
  /** One of the example's `layouts`; the first is the default. */
  readonly layout?: string;
  /** The vocabulary the program is to have (examples with `takesVocabulary` only). */
  readonly vocabulary?: ExampleVocabulary;
  /** SpinQuant's rotation before each down projection, as `--use_spin_quant native` writes it (examples with `takesTransforms` only). */
  readonly hadamard?: boolean;
  /** int8 KV caches and custom_quantized_sdpa, as `--quantize_kv_cache` writes them (examples with `takesTransforms` only). */
  readonly quantizeKvCache?: boolean;
  /** int8 KV caches with fixed per-column scales, as `--static_quantize_kv_cache` writes them (examples with `takesTransforms` only). */
  readonly staticQuantizeKvCache?: boolean;
  /** Their scale, `--static_quantize_kv_cache_scale` (default 1 / 127). */
  readonly staticQuantizeKvCacheScale?: number;
  /** The output projection as 8-bit per-channel weights ('8da8w', `--preq_mode 8da4w_output_8da8w`) or 4-bit groups ('8da4w'; examples with `takesTransforms` only). */
  readonly outputQuantization?: OutputQuantization;
  /** The token embedding in 8 bits (embedding_byte, `--preq_embedding_quantize 8,0`) or 4 (examples with `takesTransforms` only). */
  readonly embeddingBits?: EmbeddingBits;
  /** One of the example's `families`, the model whose operators it writes; the first is the default. */
  readonly family?: string;
  /** The activation dtype, export_llama's `-d` (fp32, bf16, fp16; examples with `takesDtype` only). */
  readonly dtype?: string;
}

export interface ExampleInfo {
  readonly name: string;
  readonly summary: string;
  /** Signatures, for help text. */
  readonly methods: readonly string[];
  /** Sizes `build(preset)` also knows, beside the default. */
  readonly presets?: readonly string[];
  /** Method layouts `build` can write, the default first, with the signatures each adds, for help text. */
  readonly layouts?: readonly { readonly name: string; readonly methods: readonly string[] }[];
  /** Set when `build` can size the program to a tokenizer's vocabulary. */
  readonly takesVocabulary?: true;
  /** Set when `build` takes the variant's `hadamard`, `quantizeKvCache`, `staticQuantizeKvCache`, `outputQuantization` and `embeddingBits`. */
  readonly takesTransforms?: true;
  /** Set when `build` takes the variant's `dtype`. */
  readonly takesDtype?: true;
  /** Model families `build` can write (the variant's `family`), the default first. */
  readonly families?: readonly string[];
  build(preset?: string, variant?: ExampleVariant): ProgramBuilder;
  reference(): ExampleReference;
  /** Set when the program only means something lowered (its linears are 8da4w): it is always written with XNNPACK. */
  readonly xnnpackOnly?: true;
}

const kvDecoderShape = (C: KvDecoderConfig): string =>
  `${C.layers} layers, d=${C.modelDim}, ${C.heads} heads, context ${C.context}, vocab ${C.vocab}`;

/** Help text of a decoder's prefill/decode/reset methods (DecoderReference's signatures). */
const decoderMethods = (C: { readonly prefillLength: number; readonly vocab: number }): string[] => [
  `prefill(tokens int64[1,${C.prefillLength}], start_pos int64[1]) -> logits float32[1,${C.prefillLength},${C.vocab}]`,
  `decode(token int64[1,1], pos int64[1]) -> logits float32[1,1,${C.vocab}]`,
  'reset()',
];

export const EXAMPLES = {
  'kv-decoder': {
    name: 'kv-decoder',
    summary: `transformer decoder (${kvDecoderShape(KV)}) with a KV cache shared by its methods`,
    methods: decoderMethods(KV),
    build: () => buildKvDecoder(),
    reference: () => new KvDecoderReference(),
  },
  'gru-stream': {
    name: 'gru-stream',
    summary: 'streaming GRU (16 -> 32 hidden -> 8) whose hidden state is shared by its methods',
    methods: ['step(frame float32[1,16]) -> output float32[1,8]', 'reset()'],
    build: () => buildGruStream(),
    reference: () => new GruStreamReference(),
  },
  'encoder-decoder': {
    name: 'encoder-decoder',
    summary: 'tied-weight autoencoder: two stateless methods reading the same weights',
    methods: ['encode(x float32[1,32]) -> code float32[1,8]', 'decode(code float32[1,8]) -> reconstruction float32[1,32]'],
    build: () => buildEncoderDecoder(),
    reference: () => new EncoderDecoderReference(),
  },
} as const satisfies Record<string, ExampleInfo>;

/**
 * Examples at benchmark size, or needing the XNNPACK delegate and LLM
 * kernels: `etna export-example` writes them and `etna bench` runs them, but
 * the test suites and memory tables that loop over EXAMPLES (portable runs,
 * the ONNX emitter) leave them out.
 */
export const LARGE_EXAMPLES = {
  'kv-decoder-large': {
    name: 'kv-decoder-large',
    summary: `kv-decoder at the size of a small real decoder (${kvDecoderShape(KV_DECODER_LARGE_CONFIG)})`,
    methods: decoderMethods(KV_DECODER_LARGE_CONFIG),
    build: () => buildKvDecoder(createKvDecoderWeights(KV_DECODER_LARGE_CONFIG)),
    reference: () => new KvDecoderReference(createKvDecoderWeights(KV_DECODER_LARGE_CONFIG)),
  },
  'llama-8da4w': {
    name: 'llama-8da4w',
    summary: `Llama as export_llama writes it (${LLAMA.layers} layers, d=${LLAMA.modelDim}, ${LLAMA.heads} query / ${LLAMA.kvHeads} KV heads, context ${LLAMA.context}, vocab ${LLAMA.vocab}): 8da4w linears in XNNPACK, 4-bit embedding, update_cache, custom_sdpa`,
    methods: decoderMethods(LLAMA),
    presets: LLAMA_8DA4W_PRESET_NAMES,
    layouts: [
      { name: 'prefill-decode', methods: ['prefill, decode and reset, sharing the caches at mem_id 2 (above)'] },
      {
        name: 'forward',
        methods: [
          'forward(tokens int64[1,n], input_pos int64[1]) -> logits float32[1,vocab]: n is 1, or 1 to 128 with a preset (enable_dynamic_shape)',
          'the caches as mutable buffers (mem_id 2), and the constant methods export_llama writes: get_max_seq_len, get_max_context_len, get_vocab_size, get_bos_id, get_eos_ids, get_n_layers, use_kv_cache, enable_dynamic_shape, use_sdpa_with_kv_cache',
        ],
      },
      {
        name: 'optimum',
        methods: [
          "forward(input_ids int64[1,n], cache_position int64[n]) -> logits float32[1,vocab]: optimum-executorch's text-generation export, one position per token",
          'the caches as mutable buffers (mem_id 2), and the constant methods optimum-executorch writes: get_dtype, get_bos_id, get_eos_id, get_eos_ids, get_head_dim, get_n_kv_heads, get_n_layers, get_vocab_size, get_max_batch_size, get_max_seq_len (the cache length), use_kv_cache, use_sdpa_with_kv_cache, enable_dynamic_shape',
        ],
      },
    ],
    takesVocabulary: true,
    takesTransforms: true,
    takesDtype: true,
    families: LLAMA_8DA4W_FAMILIES,
    build: (preset?: string, variant: ExampleVariant = {}) => {
      const { layout, vocabulary, hadamard, quantizeKvCache, outputQuantization, embeddingBits, family, dtype } = variant;
      const { staticQuantizeKvCache, staticQuantizeKvCacheScale } = variant;
      const preshaped = preset === undefined ? LLAMA : llama8da4wPreset(preset);
      // export_llama writes the static int8 caches with static shapes: a preset's prefill then takes its full length.
      const sized = staticQuantizeKvCache === true ? { ...preshaped, prefillBounded: false } : preshaped;
      const config = family === undefined ? sized : withFamily(sized, family);
      return buildLlama8da4w(createLlama8da4wWeights(vocabulary === undefined ? config : { ...config, vocab: vocabulary.size }), {
        ...(layout !== undefined && { layout: layout as Llama8da4wLayout }),
        ...(hadamard !== undefined && { hadamard }),
        ...(quantizeKvCache !== undefined && { quantizeKvCache }),
        ...(staticQuantizeKvCache !== undefined && { staticQuantizeKvCache }),
        ...(staticQuantizeKvCacheScale !== undefined && { staticQuantizeKvCacheScale }),
        ...(outputQuantization !== undefined && { outputQuantization }),
        ...(embeddingBits !== undefined && { embeddingBits }),
        ...(dtype !== undefined && { dtype: activationDtype(dtype) }),
        ...(vocabulary !== undefined && {
          bosId: vocabulary.bosId ?? null,
          eosIds: vocabulary.eosId === undefined ? [] : [vocabulary.eosId],
        }),
      });
    },
    reference: () => new Llama8da4wReference(),
    xnnpackOnly: true,
  },
} as const satisfies Record<string, ExampleInfo>;

export type ExampleName = keyof typeof EXAMPLES;
export type LargeExampleName = keyof typeof LARGE_EXAMPLES;
/** Every example `exampleInfo` and `exportExample` know. */
export type AnyExampleName = ExampleName | LargeExampleName;

export const EXAMPLE_NAMES = Object.keys(EXAMPLES) as ExampleName[];
export const ALL_EXAMPLE_NAMES = [...EXAMPLE_NAMES, ...(Object.keys(LARGE_EXAMPLES) as LargeExampleName[])];

const ALL_EXAMPLES: Record<AnyExampleName, ExampleInfo> = { ...EXAMPLES, ...LARGE_EXAMPLES };

export function isExampleName(name: string): name is ExampleName {
  return Object.hasOwn(EXAMPLES, name);
}

export function isAnyExampleName(name: string): name is AnyExampleName {
  return Object.hasOwn(ALL_EXAMPLES, name);
}

export function exampleInfo(name: string): ExampleInfo {
  if (!isAnyExampleName(name))
    throw new EtnaError('INVALID_INPUT', `unknown example '${name}' (available: ${ALL_EXAMPLE_NAMES.join(', ')})`);
  return ALL_EXAMPLES[name];
}

/** A fresh builder holding the example program (not yet exported), at one of its presets' sizes and in one of its layouts if given. */
export function buildExample(name: string, preset?: string, variant: ExampleVariant = {}): ProgramBuilder {
  const info = exampleInfo(name);
  if (preset !== undefined && !(info.presets ?? []).includes(preset)) {
    const known = info.presets === undefined ? 'it has no presets' : `available: ${info.presets.join(', ')}`;
    throw new EtnaError('INVALID_INPUT', `example '${name}' has no preset '${preset}' (${known})`);
  }
  const layouts = (info.layouts ?? []).map((layout) => layout.name);
  if (variant.layout !== undefined && !layouts.includes(variant.layout)) {
    const known = layouts.length === 0 ? 'it has one' : `available: ${layouts.join(', ')}`;
    throw new EtnaError('INVALID_INPUT', `example '${name}' has no layout '${variant.layout}' (${known})`);
  }
  if (variant.vocabulary !== undefined) {
    if (info.takesVocabulary !== true)
      throw new EtnaError(
        'INVALID_INPUT',
        `example '${name}' has a vocabulary of its own; only ${ALL_EXAMPLE_NAMES.filter((n) => ALL_EXAMPLES[n].takesVocabulary === true).join(', ')} take one`,
      );
    const { size } = variant.vocabulary;
    if (!Number.isSafeInteger(size) || size < 1) throw new EtnaError('INVALID_INPUT', `example '${name}': a vocabulary of ${size} tokens`);
  }
  const families = info.families ?? [];
  if (variant.family !== undefined && !families.includes(variant.family)) {
    const known = families.length === 0 ? 'it has one' : `available: ${families.join(', ')}`;
    throw new EtnaError('INVALID_INPUT', `example '${name}' has no family '${variant.family}' (${known})`);
  }
  const transforms = [
    variant.hadamard,
    variant.quantizeKvCache,
    variant.staticQuantizeKvCache,
    variant.staticQuantizeKvCacheScale,
    variant.outputQuantization,
    variant.embeddingBits,
  ];
  if (transforms.some((option) => option !== undefined) && info.takesTransforms !== true)
    throw new EtnaError(
      'INVALID_INPUT',
      `example '${name}' takes no export_llama transformations; only ${ALL_EXAMPLE_NAMES.filter((n) => ALL_EXAMPLES[n].takesTransforms === true).join(', ')} do`,
    );
  if (variant.dtype !== undefined && info.takesDtype !== true)
    throw new EtnaError(
      'INVALID_INPUT',
      `example '${name}' is written in float32 only; only ${ALL_EXAMPLE_NAMES.filter((n) => ALL_EXAMPLES[n].takesDtype === true).join(', ')} take an activation dtype`,
    );
  return info.build(preset, variant);
}

/** The example as .pte bytes. */
export function exportExample(name: string, options?: ExportOptions & { readonly preset?: string } & ExampleVariant): Uint8Array {
  const info = exampleInfo(name);
  const {
    preset,
    layout,
    vocabulary,
    hadamard,
    quantizeKvCache,
    staticQuantizeKvCache,
    staticQuantizeKvCacheScale,
    outputQuantization,
    embeddingBits,
    family,
    dtype,
    ...exportOptions
  } = options ?? {};
  const variant = {
    ...(family !== undefined && { family }),
    ...(layout !== undefined && { layout }),
    ...(vocabulary !== undefined && { vocabulary }),
    ...(hadamard !== undefined && { hadamard }),
    ...(quantizeKvCache !== undefined && { quantizeKvCache }),
    ...(staticQuantizeKvCache !== undefined && { staticQuantizeKvCache }),
    ...(staticQuantizeKvCacheScale !== undefined && { staticQuantizeKvCacheScale }),
    ...(outputQuantization !== undefined && { outputQuantization }),
    ...(embeddingBits !== undefined && { embeddingBits }),
    ...(dtype !== undefined && { dtype }),
  };
  return buildExample(name, preset, variant).toPte(info.xnnpackOnly === true ? { ...exportOptions, xnnpack: true } : exportOptions);
}

/** A fresh reference implementation (its own state) of the example. */
export function exampleReference(name: string): ExampleReference {
  return exampleInfo(name).reference();
}

export {
  buildEncoderDecoder,
  createEncoderDecoderWeights,
  ENCODER_DECODER_CONFIG,
  EncoderDecoderReference,
  encoderDecoderSession,
} from './encoder-decoder.js';
export type { EncoderDecoderWeights } from './encoder-decoder.js';
export { buildGruStream, createGruStreamWeights, GRU_STREAM_CONFIG, GruStreamReference, gruStreamSession } from './gru-stream.js';
export type { GruStreamWeights } from './gru-stream.js';
export {
  buildKvDecoder,
  causalMaskTable,
  createKvDecoderWeights,
  KV_DECODER_CONFIG,
  KV_DECODER_LARGE_CONFIG,
  KvDecoderReference,
  kvDecoderFullSequence,
  kvDecoderSession,
} from './kv-decoder.js';
export type { KvDecoderConfig, KvDecoderLayerWeights, KvDecoderWeights } from './kv-decoder.js';
export {
  addConstantMethod,
  buildLlama8da4w,
  createLlama8da4wWeights,
  headDim,
  isLlama8da4wPreset,
  LLAMA_8DA4W_CONFIG,
  LLAMA_8DA4W_LAYOUTS,
  LLAMA_8DA4W_METADATA,
  llama8da4wMetadata,
  LLAMA_8DA4W_PRESET_NAMES,
  LLAMA_8DA4W_PRESETS,
  llama8da4wPreset,
  Llama8da4wReference,
  llama8da4wSession,
} from './llama-8da4w.js';
export { isLlama8da4wFamily, LLAMA_8DA4W_FAMILIES, withFamily } from './llama-families.js';
export type { Llama8da4wFamily } from './llama-families.js';
export type {
  Llama8da4wArithmetic,
  Llama8da4wBuildOptions,
  Llama8da4wTransforms,
  Llama8da4wConfig,
  Llama8da4wLayout,
  Llama8da4wLayerWeights,
  Llama8da4wPreset,
  Llama8da4wWeights,
  EmbeddingBits,
  OutputQuantization,
} from './llama-8da4w.js';
export { erf, float32Tensor, gelu, int64Tensor, SeededRandom } from './reference.js';
export type { ExampleCall, ExampleReference, LinearWeights, NormWeights, ReferenceTensor } from './reference.js';
