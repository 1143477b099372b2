// A session saved as bytes and continued elsewhere: restored on the same Llm,
// on another Llm over the same program, or forked; each goes on exactly as the
// session it came from would have. The snapshot holds the cache rows the
// session filled, not the whole cache.
import { describe, expect, it, vi } from 'vitest';

import { Module } from '../../lib/index.js';
import { Llm, loadTokenizer } from '../../lib/llm/index.js';
import { cacheRanges } from '../../lib/llm/snapshot.js';
import { LLAMA_8DA4W_CONFIG } from '../../lib/tools/examples/llama-8da4w.js';
import { rejection, thrown } from '../helpers/errors.js';
import { byteTokenizerJson, llamaProgram } from './helpers.js';

const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson()));
const llamaBytes = llamaProgram(LLAMA_8DA4W_CONFIG, { get_max_context_len: [LLAMA_8DA4W_CONFIG.context] });
const system = Array.from({ length: 19 }, (_, i) => (i * 29 + 3) % LLAMA_8DA4W_CONFIG.vocab);
const greedy = { temperature: 0, maxNewTokens: 7 } as const;

/** A session saved after the system prompt, and what it then gives for [70, 71, 72]. */
async function savedAfterSystem() {
  const llm = await Llm.load(llamaBytes, { tokenizer });
  const session = await llm.session();
  await session.generate(system, greedy);
  const snapshot = await session.save();
  const position = session.position;
  const expected = await session.generate([70, 71, 72], greedy);
  return { llm, session, snapshot, position, expected };
}

