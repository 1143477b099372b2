// `etna export-example llama-8da4w --family qwen3|gemma3`: Qwen3's operators
// (per-head q/k RMSNorm, rotate_half RoPE, tied embeddings, no BOS) and Gemma
// 3's (those, with (1 + weight) norms, a sqrt(d) embedding scale, a GELU-tanh
// gate and post-attention / post-MLP norms) in each layout, loaded by the
// runner and compared with the TypeScript reference token for token, alone
// and with int8 KV caches.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';
import { Llm, loadTokenizer } from '../../lib/llm/index.js';
import { Program } from '../../lib/program.js';
import { buildExample } from '../../lib/tools/examples/index.js';
import { geluTanh, ropeRows, withFamily, type Llama8da4wFamily } from '../../lib/tools/examples/llama-families.js';
import {
  createLlama8da4wWeights,
  LLAMA_8DA4W_CONFIG,
  LLAMA_8DA4W_PRESETS,
  Llama8da4wReference,
  type Llama8da4wLayout,
} from '../../lib/tools/examples/llama-8da4w.js';
import { runCli } from '../helpers/cli.js';
import { byteTokenizerJson, referenceGreedy } from './helpers.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-llama-families-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const QWEN3 = withFamily(LLAMA_8DA4W_PRESETS.small, 'qwen3');
const GEMMA3 = withFamily(LLAMA_8DA4W_PRESETS.small, 'gemma3');
const CONFIGS = { qwen3: QWEN3, gemma3: GEMMA3 };
const smallTokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson({ vocab: QWEN3.vocab })));
const promptOf = (length: number): number[] => Array.from({ length }, (_, i) => (i * 89 + 7) % QWEN3.vocab);

function exported(family: Llama8da4wFamily, options: { layout: Llama8da4wLayout; quantizeKvCache?: boolean; hadamard?: boolean }): string {
  const suffix = `${options.quantizeKvCache === true ? '-int8' : ''}${options.hadamard === true ? '-hadamard' : ''}`;
  const out = path.join(dir, `${family}-${options.layout}${suffix}.pte`);
  expect(runExportExample('llama-8da4w', out, { preset: 'small', family, ...options })).toBe(0);
  return out;
}

describe('the qwen3 family', () => {
  it("has Qwen3's weights: q_norm and k_norm of head_dim per layer, the output projection tied to the embedding", () => {
    const weights = createLlama8da4wWeights(QWEN3);
    const hd = QWEN3.modelDim / QWEN3.heads;
    for (const layer of weights.layers) expect([layer.qNorm?.length, layer.kNorm?.length]).toEqual([hd, hd]);
    expect(weights.output).toBe(weights.tokenEmbedding);
    expect([QWEN3.ropeTheta, QWEN3.normEps]).toEqual([1_000_000, 1e-6]);
    // The weights both families share are the same draws; Llama's own output projection is not the embedding.
    const llama = createLlama8da4wWeights(LLAMA_8DA4W_PRESETS.small);
    expect(Buffer.compare(Buffer.from(llama.layers[1]!.w2.buffer), Buffer.from(weights.layers[1]!.w2.buffer))).toBe(0);
    expect(llama.output).not.toBe(llama.tokenEmbedding);
    expect(llama.layers[0]!.qNorm).toBeUndefined();
  });

  it('rotates halves (x[i] with x[i + head_dim/2]) where Llama rotates interleaved pairs', () => {
    // One head of 4 at one position: angles a0, a1 for the two frequencies.
    const tables = { cos: Float32Array.from([Math.cos(0.3), Math.cos(0.1)]), sin: Float32Array.from([Math.sin(0.3), Math.sin(0.1)]) };
    const x = [1, 2, 3, 4];
    const rotate = (halves: boolean): number[] => {
      const rows = Float32Array.from(x);
      ropeRows(rows, { rows: 1, heads: 1, headDim: 4 }, 0, tables, halves);
      return Array.from(rows);
    };
    const [c0, c1, s0, s1] = [Math.cos(0.3), Math.cos(0.1), Math.sin(0.3), Math.sin(0.1)];
    // x * cat(cos, cos) + rotate_half(x) * cat(sin, sin), rotate_half(x) = cat(-x[2:], x[:2]).
    const halves = [1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1];
    const pairs = [1 * c0 - 2 * s0, 1 * s0 + 2 * c0, 3 * c1 - 4 * s1, 3 * s1 + 4 * c1];
    rotate(true).forEach((v, i) => expect(v).toBeCloseTo(halves[i]!, 6));
    rotate(false).forEach((v, i) => expect(v).toBeCloseTo(pairs[i]!, 6));
  });

  it("computes a model of its own: the reference's greedy tokens differ from Llama's and Gemma 3's", () => {
    const prompt = promptOf(9);
    const [qwen3, gemma3] = [referenceGreedy(prompt, 8, QWEN3), referenceGreedy(prompt, 8, GEMMA3)];
    expect(qwen3).not.toEqual(referenceGreedy(prompt, 8, LLAMA_8DA4W_PRESETS.small));
    expect(gemma3).not.toEqual(qwen3);
  });
});

