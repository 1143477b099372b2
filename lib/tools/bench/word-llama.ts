// What the benchmarks that feed token ids load: llama-8da4w at a preset's
// shape with seeded weights (prefill/decode, its caches' whole context
// stated), and a word-level tokenizer with one word `tN` per id, so that a
// prompt is a list of ids and a reply's text spells its ids.
import { Llm, loadTokenizer } from '../../llm/index.js';
import {
  addConstantMethod,
  buildLlama8da4w,
  createLlama8da4wWeights,
  type Llama8da4wConfig,
  type Llama8da4wTransforms,
} from '../examples/llama-8da4w.js';

export function wordTokenizer(vocab: number) {
  const words = Object.fromEntries(Array.from({ length: vocab }, (_, i) => [`t${i}`, i]));
  const json = {
    version: '1.0',
    added_tokens: [],
    normalizer: null,
    pre_tokenizer: { type: 'Whitespace' },
    post_processor: null,
    decoder: null,
    model: { type: 'WordLevel', vocab: words, unk_token: 't0' },
  };
  return loadTokenizer(new TextEncoder().encode(JSON.stringify(json)));
}

/** The token ids a reply's text spells under wordTokenizer. */
export const wordIds = (text: string): number[] => [...text.matchAll(/t(\d+)/g)].map((match) => Number(match[1]));

/** The program at `config`'s shape, with the export transforms asked for, loaded with the word tokenizer. */
export function loadWordLlama(config: Llama8da4wConfig, numThreads: number, transforms: Llama8da4wTransforms = {}): Promise<Llm> {
  const builder = buildLlama8da4w(createLlama8da4wWeights(config), transforms);
  addConstantMethod(builder, 'get_max_context_len', [config.context]);
  return Llm.load(builder.export({ xnnpack: true }).bytes, { tokenizer: wordTokenizer(config.vocab), numThreads });
}
