// Tokenizers for text generation: what the runner needs from one is ids for
// text and the bytes each id stands for, so that streamed text can be cut
// anywhere between tokens and still be whole UTF-8 (detokenizer.ts).
import { readFileSync } from 'node:fs';

import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';

import { describeValue, EtnaError } from '../errors.js';
import { besideFile, namedTokenId, readTokenizerConfig, type ConfigSource, type TokenizerConfig } from './config.js';
import { TiktokenTokenizer } from './tiktoken.js';

export interface LlmTokenizer {
  /** 'hf' for a tokenizer.json, 'tiktoken' for base64-rank lines (Llama 3's tokenizer.model). */
  readonly format: 'hf' | 'tiktoken';
  /** Ids 0..vocabSize-1, special tokens included. */
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  /**
   * Whether a text starts with BOS when the tokenizer encodes it for its
   * model (tokenizer_config's add_bos_token, else what its post-processor
   * does); absent: whenever there is a BOS token.
   */
  readonly addsBos?: boolean;
  /** The tokenizer_config.json read with it (chat template, token names); undefined without one. */
  readonly config?: TokenizerConfig | undefined;
  /** Control tokens by their text: what a chat template writes to mean them. */
  readonly specialTokens?: ReadonlyMap<string, number>;
  /** Ids below vocabSize that name no token. */
  readonly missingIds?: readonly number[];
  /** Ids for text, with no special tokens added (BOS and EOS are the runner's `numBos` / `numEos`). */
  encode(text: string): number[];
  /** Ids for text in which each key of `marks` stands for its id and everything else, special tokens' text too, is text. */
  encodeMarked?(text: string, marks: ReadonlyMap<string, number>): number[];
  /** The bytes `id` stands for in a stream of text; empty for special tokens. */
  tokenBytes(id: number): Uint8Array;
  /** Whole-sequence decoding, special tokens skipped, as the tokenizer's own decoder does it. */
  decode(ids: readonly number[]): string;
}

const utf8 = new TextEncoder();
const EMPTY = new Uint8Array(0);

/**
 * GPT-2's reversible map of bytes to printable characters, which byte-level
 * BPE vocabularies (GPT-2, Llama 3, Qwen) spell their tokens in; inverted.
 */
function byteLevelDecoderTable(): Map<string, number> {
  const table = new Map<string, number>();
  let shifted = 0;
  for (let byte = 0; byte < 256; byte++) {
    const printable = (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae && byte <= 0xff);
    table.set(String.fromCodePoint(printable ? byte : 256 + shifted++), byte);
  }
  return table;
}

interface JsonDecoder {
  type?: string;
  decoders?: JsonDecoder[];
  pattern?: { String?: string };
  content?: string;
  replacement?: string;
}

/** How a tokenizer.json spells bytes in its tokens, from its decoder. */
function tokenSpelling(decoder: JsonDecoder | null | undefined): (token: string) => Uint8Array {
  const steps = decoder?.type === 'Sequence' ? (decoder.decoders ?? []) : decoder ? [decoder] : [];
  const types = steps.map((step) => step.type ?? '?');
  if (types.includes('ByteLevel')) {
    const table = byteLevelDecoderTable();
    return (token) => {
      const bytes = new Uint8Array(token.length);
      let n = 0;
      for (const char of token) {
        const byte = table.get(char);
        if (byte === undefined) return utf8.encode(token);
        bytes[n++] = byte;
      }
      return bytes.subarray(0, n);
    };
  }
  const supported = new Set(['Replace', 'ByteFallback', 'Fuse', 'Strip', 'Metaspace']);
  const unknown = types.filter((type) => !supported.has(type));
  if (unknown.length > 0) {
    throw new EtnaError(
      'INVALID_INPUT',
      `tokenizer.json: decoder ${unknown.map((t) => `'${t}'`).join(', ')} is not supported for streaming text (supported: ByteLevel, and sequences of Replace, ByteFallback, Fuse, Strip, Metaspace)`,
    );
  }
  // SentencePiece-style vocabularies: '▁' is a space, '<0xNN>' one byte. Strip only trims the start of a whole
  // decoded text; a stream continues a prompt, so its first space is kept.
  const replacements: [string, string][] = [];
  for (const step of steps) {
    if (step.type === 'Replace' && step.pattern?.String !== undefined) replacements.push([step.pattern.String, step.content ?? '']);
    if (step.type === 'Metaspace') replacements.push([step.replacement ?? '\u2581', ' ']);
  }
  const byteFallback = types.includes('ByteFallback');
  return (token) => {
    const byte = byteFallback ? /^<0x([0-9A-Fa-f]{2})>$/.exec(token) : null;
    if (byte) return Uint8Array.of(parseInt(byte[1]!, 16));
    let text = token;
    for (const [from, to] of replacements) text = text.split(from).join(to);
    return utf8.encode(text);
  };
}