describe('LlmSession.save and Llm.restoreSession', () => {
  it('continue a conversation on another session, and another Llm over the same bytes, as it would have gone on', async () => {
    const { llm, session, snapshot, position, expected } = await savedAfterSystem();

    const restored = await llm.restoreSession(snapshot);
    expect(restored.position).toBe(position);
    expect((await restored.generate([70, 71, 72], greedy)).tokens).toEqual(expected.tokens);

    const elsewhere = await Llm.load(llamaBytes, { tokenizer });
    const moved = await elsewhere.restoreSession(snapshot.buffer);
    expect((await moved.generate([70, 71, 72], greedy)).tokens).toEqual(expected.tokens);
    await Promise.all([session.dispose(), restored.dispose(), moved.dispose()]);
    await Promise.all([llm.dispose(), elsewhere.dispose()]);
  });

  it('restore into a session kept for it, whatever it held, and go on as the saved one would', async () => {
    const { llm, session, snapshot, position, expected } = await savedAfterSystem();

    const kept = await llm.session();
    await kept.generate([5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28], greedy);
    await kept.restore(snapshot);
    expect(kept.position).toBe(position);
    expect((await kept.generate([70, 71, 72], greedy)).tokens).toEqual(expected.tokens);
    // A snapshot cut short leaves the session where it was.
    const before = kept.position;
    const bad = await rejection(kept.restore(snapshot.subarray(0, 20)));
    expect(bad.code).toBe('INVALID_INPUT');
    expect(kept.position).toBe(before);
    await Promise.all([session.dispose(), kept.dispose(), llm.dispose()]);
  });

  it('hold only the cache rows up to the position, and the rows as they were', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const session = await llm.session();
    const empty = await session.save();
    await session.generate(system, greedy);
    const saved = await session.save();
    const { state } = llm.program.describe().methods.find((method) => method.name === 'decode')!;
    const ranges = cacheRanges(state, llm.metadata, session.position - 1);
    const rowBytes = ranges.reduce((sum, [, size]) => sum + size, 0);
    const cacheBytes = state.reduce((sum, tensor) => sum + tensor.bytes, 0);
    // The rows filled are a small part of a 256-position cache, and the snapshot is those rows and a header.
    expect(rowBytes).toBeLessThan(cacheBytes / 4);
    expect(saved.byteLength).toBeGreaterThan(rowBytes);
    expect(saved.byteLength).toBeLessThan(rowBytes * 1.05 + 4096);
    expect(empty.byteLength).toBeLessThan(4096);
    await session.dispose();
    await llm.dispose();
  });

  it('save({ position }) keeps a prefix of the cache, with no pending token, that complete() extends as a fresh prefill would', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const session = await llm.session();
    const conversation = [...system, 40, 41, 42];
    const first = await session.complete(conversation, greedy);
    // The cache holds the prompt and every generated token but the last, which is pending.
    expect(session.tokens).toEqual([...conversation, ...first.tokens.slice(0, -1)]);
    const whole = await session.save();
    const prefix = await session.save({ position: system.length });
    expect(prefix.byteLength).toBeLessThan(whole.byteLength);

    const restored = await llm.restoreSession(prefix);
    expect(restored.tokens).toEqual(system);
    expect(restored.position).toBe(system.length);
    const prompt = [...system, 50, 51];
    const result = await restored.complete(prompt, greedy);
    expect(result.stats.cachedTokens).toBe(system.length);
    expect(result.tokens).toEqual((await llm.generate(prompt, greedy)).tokens);

    // The whole cache is a full save, pending token and all.
    const all = await llm.restoreSession(await session.save({ position: session.tokens.length }));
    expect(all.position).toBe(session.position);
    for (const position of [-1, 1.5, session.tokens.length + 1, '3']) {
      const error = await rejection(session.save({ position: position as number }));
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(/^save: position must be an integer from 0 to \d+ \(the tokens in the cache\), got /);
    }
    expect((await rejection(session.save({ at: 3 } as never))).message).toMatch(/^save: unknown option 'at'/);
    await Promise.all([session.dispose(), restored.dispose(), all.dispose()]);
    await llm.dispose();
  });

  it('fork: N sessions that all start after a shared prompt, each going on as the original would', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const base = await llm.session();
    await base.generate(system, { temperature: 0, maxNewTokens: 1 });
    const forks = await Promise.all([base.fork(), base.fork(), base.fork()]);
    const questions = [[1, 2, 3], [200, 201], [9]];
    const answers = await Promise.all(forks.map((fork, i) => fork.generate(questions[i]!, greedy)));
    for (const [i, question] of questions.entries()) {
      const alone = await llm.session();
      await alone.generate(system, { temperature: 0, maxNewTokens: 1 });
      expect(answers[i]!.tokens).toEqual((await alone.generate(question, greedy)).tokens);
      await alone.dispose();
    }
    // The original is untouched by its forks.
    expect(base.position).toBe(system.length + 1);
    // While forks copy its cache, nothing may change it; reading it (save) is fine.
    const saved = await base.save();
    const pendingFork = base.fork();
    expect((await rejection(base.generate([5], greedy).result)).message).toBe(
      'generate: this session is being forked; await the fork first',
    );
    expect(() => base.reset()).toThrow(/^reset: this session is being forked/);
    expect((await rejection(base.restore(saved))).message).toMatch(/^restore: this session is being forked/);
    const reading = base.save();
    const late = await pendingFork;
    expect((await reading).byteLength).toBe(saved.byteLength);
    expect(late.tokens).toEqual(base.tokens);
    await Promise.all([base.dispose(), late.dispose(), ...forks.map((fork) => fork.dispose())]);
    await llm.dispose();
  });

  it('fork and session take a module loaded ahead: untouched until a fork, then with the rows a fork copies in memory; disposed with the Llm', async () => {
    const loaded: Module[] = [];
    const load = Module.load.bind(Module);
    const spy = vi.spyOn(Module, 'load').mockImplementation(async (...args) => {
      const module = await load(...args);
      loaded.push(module);
      return module;
    });
    try {
      const llm = await Llm.load(llamaBytes, { tokenizer });
      expect(loaded).toHaveLength(1); // the metadata's, disposed
      const base = await llm.session();
      const first = await base.generate(system, { temperature: 0, maxNewTokens: 1 });
      await vi.waitFor(() => expect(loaded).toHaveLength(3));
      const untouched = (module: Module): number => module.memoryReport().untouchedBytes;
      const stateBytes = loaded[2]!.memoryReport().arenas.find((arena) => arena.memoryId === 2)!.bytes;
      // Loaded ahead with no fork yet: no page of its state is in memory but the one its block's header sits in.
      expect(untouched(loaded[2]!)).toBeGreaterThan(stateBytes - 4096);

      const forked = await base.fork();
      // The fork took it; the one loaded next has the rows a fork copies in memory.
      await vi.waitFor(() => expect(loaded).toHaveLength(4));
      const rows = cacheRanges(loaded[3]!.methodMeta('decode').state, llm.metadata, base.tokens.length);
      const rowBytes = rows.reduce((sum, [, size]) => sum + size, 0);
      await vi.waitFor(() => expect(untouched(loaded[3]!)).toBeLessThanOrEqual(stateBytes - rowBytes));
      // ... and its bytes as a new module's: a fork from it holds the original's, a session from it nothing.
      const again = await base.fork();
      expect(Buffer.compare(await again.save(), await base.save())).toBe(0);
      await forked.generate([1, 2, 3], greedy);
      expect(Buffer.compare(await again.save(), await base.save())).toBe(0);
      const fresh = await llm.session();
      expect((await fresh.generate(system, { temperature: 0, maxNewTokens: 1 })).tokens).toEqual(first.tokens);
      expect((await again.generate([9], greedy)).tokens).toEqual((await base.generate([9], greedy)).tokens);

      await Promise.all([base.dispose(), forked.dispose(), again.dispose(), fresh.dispose()]);
      await llm.dispose();
      // Every module it loaded, the one loaded ahead included, is disposed.
      for (const module of loaded) expect(thrown(() => module.memoryReport()).code).toBe('DISPOSED');
      await expect(llm.session()).rejects.toThrow('Llm has been disposed');
    } finally {
      spy.mockRestore();
    }
  });

  it('refuse snapshots that are cut short, not a session, or from another program, and make no session', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const session = await llm.session();
    await session.generate(system, greedy);
    const snapshot = await session.save();
    const cases: [Uint8Array, RegExp][] = [
      [snapshot.subarray(0, snapshot.byteLength - 3), /^state snapshot: truncated/],
      [snapshot.subarray(0, 8), /^session snapshot: 8 bytes is shorter than its header$/],
      [new Uint8Array(64), /^session snapshot: the bytes do not start with 'ETLS'$/],
    ];
    const other = llamaProgram({ ...LLAMA_8DA4W_CONFIG, context: 128 }, { get_max_context_len: [128] });
    const otherLlm = await Llm.load(other, { tokenizer });
    const otherSession = await otherLlm.session();
    await otherSession.generate([1, 2, 3], greedy);
    cases.push([await otherSession.save(), /^state snapshot: saved from a program whose state is laid out differently/]);
    for (const [bytes, message] of cases) {
      const error = await rejection(llm.restoreSession(bytes));
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(message);
    }
    expect((await rejection(llm.restoreSession('x' as never))).message).toBe(
      "restoreSession: a session snapshot must be an ArrayBuffer or a view of one, got 'x'",
    );
    const running = session.generate([5], greedy);
    expect((await rejection(session.save())).message).toBe('save: this session is generating; await the generation (or abort it) first');
    await running;
    await Promise.all([session.dispose(), otherSession.dispose()]);
    await Promise.all([llm.dispose(), otherLlm.dispose()]);
  });
});

