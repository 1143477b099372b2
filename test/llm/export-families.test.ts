// `etna export-example llama-8da4w --family qwen3|gemma3|phi4|smollm2`:
// Qwen3's operators (per-head q/k RMSNorm, rotate_half RoPE, tied embeddings,
// no BOS), Gemma 3's (those, with (1 + weight) norms, a sqrt(d) embedding
// scale, a GELU-tanh gate, post-attention / post-MLP norms, a head_dim of 256
// and global layers among the sliding ones), Phi-4-mini's (fused projections
// split, a partial rotary embedding with LongRoPE's attention factor, tied
// embeddings) and SmolLM2's (Llama's graph, tied, its rope theta) in each
// layout, loaded by the runner and compared with the TypeScript reference
// token for token, alone and with int8 KV caches and the Hadamard rotation.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';
import { Llm, loadTokenizer } from '../../lib/llm/index.js';
import { Program } from '../../lib/program.js';
import { buildExample } from '../../lib/tools/examples/index.js';
import {
  familyRopeTables,
  geluTanh,
  layerRopeTheta,
  ropeRows,
  rotaryDim,
  withFamily,
  type Llama8da4wFamily,
} from '../../lib/tools/examples/llama-families.js';
import {
  addConstantMethod,
  buildLlama8da4w,
  createLlama8da4wWeights,
  headDim,
  LLAMA_8DA4W_CONFIG,
  llama8da4wMetadata,
  pairsToHalves,
  LLAMA_8DA4W_PRESETS,
  Llama8da4wReference,
  type Llama8da4wLayout,
} from '../../lib/tools/examples/llama-8da4w.js';
import { runCli } from '../helpers/cli.js';
import { byteTokenizerJson, referenceGreedy } from './helpers.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-llama-families-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const QWEN3 = withFamily(LLAMA_8DA4W_PRESETS.small, 'qwen3');
// Six layers: five sliding-window layers and a global one.
const GEMMA3 = withFamily({ ...LLAMA_8DA4W_PRESETS.small, layers: 6 }, 'gemma3');
const PHI4 = withFamily(LLAMA_8DA4W_PRESETS.small, 'phi4');
const SMOLLM2 = withFamily(LLAMA_8DA4W_PRESETS.small, 'smollm2');
const CONFIGS = { qwen3: QWEN3, gemma3: GEMMA3, phi4: PHI4, smollm2: SMOLLM2 };
const smallTokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson({ vocab: QWEN3.vocab })));
const promptOf = (length: number): number[] => Array.from({ length }, (_, i) => (i * 89 + 7) % QWEN3.vocab);

function exported(family: Llama8da4wFamily, options: { layout: Llama8da4wLayout; quantizeKvCache?: boolean; hadamard?: boolean }): string {
  const suffix = `${options.quantizeKvCache === true ? '-int8' : ''}${options.hadamard === true ? '-hadamard' : ''}`;
  const out = path.join(dir, `${family}-${options.layout}${suffix}.pte`);
  if (family === 'gemma3') {
    // Six layers, past the small preset's two: the CLI's shapes are the presets', so this one is built directly.
    const { layout, ...transforms } = options;
    const bytes = buildLlama8da4w(createLlama8da4wWeights(GEMMA3), { layout, ...transforms }).toPte({ xnnpack: true });
    fs.writeFileSync(out, bytes);
  } else expect(runExportExample('llama-8da4w', out, { preset: 'small', family, ...options })).toBe(0);
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
    const [qwen3, gemma3] = [
      referenceGreedy(prompt, 8, QWEN3),
      referenceGreedy(prompt, 8, withFamily(LLAMA_8DA4W_PRESETS.small, 'gemma3')),
    ];
    expect(qwen3).not.toEqual(referenceGreedy(prompt, 8, LLAMA_8DA4W_PRESETS.small));
    expect(gemma3).not.toEqual(qwen3);
  });
});

