// `etna export-example NAME OUT.pte [--xnnpack]`: writes a built-in example program.
import { writeFileSync } from 'node:fs';

import { loadTokenizer } from '../llm/tokenizer.js';
import { ALL_EXAMPLE_NAMES, exampleInfo, exportExample, isAnyExampleName, type ExampleVocabulary } from '../tools/examples/index.js';
import { ACTIVATION_DTYPE_NAMES, activationDtype, isActivationDtypeName } from '../tools/examples/activation-dtype.js';
import { activationDtypeConflict } from '../tools/examples/llama-8da4w.js';
import { reportUsageError, usage, type Command } from './command.js';
import { formatBytes } from '../format.js';

function examplesList(): string {
  const lines = ['examples:'];
  for (const name of ALL_EXAMPLE_NAMES) {
    const info = exampleInfo(name);
    lines.push(`  ${name}: ${info.summary}`);
    for (const signature of info.methods) lines.push(`      ${signature}`);
    if (info.families !== undefined) lines.push(`      families: ${info.families.join(', ')} (the first is the default)`);
    if (info.presets !== undefined)
      lines.push(`      presets: ${info.presets.join(', ')} (prefill of 1 to 128 tokens, last-position logits)`);
    info.layouts?.forEach((layout, i) => {
      lines.push(`      layout ${layout.name}${i === 0 ? ' (default)' : ''}:`);
      for (const signature of layout.methods) lines.push(`        ${signature}`);
    });
  }
  return lines.join('\n');
}

export const EXPORT_EXAMPLE: Command = {
  spec: {
    name: 'export-example',
    synopsis: 'NAME OUT.pte',
    brief: 'write a built-in example program',
    summary: 'Writes the built-in example NAME as a program with portable kernels, or lowered to XNNPACK.',
    options: [
      {
        name: 'xnnpack',
        help: 'lower linear layers, convolutions and arithmetic to XNNPACK, as etna bench runs it (default: portable kernels only)',
      },
      {
        name: 'preset',
        value: 'NAME',
        help: "write the example at one of its preset sizes, with seeded random weights (see the example's presets below)",
      },
      {
        name: 'layout',
        value: 'NAME',
        help: "write the example's methods in one of its layouts (see below; llama-8da4w: prefill-decode, forward or optimum)",
      },
      {
        name: 'vocab-from',
        value: 'FILE',
        help: "size the vocabulary to a tokenizer.json or tiktoken file's, and name its BOS and EOS tokens (llama-8da4w)",
      },
      {
        name: 'family',
        value: 'NAME',
        help: "write the example as one model family's operators (llama-8da4w: llama; qwen3: per-head q/k RMSNorm, rotate_half RoPE, tied embeddings, no BOS; gemma3: those, with (1 + weight) norms, a sqrt(d) embedding scale, a GELU-tanh gate, post-attention / post-MLP norms, head_dim 256 and a global layer after five sliding-window ones (ring caches); phi4: fused projections split, partial rotate_half RoPE with LongRoPE's attention factor, tied embeddings; smollm2: Llama's graph, tied embeddings, rope theta 1e5)",
      },
      {
        name: 'hadamard',
        help: "rotate each feed-forward's input to its down projection with llama::fast_hadamard_transform, as export_llama's --use_spin_quant native writes it (llama-8da4w)",
      },
      {
        name: 'quantize-kv-cache',
        help: "keep the KV caches in int8 with per-position scales and zero points, read by custom_quantized_sdpa, as export_llama's --quantize_kv_cache writes them (llama-8da4w)",
      },
      {
        name: 'static-quantize-kv-cache',
        help: "keep the KV caches in int8 with one fixed scale per head column, dequantized whole for attention.py's SDPA, as export_llama's --static_quantize_kv_cache writes them (llama-8da4w; static shapes, no sliding-window family, fp32)",
      },
      {
        name: 'static-quantize-kv-cache-scale',
        value: 'S',
        help: 'the scale of those caches, finite and positive (default 1/127), as --static_quantize_kv_cache_scale',
      },
      {
        name: 'output-8da8w',
        help: "quantize the output projection to 8-bit weights with one scale per row (int8 dynamic activations), as export_llama's --preq_mode 8da4w_output_8da8w writes the quantized Llama 3.2 checkpoints (llama-8da4w)",
      },
      {
        name: 'embedding-8bit',
        help: "store the token embedding as 8-bit codes with one scale per row, read by quantized_decomposed::embedding_byte, as export_llama's --preq_embedding_quantize 8,0 writes it (llama-8da4w)",
      },
      {
        name: 'dtype',
        short: 'd',
        value: 'DTYPE',
        help: "activations in fp32 (the default), bf16 or fp16, as export_llama's -d writes them: the operators outside the XNNPACK delegates in that dtype, converted to and from float32 around the delegates and custom_sdpa (llama-8da4w; with --quantize-kv-cache and --hadamard too)",
      },
    ],
    notes: examplesList(),
  },
  run: (args) =>
    runExportExample(args.positionals[0]!, args.positionals[1]!, {
      xnnpack: args.flag('xnnpack'),
      preset: args.string('preset'),
      layout: args.string('layout'),
      family: args.string('family'),
      vocabFrom: args.string('vocab-from'),
      hadamard: args.flag('hadamard'),
      quantizeKvCache: args.flag('quantize-kv-cache'),
      staticQuantizeKvCache: args.flag('static-quantize-kv-cache'),
      staticQuantizeKvCacheScale: args.number('static-quantize-kv-cache-scale', (value) => value > 0, 'a finite positive scale'),
      output8da8w: args.flag('output-8da8w'),
      embedding8bit: args.flag('embedding-8bit'),
      dtype: args.string('dtype'),
    }),
};

