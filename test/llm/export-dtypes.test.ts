// `etna export-example llama-8da4w -d bf16|fp16`: export_llama's 16-bit
// activations. The operators outside the XNNPACK delegates run in the 16-bit
// dtype, conversions to and from float32 surround the delegates and
// custom_sdpa, and the logits come out 16-bit. The runner loads the program
// and generates the greedy tokens of a TypeScript reference that rounds each
// operator's result as the kernels do; the logits stay near the float32
// program's.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';
import { Llm, loadTokenizer } from '../../lib/llm/index.js';
import { Module } from '../../lib/module.js';
import { Program } from '../../lib/program.js';
import { Tensor } from '../../lib/tensor.js';
import { float16ToNumber } from '../../lib/dtypes.js';
import { bf16Value } from '../../lib/export/quantize.js';
import { activationDtype, roundingTo, type ActivationDtype } from '../../lib/tools/examples/activation-dtype.js';
import { Llama8da4wRoundedReference } from '../../lib/tools/examples/llama-16bit.js';
import {
  buildLlama8da4w,
  createLlama8da4wWeights,
  LLAMA_8DA4W_CONFIG,
  LLAMA_8DA4W_PRESETS,
  type Llama8da4wTransforms,
} from '../../lib/tools/examples/llama-8da4w.js';
import { withFamily, type Llama8da4wFamily } from '../../lib/tools/examples/llama-families.js';
import { argmax, worstDifference } from '../helpers/logits.js';
import { runCli } from '../helpers/cli.js';
import { byteTokenizerJson, referenceGreedy } from './helpers.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-llama-dtypes-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const SMALL = LLAMA_8DA4W_PRESETS.small;
const tokenizer = loadTokenizer(new TextEncoder().encode(byteTokenizerJson({ vocab: SMALL.vocab })));
const promptOf = (length: number): number[] => Array.from({ length }, (_, i) => (i * 89 + 7) % SMALL.vocab);

function exported(dtype: string, layout: 'forward' | 'prefill-decode'): string {
  const out = path.join(dir, `llama-${dtype}-${layout}.pte`);
  expect(runExportExample('llama-8da4w', out, { preset: 'small', layout, dtype })).toBe(0);
  return out;
}

/** How far the program's logits may be from the rounding reference's: a few units in the last place at |logit| < 4. */
const LOGITS_SPREAD: Record<ActivationDtype, number> = { bfloat16: 0.125, float16: 0.0625, float32: 1e-3 };

/** The reference's logits row before each of `generated`, fed the prompt token by token and then the generated tokens. */
function teacherForcedRows(reference: Llama8da4wRoundedReference, prompt: readonly number[], generated: readonly number[]): Float32Array[] {
  let position = 0;
  let row = new Float32Array(0);
  for (const token of prompt) row = reference.decode(token, position++);
  return generated.map((token) => {
    const before = row;
    row = reference.decode(token, position++);
    return before;
  });
}

const widen = (dtype: ActivationDtype, bits: Uint16Array): Float32Array =>
  Float32Array.from(bits, dtype === 'bfloat16' ? bf16Value : float16ToNumber);

