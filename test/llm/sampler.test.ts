// Sampling over a logits row: greedy, temperature, top-k, top-p, seeds.
import { describe, expect, it } from 'vitest';

import { argmax, Sampler } from '../../lib/llm/index.js';

const draws = (sampler: Sampler, row: Float32Array, n: number): number[] => Array.from({ length: n }, () => sampler.sample(row));
const counts = (ids: readonly number[], vocab: number): number[] => {
  const c = new Array<number>(vocab).fill(0);
  for (const id of ids) c[id]!++;
  return c;
};

describe('sampler', () => {
  it('greedy is the first largest logit, a NaN counting as largest as in torch.argmax', () => {
    expect(argmax(Float32Array.of(1, 3, 2, 3))).toBe(1);
    expect(argmax(Float32Array.of(1, Number.NaN, 5, Number.NaN))).toBe(1);
    expect(argmax(Float32Array.of(-Infinity, -Infinity))).toBe(0);
    const greedy = new Sampler({ temperature: 0, topK: 0, topP: 1, seed: 1 });
    expect(greedy.sample(Float32Array.of(0.5, 2, -1))).toBe(1);
    expect(new Sampler({ temperature: 1, topK: 1, topP: 1, seed: 1 }).sample(Float32Array.of(0.5, 2, -1))).toBe(1);
  });

  it('draws in proportion to softmax(logits / temperature)', () => {
    const row = Float32Array.from([0.5, 0.3, 0.15, 0.05], Math.log);
    const c = counts(draws(new Sampler({ temperature: 1, topK: 0, topP: 1, seed: 5 }), row, 20000), 4);
    [0.5, 0.3, 0.15, 0.05].forEach((p, i) => expect(Math.abs(c[i]! / 20000 - p)).toBeLessThan(0.02));
    // Temperature 0.5 squares the odds: 0.5^2 : 0.3^2 : ... normalised.
    const sharp = counts(draws(new Sampler({ temperature: 0.5, topK: 0, topP: 1, seed: 5 }), row, 20000), 4);
    expect(Math.abs(sharp[0]! / 20000 - 0.25 / 0.365)).toBeLessThan(0.02);
  });

  it('top-p keeps the smallest set of most likely tokens reaching p, top-k the k most likely', () => {
    const row = Float32Array.from([0.05, 0.5, 0.15, 0.3], Math.log);
    const seen = (options: { topK: number; topP: number }): number[] =>
      counts(draws(new Sampler({ temperature: 1, seed: 9, ...options }), row, 4000), 4).flatMap((n, id) => (n > 0 ? [id] : []));
    expect(seen({ topK: 0, topP: 0.7 })).toEqual([1, 3]);
    expect(seen({ topK: 0, topP: 0.85 })).toEqual([1, 2, 3]);
    expect(seen({ topK: 2, topP: 1 })).toEqual([1, 3]);
    expect(seen({ topK: 3, topP: 0.7 })).toEqual([1, 3]);
  });

  it('top-k over a large vocabulary picks the same tokens as sorting it, ties going to the lower id', () => {
    const vocab = 5000;
    const row = Float32Array.from({ length: vocab }, (_, i) => ((i * 7919) % 101) / 10);
    const sorted = Array.from(row.keys()).sort((a, b) => row[b]! - row[a]! || a - b);
    const ids = new Set(draws(new Sampler({ temperature: 1000, topK: 7, topP: 1, seed: 3 }), row, 3000));
    expect([...ids].sort((a, b) => a - b)).toEqual(sorted.slice(0, 7).sort((a, b) => a - b));
  });

  it('the same seed draws the same tokens; another seed, others', () => {
    const row = Float32Array.from({ length: 1000 }, (_, i) => Math.sin(i));
    const options = { temperature: 0.8, topK: 50, topP: 0.95 };
    const first = draws(new Sampler({ ...options, seed: 42 }), row, 50);
    expect(draws(new Sampler({ ...options, seed: 42 }), row, 50)).toEqual(first);
    expect(draws(new Sampler({ ...options, seed: 43 }), row, 50)).not.toEqual(first);
  });

  it('top-p below 1 / vocabulary on a flat row keeps the most likely token, which the cut alone would drop', () => {
    // Two tokens, p = 0.1: the cut is 0.9 of the mass, above both tokens' 0.5.
    const draws01 = draws(new Sampler({ temperature: 1, topK: 0, topP: 0.1, seed: 4 }), Float32Array.of(0, 0), 50);
    expect(new Set(draws01)).toEqual(new Set([0]));
    expect(new Set(draws(new Sampler({ temperature: 1, topK: 0, topP: 0.1, seed: 4 }), Float32Array.of(0, 0.1), 50))).toEqual(new Set([1]));
  });

  it('refuses rows it cannot sample from', () => {
    const sampler = new Sampler({ temperature: 1, topK: 0, topP: 1, seed: 1 });
    expect(() => sampler.sample(Float32Array.of(1, Number.NaN))).toThrow(/logit 1 is NaN/);
    expect(() => sampler.sample(Float32Array.of(-Infinity, -Infinity))).toThrow(/every logit is -Infinity/);
  });
});
