// Programs and tokenizers the LLM runner tests share.
import {
  addConstantMethod,
  buildLlama8da4w,
  createLlama8da4wWeights,
  LLAMA_8DA4W_CONFIG,
  Llama8da4wReference,
  type Llama8da4wConfig,
  type Llama8da4wTransforms,
} from '../../lib/tools/examples/llama-8da4w.js';
import { ProgramBuilder } from '../../lib/export/program-builder.js';

/** The llama-8da4w example (prefill/decode layout) with extra metadata methods, and export_llama's transformations if given. */
export function llamaProgram(
  config: Llama8da4wConfig = LLAMA_8DA4W_CONFIG,
  metadata: Record<string, (number | boolean)[]> = {},
  transforms: Llama8da4wTransforms = {},
): Uint8Array {
  const program = buildLlama8da4w(createLlama8da4wWeights(config), transforms);
  for (const [name, values] of Object.entries(metadata)) addConstantMethod(program, name, values);
  return program.export({ xnnpack: true }).bytes;
}

/** Greedy tokens of the reference, fed the way the runner feeds a fixed-length prefill: whole chunks, then one token at a time. */
export function referenceGreedy(
  prompt: readonly number[],
  maxNewTokens: number,
  config: Llama8da4wConfig = LLAMA_8DA4W_CONFIG,
  reference = new Llama8da4wReference(createLlama8da4wWeights(config)),
  start = 0,
): number[] {
  const argmaxRow = (row: Float32Array): number => {
    let best = 0;
    for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
    return best;
  };
  let position = start;
  let row = new Float32Array(0);
  let at = 0;
  while (at < prompt.length) {
    if (prompt.length - at >= config.prefillLength && prompt.length - at > 1) {
      const logits = reference.prefill(prompt.slice(at, at + config.prefillLength), position);
      row = logits.subarray(logits.length - config.vocab);
      position += config.prefillLength;
      at += config.prefillLength;
    } else {
      row = reference.decode(prompt[at]!, position);
      position++;
      at++;
    }
  }
  const tokens: number[] = [];
  for (;;) {
    const token = argmaxRow(row);
    tokens.push(token);
    if (tokens.length === maxNewTokens) return tokens;
    row = reference.decode(token, position++);
  }
}

export interface ByteTokenizerOptions {
  /** Special tokens, ids 256, 257 ... in order. */
  readonly specials?: readonly string[];
  /** Ids in all: unused tokens fill the vocabulary up to this size after the bytes and the specials. */
  readonly vocab?: number;
}

/**
 * A byte-level tokenizer.json with one token per byte and no merges: any text
 * encodes to its UTF-8 bytes, so a 256-token model can stream any text.
 */
export function byteTokenizerJson(options: ByteTokenizerOptions = {}): string {
  const { specials = [], vocab: size = 256 + specials.length } = options;
  const vocab: Record<string, number> = {};
  let shifted = 0;
  for (let byte = 0; byte < 256; byte++) {
    const printable = (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae && byte <= 0xff);
    vocab[String.fromCodePoint(printable ? byte : 256 + shifted++)] = byte;
  }
  const added = specials.map((content, i) => ({
    id: 256 + i,
    content,
    special: true,
    normalized: false,
    lstrip: false,
    rstrip: false,
    single_word: false,
  }));
  for (const { id, content } of added) vocab[content] = id;
  for (let id = 256 + specials.length; id < size; id++) vocab[`<unused_${id}>`] = id;
  return JSON.stringify({
    version: '1.0',
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges: [],
    },
  });
}

export interface BigramOptions {
  /** Logit added to `to` after `from`. */
  readonly chain: readonly (readonly [number, number])[];
  /** Logit added to `token` at `position`, whatever came before. */
  readonly atPosition?: readonly (readonly [number, number])[];
  readonly vocab?: number;
  readonly context?: number;
  /** Logits [1, vocab] for the last token, as a last-token-only export returns them, instead of [1, 1, vocab]. */
  readonly lastTokenOnly?: boolean;
  readonly tokensDtype?: 'int64' | 'int32';
  /** Tokens one call takes up to, as a dynamic dim (DYNAMIC_BOUND); without it forward takes exactly one. */
  readonly maxTokens?: number;
  readonly metadata?: Record<string, (number | boolean)[]>;
}

/**
 * export_llama's single-method layout in miniature: forward(tokens int64[1, 1],
 * input_pos int64[1]) -> logits = table[token] + positionTable[input_pos], so
 * a test can say which token follows which, and where.
 */
export function bigramProgram(options: BigramOptions): Uint8Array {
  const vocab = options.vocab ?? 256;
  const context = options.context ?? 32;
  const table = new Float32Array(vocab * vocab);
  for (const [from, to] of options.chain) table[from * vocab + to] = 10;
  const positions = new Float32Array(context * vocab);
  for (const [position, token] of options.atPosition ?? []) positions[position * vocab + token] = 20;
  const program = new ProgramBuilder();
  const tableConstant = program.constant('table', 'float32', [vocab, vocab], table);
  const positionConstant = program.constant('positions', 'float32', [context, vocab], positions);
  program.method('forward', (m) => {
    const tokens = m.input('tokens', options.tokensDtype ?? 'int64', [1, options.maxTokens ?? 1]);
    const position = m.input('input_pos', 'int64', [1]);
    const rows = m.embedding(tableConstant, tokens);
    const logits = m.add(rows, m.embedding(positionConstant, position));
    if (options.maxTokens !== undefined) for (const value of [tokens, rows, logits]) m.graph.markDynamic(value.index, [1]);
    m.output({ logits: options.lastTokenOnly === true ? m.reshape(logits, [1, vocab]) : logits });
  });
  const metadata = options.metadata ?? { get_max_seq_len: [context], get_max_context_len: [context], get_eos_ids: [0] };
  for (const [name, values] of Object.entries(metadata)) addConstantMethod(program, name, values);
  return program.toPte();
}

/** Token ids of a text under byteTokenizerJson: its UTF-8 bytes. */
export const bytesOf = (text: string): number[] => Array.from(new TextEncoder().encode(text));

/** A chain through the bytes of `text`: each byte is followed by the next, the last by token 0. */
export function chainOf(text: string): [number, number][] {
  const bytes = [...bytesOf(text), 0];
  return bytes.slice(0, -1).map((byte, i) => [byte, bytes[i + 1]!] as [number, number]);
}
