// `etna bench llm` at the small preset: the same seeded weights written as a
// .pte (8da4w), a GGUF (Q4_0) and an ONNX (MatMulNBits), each loaded in its
// runtime, whose log-probabilities for the same tokens must agree with a
// float reference within what 4-bit weights allow, and closely with a
// reference that computes with that runtime's own dequantized weights; then
// the whole bench end to end, checking the table's shape.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';
import { dequantizeInt4Groups, quantizeInt4Groups } from '../../lib/export/quantize.js';
import { Module, Tensor } from '../../lib/index.js';
import { prepareLlmArtifacts, type LlmArtifacts } from '../../lib/tools/bench/llm/artifacts.js';
import { dequantizeQ4_0, float16Bits, float16Value, ggufChunks, quantizeQ4_0 } from '../../lib/tools/bench/llm/gguf.js';
import { logitsDistance, runLlmBench } from '../../lib/tools/bench/llm/harness.js';
import { formatLlmReport, llmTableRows } from '../../lib/tools/bench/llm/report.js';
import { logSoftmax, prepareLlmLoader, type LlmRuntime } from '../../lib/tools/bench/llm/runners.js';
import {
  createLlama8da4wWeights,
  headDim,
  Llama8da4wReference,
  LLAMA_8DA4W_PRESETS,
  type Llama8da4wWeights,
} from '../../lib/tools/examples/llama-8da4w.js';