describe('the gemma3 family', () => {
  it("has Gemma 3's weights: (1 + weight) norms around 1, post-attention and post-MLP norms, tied embeddings, a head_dim of 256", () => {
    const weights = createLlama8da4wWeights(GEMMA3);
    const { modelDim: d, heads, kvHeads } = GEMMA3;
    expect(headDim(GEMMA3)).toBe(256);
    for (const layer of weights.layers) {
      expect([layer.qNorm?.length, layer.kNorm?.length]).toEqual([256, 256]);
      // head_dim is not modelDim / heads: q has heads * 256 outputs, the output projection as many inputs.
      expect([layer.wq.length, layer.wk.length, layer.wo.length]).toEqual([heads * 256 * d, kvHeads * 256 * d, d * heads * 256]);
      expect([layer.postAttentionNorm?.length, layer.postFfnNorm?.length]).toEqual([d, d]);
      // Stored around 0: the norm scales by 1 + weight.
      expect(Math.max(...layer.attentionNorm.map(Math.abs))).toBeLessThan(0.2);
    }
    expect(weights.output).toBe(weights.tokenEmbedding);
    expect([GEMMA3.ropeTheta, GEMMA3.normEps]).toEqual([1_000_000, 1e-6]);
  });

  it('gates with GELU in its tanh approximation', () => {
    // torch.nn.functional.gelu(x, approximate='tanh') at 1, -1 and 3.
    expect(geluTanh(1)).toBeCloseTo(0.8411919906, 9);
    expect(geluTanh(-1)).toBeCloseTo(-0.1588080094, 9);
    expect(geluTanh(3)).toBeCloseTo(2.99636, 5);
  });

  it('makes every sixth layer global (rope theta 1e6), the others sliding-window layers (1e4)', () => {
    const thetas = Array.from({ length: 12 }, (_, l) => layerRopeTheta(GEMMA3, l));
    expect(thetas).toEqual([1e4, 1e4, 1e4, 1e4, 1e4, 1e6, 1e4, 1e4, 1e4, 1e4, 1e4, 1e6]);
    // The other families have one theta for every layer.
    expect(layerRopeTheta(QWEN3, 0)).toBe(layerRopeTheta(QWEN3, 5));
    // The program holds one pair of tables per theta.
    const program = buildLlama8da4w(createLlama8da4wWeights(GEMMA3), { layout: 'forward' });
    const names = program.programGraph.constants.map((c) => c.name);
    expect(names.filter((name) => name.startsWith('rope'))).toEqual(['rope_local.cos', 'rope_local.sin', 'rope.cos', 'rope.sin']);
  });

  it("keeps a sliding-window layer's keys and values in a ring of 2 * window rows, with the position each row holds", () => {
    const program = buildLlama8da4w(createLlama8da4wWeights(GEMMA3), { layout: 'forward' });
    const buffers = new Map(program.programGraph.sharedBuffers.map((b) => [b.name, b]));
    // The small preset's context of 256 is shorter than the window: the ring is 2 * 256 rows, as HybridCache sizes it.
    for (const l of [0, 1, 2, 3, 4]) {
      expect(buffers.get(`layers.${l}.attention.k_cache`)?.shape).toEqual([1, 512, GEMMA3.kvHeads, 256]);
      expect(buffers.get(`layers.${l}.attention.cache_positions`)?.shape).toEqual([512]);
    }
    expect(buffers.get('layers.5.attention.k_cache')?.shape).toEqual([1, 256, GEMMA3.kvHeads, 256]);
    expect(buffers.has('layers.5.attention.cache_positions')).toBe(false);
    const windowed = withFamily({ ...LLAMA_8DA4W_PRESETS.small, context: 1024 }, 'gemma3');
    expect(windowed.slidingWindow).toBe(512);
    const long = buildLlama8da4w(createLlama8da4wWeights({ ...windowed, layers: 1 }), { layout: 'forward' });
    expect(long.programGraph.sharedBuffers.find((b) => b.name === 'layers.0.attention.k_cache')?.shape).toEqual([1, 1024, 2, 256]);
    // Each sliding layer's row is position % (2 * window), aten::remainder.Scalar_out as the exporter writes the `%`.
    const [forward] = program.export().program.methods;
    const names = forward!.instructions.flatMap((instruction) =>
      instruction.kind === 'kernel'
        ? [`${forward!.operators[instruction.opIndex]!.name}.${forward!.operators[instruction.opIndex]!.overload}`]
        : [],
    );
    expect(names.filter((name) => name === 'aten::remainder.Scalar_out')).toHaveLength(5);
    expect(names).not.toContain('aten::div.Scalar_mode_out');
  });

  it('refuses a prefill longer than the window: a chunk would overwrite rows its first queries still see', () => {
    const narrow = withFamily({ ...LLAMA_8DA4W_PRESETS.small, layers: 1, context: 512, slidingWindow: 64 }, 'gemma3');
    expect(() => buildLlama8da4w(createLlama8da4wWeights(narrow))).toThrow(/a prefill of 128 tokens does not fit the sliding window of 64/);
  });
});

