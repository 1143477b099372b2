// A float16 graph end to end: add, mm, add of a broadcast bias, softmax and
// a cast to float32, run by the portable kernels and compared against a
// reference that computes each op in float32 and rounds its result once to
// float16 (ties to even) with lib/dtypes.ts's conversion, which the
// first test checks at its rounding edges.
import { describe, expect, it } from 'vitest';

import { float16ToNumber as halfValue, numberToFloat16 as halfBits } from '../../lib/dtypes.js';
import { ProgramBuilder } from '../../lib/export/index.js';
import { Module, Tensor } from '../../lib/index.js';

const toHalf = (v: number): number => halfValue(halfBits(v));

const ROWS = 2;
const INNER = 3;
const COLS = 4;

function buildProgram(): Uint8Array {
  const program = new ProgramBuilder();
  program.method('forward', (m) => {
    const x = m.input('x', 'float16', [ROWS, INNER]);
    const w = m.input('w', 'float16', [INNER, COLS]);
    const bias = m.input('bias', 'float16', [COLS]);
    const product = m.add(m.matmul(m.add(x, x), w), bias);
    m.output({ product, probs: m.cast(m.softmax(product, 1), 'float32') });
  });
  return program.toPte();
}

interface Reference {
  product: number[];
  probs: number[];
}

function reference(x: number[], w: number[], bias: number[]): Reference {
  const doubled = x.map((v) => toHalf(v + v));
  const product: number[] = [];
  for (let i = 0; i < ROWS; i++) {
    for (let j = 0; j < COLS; j++) {
      let acc = 0;
      for (let k = 0; k < INNER; k++)
        acc = Math.fround(acc + Math.fround((doubled[i * INNER + k] as number) * (w[k * COLS + j] as number)));
      product.push(toHalf(toHalf(acc) + (bias[j] as number)));
    }
  }
  const probs: number[] = [];
  for (let i = 0; i < ROWS; i++) {
    const row = product.slice(i * COLS, (i + 1) * COLS);
    const top = Math.max(...row);
    const total = row.reduce((sum, v) => sum + Math.exp(Math.fround(v - top)), 0);
    for (const v of row) probs.push(toHalf(Math.exp(Math.fround(v - top)) / total));
  }
  return { product, probs };
}

function halfTensor(shape: number[], values: number[]): Tensor<'float16'> {
  return new Tensor('float16', shape, Uint16Array.from(values, halfBits));
}

describe('float16 programs on the portable kernels', () => {
  it('our float16 conversion rounds ties to even and overflows to infinity', () => {
    expect(halfBits(1 + 2 ** -11)).toBe(0x3c00);
    expect(halfBits(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(halfBits(65519)).toBe(0x7bff);
    expect(halfBits(65520)).toBe(0x7c00);
    expect(halfBits(3 * 2 ** -25)).toBe(0x0002);
    expect(halfValue(0x3555)).toBeCloseTo(1 / 3, 3);
  });

  it('add, mm, softmax and a cast to float32 match a float32 reference rounded once per op', async () => {
    const module = await Module.load(buildProgram());
    // Values with more bits than float16 holds, so every rounding step matters.
    const x = Array.from({ length: ROWS * INNER }, (_, i) => toHalf(Math.sin(i + 1) * 1.7));
    const w = Array.from({ length: INNER * COLS }, (_, i) => toHalf(Math.cos(i * 0.7) * 2.3));
    const bias = Array.from({ length: COLS }, (_, i) => toHalf(0.1 * i - 0.15));
    const outputs = await module.run('forward', {
      x: halfTensor([ROWS, INNER], x),
      w: halfTensor([INNER, COLS], w),
      bias: halfTensor([COLS], bias),
    });
    const expected = reference(x, w, bias);

    const product = outputs.product as Tensor;
    expect(product.dtype).toBe('float16');
    expect(Array.from(product.data as Uint16Array, halfValue)).toEqual(expected.product);

    const probs = outputs.probs as Tensor;
    expect(probs.dtype).toBe('float32');
    const got = Array.from(probs.data as Float32Array);
    // Every probability is a float16 value widened exactly; exp may differ
    // in its last double bit between libms, so allow one float16 step.
    got.forEach((p, i) => {
      expect(toHalf(p)).toBe(p);
      expect(Math.abs(p - (expected.probs[i] as number))).toBeLessThanOrEqual(2 ** -11);
    });
    expect(got.slice(0, COLS).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 2);
    await module.dispose();
  });
});