interface JsonAddedToken {
  id: number;
  content: string;
  special?: boolean;
  normalized?: boolean;
}

interface TokenizerJson {
  model?: { type?: string; vocab?: Record<string, number> | unknown[]; merges?: unknown[] };
  decoder?: JsonDecoder | null;
  added_tokens?: JsonAddedToken[];
}

class HuggingFaceTokenizer implements LlmTokenizer {
  readonly format = 'hf';
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  readonly addsBos: boolean;
  readonly specialTokens = new Map<string, number>();
  readonly missingIds: readonly number[];
  private readonly tokenizer: HfTokenizer;
  private readonly bytes: (Uint8Array | undefined)[];
  private readonly spell: (token: string) => Uint8Array;
  private readonly tokens: string[] = [];
  private readonly special = new Set<number>();
  // The tokenizer.json without its model, and the tokenizers encodeMarked made from it, one per set of marks.
  private readonly shell: TokenizerJson;
  private readonly marked = new WeakMap<ReadonlyMap<string, number>, HfTokenizer>();

  constructor(
    json: TokenizerJson,
    readonly config: TokenizerConfig | undefined,
    source: string,
  ) {
    if (json.model?.type === undefined) throw new EtnaError('INVALID_INPUT', `${source}: not a tokenizer.json (no model.type)`);
    this.spell = tokenSpelling(json.decoder);
    this.tokenizer = HuggingFaceTokenizer.make(json, config, source);
    this.shell = { ...json, model: { type: 'BPE', vocab: {}, merges: [] } };
    for (const [token, id] of this.tokenizer.get_vocab(true)) this.tokens[id] = token;
    for (const added of json.added_tokens ?? []) {
      if (added.special !== true) continue;
      this.special.add(added.id);
      this.specialTokens.set(added.content, added.id);
    }
    this.vocabSize = this.tokens.length;
    this.missingIds = Array.from(this.tokens.keys()).filter((id) => this.tokens[id] === undefined);
    this.bytes = new Array<Uint8Array | undefined>(this.vocabSize);
    const idOf = (name: string): number | undefined => this.tokenizer.token_to_id(name);
    this.bosId = namedTokenId(config, 'bos_token', idOf, source);
    this.eosId = namedTokenId(config, 'eos_token', idOf, source);
    // As transformers' tokenizer(text) does: the config's add_bos_token, else whatever the post-processor puts first.
    const addBos = config?.add_bos_token;
    const withSpecial = this.tokenizer.encode('a', { add_special_tokens: true }).ids;
    this.addsBos =
      typeof addBos === 'boolean'
        ? addBos
        : this.bosId !== undefined && withSpecial[0] === this.bosId && withSpecial.length > this.encode('a').length;
  }