describe('activation dtypes', () => {
  it("take export_llama's -d names and round to nearest even through float32, keeping NaN, ±Inf and -0", () => {
    expect(['fp32', 'bf16', 'fp16', 'bfloat16'].map(activationDtype)).toEqual(['float32', 'bfloat16', 'float16', 'bfloat16']);
    expect(() => activationDtype('int8')).toThrow(/unknown activation dtype 'int8' \(available: fp32, bf16, fp16\)/);
    const bf16 = roundingTo('bfloat16');
    const fp16 = roundingTo('float16');
    // 1 + 2^-8 is halfway between two bfloat16s and ties to 1; 1 + 3 * 2^-8 ties up to 1 + 2^-6.
    expect([bf16(1 + 2 ** -8), bf16(1 + 3 * 2 ** -8)]).toEqual([1, 1 + 2 ** -6]);
    // float16: 65519 stays finite, 65520 overflows; 2^-25 ties to 0, 3 * 2^-25 to the subnormal 2^-23.
    expect([fp16(65519), fp16(65520), fp16(2 ** -25), fp16(3 * 2 ** -25)]).toEqual([65504, Infinity, 0, 2 ** -23]);
    for (const round of [bf16, fp16]) {
      expect(round(Number.NaN)).toBeNaN();
      expect([round(-Infinity), round(Infinity)]).toEqual([-Infinity, Infinity]);
      expect(Object.is(round(-0), -0)).toBe(true);
    }
  });

  it('writes the non-delegated operators in the 16-bit dtype, with float32 delegates, RMSNorm and custom_sdpa between conversions', () => {
    const program = Program.load(exported('bf16', 'forward'));
    const forward = program.describe().methods.find((method) => method.name === 'forward')!;
    expect(forward.outputs[0]).toMatchObject({ dtype: 'bfloat16', shape: [1, SMALL.vocab] });
    expect(forward.operators).toEqual(
      expect.arrayContaining([
        'dim_order_ops::_to_dim_order_copy.out',
        'aten::silu.out',
        'aten::mul.out',
        'quantized_decomposed::embedding_4bit.dtype_out',
      ]),
    );
    program.dispose();
  });

  it('refuses what export_llama and ExecuTorch do not write: an unknown dtype, 16 bits with the pre-quantized layout', () => {
    const unknown = runCli(['export-example', 'llama-8da4w', path.join(dir, 'x.pte'), '-d', 'int4']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown dtype 'int4' \(available: fp32, bf16, fp16\)/);
    const preQuantized = runCli(['export-example', 'llama-8da4w', path.join(dir, 'x.pte'), '-d', 'fp16', '--embedding-8bit']);
    expect(preQuantized.status).toBe(2);
    expect(preQuantized.stderr).toMatch(/--dtype fp16: float16 activations are written without --output-8da8w and --embedding-8bit/);
    const other = runCli(['export-example', 'kv-decoder', path.join(dir, 'x.pte'), '-d', 'fp16']);
    expect(other.status).toBe(2);
    expect(other.stderr).toMatch(/example 'kv-decoder' is written in float32 only; --dtype applies to llama-8da4w/);
    expect(fs.existsSync(path.join(dir, 'x.pte'))).toBe(false);
    expect(() => buildLlama8da4w(createLlama8da4wWeights(), { dtype: 'float16', outputQuantization: '8da8w' })).toThrow(
      /float16 activations are written without --output-8da8w/,
    );
  });

  it('writes -d fp16 with --hadamard and --quantize-kv-cache: the rotation in float16, the 16-bit keys, values and queries quantized', () => {
    const out = path.join(dir, 'llama-fp16-transformed.pte');
    expect(runExportExample('llama-8da4w', out, { preset: 'small', dtype: 'fp16', hadamard: true, quantizeKvCache: true })).toBe(0);
    const program = Program.load(out);
    const decode = program.describe().methods.find((method) => method.name === 'decode')!;
    expect(decode.outputs[0]).toMatchObject({ dtype: 'float16' });
    expect(decode.operators).toEqual(
      expect.arrayContaining([
        'llama::fast_hadamard_transform.out',
        'quantized_decomposed::choose_qparams_per_token_asymmetric.out',
        'quantized_decomposed::quantize_per_token.out',
        'llama::custom_quantized_sdpa.out',
      ]),
    );
    program.dispose();
  });
});

