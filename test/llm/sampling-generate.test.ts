// The sampling controls through generate() on a real program: the
// log-probabilities are the log-softmax of the rows the method returns (run
// here through a Module of their own), the penalties count the prompt and the
// generated tokens, a logit bias steers greedy decoding, and bad options are
// refused before any call.
import { describe, expect, it } from 'vitest';

import { Llm, loadTokenizer, logitBiasFault, type GenerateOptions, type TokenLogprob } from '../../lib/llm/index.js';
import { Module } from '../../lib/module.js';
import { Tensor } from '../../lib/tensor.js';
import { LLAMA_8DA4W_CONFIG } from '../../lib/tools/examples/llama-8da4w.js';
import { bigramProgram, byteTokenizerJson, chainOf, llamaProgram } from './helpers.js';
import { referenceLogits, referenceLogSoftmax, type Controls } from './sampling-reference.js';

const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson()));
const llamaBytes = llamaProgram(LLAMA_8DA4W_CONFIG, { get_max_context_len: [LLAMA_8DA4W_CONFIG.context] });
const { vocab, prefillLength } = LLAMA_8DA4W_CONFIG;

/**
 * Runs the program's methods directly, fed as the runner feeds them (whole
 * prefill chunks, then one token at a time), picking each token with
 * `choose` from the logits row the method returned and the context so far.
 */
async function runMethods(
  prompt: readonly number[],
  steps: number,
  choose: (row: Float32Array, context: readonly number[]) => number,
): Promise<{ tokens: number[]; rows: Float32Array[] }> {
  const module = await Module.load(llamaBytes);
  let position = 0;
  const call = async (method: string, tokens: readonly number[]): Promise<Float32Array> => {
    const [logits] = await module.execute(method, [
      new Tensor('int64', [1, tokens.length], BigInt64Array.from(tokens, BigInt)),
      new Tensor('int64', [1], BigInt64Array.of(BigInt(position))),
    ]);
    position += tokens.length;
    const data = (logits as Tensor).data as Float32Array;
    return data.slice(data.length - vocab);
  };
  let row = new Float32Array(0);
  for (let at = 0; at < prompt.length; ) {
    const chunk = prompt.length - at >= prefillLength && prompt.length - at > 1 ? prefillLength : 1;
    row = await call(chunk === 1 ? 'decode' : 'prefill', prompt.slice(at, at + chunk));
    at += chunk;
  }
  const context = [...prompt];
  const tokens: number[] = [];
  const rows: Float32Array[] = [];
  for (let step = 0; step < steps; step++) {
    rows.push(row);
    const token = choose(row, context);
    tokens.push(token);
    context.push(token);
    if (step + 1 < steps) row = await call('decode', [token]);
  }
  await module.dispose();
  return { tokens, rows };
}

const argmaxOf = (values: readonly number[]): number => values.indexOf(Math.max(...values));

/** Each entry's log-probabilities against the log-softmax of its row, its bytes and text against the tokenizer's. */
function expectLogprobsOf(logprobs: readonly TokenLogprob[], tokens: readonly number[], rows: readonly Float32Array[], top: number): void {
  expect(logprobs.map((entry) => entry.id)).toEqual(tokens);
  logprobs.forEach((entry, i) => {
    const expected = referenceLogSoftmax(rows[i]!);
    expect(Math.abs(entry.logprob - expected[entry.id]!)).toBeLessThan(1e-6);
    const ranked = expected.map((logprob, id) => ({ id, logprob })).sort((a, b) => b.logprob - a.logprob || a.id - b.id);
    expect(entry.topLogprobs.map((item) => item.id)).toEqual(ranked.slice(0, top).map((item) => item.id));
    entry.topLogprobs.forEach((item, k) => expect(Math.abs(item.logprob - ranked[k]!.logprob)).toBeLessThan(1e-6));
    for (const item of [entry, ...entry.topLogprobs]) {
      expect(item.bytes).toEqual(Array.from(tokenizer.tokenBytes(item.id)));
      expect(item.text).toBe(new TextDecoder().decode(Uint8Array.from(item.bytes)));
    }
  });
}

const prompt = [12, 200, 31, 7, 99, 150, 3, 64];