describe('the gemma3 family', () => {
  it("has Gemma 3's weights: (1 + weight) norms around 1, post-attention and post-MLP norms, tied embeddings", () => {
    const weights = createLlama8da4wWeights(GEMMA3);
    for (const layer of weights.layers) {
      expect([layer.qNorm?.length, layer.kNorm?.length]).toEqual([GEMMA3.modelDim / GEMMA3.heads, GEMMA3.modelDim / GEMMA3.heads]);
      expect([layer.postAttentionNorm?.length, layer.postFfnNorm?.length]).toEqual([GEMMA3.modelDim, GEMMA3.modelDim]);
      // Stored around 0: the norm scales by 1 + weight.
      expect(Math.max(...layer.attentionNorm.map(Math.abs))).toBeLessThan(0.2);
    }
    expect(weights.output).toBe(weights.tokenEmbedding);
    expect([GEMMA3.ropeTheta, GEMMA3.normEps]).toEqual([10_000, 1e-6]);
  });

  it('gates with GELU in its tanh approximation', () => {
    // torch.nn.functional.gelu(x, approximate='tanh') at 1, -1 and 3.
    expect(geluTanh(1)).toBeCloseTo(0.8411919906, 9);
    expect(geluTanh(-1)).toBeCloseTo(-0.1588080094, 9);
    expect(geluTanh(3)).toBeCloseTo(2.99636, 5);
  });

  it('is written with sliding-window layers only, and refuses shapes that would need a global layer or a window', () => {
    expect(() => withFamily(LLAMA_8DA4W_PRESETS.stories110m, 'gemma3')).toThrow(
      /gemma3 family is written with sliding-window layers only: at most 5 layers and a context of at most 512 \(got 12 layers, context 1024\)/,
    );
  });
});