describe('the phi4 family', () => {
  it("splits Phi-4-mini's fused qkv and gate_up matrices by rows, as its converter does; ties the embeddings", () => {
    const weights = createLlama8da4wWeights(PHI4);
    const llama = createLlama8da4wWeights(LLAMA_8DA4W_PRESETS.small);
    const { modelDim: d } = PHI4;
    const kv = PHI4.kvHeads * headDim(PHI4);
    const [layer, plain] = [weights.layers[1]!, llama.layers[1]!];
    // wq, wk and wv are consecutive rows of one fused matrix, w1 and w3 of another.
    expect(layer.wk.buffer).toBe(layer.wq.buffer);
    expect(layer.wv.buffer).toBe(layer.wq.buffer);
    expect([layer.wk.byteOffset - layer.wq.byteOffset, layer.wv.byteOffset - layer.wk.byteOffset]).toEqual([4 * d * d, 4 * kv * d]);
    expect(layer.w3.buffer).toBe(layer.w1.buffer);
    expect(layer.w3.byteOffset - layer.w1.byteOffset).toBe(4 * PHI4.hiddenDim * d);
    // The fused rows are the separate matrices' draws, one after another.
    for (const name of ['wq', 'wk', 'wv', 'w1', 'w3', 'w2'] as const) expect(layer[name]).toEqual(plain[name]);
    expect(weights.output).toBe(weights.tokenEmbedding);
    expect([PHI4.ropeTheta, PHI4.normEps]).toEqual([10_000, 1e-5]);
  });

  it('rotates halves of the first 3/4 of each head and passes the rest through', () => {
    expect(rotaryDim('phi4', 32)).toBe(24);
    expect(rotaryDim('phi4', 128)).toBe(96);
    expect(rotaryDim('qwen3', 32)).toBe(32);
    const tables = familyRopeTables('phi4', 4, 2, 10_000);
    const rows = Float32Array.from([1, 2, 3, 4, 5, 6]);
    ropeRows(rows, { rows: 1, heads: 1, headDim: 6, rotary: 4 }, 1, tables, true);
    const [c0, s0, c1, s1] = [tables.cos[2]!, tables.sin[2]!, tables.cos[3]!, tables.sin[3]!];
    const expected = [1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 1 * s0 + 3 * c0, 2 * s1 + 4 * c1, 5, 6];
    Array.from(rows).forEach((v, i) => expect(v).toBeCloseTo(expected[i]!, 5));
  });

  it("scales the cos and sin tables by LongRoPE's attention factor, sqrt(1 + ln(131072/4096) / ln(4096))", () => {
    const factor = Math.sqrt(17 / 12);
    const tables = familyRopeTables('phi4', 24, 3, 10_000);
    expect(tables.cos[0]).toBeCloseTo(factor, 6);
    expect(tables.sin[0]).toBe(0);
    // Position 2, frequency 1 (the short factors are all 1): cos(2) and sin(2) times the factor.
    expect(tables.cos[2 * 12]).toBeCloseTo(Math.cos(2) * factor, 6);
    expect(tables.sin[2 * 12]).toBeCloseTo(Math.sin(2) * factor, 6);
    const plain = familyRopeTables('qwen3', 24, 1, 10_000);
    expect(plain.cos[0]).toBe(1);
  });

  it("refuses a context whose table export_llama would build with LongRoPE's long factors", () => {
    expect(withFamily({ ...LLAMA_8DA4W_PRESETS.small, context: 2048 }, 'phi4').context).toBe(2048);
    expect(() => withFamily({ ...LLAMA_8DA4W_PRESETS.small, context: 2049 }, 'phi4')).toThrow(
      /phi4 family is written with LongRoPE's short factors: a context of at most 2048 \(got 2049\)/,
    );
  });

  it("names Phi-4-mini's BOS and EOS tokens only where the vocabulary holds them", () => {
    const full = llama8da4wMetadata({ ...PHI4, vocab: 200_064 });
    expect([full['get_bos_id'], full['get_eos_ids']]).toEqual([[199_999], [200_020, 199_999]]);
    const small = llama8da4wMetadata(PHI4);
    expect([small['get_bos_id'], small['get_eos_ids']]).toEqual([undefined, undefined]);
  });
});