export function exportExampleUsage(): string {
  return usage(EXPORT_EXAMPLE.spec);
}

export interface ExportExampleOptions {
  /** Write the program lowered to XNNPACK. */
  readonly xnnpack?: boolean;
  /** One of the example's preset sizes. */
  readonly preset?: string | undefined;
  /** One of the example's layouts. */
  readonly layout?: string | undefined;
  /** One of the example's model families. */
  readonly family?: string | undefined;
  /** A tokenizer file whose vocabulary the program takes. */
  readonly vocabFrom?: string | undefined;
  /** SpinQuant's rotation before each down projection (examples that take export_llama's transformations). */
  readonly hadamard?: boolean;
  /** int8 KV caches (examples that take export_llama's transformations). */
  readonly quantizeKvCache?: boolean;
  /** int8 KV caches with fixed per-column scales (examples that take export_llama's transformations). */
  readonly staticQuantizeKvCache?: boolean;
  /** Their scale (default 1 / 127). */
  readonly staticQuantizeKvCacheScale?: number | undefined;
  /** The output projection in 8-bit per-channel weights (examples that take export_llama's transformations). */
  readonly output8da8w?: boolean;
  /** The token embedding in 8 bits, read by embedding_byte (examples that take export_llama's transformations). */
  readonly embedding8bit?: boolean;
  /** The activation dtype, export_llama's `-d`: fp32, bf16 or fp16 (examples that take one). */
  readonly dtype?: string | undefined;
}

