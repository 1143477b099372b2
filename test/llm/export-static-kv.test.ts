// The llama-8da4w example with export_llama's --static_quantize_kv_cache:
// int8 caches with one fixed scale per head column (StaticQuantizedKVCache),
// quantized with div, round, clamp and a cast to int8, written with
// llama::update_cache, dequantized whole into float32 temporaries that then
// take the call's own rows, and read by attention.py's SDPA as it decomposes
// (repeat per query head, bmm, the causal mask's rows, softmax, bmm). The
// program follows its TypeScript reference over a prefill and greedy decode
// steps; its state is the int8 caches, a quarter of the float32 ones; and the
// scales and layouts export_llama refuses are refused here.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';

import { EtnaError } from '../../lib/errors.js';
import { Module } from '../../lib/index.js';
import { Llm, loadTokenizer } from '../../lib/llm/index.js';
import { exportExample } from '../../lib/tools/examples/index.js';
import {
  buildLlama8da4w,
  createLlama8da4wWeights,
  LLAMA_8DA4W_CONFIG as C,
  Llama8da4wReference,
  type Llama8da4wTransforms,
} from '../../lib/tools/examples/llama-8da4w.js';
import { staticInt8RoundTrip } from '../../lib/tools/examples/llama-transforms.js';
import { decodeLogits as decode, greedyDecodeDifferences, prefillLogits as prefill } from '../helpers/example-calls.js';
import { argmax, worstDifference } from '../helpers/logits.js';
import { byteTokenizerJson, llamaProgram, referenceGreedy } from './helpers.js';

// float32 sums in another order than the reference's double ones; an int8 rounding may land the other way now and
// then, moving that step's logits by about one quantization step of a cached value.
const LOGIT_TOLERANCE = 1e-3;
const FLIPPED_STEP_TOLERANCE = 0.15;
const PROMPT = [3, 141, 59, 26, 53, 58, 97, 93];
const STEPS = 24;
const STATIC: Llama8da4wTransforms = { staticQuantizeKvCache: true };

function kernelNames(transforms: Llama8da4wTransforms, xnnpack: boolean): Set<string> {
  const { program } = buildLlama8da4w(createLlama8da4wWeights(), transforms).export({ xnnpack });
  return new Set(program.methods.flatMap((method) => method.operators.map((op) => op.name)));
}

async function againstReference(transforms: Llama8da4wTransforms): Promise<number[]> {
  const weights = createLlama8da4wWeights();
  const module = await Module.load(buildLlama8da4w(weights, transforms).toPte({ xnnpack: true }), { shareMemoryArenas: true });
  const reference = new Llama8da4wReference(weights, '8da4w', transforms);
  const logits = await prefill(module, PROMPT);
  const expected = reference.prefill(PROMPT, 0);
  const last = (x: Float32Array): Float32Array => x.subarray((C.prefillLength - 1) * C.vocab);
  expect(worstDifference(logits, expected)).toBeLessThan(LOGIT_TOLERANCE);
  const token = argmax(last(logits));
  expect(token).toBe(argmax(last(expected)));
  const steps = await greedyDecodeDifferences(module, reference, token, C.prefillLength, STEPS);
  await module.dispose();
  return [worstDifference(logits, expected), ...steps];
}