describe('the smollm2 family', () => {
  it("at SmolLM2-135M's shape (one of its 30 layers): nine query heads on three key/value heads, greedy tokens equal the reference", {
    timeout: 120_000,
  }, async () => {
    const config = withFamily({ ...LLAMA_8DA4W_PRESETS['smollm2-135m-shape'], layers: 1 }, 'smollm2');
    expect([config.heads, config.kvHeads, headDim(config), config.vocab]).toEqual([9, 3, 64, 49_152]);
    const weights = createLlama8da4wWeights(config);
    const bytes = buildLlama8da4w(weights, { layout: 'forward' }).toPte({ xnnpack: true });
    const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson({ vocab: config.vocab })));
    const llm = await Llm.load(bytes, { tokenizer });
    const prompt = Array.from({ length: 40 }, (_, i) => (i * 89 + 7) % config.vocab);
    const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 8, ignoreEos: true });
    expect(result.tokens).toEqual(referenceGreedy(prompt, 8, config, new Llama8da4wReference(weights)));
    expect(new Set(result.tokens).size).toBeGreaterThan(1);
    await llm.dispose();
  });

  it("is written in the optimum layout as transformers' Llama: halves rotated, on q and k rows in transformers' order", () => {
    // One head of 6 at position 2, in Meta's order (pairs): rotated as pairs, then put in transformers' order, it is
    // what the rows put in transformers' order give rotated as halves.
    const tables = familyRopeTables('smollm2', 6, 3, 100_000);
    const meta = Float32Array.from([0.5, -1, 2, 0.25, -3, 1.5]);
    const rotatedPairs = Float32Array.from(meta);
    ropeRows(rotatedPairs, { rows: 1, heads: 1, headDim: 6 }, 2, tables, false);
    const halves = pairsToHalves(meta, 1, 6, 1);
    expect(Array.from(halves)).toEqual([0.5, 2, -3, -1, 0.25, 1.5]);
    ropeRows(halves, { rows: 1, heads: 1, headDim: 6 }, 2, tables, true);
    Array.from(halves).forEach((v, i) => expect(v).toBeCloseTo(pairsToHalves(rotatedPairs, 1, 6, 1)[i]!, 6));
  });

  it("is Llama's graph with SmolLM2's config: tied embeddings, rope theta 1e5, interleaved pairs", () => {
    const weights = createLlama8da4wWeights(SMOLLM2);
    expect(weights.output).toBe(weights.tokenEmbedding);
    expect(weights.layers[0]!.qNorm).toBeUndefined();
    expect([SMOLLM2.ropeTheta, SMOLLM2.normEps]).toEqual([100_000, 1e-5]);
    const metadata = llama8da4wMetadata(SMOLLM2);
    expect([metadata['get_bos_id'], metadata['get_eos_ids']]).toEqual([[0], [0]]);
    const prompt = promptOf(9);
    expect(referenceGreedy(prompt, 8, SMOLLM2)).not.toEqual(referenceGreedy(prompt, 8, LLAMA_8DA4W_PRESETS.small));
  });
});

