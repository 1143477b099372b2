// Tokenizers for text generation: what the runner needs from one is ids for
// text and the bytes each id stands for, so that streamed text can be cut
// anywhere between tokens and still be whole UTF-8 (detokenizer.ts).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';

import { EtnaError } from '../errors.js';

export interface LlmTokenizer {
  /** 'hf' for a tokenizer.json, 'tiktoken' for base64-rank lines (Llama 3's tokenizer.model). */
  readonly format: 'hf' | 'tiktoken';
  /** Ids 0..vocabSize-1, special tokens included. */
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  /** Ids for text, with no special tokens added (BOS and EOS are the runner's `numBos` / `numEos`). */
  encode(text: string): number[];
  /** The bytes `id` stands for in a stream of text; empty for special tokens. */
  tokenBytes(id: number): Uint8Array;
  /** Whole-sequence decoding, special tokens skipped, as the tokenizer's own decoder does it. */
  decode(ids: readonly number[]): string;
}

const utf8 = new TextEncoder();
const EMPTY = new Uint8Array(0);

// Names tokenizers give their first and end-of-sequence tokens, for files that come without a tokenizer_config.json.
const BOS_NAMES = ['<|begin_of_text|>', '<s>', '<bos>', '<|startoftext|>'];
const EOS_NAMES = ['<|eot_id|>', '<|end_of_text|>', '</s>', '<eos>', '<|im_end|>', '<|endoftext|>'];

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
}

interface TokenizerJson {
  model?: { type?: string; vocab?: Record<string, number> | unknown[] };
  decoder?: JsonDecoder | null;
  added_tokens?: JsonAddedToken[];
}

function tokenName(config: Record<string, unknown>, key: string): string | undefined {
  const value = config[key];
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && typeof (value as { content?: unknown }).content === 'string')
    return (value as { content: string }).content;
  return undefined;
}

class HuggingFaceTokenizer implements LlmTokenizer {
  readonly format = 'hf';
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  private readonly tokenizer: HfTokenizer;
  private readonly bytes: (Uint8Array | undefined)[];
  private readonly spell: (token: string) => Uint8Array;
  private readonly tokens: string[] = [];
  private readonly special = new Set<number>();

