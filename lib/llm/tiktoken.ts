// tiktoken files (Llama 3's tokenizer.model): base64-rank lines, encoded
// with Llama 3's split pattern and byte-pair merging, and the 256 special
// tokens Llama 3 places after the ranks.
import { EtnaError } from '../errors.js';
import { namedTokenId, type TokenizerConfig } from './config.js';
import { splitMarked } from './marks.js';
import type { LlmTokenizer } from './tokenizer.js';

// Llama 3's split of text into pieces before byte-pair merging.
const LLAMA3_PATTERN =
  /(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;
// Llama 3.1's names for its 256 special tokens, in id order after the ranks; the rest are reserved.
const LLAMA3_SPECIAL_NAMES = [
  '<|begin_of_text|>',
  '<|end_of_text|>',
  '<|reserved_special_token_0|>',
  '<|reserved_special_token_1|>',
  '<|finetune_right_pad_id|>',
  '<|reserved_special_token_2|>',
  '<|start_header_id|>',
  '<|end_header_id|>',
  '<|eom_id|>',
  '<|eot_id|>',
  '<|python_tag|>',
];
const LLAMA3_SPECIAL_COUNT = 256;
const LLAMA3_RESERVED_AFTER = 3;

const EMPTY = new Uint8Array(0);
const utf8 = new TextEncoder();

/** Llama 3's special token names, the ids they take after `base` ranks. */
function llama3Specials(base: number): Map<string, number> {
  const specials = new Map<string, number>();
  for (let i = 0; i < LLAMA3_SPECIAL_COUNT; i++) {
    const name = LLAMA3_SPECIAL_NAMES[i] ?? `<|reserved_special_token_${i - LLAMA3_SPECIAL_NAMES.length + LLAMA3_RESERVED_AFTER}|>`;
    specials.set(name, base + i);
  }
  return specials;
}

/** tiktoken BPE over base64-rank lines, with Llama 3's split pattern and special tokens. */
export class TiktokenTokenizer implements LlmTokenizer {
  readonly format = 'tiktoken';
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  readonly addsBos: boolean;
  readonly specialTokens: ReadonlyMap<string, number>;
  private readonly ranks = new Map<string, number>();
  private readonly pieces: Uint8Array[] = [];

  constructor(
    lines: readonly string[],
    source: string,
    readonly config: TokenizerConfig | undefined,
  ) {
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
    this.specialTokens = llama3Specials(base);
    const idOf = (name: string): number | undefined => this.specialTokens.get(name);
    this.bosId = namedTokenId(config, 'bos_token', idOf, source);
    this.eosId = namedTokenId(config, 'eos_token', idOf, source);
    // Llama 3 starts every text with <|begin_of_text|>, unless the config says otherwise.
    this.addsBos = config?.add_bos_token ?? true;
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

  // tiktoken splits a text at the special tokens it allows and encodes the pieces between them on their own.
  encodeMarked(text: string, marks: ReadonlyMap<string, number>): number[] {
    return splitMarked(text, marks).flatMap((piece) => ('mark' in piece ? [piece.mark] : this.encode(piece.text)));
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