  private static make(json: TokenizerJson, config: TokenizerConfig | undefined, source: string): HfTokenizer {
    try {
      return new HfTokenizer(json, config ?? {});
    } catch (error) {
      throw new EtnaError('INVALID_INPUT', `${source}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /**
   * A tokenizer whose special tokens are the marks instead of their own text,
   * built around this one's model (a vocabulary is large; the rest is small):
   * the text is split at the marks as it would be at the special tokens, and
   * each piece normalized, pre-tokenized and merged as the whole text would
   * be, so only what the marks stand for can come out as a special token.
   */
  encodeMarked(text: string, marks: ReadonlyMap<string, number>): number[] {
    if (marks === this.specialTokens) return this.encode(text);
    let tokenizer = this.marked.get(marks);
    if (tokenizer === undefined) {
      const byId = new Map((this.shell.added_tokens ?? []).map((added) => [added.id, added]));
      const added = (this.shell.added_tokens ?? []).filter((token) => token.special !== true);
      for (const [mark, id] of marks) added.push({ ...(byId.get(id) ?? { special: true, normalized: false }), id, content: mark });
      tokenizer = HuggingFaceTokenizer.make({ ...this.shell, added_tokens: added }, this.config, 'tokenizer');
      tokenizer.model = this.tokenizer.model;
      this.marked.set(marks, tokenizer);
    }
    return tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  tokenBytes(id: number): Uint8Array {
    const cached = this.bytes[id];
    if (cached !== undefined) return cached;
    const token = this.tokens[id];
    if (token === undefined)
      throw new EtnaError('INVALID_INPUT', `token id ${id} is outside the tokenizer's vocabulary 0..${this.vocabSize - 1}`);
    const bytes = this.special.has(id) ? EMPTY : this.spell(token);
    this.bytes[id] = bytes;
    return bytes;
  }

  decode(ids: readonly number[]): string {
    return this.tokenizer.decode([...ids], { skip_special_tokens: true });
  }
}

// ------------------------------------------------------------------ loading

/** Where a tokenizer comes from: a file path, the file's bytes, or one already made. */
export type TokenizerSource = string | Uint8Array | LlmTokenizer;

export interface LoadTokenizerOptions {
  /**
   * tokenizer_config.json (a path, its bytes or the object): the chat
   * template and the names of the BOS and EOS tokens. Default: the file of
   * that name beside a tokenizer read from a path, if there is one.
   */
  tokenizerConfig?: ConfigSource;
}

function isTokenizer(value: unknown): value is LlmTokenizer {
  return (
    typeof value === 'object' &&
    value !== null &&
    !(value instanceof Uint8Array) &&
    typeof (value as LlmTokenizer).encode === 'function' &&
    typeof (value as LlmTokenizer).tokenBytes === 'function'
  );
}

/**
 * Reads a tokenizer, telling the format from its contents: JSON is a Hugging
 * Face tokenizer.json, lines of `BASE64 RANK` are tiktoken (Llama 3),
 * anything else is refused, naming SentencePiece when it looks like one.
 * A tokenizer_config.json beside a path (or `options.tokenizerConfig`)
 * gives the chat template and the BOS and EOS tokens.
 */
export function loadTokenizer(source: TokenizerSource, options: LoadTokenizerOptions = {}): LlmTokenizer {
  if (typeof options !== 'object' || options === null) {
    throw new EtnaError('INVALID_INPUT', `loadTokenizer: options must be an object, got ${describeValue(options)}`);
  }
  if (isTokenizer(source)) {
    if (options.tokenizerConfig !== undefined) {
      throw new EtnaError(
        'INVALID_INPUT',
        'tokenizerConfig goes with a tokenizer read from a file or bytes; a loaded tokenizer has its own (loadTokenizer(source, { tokenizerConfig }))',
      );
    }
    return source;
  }
  let bytes: Uint8Array;
  let name: string;
  if (typeof source === 'string') {
    name = source;
    try {
      bytes = readFileSync(source);
    } catch (error) {
      throw new EtnaError('INVALID_INPUT', `tokenizer: cannot read ${source}: ${error instanceof Error ? error.message : String(error)}`, {
        cause: error,
      });
    }
  } else if (source instanceof Uint8Array) {
    name = 'tokenizer bytes';
    bytes = source;
  } else {
    throw new EtnaError('INVALID_INPUT', `tokenizer must be a path, the file's bytes or a tokenizer, got ${describeValue(source)}`);
  }
  const besideConfig = typeof source === 'string' ? besideFile(source, 'tokenizer_config.json') : undefined;
  const configSource = options.tokenizerConfig ?? besideConfig;
  const config =
    configSource === undefined
      ? undefined
      : readTokenizerConfig(configSource, configSource === besideConfig ? besideConfig : 'tokenizerConfig');
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  const start = text.trimStart();
  if (start.startsWith('{')) {
    let json: TokenizerJson;
    try {
      json = JSON.parse(text) as TokenizerJson;
    } catch (error) {
      throw new EtnaError('INVALID_INPUT', `${name}: not valid JSON: ${error instanceof Error ? error.message : String(error)}`, {
        cause: error,
      });
    }
    return new HuggingFaceTokenizer(json, config, name);
  }
  const lines = text.split('\n').map((line) => line.replace(/\r$/, ''));
  if (lines.length > 0 && /^[A-Za-z0-9+/=]+ \d+$/.test(lines[0]!)) return new TiktokenTokenizer(lines, name, config);
  // A SentencePiece model is a protobuf whose first field (pieces, field 1) starts with the byte 0x0a.
  const format = bytes[0] === 0x0a ? 'a SentencePiece .model (protobuf)' : 'in no known tokenizer format';
  throw new EtnaError(
    'INVALID_INPUT',
    `${name} is ${format}; etna reads Hugging Face tokenizer.json and tiktoken files (BASE64 RANK lines). Convert a SentencePiece model to tokenizer.json with the transformers library (AutoTokenizer.from_pretrained(...).save_pretrained)`,
  );
}