describe.each(['bf16', 'fp16'] as const)('llama-8da4w -d %s --preset small', (name) => {
  const dtype = activationDtype(name);
  const files = { forward: exported(name, 'forward'), 'prefill-decode': exported(name, 'prefill-decode') };
  const fp32 = exported('fp32', 'forward');

  it.each(['forward', 'prefill-decode'] as const)('%s: greedy tokens equal the rounding reference', async (layout) => {
    const llm = await Llm.load(files[layout], { tokenizer });
    // A prompt whose 12 steps have no near tie in the reference (top two logits at least 0.016 apart).
    const prompt = promptOf(37);
    const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 12, ignoreEos: true });
    const reference = new Llama8da4wRoundedReference(dtype, createLlama8da4wWeights(SMALL));
    expect(result.tokens).toEqual(referenceGreedy(prompt, 12, SMALL, reference));
    expect(new Set(result.tokens).size).toBeGreaterThan(1);
    await llm.dispose();
  });

  it.each([
    ['forward', 130],
    ['prefill-decode', 21],
  ] as const)(
    "%s: each greedy token is the reference's best, or within one rounding spread of it (prompt of %i tokens)",
    async (layout, length) => {
      const llm = await Llm.load(files[layout], { tokenizer });
      const prompt = promptOf(length);
      const result = await llm.generate(prompt, { temperature: 0, maxNewTokens: 16, ignoreEos: true });
      // Fed the program's own tokens, the reference ranks each choice: a 16-bit rounding that falls the other way
      // moves logits by a few units in the last place, so a near tie may be broken either way, nothing more.
      const rows = teacherForcedRows(new Llama8da4wRoundedReference(dtype, createLlama8da4wWeights(SMALL)), prompt, result.tokens);
      let exact = 0;
      result.tokens.forEach((token, i) => {
        const row = rows[i]!;
        const best = Math.max(...row);
        expect(best - row[token]!).toBeLessThan(LOGITS_SPREAD[dtype]);
        if (row[token] === best) exact++;
      });
      expect(exact).toBeGreaterThanOrEqual(14);
      await llm.dispose();
    },
  );

  it('returns 16-bit logits near the reference and near the float32 program', async () => {
    const [reduced, full] = [await Module.load(files.forward), await Module.load(fp32)];
    const reference = new Llama8da4wRoundedReference(dtype, createLlama8da4wWeights(SMALL));
    const prompt = promptOf(20);
    const feed = (tokens: number[], start: number): Tensor[] => [
      new Tensor('int64', [1, tokens.length], BigInt64Array.from(tokens, BigInt)),
      new Tensor('int64', [1], BigInt64Array.of(BigInt(start))),
    ];
    const steps: [number[], number][] = [
      [prompt, 0],
      [[prompt[3]!], prompt.length],
      [[prompt[9]!], prompt.length + 1],
    ];
    let worstReference = 0;
    let worstFloat = 0;
    for (const [tokens, start] of steps) {
      const [logits] = await reduced.execute('forward', feed(tokens, start));
      const [floatLogits] = await full.execute('forward', feed(tokens, start));
      expect(logits).toBeInstanceOf(Tensor);
      const got = widen(dtype, (logits as Tensor).data as Uint16Array);
      // The reference's prefill gives every position's logits; the program the last one's.
      const all = reference.prefill(tokens, start);
      const expected = all.subarray(all.length - SMALL.vocab);
      const float = (floatLogits as Tensor).data as Float32Array;
      for (let i = 0; i < got.length; i++) {
        worstReference = Math.max(worstReference, Math.abs(got[i]! - expected[i]!));
        worstFloat = Math.max(worstFloat, Math.abs(got[i]! - float[i]!));
      }
    }
    // Measured: 0.066 (bf16) and 0.034 (fp16) from the reference, 0.11 and 0.065 from the float32 program, whose
    // activations are not rounded at all; the float32 program is at least 2^-9 away somewhere, as 16 bits cannot hold it.
    expect(worstReference).toBeLessThan(LOGITS_SPREAD[dtype]);
    expect(worstFloat).toBeLessThan(2 * LOGITS_SPREAD[dtype]);
    expect(worstFloat).toBeGreaterThan(2 ** -9);
    await reduced.dispose();
    await full.dispose();
  });
});

/**
 * The example's own small shape in a family, a dtype and with export_llama's
 * transformations: the program's greedy tokens after a prefill, and the
 * reference's, each decoding its own; and the worst logit difference where
 * the two are fed the same tokens.
 */