describe('sampling controls in generate()', () => {
  it('logprobs are the log-softmax of the rows the method returns, one entry per token, and onToken gets each as it comes', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const seen: [number, TokenLogprob | undefined][] = [];
    const result = await llm.generate(prompt, {
      temperature: 0,
      maxNewTokens: 10,
      logprobs: true,
      topLogprobs: 5,
      onToken: (id, logprobs) => seen.push([id, logprobs]),
    });
    const { tokens, rows } = await runMethods(prompt, 10, (row) => argmaxOf(Array.from(row)));
    expect(result.tokens).toEqual(tokens);
    expectLogprobsOf(result.logprobs!, tokens, rows, 5);
    // Greedy without a bias or penalties picks the most likely token of each row.
    for (const entry of result.logprobs!) expect(entry.topLogprobs[0]!.id).toBe(entry.id);
    expect(seen).toEqual(result.tokens.map((id, i) => [id, result.logprobs![i]]));

    // Without logprobs the result has none, and onToken gets the ids alone.
    const ids: number[] = [];
    const plain = await llm.generate(prompt, {
      temperature: 0.9,
      seed: 3,
      maxNewTokens: 6,
      onToken: (id, lp) => ids.push(lp === undefined ? id : -1),
    });
    expect(plain.logprobs).toBeUndefined();
    expect(ids).toEqual(plain.tokens);
    // Sampled tokens have theirs too, from the same rows, whatever the temperature.
    const sampled = await llm.generate(prompt, { temperature: 1.7, seed: 5, maxNewTokens: 8, logprobs: true });
    const replay = await runMethods(prompt, 8, (_, context) => sampled.tokens[context.length - prompt.length]!);
    expectLogprobsOf(sampled.logprobs!, sampled.tokens, replay.rows, 0);
    await llm.dispose();
  });

  it('a throw from onToken fails the generation, with the error as its cause, and the session goes on', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const session = await llm.session();
    const failure = new Error('listener gave up');
    const failing = session.generate(prompt, {
      temperature: 0,
      maxNewTokens: 6,
      onToken: () => {
        throw failure;
      },
    });
    await expect(failing).rejects.toMatchObject({ message: 'listener gave up', cause: failure });
    // The sampled token is pending, as after any turn: the next one continues from it.
    expect(session.position).toBe(prompt.length + 1);
    const next = await session.generate([5], { temperature: 0, maxNewTokens: 2 });
    expect(next.stats.generatedTokens).toBe(2);
    await session.dispose();
    await llm.dispose();
  });

  it('a large positive logit bias makes greedy decoding pick that token; its logprob stays the model’s', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const greedy = await llm.generate(prompt, { temperature: 0, maxNewTokens: 6 });
    const target = [...Array(vocab).keys()].find((id) => !greedy.tokens.includes(id))!;
    const biased = await llm.generate(prompt, { temperature: 0, maxNewTokens: 6, logitBias: { [target]: 100 }, logprobs: true });
    expect(biased.tokens).toEqual(new Array(6).fill(target));
    const { rows } = await runMethods(prompt, 6, () => target);
    expectLogprobsOf(biased.logprobs!, biased.tokens, rows, 0);
    // The bias is not in the log-probabilities: the model did not favour the token.
    for (const entry of biased.logprobs!) expect(entry.logprob).toBeLessThan(-1);
    // -100 on what greedy picks first moves it off that token.
    const banned = await llm.generate(prompt, { temperature: 0, maxNewTokens: 1, logitBias: { [greedy.tokens[0]!]: -100 } });
    expect(banned.tokens[0]).not.toBe(greedy.tokens[0]);
    await llm.dispose();
  });

  it('the penalties count the prompt and the generated tokens in their window, as the reference picks over the same rows', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const plain = await llm.generate(prompt, { temperature: 0, maxNewTokens: 16 });
    const controls: Controls[] = [
      { temperature: 0, repetitionPenalty: 1.6, penaltyLastN: 12 },
      { temperature: 0, frequencyPenalty: 0.6, presencePenalty: 0.4, penaltyLastN: -1, logitBias: { [prompt[3]!]: 1.5 } },
      { temperature: 0, presencePenalty: 2, penaltyLastN: 4 },
    ];
    for (const c of controls) {
      const { logitBias, ...rest } = c;
      const options: GenerateOptions = { ...rest, maxNewTokens: 16, ...(logitBias !== undefined && { logitBias }) };
      const result = await llm.generate(prompt, options);
      const { tokens } = await runMethods(prompt, 16, (row, context) => argmaxOf(referenceLogits(row, c, context)));
      expect(result.tokens).toEqual(tokens);
      expect(result.tokens).not.toEqual(plain.tokens);
    }
    await llm.dispose();
  });

  it('a session turn counts the earlier turns too: the window is the context the model sees', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    // The bias would make the first prompt's first token the pick, were the presence penalty not counting it.
    const options = { temperature: 0, presencePenalty: 2, penaltyLastN: -1, logitBias: { [prompt[0]!]: 1.5 }, maxNewTokens: 5 };
    const session = await llm.session();
    const first = await session.generate(prompt, options);
    const second = await session.generate([5], options);
    // The same context in one turn: the first turn's prompt and tokens, then the second's prompt.
    const whole = [...prompt, ...first.tokens, 5];
    expect(second.tokens).toEqual((await llm.generate(whole, options)).tokens);
    const counted = await runMethods(whole, 5, (row, context) => argmaxOf(referenceLogits(row, options, context)));
    expect(second.tokens).toEqual(counted.tokens);
    expect(second.tokens).not.toContain(prompt[0]);
    // Counting the second turn's tokens alone would have picked it.
    const turnOnly = await runMethods(whole, 5, (row, context) => argmaxOf(referenceLogits(row, options, context.slice(whole.length - 1))));
    expect(turnOnly.tokens[0]).toBe(prompt[0]);
    await session.dispose();
    await llm.dispose();
  });
});