  constructor(json: TokenizerJson, config: Record<string, unknown>, source: string) {
    if (json.model?.type === undefined) throw new EtnaError('INVALID_INPUT', `${source}: not a tokenizer.json (no model.type)`);
    this.spell = tokenSpelling(json.decoder);
    try {
      this.tokenizer = new HfTokenizer(json, config);
    } catch (error) {
      throw new EtnaError('INVALID_INPUT', `${source}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    for (const [token, id] of this.tokenizer.get_vocab(true)) this.tokens[id] = token;
    for (const added of json.added_tokens ?? []) if (added.special === true) this.special.add(added.id);
    this.vocabSize = this.tokens.length;
    this.bytes = new Array<Uint8Array | undefined>(this.vocabSize);
    const idOf = (names: readonly (string | undefined)[]): number | undefined => {
      for (const name of names) {
        const id = name === undefined ? undefined : this.tokenizer.token_to_id(name);
        if (id !== undefined) return id;
      }
      return undefined;
    };
    const configured = (key: string): (string | undefined)[] => [tokenName(config, key)].filter((name) => name !== undefined);
    this.bosId = idOf(configured('bos_token').length > 0 ? configured('bos_token') : BOS_NAMES);
    this.eosId = idOf(configured('eos_token').length > 0 ? configured('eos_token') : EOS_NAMES);
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
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

// ------------------------------------------------------------------ tiktoken

// Llama 3's split of text into pieces before byte-pair merging.
const LLAMA3_PATTERN =
  /(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;
// Llama 3 places 256 special tokens after the ranks; <|eot_id|>, the end of a turn, is the tenth.
const LLAMA3_SPECIAL_COUNT = 256;
const LLAMA3_EOT_OFFSET = 9;

/** tiktoken BPE over base64-rank lines, with Llama 3's split pattern and special tokens. */
class TiktokenTokenizer implements LlmTokenizer {
  readonly format = 'tiktoken';
  readonly vocabSize: number;
  readonly bosId: number;
  readonly eosId: number;
  private readonly ranks = new Map<string, number>();
  private readonly pieces: Uint8Array[] = [];

  constructor(lines: readonly string[], source: string) {
    lines.forEach((line, index) => {
      if (line.length === 0) return;
      const [base64, rankText, extra] = line.split(' ');
      const rank = Number(rankText);
      if (base64 === undefined || extra !== undefined || !Number.isInteger(rank) || rank < 0) {
        throw new EtnaError('INVALID_INPUT', `${source}: line ${index + 1} is not 'BASE64 RANK'`);
      }
      const bytes = new Uint8Array(Buffer.from(base64, 'base64'));
      this.ranks.set(TiktokenTokenizer.key(bytes), rank);
      this.pieces[rank] = bytes;
    });
    const base = this.pieces.length;
    this.vocabSize = base + LLAMA3_SPECIAL_COUNT;
    this.bosId = base;
    this.eosId = base + LLAMA3_EOT_OFFSET;
  }

  private static key(bytes: Uint8Array): string {
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
  }

  encode(text: string): number[] {
    const ids: number[] = [];
    for (const match of text.matchAll(LLAMA3_PATTERN)) {
      const bytes = utf8.encode(match[0]);
      const whole = this.ranks.get(TiktokenTokenizer.key(bytes));
      if (whole !== undefined) {
        ids.push(whole);
        continue;
      }
      // Byte-pair merging: join the adjacent pair of lowest rank until none is in the table.
      const parts: Uint8Array[] = Array.from(bytes, (_, i) => bytes.subarray(i, i + 1));
      for (;;) {
        let best = -1;
        let bestRank = Infinity;
        for (let i = 0; i + 1 < parts.length; i++) {
          const joined = bytes.subarray(
            parts[i]!.byteOffset - bytes.byteOffset,
            parts[i + 1]!.byteOffset - bytes.byteOffset + parts[i + 1]!.length,
          );
          const rank = this.ranks.get(TiktokenTokenizer.key(joined));
          if (rank !== undefined && rank < bestRank) [best, bestRank] = [i, rank];
        }
        if (best < 0) break;
        const first = parts[best]!;
        parts.splice(
          best,
          2,
          bytes.subarray(first.byteOffset - bytes.byteOffset, first.byteOffset - bytes.byteOffset + first.length + parts[best + 1]!.length),
        );
      }
      for (const part of parts) {
        const rank = this.ranks.get(TiktokenTokenizer.key(part));
        if (rank === undefined) throw new EtnaError('INVALID_INPUT', `tiktoken: the byte 0x${part[0]!.toString(16)} has no rank`);
        ids.push(rank);
      }
    }
    return ids;
  }

  tokenBytes(id: number): Uint8Array {
    if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize)
      throw new EtnaError('INVALID_INPUT', `token id ${id} is outside the tokenizer's vocabulary 0..${this.vocabSize - 1}`);
    return this.pieces[id] ?? EMPTY;
  }

  decode(ids: readonly number[]): string {
    return Buffer.concat(ids.map((id) => this.tokenBytes(id))).toString('utf8');
  }
}

// ------------------------------------------------------------------ loading

/** Where a tokenizer comes from: a file path, the file's bytes, or one already made. */
export type TokenizerSource = string | Uint8Array | LlmTokenizer;

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
 * Face tokenizer.json (with a tokenizer_config.json beside a path read for
 * its BOS and EOS names), lines of `BASE64 RANK` are tiktoken (Llama 3),
 * anything else is refused, naming SentencePiece when it looks like one.
 */
export function loadTokenizer(source: TokenizerSource): LlmTokenizer {
  if (isTokenizer(source)) return source;
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
    throw new EtnaError('INVALID_INPUT', `tokenizer must be a path, the file's bytes or a tokenizer, got ${typeof source}`);
  }
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
    let config: Record<string, unknown> = {};
    const beside = typeof source === 'string' ? join(dirname(source), 'tokenizer_config.json') : undefined;
    if (beside !== undefined && existsSync(beside)) config = JSON.parse(readFileSync(beside, 'utf8')) as Record<string, unknown>;
    return new HuggingFaceTokenizer(json, config, name);
  }
  const lines = text.split('\n').map((line) => line.replace(/\r$/, ''));
  if (lines.length > 0 && /^[A-Za-z0-9+/=]+ \d+$/.test(lines[0]!)) return new TiktokenTokenizer(lines, name);
  // A SentencePiece model is a protobuf whose first field (pieces, field 1) starts with the byte 0x0a.
  const format = bytes[0] === 0x0a ? 'a SentencePiece .model (protobuf)' : 'in no known tokenizer format';
  throw new EtnaError(
    'INVALID_INPUT',
    `${name} is ${format}; etna reads Hugging Face tokenizer.json and tiktoken files (BASE64 RANK lines). Convert a SentencePiece model to tokenizer.json with the transformers library (AutoTokenizer.from_pretrained(...).save_pretrained)`,
  );
}