describe.each(['qwen3', 'gemma3'] as const)('llama-8da4w --family %s --preset small, token for token against the reference', (family) => {
  const config = CONFIGS[family];
  const files = {
    'prefill-decode': exported(family, { layout: 'prefill-decode' }),
    forward: exported(family, { layout: 'forward' }),
    optimum: exported(family, { layout: 'optimum' }),
  };

  it('names its BOS token only if the family has one', async () => {
    const bos = family === 'gemma3' ? [2] : [];
    for (const layout of ['forward', 'optimum'] as const) {
      const program = Program.load(files[layout]);
      const names = program.describe().methods.map((method) => method.name);
      expect(names).toContain('get_eos_ids');
      expect(names.includes('get_bos_id')).toBe(bos.length > 0);
      program.dispose();
    }
    const llm = await Llm.load(files.forward, { tokenizer: smallTokenizer });
    expect(llm.metadata.bosId).toBe(bos[0]);
    // The byte tokenizer adds no BOS of its own: one goes first only when asked for, and only if the model names one.
    const result = await llm.generate('Hi', { temperature: 0, maxNewTokens: 2, ignoreEos: true });
    expect(result.promptTokens).toEqual([0x48, 0x69]);
    if (family === 'gemma3') {
      const withBos = await llm.generate('Hi', { temperature: 0, maxNewTokens: 2, ignoreEos: true, numBos: 1 });
      expect(withBos.promptTokens).toEqual([2, 0x48, 0x69]);
    }
    await llm.dispose();
  });

  it.each([
    ['prefill-decode', 5],
    ['prefill-decode', 100],
    ['forward', 100],
    ['forward', 130],
    ['optimum', 100],
  ] as const)('%s: greedy tokens equal the reference (prompt of %i tokens)', async (layout, length) => {
    const llm = await Llm.load(files[layout], { tokenizer: smallTokenizer });
    const prompt = promptOf(length);
    // 12 tokens: the qwen3 130-token prompt's 16th is a near tie (logits 0.02 apart) that the chunking may break either way.
    const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 12, ignoreEos: true });
    expect(result.tokens).toEqual(referenceGreedy(prompt, 12, config));
    expect(new Set(result.tokens).size).toBeGreaterThan(1);
    await llm.dispose();
  });

  it.each(['prefill-decode', 'forward', 'optimum'] as const)(
    '%s with --quantize-kv-cache: greedy tokens equal the reference of the int8-cache graph',
    async (layout) => {
      const llm = await Llm.load(exported(family, { layout, quantizeKvCache: true }), { tokenizer: smallTokenizer });
      const prompt = promptOf(37);
      const reference = new Llama8da4wReference(createLlama8da4wWeights(config), '8da4w', { quantizeKvCache: true });
      const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 12, ignoreEos: true });
      expect(result.tokens).toEqual(referenceGreedy(prompt, 12, config, reference));
      await llm.dispose();
    },
  );

  it('forward with --hadamard --quantize-kv-cache: greedy tokens equal the reference of both transformations', async () => {
    const transforms = { hadamard: true, quantizeKvCache: true };
    const llm = await Llm.load(exported(family, { layout: 'forward', ...transforms }), { tokenizer: smallTokenizer });
    const prompt = promptOf(41);
    const reference = new Llama8da4wReference(createLlama8da4wWeights(config), '8da4w', transforms);
    const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 12, ignoreEos: true });
    expect(result.tokens).toEqual(referenceGreedy(prompt, 12, config, reference));
    await llm.dispose();
  });
});

describe('--family refuses what it cannot write', () => {
  it('an unknown family, or a family for an example without any, is bad usage (exit 2)', () => {
    const unknown = runCli(['export-example', 'llama-8da4w', path.join(dir, 'x.pte'), '--family', 'gpt2']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/^etna export-example: example 'llama-8da4w' has no family 'gpt2' \(available: llama, qwen3, gemma3\)/);
    const familyless = runCli(['export-example', 'kv-decoder', path.join(dir, 'x.pte'), '--family', 'qwen3']);
    expect(familyless.status).toBe(2);
    expect(familyless.stderr).toMatch(/example 'kv-decoder' has no family 'qwen3'/);
    expect(fs.existsSync(path.join(dir, 'x.pte'))).toBe(false);
    expect(() => buildExample('gru-stream', undefined, { family: 'qwen3' })).toThrow(
      /example 'gru-stream' has no family 'qwen3' \(it has one\)/,
    );
  });

  it('the default family is llama: the same program as without --family', () => {
    const plain = buildExample('llama-8da4w', undefined, { layout: 'forward' }).toPte({ xnnpack: true });
    const llama = buildExample('llama-8da4w', undefined, { layout: 'forward', family: 'llama' }).toPte({ xnnpack: true });
    expect(Buffer.compare(Buffer.from(plain), Buffer.from(llama))).toBe(0);
    expect(LLAMA_8DA4W_CONFIG.family).toBeUndefined();
  });
});