export function runExportExample(name: string, out: string, options: ExportExampleOptions = {}): number {
  if (!isAnyExampleName(name)) return reportUsageError(EXPORT_EXAMPLE.spec, `unknown example '${name}'`);
  const xnnpack = options.xnnpack === true || exampleInfo(name).xnnpackOnly === true;
  const presets = exampleInfo(name).presets ?? [];
  if (options.preset !== undefined && !presets.includes(options.preset)) {
    return reportUsageError(
      EXPORT_EXAMPLE.spec,
      `example '${name}' has no preset '${options.preset}'${presets.length > 0 ? ` (available: ${presets.join(', ')})` : ''}`,
    );
  }
  const layouts = (exampleInfo(name).layouts ?? []).map((layout) => layout.name);
  if (options.layout !== undefined && !layouts.includes(options.layout)) {
    return reportUsageError(
      EXPORT_EXAMPLE.spec,
      `example '${name}' has no layout '${options.layout}'${layouts.length > 0 ? ` (available: ${layouts.join(', ')})` : ''}`,
    );
  }
  const families = exampleInfo(name).families ?? [];
  if (options.family !== undefined && !families.includes(options.family)) {
    return reportUsageError(
      EXPORT_EXAMPLE.spec,
      `example '${name}' has no family '${options.family}'${families.length > 0 ? ` (available: ${families.join(', ')})` : ''}`,
    );
  }
  if (options.vocabFrom !== undefined && exampleInfo(name).takesVocabulary !== true) {
    return reportUsageError(
      EXPORT_EXAMPLE.spec,
      `example '${name}' has a vocabulary of its own; --vocab-from applies to ${ALL_EXAMPLE_NAMES.filter((n) => exampleInfo(n).takesVocabulary === true).join(', ')}`,
    );
  }
  const hadamard = options.hadamard === true;
  const quantizeKvCache = options.quantizeKvCache === true;
  const staticQuantizeKvCache = options.staticQuantizeKvCache === true;
  const staticScale = options.staticQuantizeKvCacheScale;
  const output8da8w = options.output8da8w === true;
  const embedding8bit = options.embedding8bit === true;
  if (
    (hadamard || quantizeKvCache || staticQuantizeKvCache || output8da8w || embedding8bit) &&
    exampleInfo(name).takesTransforms !== true
  ) {
    return reportUsageError(
      EXPORT_EXAMPLE.spec,
      `example '${name}' takes no export_llama transformations; --hadamard, --quantize-kv-cache, --static-quantize-kv-cache, --output-8da8w and --embedding-8bit apply to ${ALL_EXAMPLE_NAMES.filter((n) => exampleInfo(n).takesTransforms === true).join(', ')}`,
    );
  }
  if (options.dtype !== undefined) {
    if (exampleInfo(name).takesDtype !== true)
      return reportUsageError(
        EXPORT_EXAMPLE.spec,
        `example '${name}' is written in float32 only; --dtype applies to ${ALL_EXAMPLE_NAMES.filter((n) => exampleInfo(n).takesDtype === true).join(', ')}`,
      );
    if (!isActivationDtypeName(options.dtype))
      return reportUsageError(EXPORT_EXAMPLE.spec, `unknown dtype '${options.dtype}' (available: ${ACTIVATION_DTYPE_NAMES.join(', ')})`);
    const conflict = activationDtypeConflict(activationDtype(options.dtype), {
      hadamard,
      ...(output8da8w && { outputQuantization: '8da8w' as const }),
      ...(embedding8bit && { embeddingBits: 8 as const }),
    });
    if (conflict !== undefined) return reportUsageError(EXPORT_EXAMPLE.spec, `--dtype ${options.dtype}: ${conflict}`);
  }
  let vocabulary: ExampleVocabulary | undefined;
  if (options.vocabFrom !== undefined) {
    const tokenizer = loadTokenizer(options.vocabFrom);
    vocabulary = { size: tokenizer.vocabSize, bosId: tokenizer.bosId, eosId: tokenizer.eosId };
  }
  const bytes = exportExample(name, {
    xnnpack,
    ...(options.preset !== undefined && { preset: options.preset }),
    ...(options.layout !== undefined && { layout: options.layout }),
    ...(options.family !== undefined && { family: options.family }),
    ...(vocabulary !== undefined && { vocabulary }),
    ...(hadamard && { hadamard }),
    ...(quantizeKvCache && { quantizeKvCache }),
    ...(staticQuantizeKvCache && { staticQuantizeKvCache }),
    ...(staticScale !== undefined && { staticQuantizeKvCacheScale: staticScale }),
    ...(output8da8w && { outputQuantization: '8da8w' as const }),
    ...(embedding8bit && { embeddingBits: 8 as const }),
    ...(options.dtype !== undefined && { dtype: options.dtype }),
  });
  writeFileSync(out, bytes);
  const details = [
    name,
    ...(options.preset !== undefined ? [`preset ${options.preset}`] : []),
    ...(options.layout !== undefined ? [`layout ${options.layout}`] : []),
    ...(options.family !== undefined ? [`family ${options.family}`] : []),
    ...(vocabulary !== undefined ? [`vocabulary of ${vocabulary.size} tokens`] : []),
    ...(hadamard ? ['Hadamard-rotated feed-forwards'] : []),
    ...(quantizeKvCache ? ['int8 KV caches'] : []),
    ...(staticQuantizeKvCache ? [`static int8 KV caches (scale ${staticScale ?? '1/127'})`] : []),
    ...(output8da8w ? ['8da8w output projection'] : []),
    ...(embedding8bit ? ['8-bit token embedding'] : []),
    ...(options.dtype !== undefined ? [`${activationDtype(options.dtype)} activations`] : []),
  ];
  console.log(`wrote ${out} (${details.join(', ')}${xnnpack ? ', lowered to XNNPACK' : ''}, ${formatBytes(bytes.byteLength)})`);
  return 0;
}