describe.each(['qwen3', 'gemma3', 'phi4', 'smollm2'] as const)(
  'llama-8da4w --family %s --preset small, token for token against the reference',
  (family) => {
    const config = CONFIGS[family];
    const files = {
      'prefill-decode': exported(family, { layout: 'prefill-decode' }),
      forward: exported(family, { layout: 'forward' }),
      optimum: exported(family, { layout: 'optimum' }),
    };

    it('names its BOS token only if the family has one in the vocabulary', async () => {
      const bos = { qwen3: [], gemma3: [2], phi4: [], smollm2: [0] }[family];
      for (const layout of ['forward', 'optimum'] as const) {
        const program = Program.load(files[layout]);
        const names = program.describe().methods.map((method) => method.name);
        // Phi-4-mini's end tokens are past the small vocabulary.
        expect(names.includes('get_eos_ids')).toBe(family !== 'phi4');
        expect(names.includes('get_bos_id')).toBe(bos.length > 0);
        program.dispose();
      }
      const llm = await Llm.load(files.forward, { tokenizer: smallTokenizer });
      expect(llm.metadata.bosId).toBe(bos[0]);
      // The byte tokenizer adds no BOS of its own: one goes first only when asked for, and only if the model names one.
      const result = await llm.generate('Hi', { temperature: 0, maxNewTokens: 2, ignoreEos: true });
      expect(result.promptTokens).toEqual([0x48, 0x69]);
      if (bos.length > 0) {
        const withBos = await llm.generate('Hi', { temperature: 0, maxNewTokens: 2, ignoreEos: true, numBos: 1 });
        expect(withBos.promptTokens).toEqual([bos[0], 0x48, 0x69]);
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
  },
);

// One sliding-window layer with a window of 128 (Gemma 3's is 512), so a 300-token prompt runs past it twice over
// in the ring of 256 rows. One layer: through six, an activation that rounds to the other int8 code in the runtime
// than in the reference (their float sums differ in the last bits) moves later logits by a few hundredths, as far as
// this model's top two tokens often are apart.
const GEMMA3_WINDOWED = withFamily({ ...LLAMA_8DA4W_PRESETS.small, layers: 1, context: 512, slidingWindow: 128 }, 'gemma3');

describe('llama-8da4w --family gemma3 past its sliding window, token for token against the reference', () => {
  const prompt = promptOf(300);
  const build = (name: string, options: Parameters<typeof buildLlama8da4w>[1]): string => {
    const program = buildLlama8da4w(createLlama8da4wWeights(GEMMA3_WINDOWED), options);
    // The two-method layout has no metadata of its own: the runner needs the context length.
    if (options?.layout === 'prefill-decode') addConstantMethod(program, 'get_max_context_len', [GEMMA3_WINDOWED.context]);
    const out = path.join(dir, `gemma3-windowed-${name}.pte`);
    fs.writeFileSync(out, program.toPte({ xnnpack: true }));
    return out;
  };

  it('the window decides: the reference without it picks other tokens', () => {
    const unbounded = { ...GEMMA3_WINDOWED, slidingWindow: GEMMA3_WINDOWED.context };
    expect(referenceGreedy(prompt, 12, GEMMA3_WINDOWED)).not.toEqual(referenceGreedy(prompt, 12, unbounded));
  });

  it.each(['prefill-decode', 'forward', 'optimum'] as const)(
    '%s: greedy tokens equal the reference (prompt of 300 tokens)',
    async (layout) => {
      const llm = await Llm.load(build(layout, { layout }), { tokenizer: smallTokenizer });
      const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 12, ignoreEos: true });
      expect(result.tokens).toEqual(referenceGreedy(prompt, 12, GEMMA3_WINDOWED));
      expect(new Set(result.tokens).size).toBeGreaterThan(1);
      // Starting again at position 0 empties the rings (every row's position is dropped): the same prompt, the same tokens.
      const again = await llm.generate(prompt, { temperature: 0, maxNewTokens: 12, ignoreEos: true });
      expect(again.tokens).toEqual(result.tokens);
      await llm.dispose();
    },
  );

  it.each([
    ['forward', { quantizeKvCache: true }],
    ['forward', { quantizeKvCache: true, hadamard: true }],
    ['prefill-decode', { quantizeKvCache: true }],
  ] as const)('%s with %o: greedy tokens equal the reference of the int8 ring', async (layout, transforms) => {
    const name = `${layout}-${Object.keys(transforms).join('-')}`;
    const llm = await Llm.load(build(name, { layout, ...transforms }), { tokenizer: smallTokenizer });
    const reference = new Llama8da4wReference(createLlama8da4wWeights(GEMMA3_WINDOWED), '8da4w', transforms);
    const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 12, ignoreEos: true });
    expect(result.tokens).toEqual(referenceGreedy(prompt, 12, GEMMA3_WINDOWED, reference));
    await llm.dispose();
  });
});

describe('--family refuses what it cannot write', () => {
  it('an unknown family, or a family for an example without any, is bad usage (exit 2)', () => {
    const unknown = runCli(['export-example', 'llama-8da4w', path.join(dir, 'x.pte'), '--family', 'gpt2']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(
      /^etna export-example: example 'llama-8da4w' has no family 'gpt2' \(available: llama, qwen3, gemma3, phi4, smollm2\)/,
    );
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