async function greedyPair(
  family: Llama8da4wFamily,
  dtype: ActivationDtype,
  transforms: Pick<Llama8da4wTransforms, 'hadamard' | 'quantizeKvCache'>,
  prompt: readonly number[],
  steps: number,
): Promise<{ program: number[]; reference: number[]; worst: number }> {
  const C = withFamily(LLAMA_8DA4W_CONFIG, family);
  const weights = createLlama8da4wWeights(C);
  const module = await Module.load(buildLlama8da4w(weights, { ...transforms, dtype }).toPte({ xnnpack: true }), {
    shareMemoryArenas: true,
  });
  const reference = new Llama8da4wRoundedReference(dtype, weights, transforms);
  const lastRow = (logits: Float32Array): Float32Array => logits.subarray(logits.length - C.vocab);
  const run = async (method: string, tokens: readonly number[], start: number): Promise<Float32Array> => {
    const [out] = await module.execute(method, [Tensor.int64([1, tokens.length], [...tokens]), Tensor.int64([1], [start])]);
    return widen(dtype, (out as Tensor).data as Uint16Array);
  };
  let got = lastRow(await run('prefill', prompt, 0));
  let want = lastRow(reference.prefill(prompt, 0));
  let worst = worstDifference(got, want);
  const program: number[] = [];
  const expected: number[] = [];
  for (let step = 0; step < steps; step++) {
    program.push(argmax(got));
    expected.push(argmax(want));
    if (step === steps - 1) break;
    got = await run('decode', [program[step]!], prompt.length + step);
    // The reference decodes the program's token, so a difference in one step does not carry into the next.
    want = reference.decode(program[step]!, prompt.length + step);
    worst = Math.max(worst, worstDifference(got, want));
  }
  await module.dispose();
  return { program, reference: expected, worst };
}

const PROMPT = [3, 141, 59, 26, 53, 58, 97, 93];
const STEPS = 16;

// Each case's greedy tokens equal the reference's for PROMPT (no near tie in these steps); the logits stay within
// LOGITS_SPREAD. The program's float32 linears sum in another order than the reference, so now and then a value
// rounds to the neighbouring 16-bit number: measured worst differences of 0 to 0.066 in bfloat16 (the int8 caches
// keep such a row), 0 to 0.02 in float16.
describe.each([
  ['qwen3', {}],
  ['gemma3', {}],
  ['phi4', {}],
  ['smollm2', {}],
  ['llama', { quantizeKvCache: true }],
  ['gemma3', { quantizeKvCache: true }],
] as const)('llama-8da4w --family %s %o in 16 bits', (family, transforms) => {
  it.each(['bfloat16', 'float16'] as const)('%s: greedy tokens equal the rounding reference, logits within its spread', async (dtype) => {
    const { program, reference, worst } = await greedyPair(family, dtype, transforms, PROMPT, STEPS);
    expect(program).toEqual(reference);
    expect(new Set(program).size).toBeGreaterThan(1);
    expect(worst).toBeLessThan(LOGITS_SPREAD[dtype]);
  });
});

describe('llama-8da4w -d fp16|bf16 --hadamard', () => {
  it.each([
    ['float16', { hadamard: true }],
    ['float16', { hadamard: true, quantizeKvCache: true }],
    ['bfloat16', { hadamard: true }],
    ['bfloat16', { hadamard: true, quantizeKvCache: true }],
  ] as const)('%s %o: greedy tokens equal the rounding reference (every butterfly rounded to the dtype)', async (dtype, transforms) => {
    const { program, reference, worst } = await greedyPair('llama', dtype, transforms, PROMPT, STEPS);
    expect(program).toEqual(reference);
    // float16: measured 1.2e-4 and 2.4e-4; a reference rotating in double and rounding once is 0.05 to 0.065 away.
    expect(worst).toBeLessThan(dtype === 'float16' ? 2 ** -10 : 2 ** -6);
  });
});
