// The runner over a program with int8 KV caches (export_llama's
// --quantize_kv_cache): greedy generation follows the reference of the
// quantized graph, and a session snapshot carries the int8 rows with their
// per-position scales and zero points, so a restored session goes on as the
// saved one, from fewer bytes than with float32 caches.
import { describe, expect, it } from 'vitest';

import { Llm, loadTokenizer } from '../../lib/llm/index.js';
import { createLlama8da4wWeights, LLAMA_8DA4W_CONFIG as C, Llama8da4wReference } from '../../lib/tools/examples/llama-8da4w.js';
import { byteTokenizerJson, llamaProgram, referenceGreedy } from './helpers.js';

const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson()));
const metadata = { get_max_context_len: [C.context] };
const quantized = llamaProgram(C, metadata, { quantizeKvCache: true });
const prompt = Array.from({ length: 19 }, (_, i) => (i * 29 + 3) % C.vocab);
const greedy = { temperature: 0, maxNewTokens: 7 } as const;

describe('Llm over int8 KV caches', () => {
  it('generates what the reference of the quantized graph generates', async () => {
    const llm = await Llm.load(quantized, { tokenizer });
    const reference = new Llama8da4wReference(createLlama8da4wWeights(C), '8da4w', { quantizeKvCache: true });
    expect((await llm.generate(prompt, { ...greedy, maxNewTokens: 12 })).tokens).toEqual(referenceGreedy(prompt, 12, C, reference));
    await llm.dispose();
  });

  it('a restored session goes on as the saved one; its snapshot is about a quarter of the float32 caches', async () => {
    const sizes: number[] = [];
    for (const bytes of [quantized, llamaProgram(C, metadata)]) {
      const llm = await Llm.load(bytes, { tokenizer });
      const session = await llm.session();
      await session.generate(prompt, greedy);
      const snapshot = await session.save();
      sizes.push(snapshot.byteLength);
      const expected = await session.generate([70, 71, 72], greedy);
      const restored = await llm.restoreSession(snapshot);
      expect((await restored.generate([70, 71, 72], greedy)).tokens).toEqual(expected.tokens);
      await Promise.all([session.dispose(), restored.dispose()]);
      await llm.dispose();
    }
    // The cache rows dominate both: (head_dim + 5) / (4 head_dim) as many bytes, plus the same header.
    const hd = C.modelDim / C.heads;
    expect(sizes[0]! / sizes[1]!).toBeGreaterThan((hd + 5) / (4 * hd) - 0.02);
    expect(sizes[0]! / sizes[1]!).toBeLessThan(0.35);
  });
});
