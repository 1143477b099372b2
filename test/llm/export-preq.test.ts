// The layout of the quantized Llama 3.2 checkpoints (QAT+LoRA, SpinQuant), as
// export_llama writes them with `--preq_mode 8da4w_output_8da8w
// --preq_embedding_quantize 8,0`: the output projection with 8-bit weights,
// one scale per row, behind per-token int8 activations (the delegate's qd8 x
// qc8w fully connected), and the token embedding as 8-bit rows read by
// quantized_decomposed::embedding_byte. The program follows the reference
// that dequantizes both the same way, logit for logit and token for token.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';
import { dequantizeInt8Channels, quantizeInt8Channels } from '../../lib/export/quantize.js';
import { Module } from '../../lib/index.js';
import { Llm, loadTokenizer } from '../../lib/llm/index.js';
import { Program } from '../../lib/program.js';
import {
  buildLlama8da4w,
  createLlama8da4wWeights,
  LLAMA_8DA4W_CONFIG as C,
  Llama8da4wReference,
  type Llama8da4wBuildOptions,
  type Llama8da4wTransforms,
} from '../../lib/tools/examples/llama-8da4w.js';
import { runCli } from '../helpers/cli.js';
import { decodeLogits as decode, greedyDecodeDifferences, prefillLogits as prefill } from '../helpers/example-calls.js';
import { argmax, worstDifference } from '../helpers/logits.js';
import { byteTokenizerJson, llamaProgram, referenceGreedy } from './helpers.js';

// As test/export/llama-transforms.test.ts: float32 summation order differs from the reference, so now and then an
// activation lands on the other side of an int8 rounding boundary (the 4-bit embedding does so for 2 of the 256
// tokens at position 0, the 8-bit one for 5); otherwise the differences are around 1e-6. Such a step moves the
// logits by about one quantization step (5e-2 measured), and on through the steps after it when the row it
// flipped was written into a cache.
const LOGIT_TOLERANCE = 1e-3;
const FLIPPED_STEP_TOLERANCE = 0.15;

const PREQ: Llama8da4wTransforms = { outputQuantization: '8da8w', embeddingBits: 8 };
const PROMPT = [3, 141, 59, 26, 53, 58, 97, 93];
const STEPS = 24;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-llama-preq-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const last = (logits: Float32Array): Float32Array => logits.subarray((C.prefillLength - 1) * C.vocab);

describe('8-bit per-channel quantization', () => {
  it('maps each row onto [-128, 127] with scale max|w| / 127.5, rounding half to even', () => {
    // max|w| = 127.5 / 64, so the scale is 1 / 64 and every quotient below is exact.
    const row = [127.5, -127.5, 0.5, 1.5, 2.5, 0, -19.2].map((v) => v / 64);
    const q = quantizeInt8Channels([...row, ...row.map((v) => v * 2)], 2, row.length);
    expect(Array.from(q.scales)).toEqual([1 / 64, 1 / 32]);
    // +127.5 rounds to 128 and is clamped; -127.5 rounds to -128; 0.5, 1.5 and 2.5 go to the even neighbours 0, 2, 2.
    expect(Array.from(q.codes.subarray(0, row.length))).toEqual([127, -128, 0, 2, 2, 0, -19]);
    expect(Array.from(q.codes.subarray(row.length))).toEqual(Array.from(q.codes.subarray(0, row.length)));
    const back = dequantizeInt8Channels(q);
    for (let k = 0; k < row.length; k++) expect(Math.abs(back[k]! - row[k]!)).toBeLessThanOrEqual(q.scales[0]! / 2 + 1e-9);
  });

  it('refuses non-finite weights and a wrong count, naming them', () => {
    expect(() => quantizeInt8Channels([0, Number.NaN], 1, 2)).toThrow(/weight \[0, 1\] is NaN/);
    expect(() => quantizeInt8Channels([0, 1, 2], 2, 2)).toThrow(/expected 4 weights for \[2, 2\], got 3/);
    expect(() => quantizeInt8Channels([0, Number.POSITIVE_INFINITY], 1, 2)).toThrow(/weight \[0, 1\] is Infinity/);
  });
});