describe('sampling options are checked before any call', () => {
  it.each([
    [{ repetitionPenalty: 0 }, /repetitionPenalty must be a number > 0, got number 0/],
    [{ frequencyPenalty: 2.5 }, /frequencyPenalty must be a number in \[-2, 2\], got number 2.5/],
    [{ presencePenalty: -3 }, /presencePenalty must be a number in \[-2, 2\]/],
    [{ penaltyLastN: -2 }, /penaltyLastN must be an integer >= -1, got number -2/],
    [{ penaltyLastN: 1.5 }, /penaltyLastN must be an integer >= -1/],
    [{ minP: 1.5 }, /minP must be a number in \[0, 1\], got number 1.5/],
    [{ minP: Number.NaN }, /minP must be a number in \[0, 1\], got number NaN/],
    [{ logprobs: true, topLogprobs: 21 }, /topLogprobs must be an integer from 0 to 20, got number 21/],
    [{ topLogprobs: 3 }, /topLogprobs must be given with logprobs: true, got number 3/],
    [{ logprobs: 'yes' }, /logprobs must be a boolean, got 'yes'/],
    [{ logitBias: { 300: 1 } }, /logitBias must be keyed by token ids in the model's vocabulary 0..255, got token 300/],
    [{ logitBias: { a: 1 } }, /logitBias must be keyed by token ids \(integers >= 0\), got the key 'a'/],
    [{ logitBias: { '-1': 1 } }, /got the key '-1'/],
    [{ logitBias: { '07': 1 } }, /got the key '07'/],
    [{ logitBias: { 5: 101 } }, /logitBias\[5\] must be a number in \[-100, 100\], got number 101/],
    [{ logitBias: { 5: '1' } }, /logitBias\[5\] must be a number in \[-100, 100\], got '1'/],
    [{ logitBias: [1] }, /logitBias must be an object of token ids to numbers, got Array/],
    [{ logitBias: new Map([[1, 1]]) }, /logitBias must be an object of token ids to numbers, got Map/],
    [{ logitBias: null }, /logitBias must be an object of token ids to numbers, got null/],
    [{ onToken: 5 }, /onToken must be a function, got number 5/],
  ])('%o', async (options, message) => {
    const llm = await Llm.load(bigramProgram({ chain: chainOf('ab') }), { tokenizer });
    const session = await llm.session();
    await session.generate('a', { temperature: 0, maxNewTokens: 2 });
    const before = session.position;
    const refused = session.generate('a', options as GenerateOptions);
    await expect(refused).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(refused).rejects.toThrow(message);
    expect(session.position).toBe(before);
    await session.dispose();
    await llm.dispose();
  });

  it('logitBiasFault checks a request by the same rule, the vocabulary when given', () => {
    expect(logitBiasFault({ 0: -100, 255: 100, 7: 0.5 }, { vocabSize: 256 })).toBeUndefined();
    expect(logitBiasFault({})).toBeUndefined();
    expect(logitBiasFault({ 256: 1 })).toBeUndefined();
    expect(logitBiasFault({ 256: 1 }, { vocabSize: 256 })).toMatchObject({ fault: 'range', field: 'logitBias', got: 'token 256' });
    expect(logitBiasFault({ 3: -100.5 })).toMatchObject({ fault: 'range', field: 'logitBias[3]', rule: 'a number in [-100, 100]' });
    expect(logitBiasFault({ 3: Infinity })).toMatchObject({ fault: 'range', field: 'logitBias[3]' });
    expect(logitBiasFault({ x: 1 })).toMatchObject({ fault: 'type', field: 'logitBias' });
    expect(logitBiasFault('5=1')).toMatchObject({ fault: 'type', field: 'logitBias' });
  });
});
