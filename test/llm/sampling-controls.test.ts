// The sampling controls against the reference of sampling-reference.ts,
// written from their definitions: processed distributions, greedy picks,
// draws and log-probabilities on seeded random rows, then the edge cases.
import { describe, expect, it } from 'vitest';

import { argmax, Sampler, type SamplingOptions } from '../../lib/llm/index.js';
import { rowLogprobs } from '../../lib/llm/logprobs.js';
import { Lcg } from '../../lib/random.js';
import { referenceDistribution, referenceLogits, referenceLogSoftmax, type Controls } from './sampling-reference.js';

const samplerOf = (c: Controls, seed = 1): Sampler => {
  const options: SamplingOptions = {
    topK: 0,
    topP: 1,
    seed,
    ...c,
    logitBias: new Map(Object.entries(c.logitBias ?? {}).map(([id, bias]) => [Number(id), bias])),
  };
  return new Sampler(options);
};

/** A random row over `vocab` tokens, and a context that repeats some of them. */
function randomCase(random: Lcg, vocab: number): { row: Float32Array; context: number[] } {
  const row = random.signedFloat32(vocab, 6);
  const context = Array.from({ length: 1 + Math.floor(random.next() * 40) }, () => Math.floor(random.next() * Math.min(vocab, 24)));
  return { row, context };
}

const CONTROLS: Controls[] = [
  { temperature: 0.8, repetitionPenalty: 1.3 },
  { temperature: 1, frequencyPenalty: 0.7, presencePenalty: -0.4, penaltyLastN: 10 },
  { temperature: 1.5, minP: 0.05 },
  { temperature: 0.6, topK: 20, topP: 0.9, minP: 0.1, repetitionPenalty: 0.8, penaltyLastN: -1 },
  { temperature: 1.2, topP: 0.7, frequencyPenalty: 2, presencePenalty: 2, penaltyLastN: 3, logitBias: { 3: 5, 7: -2.5, 11: 100 } },
  { temperature: 0.9, topK: 5, logitBias: { 0: -100, 1: 1.5 }, repetitionPenalty: 1.1, penaltyLastN: 0 },
  // The bias comes before the repetition penalty: a bias that flips a logit's sign flips what the penalty does.
  { temperature: 1, repetitionPenalty: 1.8, penaltyLastN: 16, logitBias: { 2: 3, 5: -4, 9: 1, 14: -0.5 } },
];

describe('sampling controls against their definitions', () => {
  it.each(CONTROLS.map((c, i) => [i, c] as const))('processed distribution on random rows (controls %i)', (_, c) => {
    const random = new Lcg(11);
    for (let trial = 0; trial < 40; trial++) {
      const { row, context } = randomCase(random, trial % 2 === 0 ? 64 : 1000);
      const sampler = samplerOf(c);
      sampler.accept(context);
      const { ids, probabilities } = sampler.candidates(row);
      const expected = referenceDistribution(row, c, context);
      expect(ids).toEqual([...expected.keys()]);
      ids.forEach((id, i) => expect(Math.abs(probabilities[i]! - expected.get(id)!)).toBeLessThan(2e-6));
    }
  });

  it('greedy picks the argmax of the logits after the bias and the penalties', () => {
    const random = new Lcg(5);
    let moved = 0;
    for (const c of CONTROLS) {
      for (let trial = 0; trial < 60; trial++) {
        const { row, context } = randomCase(random, 48);
        // The context holds the row's argmax, so the penalties have something to push down.
        context.push(argmax(row));
        const sampler = samplerOf({ ...c, temperature: 0 });
        sampler.accept(context);
        const logits = referenceLogits(row, c, context);
        const expected = logits.indexOf(Math.max(...logits));
        expect(sampler.sample(row)).toBe(expected);
        if (expected !== argmax(row)) moved++;
        // top-k 1 is greedy too.
        const topOne = samplerOf({ ...c, topK: 1 });
        topOne.accept(context);
        expect(topOne.sample(row)).toBe(expected);
      }
    }
    // The bias and the penalties changed the pick in a good share of the rows.
    expect(moved).toBeGreaterThan(100);
  });

  it('draws in proportion to the processed distribution, and the same seed draws the same tokens', () => {
    const random = new Lcg(23);
    for (const c of CONTROLS) {
      const { row, context } = randomCase(random, 12);
      const sampler = samplerOf(c, 77);
      sampler.accept(context);
      const draws = 20000;
      const seen = new Map<number, number>();
      for (let i = 0; i < draws; i++) {
        const id = sampler.sample(row);
        seen.set(id, (seen.get(id) ?? 0) + 1);
      }
      const expected = referenceDistribution(row, c, context);
      for (const id of seen.keys()) expect(expected.has(id), `token ${id} is outside the candidates`).toBe(true);
      for (const [id, p] of expected) expect(Math.abs((seen.get(id) ?? 0) / draws - p)).toBeLessThan(0.015);
      const again = samplerOf(c, 77);
      again.accept(context);
      const replay = samplerOf(c, 77);
      replay.accept(context);
      const first = Array.from({ length: 50 }, () => again.sample(row));
      expect(Array.from({ length: 50 }, () => replay.sample(row))).toEqual(first);
    }
  });

  it('log-probabilities are the log-softmax of the row as given, whatever the bias, the penalties and temperature', () => {
    const random = new Lcg(9);
    for (let trial = 0; trial < 30; trial++) {
      const row = random.signedFloat32(trial % 2 === 0 ? 50 : 3000, 10);
      const expected = referenceLogSoftmax(row);
      const token = Math.floor(random.next() * row.length);
      const { logprob, top } = rowLogprobs(row, token, 20);
      expect(Math.abs(logprob - expected[token]!)).toBeLessThan(1e-9);
      const ranked = expected.map((lp, id) => ({ id, lp })).sort((a, b) => b.lp - a.lp || a.id - b.id);
      expect(top.map((entry) => entry.id)).toEqual(ranked.slice(0, 20).map((entry) => entry.id));
      top.forEach((entry, i) => expect(Math.abs(entry.logprob - ranked[i]!.lp)).toBeLessThan(1e-9));
    }
    expect(rowLogprobs(Float32Array.of(1, 2, 3), 0, 0).top).toEqual([]);
    // Asking for more than the vocabulary gives all of it.
    expect(rowLogprobs(Float32Array.of(1, 2, 3), 0, 20).top.map((entry) => entry.id)).toEqual([2, 1, 0]);
  });
});