describe('llama-8da4w with static int8 KV caches', () => {
  it('rounds halves to even and clamps to the int8 range, in float32', () => {
    const s = 0.5;
    expect(Array.from(staticInt8RoundTrip(Float32Array.of(0.25, 0.75, -0.25, 100, -100, 0.3), s))).toEqual([0, 1, 0, 63.5, -64, 0.5]);
  });

  it('writes the ops StaticQuantizedKVCache and attention.py write', () => {
    const names = kernelNames(STATIC, false);
    const quantize = ['aten::div', 'aten::round', 'aten::clamp', 'dim_order_ops::_to_dim_order_copy', 'llama::update_cache'];
    const attention = ['aten::index', 'aten::expand_copy', 'aten::bmm', 'aten::_softmax'];
    for (const op of [...quantize, ...attention]) expect(names).toContain(op);
    for (const op of ['llama::custom_sdpa', 'llama::custom_quantized_sdpa', 'quantized_decomposed::quantize_per_token'])
      expect(names).not.toContain(op);
    // XNNPACK has no round, and converts no dtypes: those stay outside the delegates, as the cache writes do.
    const lowered = kernelNames(STATIC, true);
    for (const op of ['aten::round', 'dim_order_ops::_to_dim_order_copy', 'llama::update_cache', 'aten::index'])
      expect(lowered).toContain(op);
  });

  for (const scale of [undefined, 0.02]) {
    it(`follows its reference over a prefill and ${STEPS} greedy steps (scale ${scale ?? 'default'})`, async () => {
      const steps = await againstReference(scale === undefined ? STATIC : { ...STATIC, staticQuantizeKvCacheScale: scale });
      const flipped = steps.filter((worst) => worst >= LOGIT_TOLERANCE);
      expect(flipped.length, `steps over ${LOGIT_TOLERANCE}: ${steps.join(', ')}`).toBeLessThanOrEqual(steps.length / 8);
      for (const worst of flipped) expect(worst).toBeLessThan(FLIPPED_STEP_TOLERANCE);
    });
  }

  it('the scale matters: a coarse one changes the logits, and the reference follows', async () => {
    const weights = createLlama8da4wWeights();
    const coarse = { ...STATIC, staticQuantizeKvCacheScale: 0.5 };
    const module = await Module.load(buildLlama8da4w(weights, coarse).toPte({ xnnpack: true }), { shareMemoryArenas: true });
    await prefill(module, PROMPT);
    const got = await decode(module, 7, C.prefillLength);
    const reference = new Llama8da4wReference(weights, '8da4w', coarse);
    reference.prefill(PROMPT, 0);
    expect(worstDifference(got, reference.decode(7, C.prefillLength))).toBeLessThan(LOGIT_TOLERANCE);
    const fine = new Llama8da4wReference(weights, '8da4w', STATIC);
    fine.prefill(PROMPT, 0);
    expect(worstDifference(got, fine.decode(7, C.prefillLength))).toBeGreaterThan(10 * LOGIT_TOLERANCE);
    await module.dispose();
  });

  it('Llm.generate gives the reference greedy tokens; a snapshot is about a quarter of the float32 one', async () => {
    const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson()));
    const metadata = { get_max_context_len: [C.context] };
    const prompt = Array.from({ length: 19 }, (_, i) => (i * 29 + 3) % C.vocab);
    const greedy = { temperature: 0, maxNewTokens: 10 } as const;
    const sizes: number[] = [];
    for (const transforms of [STATIC, {}]) {
      const llm = await Llm.load(llamaProgram(C, metadata, transforms), { tokenizer });
      const session = await llm.session();
      const generated = await session.generate(prompt, greedy);
      const reference = new Llama8da4wReference(createLlama8da4wWeights(C), '8da4w', transforms);
      expect(generated.tokens).toEqual(referenceGreedy(prompt, greedy.maxNewTokens, C, reference));
      sizes.push((await session.save()).byteLength);
      await session.dispose();
      await llm.dispose();
    }
    expect(sizes[0]! / sizes[1]!).toBeGreaterThan(0.24);
    expect(sizes[0]! / sizes[1]!).toBeLessThan(0.3);
  });

  it("export_llama's forward layout: one token a call, use_sdpa_with_kv_cache false", async () => {
    const bytes = exportExample('llama-8da4w', { layout: 'forward', staticQuantizeKvCache: true });
    const module = await Module.load(bytes);
    const [flag] = await module.execute('use_sdpa_with_kv_cache', []);
    expect(flag).toBe(false);
    await module.dispose();
  });

  it('etna export-example --static-quantize-kv-cache --static-quantize-kv-cache-scale writes that program', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'etna-static-kv-'));
    try {
      const out = join(dir, 'llama.pte');
      expect(runExportExample('llama-8da4w', out, { staticQuantizeKvCache: true, staticQuantizeKvCacheScale: 0.02 })).toBe(0);
      const module = await Module.load(new Uint8Array(readFileSync(out)), { shareMemoryArenas: true });
      const reference = new Llama8da4wReference(createLlama8da4wWeights(), '8da4w', { ...STATIC, staticQuantizeKvCacheScale: 0.02 });
      expect(worstDifference(await prefill(module, PROMPT), reference.prefill(PROMPT, 0))).toBeLessThan(LOGIT_TOLERANCE);
      await module.dispose();
      expect(runExportExample('kv-decoder', join(dir, 'x.pte'), { staticQuantizeKvCache: true })).not.toBe(0);
      expect(() => runExportExample('llama-8da4w', out, { staticQuantizeKvCache: true, staticQuantizeKvCacheScale: 0 })).toThrow(
        /finite and positive, got 0/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses the scales and layouts export_llama refuses', () => {
    const weights = createLlama8da4wWeights();
    for (const scale of [0, -1 / 127, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      const options = { ...STATIC, staticQuantizeKvCacheScale: scale };
      expect(() => buildLlama8da4w(weights, options)).toThrow(/scale must be finite and positive/);
      expect(() => new Llama8da4wReference(weights, '8da4w', options)).toThrow(EtnaError);
    }
    expect(() => buildLlama8da4w(weights, { staticQuantizeKvCacheScale: 0.1 })).toThrow(/without the static int8 KV caches/);
    expect(() => buildLlama8da4w(weights, { ...STATIC, quantizeKvCache: true })).toThrow(/not both/);
    const bounded = createLlama8da4wWeights({ ...C, prefillLength: 16, prefillBounded: true });
    expect(() => buildLlama8da4w(bounded, STATIC)).toThrow(/static shapes/);
    expect(() => buildLlama8da4w(weights, { ...STATIC, layout: 'optimum' })).toThrow(/optimum/);
    expect(() => buildLlama8da4w(weights, { ...STATIC, dtype: 'bfloat16' })).toThrow(/bfloat16 activations/);
    try {
      buildLlama8da4w(weights, { ...STATIC, staticQuantizeKvCacheScale: 0 });
    } catch (error) {
      expect(error).toBeInstanceOf(EtnaError);
      expect((error as EtnaError).code).toBe('INVALID_INPUT');
    }
  });
});