describe('llama-8da4w with an 8da8w output and an 8-bit embedding', () => {
  const weights = createLlama8da4wWeights();
  const lowered = buildLlama8da4w(weights, PREQ).export({ xnnpack: true });

  it('reads the embedding with embedding_byte: int8 rows [vocab, dim], float32 scales [vocab]', () => {
    const operators = new Set(lowered.program.methods.flatMap((method) => method.operators.map((op) => `${op.name}.${op.overload}`)));
    expect(operators).toContain('quantized_decomposed::embedding_byte.dtype_out');
    expect(operators).not.toContain('quantized_decomposed::embedding_4bit.dtype_out');
    const plain = buildLlama8da4w(createLlama8da4wWeights()).export({ xnnpack: true });
    // Both tables go from 4.5 bits a weight (4-bit codes, a 16-bit scale per 32) to about 8.25 (8-bit codes, a
    // float32 scale per row of 128): some 0.94 bytes more per weight of one table.
    const grown = lowered.bytes.byteLength - plain.bytes.byteLength;
    expect(grown).toBeGreaterThan(C.vocab * C.modelDim * 0.85);
    expect(grown).toBeLessThan(C.vocab * C.modelDim * 1.0);
  });

  it('matches the reference that dequantizes both alike in prefill and greedy decoding, and not the 4-bit one', async () => {
    const module = await Module.load(lowered.bytes, { shareMemoryArenas: true });
    const reference = new Llama8da4wReference(weights, '8da4w', PREQ);
    const fourBit = new Llama8da4wReference(weights, '8da4w');
    const logits = await prefill(module, PROMPT);
    const expected = reference.prefill(PROMPT, 0);
    expect(worstDifference(logits, expected)).toBeLessThan(LOGIT_TOLERANCE);
    // The 8-bit tables move the logits by far more than the tolerance: the program does write them.
    expect(worstDifference(logits, fourBit.prefill(PROMPT, 0))).toBeGreaterThan(20 * LOGIT_TOLERANCE);
    const token = argmax(last(logits));
    expect(token).toBe(argmax(last(expected)));
    const steps = await greedyDecodeDifferences(module, reference, token, C.prefillLength, STEPS);
    await module.dispose();
    expect(steps[0]!).toBeLessThan(LOGIT_TOLERANCE);
    for (const worst of steps) expect(worst, steps.join(', ')).toBeLessThan(FLIPPED_STEP_TOLERANCE);
  });

  it('embeds every token as the reference does: each one alone at position 0', async () => {
    const module = await Module.load(lowered.bytes, { shareMemoryArenas: true });
    const worst: number[] = [];
    for (let token = 0; token < C.vocab; token++) {
      await module.execute('reset', []);
      const got = await decode(module, token, 0);
      worst.push(worstDifference(got, new Llama8da4wReference(weights, '8da4w', PREQ).decode(token, 0)));
    }
    await module.dispose();
    const flipped = worst.filter((difference) => difference >= LOGIT_TOLERANCE);
    expect(flipped.length, `tokens over ${LOGIT_TOLERANCE}`).toBeLessThanOrEqual(C.vocab / 32);
    for (const difference of flipped) expect(difference).toBeLessThan(FLIPPED_STEP_TOLERANCE);
  });

  it('generates the reference greedy tokens through the runner', async () => {
    const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson()));
    const llm = await Llm.load(llamaProgram(C, { get_max_context_len: [C.context] }, PREQ), { tokenizer });
    const prompt = Array.from({ length: 19 }, (_, i) => (i * 29 + 3) % C.vocab);
    const reference = new Llama8da4wReference(createLlama8da4wWeights(C), '8da4w', PREQ);
    expect((await llm.generate(prompt, { temperature: 0, maxNewTokens: 12 })).tokens).toEqual(referenceGreedy(prompt, 12, C, reference));
    await llm.dispose();
  });

  it('takes the preq transformations with the others, the reference following', async () => {
    const all: Llama8da4wTransforms = { ...PREQ, hadamard: true, quantizeKvCache: true };
    const module = await Module.load(buildLlama8da4w(weights, all).toPte({ xnnpack: true }), { shareMemoryArenas: true });
    const logits = await prefill(module, PROMPT);
    expect(worstDifference(logits, new Llama8da4wReference(weights, '8da4w', all).prefill(PROMPT, 0))).toBeLessThan(FLIPPED_STEP_TOLERANCE);
    await module.dispose();
  });
});

describe('etna export-example llama-8da4w --output-8da8w --embedding-8bit', () => {
  it('writes the forward layout with embedding_byte, and says so', () => {
    const out = path.join(dir, 'preq.pte');
    const written = runCli([
      'export-example',
      'llama-8da4w',
      out,
      '--preset',
      'small',
      '--layout',
      'forward',
      '--output-8da8w',
      '--embedding-8bit',
    ]);
    expect(written.status, written.stderr).toBe(0);
    expect(written.stdout).toMatch(/8da8w output projection, 8-bit token embedding/);
    const program = Program.load(fs.readFileSync(out));
    const forward = program.describe().methods.find((method) => method.name === 'forward')!;
    expect(forward.operators).toContain('quantized_decomposed::embedding_byte.dtype_out');
    program.dispose();
  });

  it('refuses them with a 16-bit dtype and on examples without export_llama transformations', () => {
    const out = path.join(dir, 'refused.pte');
    const dtype = runCli(['export-example', 'llama-8da4w', out, '-d', 'bf16', '--embedding-8bit']);
    expect(dtype.status).toBe(2);
    expect(dtype.stderr).toMatch(/--dtype bf16: bfloat16 activations are written without --output-8da8w and --embedding-8bit/);
    expect(runExportExample('kv-decoder', out, { output8da8w: true })).toBe(2);
    expect(fs.existsSync(out)).toBe(false);
    // Options from untyped callers: a value the example does not write is named.
    const untyped = (options: Record<string, unknown>): Llama8da4wBuildOptions => options as Llama8da4wBuildOptions;
    expect(() => buildLlama8da4w(createLlama8da4wWeights(), untyped({ embeddingBits: 2 }))).toThrow(
      /the token embedding is written in 4 or 8 bits, not 2/,
    );
    expect(() => new Llama8da4wReference(createLlama8da4wWeights(), '8da4w', untyped({ outputQuantization: '8da2w' }))).toThrow(
      /unknown output quantization '8da2w' \(available: 8da4w, 8da8w\)/,
    );
    expect(() => buildLlama8da4w(createLlama8da4wWeights(), { dtype: 'float16', outputQuantization: '8da8w' })).toThrow(
      /float16 activations are written without --output-8da8w and --embedding-8bit/,
    );
  });
});