const C = LLAMA_8DA4W_PRESETS.small;
const weights = createLlama8da4wWeights(C);
const dir = mkdtempSync(join(tmpdir(), 'etna-bench-llm-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The weights with every linear (and, for Q4_0, the embedding) replaced by what a 4-bit format stores. */
function requantized(quantize: (w: Float32Array, out: number, inFeatures: number) => Float32Array, embedding: boolean): Llama8da4wWeights {
  const d = C.modelDim;
  const kv = C.kvHeads * headDim(C);
  return {
    ...weights,
    tokenEmbedding: embedding ? quantize(weights.tokenEmbedding, C.vocab, d) : weights.tokenEmbedding,
    output: quantize(weights.output, C.vocab, d),
    layers: weights.layers.map((l) => ({
      ...l,
      wq: quantize(l.wq, d, d),
      wk: quantize(l.wk, kv, d),
      wv: quantize(l.wv, kv, d),
      wo: quantize(l.wo, d, d),
      w1: quantize(l.w1, C.hiddenDim, d),
      w3: quantize(l.w3, C.hiddenDim, d),
      w2: quantize(l.w2, d, C.hiddenDim),
    })),
  };
}

describe('GGUF writer', () => {
  it('quantizes Q4_0 blocks as llama.cpp does: d = largest-magnitude value / -8, codes min(15, trunc(x/d + 8.5))', () => {
    const block = Float32Array.from({ length: 32 }, (_, i) => (i === 5 ? -4 : (i - 16) / 8));
    const bytes = quantizeQ4_0(block, 32);
    expect(bytes.length).toBe(18);
    expect(float16Value(bytes[0]! | (bytes[1]! << 8))).toBe(0.5);
    // Element 5 (-4) is code 0 in the low nibble; element 21 (0.625) is code trunc(1.25 + 8.5) = 9 in the high nibble.
    expect(bytes[2 + 5]).toBe(0 | (9 << 4));
    const back = dequantizeQ4_0(bytes);
    expect(back[5]).toBe(-4);
    for (let i = 0; i < 32; i++) expect(Math.abs(back[i]! - block[i]!)).toBeLessThanOrEqual(0.25);
    expect(float16Bits(1 + 2 ** -11)).toBe(0x3c00); // a tie rounds to even
    expect(float16Bits(65520)).toBe(0x7c00);
  });

  it('writes the header, key/values and tensor infos llama.cpp reads', () => {
    const chunks = ggufChunks(weights);
    const bytes = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
    let at = 0;
    for (const c of chunks) {
      bytes.set(c, at);
      at += c.byteLength;
    }
    const view = new DataView(bytes.buffer);
    expect(new TextDecoder().decode(bytes.subarray(0, 4))).toBe('GGUF');
    expect(view.getUint32(4, true)).toBe(3);
    expect(Number(view.getBigUint64(8, true))).toBe(2 + 9 * C.layers + 1);
    const text = new TextDecoder('latin1').decode(bytes.subarray(0, 200_000));
    for (const key of ['llama.attention.head_count_kv', 'tokenizer.ggml.tokens', 'blk.1.ffn_down.weight', 'token_embd.weight']) {
      expect(text).toContain(key);
    }
  });
});

describe('the three formats of one model', () => {
  let artifacts: LlmArtifacts;
  beforeAll(async () => {
    artifacts = await prepareLlmArtifacts('small', { cacheDir: dir, inProcess: true });
  });
  const tokens = [5, 300, 17, 400, 9, 260, 77, 120];
  const next = 42;
  /** Log-probabilities after the prompt and after one decode step. */
  const referenceOf = (w: Llama8da4wWeights, arithmetic: '8da4w' | 'float'): Float32Array[] => {
    const reference = new Llama8da4wReference(w, arithmetic);
    const prefill = reference.prefill(tokens, 0);
    return [logSoftmax(prefill.subarray((tokens.length - 1) * C.vocab)), logSoftmax(reference.decode(next, tokens.length))];
  };
  const float = referenceOf(weights, 'float');
  // What each runtime computes with: etna the 8da4w program exactly; llama.cpp the Q4_0 weights
  // (int8 activations, a float16 cache); onnxruntime the 8da4w codes and scales (int8 activations per block).
  const own: Record<LlmRuntime, { expected: Float32Array[]; tolerance: number }> = {
    etna: { expected: referenceOf(weights, '8da4w'), tolerance: 1e-3 },
    'llama.cpp': {
      expected: referenceOf(
        requantized((w, _, k) => dequantizeQ4_0(quantizeQ4_0(w, k)), true),
        'float',
      ),
      tolerance: 0.04,
    },
    onnxruntime: {
      expected: referenceOf(
        requantized((w, n, k) => dequantizeInt4Groups(quantizeInt4Groups(w, n, k, 32)), false),
        'float',
      ),
      tolerance: 0.04,
    },
  };
  // 4-bit weights move the log-probabilities of this random model by about 0.15 to 0.25 of their spread.
  const QUANTIZATION_TOLERANCE = 0.3;

  for (const runtime of ['etna', 'llama.cpp', 'onnxruntime'] as const) {
    it(`${runtime} agrees with the float reference within 4-bit tolerance, and closely with its own weights`, async () => {
      const load = await prepareLlmLoader(runtime);
      const runner = await load({ etna: artifacts.pte, 'llama.cpp': artifacts.gguf, onnxruntime: artifacts.onnx }[runtime], C, 1);
      try {
        const got = [(await runner.prefill(tokens, true))!, (await runner.decode(next, true))!];
        got.forEach((values, step) => {
          expect(values.length).toBe(C.vocab);
          expect(logitsDistance(Array.from(values), Array.from(float[step]!)), `step ${step} vs float`).toBeLessThan(
            QUANTIZATION_TOLERANCE,
          );
          expect(
            logitsDistance(Array.from(values), Array.from(own[runtime].expected[step]!)),
            `step ${step} vs its own weights`,
          ).toBeLessThan(own[runtime].tolerance);
        });
        // A second prefill starts from an empty cache again.
        expect(logitsDistance(Array.from((await runner.prefill(tokens, true))!), Array.from(got[0]!))).toBeLessThan(1e-6);
      } finally {
        await runner.dispose();
      }
    });
  }

  it('the tolerance tells models apart: other weights land far outside it', () => {
    const otherWeights = referenceOf(createLlama8da4wWeights({ ...C, seed: 7 }), 'float');
    expect(logitsDistance(Array.from(otherWeights[0]!), Array.from(float[0]!))).toBeGreaterThan(1);
  });
});

describe('etna export-example llama-8da4w --preset', () => {
  it('writes a prefill that takes 1 to 128 tokens and returns the last position', async () => {
    const out = join(dir, 'small.pte');
    expect(runExportExample('llama-8da4w', out, { preset: 'small' })).toBe(0);
    const module = await Module.load(new Uint8Array(readFileSync(out)), { shareMemoryArenas: true });
    expect(module.methodMeta('prefill').inputs[0]!.dynamism).toBe('bound');
    for (const length of [1, 5, 128]) {
      const prompt = Array.from({ length }, (_, i) => (i * 37 + 11) % C.vocab);
      const reference = new Llama8da4wReference(weights);
      const expected = reference.prefill(prompt, 0).subarray((length - 1) * C.vocab);
      await module.execute('reset', []);
      const [logits] = await module.execute('prefill', [Tensor.int64([1, length], prompt), Tensor.int64([1], [0])]);
      expect((logits as Tensor).shape).toEqual([1, 1, C.vocab]);
      const got = (logits as Tensor).data as Float32Array;
      let worst = 0;
      for (let i = 0; i < C.vocab; i++) worst = Math.max(worst, Math.abs(got[i]! - expected[i]!));
      expect(worst, `${length} tokens`).toBeLessThan(1e-3);
    }
    await expect(
      module.execute('prefill', [Tensor.int64([1, 129], new Array<number>(129).fill(1)), Tensor.int64([1], [0])]),
    ).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await module.dispose();
  });

  it('refuses a preset the example does not have', () => {
    expect(runExportExample('llama-8da4w', join(dir, 'x.pte'), { preset: 'huge' })).toBe(2);
    expect(runExportExample('kv-decoder', join(dir, 'x.pte'), { preset: 'small' })).toBe(2);
  });
});

describe('etna bench llm', () => {
  it('runs every runtime in its own process and reports one row each', async () => {
    const report = await runLlmBench({
      preset: 'small',
      threads: [1],
      cacheDir: dir,
      decodeSteps: 4,
      prefillRepeats: 1,
      bandwidthBytes: 64 * 1024 * 1024,
    });
    expect(report.bandwidth.map((b) => b.threads)).toEqual([1]);
    expect(report.bandwidth[0]!.bytesPerSecond).toBeGreaterThan(1e8);
    expect(report.rows.map((r) => r.runtime)).toEqual(['etna', 'llama.cpp', 'onnxruntime']);
    for (const row of report.rows) {
      expect(row.threads).toBe(1);
      expect(row.loadMs).toBeGreaterThan(0);
      expect(row.baselineRssBytes).toBeGreaterThan(10 * 1024 * 1024);
      // A model this small barely moves resident memory: the figure is there, its sign is noise.
      expect(Number.isFinite(row.rssAfterLoadBytes) && Number.isFinite(row.rssAfterRunBytes)).toBe(true);
      expect(Object.keys(row.prefill)).toEqual(['8', '128']);
      expect(row.decode.minMs).toBeLessThanOrEqual(row.decode.medianMs);
      expect(row.bandwidthFraction.min).toBeGreaterThanOrEqual(row.bandwidthFraction.median);
      expect(row.bandwidthFraction.median).toBeGreaterThan(0);
      expect(row.differenceFromEtna).toBeLessThan(0.4);
    }
    expect(report.rows[0]!.differenceFromEtna).toBe(0);
    const [header, ...rows] = llmTableRows(report);
    expect(header).toEqual([
      'runtime',
      'threads',
      'load ms',
      'RSS after load',
      'prefill 8 ms (min / median)',
      'prefill 128 ms (min / median)',
      'decode ms/token (min / median)',
      'decode GB/s (min / median)',
      'of read bandwidth (min / median)',
      'log-probs vs etna',
    ]);
    expect(rows).toHaveLength(3);
    for (const row of rows) expect(row).toHaveLength(header!.length);
    expect(formatLlmReport(report)).toMatch(/read bandwidth: [\d.]+ GB\/s at 1 thread/);
  }, 120_000);
});