describe('LlmSession.complete: the prompt as the whole context', () => {
  it('keeps the cache rows that match the prompt, prefills the rest, and generates what a fresh session would', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const session = await llm.session();
    const ask = async (question: number[]) => {
      const prompt = [...system, ...question];
      const result = await session.complete(prompt, greedy);
      expect(result.tokens).toEqual((await llm.generate(prompt, greedy)).tokens);
      return result;
    };
    expect((await ask([1, 2, 3])).stats.cachedTokens).toBe(0);
    expect((await ask([4, 5])).stats.cachedTokens).toBe(system.length);
    // The whole prompt cached: its last token runs again for the logits of the first new one.
    const again = await ask([4, 5]);
    expect(again.stats.cachedTokens).toBe(system.length + 1);
    expect(again.stats.promptTokens).toBe(system.length + 2);
    // A different start keeps nothing.
    expect((await ask([]).then(() => session.complete([9, ...system], greedy))).stats.cachedTokens).toBe(0);
    await session.dispose();
    await llm.dispose();
  });

  it('on a fork of a session that prefilled a shared prompt, prefills only what follows it', async () => {
    const llm = await Llm.load(llamaBytes, { tokenizer });
    const base = await llm.session();
    await base.complete(system, { temperature: 0, maxNewTokens: 1 });
    const fork = await base.fork();
    const prompt = [...system, 33, 34];
    const result = await fork.complete(prompt, greedy);
    expect(result.stats.cachedTokens).toBe(system.length);
    expect(result.tokens).toEqual((await llm.generate(prompt, greedy)).tokens);
    await Promise.all([base.dispose(), fork.dispose()]);
    await llm.dispose();
  });
});