describe('sampling edge cases', () => {
  it('ties go to the lower id: greedy, top-k, the candidates order and the top log-probabilities', () => {
    const row = Float32Array.of(1, 3, 2, 3, 3);
    expect(samplerOf({ temperature: 0 }).sample(row)).toBe(1);
    expect(samplerOf({ temperature: 0, logitBias: { 1: -0.5 } }).sample(row)).toBe(3);
    expect(samplerOf({ temperature: 1, topK: 2 }).candidates(row).ids).toEqual([1, 3]);
    // min-p 1 keeps every token as likely as the most likely one.
    const tied = samplerOf({ temperature: 1, minP: 1 }).candidates(row);
    expect(tied.ids).toEqual([1, 3, 4]);
    tied.probabilities.forEach((p) => expect(p).toBeCloseTo(1 / 3, 6));
    expect(rowLogprobs(row, 0, 4).top.map((entry) => entry.id)).toEqual([1, 3, 4, 2]);
  });

  it('all but one token at -Infinity: that token is drawn, with log-probability 0; a bias or a penalty leaves -Infinity as it is', () => {
    const row = new Float32Array(40).fill(-Infinity);
    row[17] = -3;
    const c: Controls = { temperature: 2, minP: 0.5, repetitionPenalty: 1.5, frequencyPenalty: -2, logitBias: { 3: 100, 17: -50 } };
    const sampler = samplerOf(c);
    sampler.accept([3, 3, 3, 17]);
    expect(new Set(Array.from({ length: 200 }, () => sampler.sample(row)))).toEqual(new Set([17]));
    expect(sampler.candidates(row)).toEqual({ ids: [17], probabilities: [1] });
    expect(samplerOf({ ...c, temperature: 0 }).sample(row)).toBe(17);
    const { logprob, top } = rowLogprobs(row, 17, 3);
    expect(logprob).toBe(0);
    expect(top.map((entry) => entry.logprob)).toEqual([0, -Infinity, -Infinity]);
  });

  it('a bias of -100 bans a token; +100 makes it the only one drawn', () => {
    const random = new Lcg(4);
    const row = random.signedFloat32(300, 8);
    const best = argmax(row);
    const banned = samplerOf({ temperature: 1.5, logitBias: { [best]: -100 } }, 3);
    const { ids, probabilities } = banned.candidates(row);
    expect(probabilities[ids.indexOf(best)]!).toBeLessThan(1e-30);
    for (let i = 0; i < 5000; i++) expect(banned.sample(row)).not.toBe(best);
    const worst = Array.from(row.keys()).sort((a, b) => row[a]! - row[b]!)[0]!;
    const chosen = samplerOf({ temperature: 1.5, logitBias: { [worst]: 100 } }, 3);
    expect(new Set(Array.from({ length: 2000 }, () => chosen.sample(row)))).toEqual(new Set([worst]));
    expect(samplerOf({ temperature: 0, logitBias: { [worst]: 100 } }).sample(row)).toBe(worst);
  });

  it('the window: the last penaltyLastN accepted tokens count, -1 counts them all, 0 none', () => {
    const row = Float32Array.of(2, 2, 2, 2, 2, 2);
    const context = [0, 0, 1, 2, 2, 2, 3];
    const penalised = (penaltyLastN: number): number[] => {
      const sampler = samplerOf({ temperature: 1, frequencyPenalty: 1, penaltyLastN });
      sampler.accept(context.slice(0, 3));
      for (const id of context.slice(3)) sampler.accept(id);
      const { ids, probabilities } = sampler.candidates(row);
      // Back from probabilities to logits, up to a constant: log p relative to token 5's, which no window holds.
      const p5 = probabilities[ids.indexOf(5)]!;
      return [0, 1, 2, 3, 4].map((id) => Math.round(Math.log(probabilities[ids.indexOf(id)]! / p5) * 1e6) / 1e6);
    };
    expect(penalised(1)).toEqual([0, 0, 0, -1, 0]);
    expect(penalised(4)).toEqual([0, 0, -3, -1, 0]);
    expect(penalised(6)).toEqual([-1, -1, -3, -1, 0]);
    expect(penalised(-1)).toEqual([-2, -1, -3, -1, 0]);
    expect(penalised(0)).toEqual([0, 0, 0, 0, 0]);
    // A prompt longer than the window leaves only its tail.
    expect(penalised(2)).toEqual([0, 0, -1, -1, 0]);
  });

  it('the repetition penalty divides a positive logit and multiplies a negative one', () => {
    const row = Float32Array.of(2, -2, 0, 1);
    const sampler = samplerOf({ temperature: 1, repetitionPenalty: 2 });
    sampler.accept([0, 1, 2]);
    const { ids, probabilities } = sampler.candidates(row);
    // Back to logits from token 3's, which the window does not hold.
    const logit = (id: number): number => Math.log(probabilities[ids.indexOf(id)]! / probabilities[ids.indexOf(3)]!) + 1;
    [1, -4, 0].forEach((expected, id) => expect(logit(id)).toBeCloseTo(expected, 5));
    // Below 1 it rewards repeats the same way round.
    const rewarding = samplerOf({ temperature: 0, repetitionPenalty: 0.25 });
    rewarding.accept([3]);
    expect(rewarding.sample(row)).toBe(3);
  });

  it('NaN: sampling refuses the row, greedy picks it as torch.argmax does, log-probabilities are NaN', () => {
    const row = Float32Array.of(1, Number.NaN, 3);
    expect(() => samplerOf({ temperature: 1, minP: 0.1 }).sample(row)).toThrow(/logit 1 is NaN/);
    expect(samplerOf({ temperature: 0, logitBias: { 1: -100 } }).sample(row)).toBe(1);
    expect(Number.isNaN(rowLogprobs(row, 2, 0).logprob)).toBe(true);
    expect(() => samplerOf({ temperature: 1 }).sample(Float32Array.of(-Infinity, 0, -Infinity).fill(-Infinity))).toThrow(
      /every logit is -Infinity/,
    );
    expect(Number.isNaN(rowLogprobs(Float32Array.of(-Infinity, -Infinity), 0, 0).logprob)).toBe(true);
  });

  it('+Infinity: the +Infinity tokens share the probability, and a bias or a penalty keeps them there', () => {
    const row = Float32Array.of(5, Infinity, 7, Infinity);
    const sampler = samplerOf({ temperature: 0.7, minP: 0.9, logitBias: { 1: -100 }, repetitionPenalty: 3, frequencyPenalty: 2 });
    sampler.accept([3, 3]);
    expect(sampler.candidates(row)).toEqual({ ids: [1, 3], probabilities: [0.5, 0.5] });
    const seen = new Set(Array.from({ length: 200 }, () => sampler.sample(row)));
    expect(seen).toEqual(new Set([1, 3]));
    expect(samplerOf({ temperature: 0 }).sample(row)).toBe(1);
    expect(rowLogprobs(row, 3, 3)).toEqual({
      logprob: -Math.log(2),
      top: [
        { id: 1, logprob: -Math.log(2) },
        { id: 3, logprob: -Math.log(2) },
        { id: 2, logprob: -Infinity },
      ],
    });
  });

  it('leaves the row it is given as the method returned it', () => {
    const row = Float32Array.of(1, 2, 3, 4);
    const copy = row.slice();
    const sampler = samplerOf({ temperature: 1, repetitionPenalty: 2, logitBias: { 0: 5 } });
    sampler.accept([3]);
    sampler.sample(row);
    samplerOf({ temperature: 0, logitBias: { 0: 5 } }).sample(row);
    expect(Buffer.compare(Buffer.from(row.buffer), Buffer.from(copy.buffer))).toBe(0);
  });
});
