// The prefix cache's policy: what two prompts share is saved in whole
// blocks, once; a lookup takes the entry sharing the longest prefix; entries
// past the byte budget go, least recently used first.
import { describe, expect, it } from 'vitest';

import { PrefixCache } from '../../lib/serve/prefix-cache.js';

const range = (from: number, count: number): number[] => Array.from({ length: count }, (_, i) => from + i);
const bytes = (size: number): Uint8Array => new Uint8Array(size);

describe('PrefixCache', () => {
  it('wants the whole blocks a prompt shares with a recent one, unless an entry holds them', () => {
    const cache = new PrefixCache({ maxBytes: 1000, blockTokens: 4 });
    const system = range(100, 10);
    // A first prompt shares nothing yet.
    expect(cache.wanted([...system, 1, 2])).toBe(0);
    // The second shares 10 tokens: 8 in whole blocks of 4.
    expect(cache.wanted([...system, 3])).toBe(8);
    cache.add(system.slice(0, 8), bytes(100));
    expect(cache.wanted([...system, 5])).toBe(0);
    // Less than a block in common is not worth a snapshot.
    expect(cache.wanted([100, 101, 102, 7])).toBe(0);
    expect(new PrefixCache({ maxBytes: 0, blockTokens: 4 }).wanted(system)).toBe(0);
  });

  it("finds the entry sharing the longest prefix, at least a block, short of the prompt's last token", () => {
    const cache = new PrefixCache({ maxBytes: 1000, blockTokens: 4 });
    cache.add(range(0, 8), bytes(10));
    cache.add(range(0, 16), bytes(20));
    cache.add([...range(0, 4), 99, 99, 99, 99], bytes(30));
    expect(cache.lookup([...range(0, 12), 50])).toMatchObject({ shared: 12, entry: { tokens: range(0, 16) } });
    expect(cache.lookup(range(0, 6))).toMatchObject({ shared: 5, entry: { tokens: range(0, 8) } });
    // The whole of an entry's prompt: all of it but the last token is kept.
    expect(cache.lookup(range(0, 16))!.shared).toBe(15);
    expect(cache.lookup([0, 1, 2, 50, 51])).toBeUndefined();
    cache.counted(12);
    cache.counted(5);
    expect(cache.stats).toEqual({ entries: 3, bytes: 60, maxBytes: 1000, blockTokens: 4, hits: 2, hitTokens: 17 });
  });

  it('keeps its entries within the byte budget, dropping the least recently used first', () => {
    const cache = new PrefixCache({ maxBytes: 100, blockTokens: 2 });
    cache.add([1, 1], bytes(40));
    cache.add([2, 2], bytes(40));
    // A hit makes [1, 1] the most recently used, so [2, 2] goes when [3, 3] comes.
    expect(cache.lookup([1, 1, 9])).toBeDefined();
    cache.add([3, 3], bytes(40));
    expect(cache.lookup([2, 2, 9])).toBeUndefined();
    expect(cache.lookup([1, 1, 9])).toBeDefined();
    expect(cache.stats).toMatchObject({ entries: 2, bytes: 80 });
    // The same prefix again replaces its entry; one larger than the budget is not kept.
    cache.add([3, 3], bytes(50));
    cache.add([4, 4], bytes(101));
    expect(cache.stats).toMatchObject({ entries: 2, bytes: 90 });
    expect(cache.lookup([4, 4, 9])).toBeUndefined();
  });
});
