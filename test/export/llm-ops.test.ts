// A prefill/decode program written the way export_llama writes attention:
// a 4-bit quantized embedding (`quantized_decomposed::embedding_4bit.dtype_out`
// with float16 group scales), `llama::update_cache` into KV caches that live
// in shared state (mem_id 2), and `llama::custom_sdpa` with causal masking
// from `start_pos`. Outputs are checked against a TypeScript reference, and
// decode must see the keys prefill wrote.
import { describe, expect, it } from 'vitest';

import { ProgramBuilder, type ConstantTensor, type MethodBuilder, type SharedBuffer, type TensorValue } from '../../lib/export/index.js';
import { Module, Tensor } from '../../lib/index.js';

const VOCAB = 6;
const HEADS = 4;
const KV_HEADS = 2;
const HEAD_DIM = 4;
const WIDTH = HEADS * HEAD_DIM; // embedding width: queries use every head
const KV_WIDTH = KV_HEADS * HEAD_DIM;
const GROUPS = 2; // quantization groups per embedding row
const CONTEXT = 8;
const PREFILL = 3;

// Nibble values 0..15 per (row, column), deterministic.
function nibble(row: number, column: number): number {
  return (row * 7 + column * 5 + 3) % 16;
}

// float16 bit patterns of exactly representable scales.
const HALF_SCALES: Record<number, number> = { 0.125: 0x3000, 0.25: 0x3400, 0.5: 0x3800 };
function scaleOf(row: number, group: number): number {
  return [0.125, 0.25, 0.5][(row + group) % 3] as number;
}

function packedWeights(): Uint8Array {
  const bytes = new Uint8Array((VOCAB * WIDTH) / 2);
  for (let r = 0; r < VOCAB; r++) {
    for (let c = 0; c < WIDTH; c += 2) bytes[(r * WIDTH + c) / 2] = (nibble(r, c) << 4) | nibble(r, c + 1);
  }
  return bytes;
}

function embeddingRow(token: number): number[] {
  return Array.from({ length: WIDTH }, (_, c) => (nibble(token, c) - 8) * scaleOf(token, Math.floor(c / (WIDTH / GROUPS))));
}

interface State {
  weights: ConstantTensor;
  scales: ConstantTensor;
  key: SharedBuffer;
  value: SharedBuffer;
}

// tokens [1, S] -> attention output [1, S, HEADS, HEAD_DIM]. Queries are the
// embeddings; keys and values are the first KV_WIDTH and last KV_WIDTH
// columns (scaled), so grouped heads read different data than queries.
function attentionMethod(m: MethodBuilder, state: State, sequence: number): void {
  const g = m.graph;
  const tokens = m.input('tokens', 'int64', [1, sequence]);
  const position = m.input('start_pos', 'int64', [1]);
  const start = g.addValue({ kind: 'int', value: 0n });
  g.addKernelCall('aten::_local_scalar_dense', [position.index, start]);
  const int = (value: number): number => g.addValue({ kind: 'int', value: BigInt(value) });

  const x = g.addTensor('float32', [1, sequence, WIDTH]);
  const dtypeFloat32 = int(6);
  g.addKernelCall('quantized_decomposed::embedding_4bit.dtype_out', [
    m.use(state.weights).index,
    m.use(state.scales).index,
    g.addValue({ kind: 'null' }),
    int(-8),
    int(7),
    tokens.index,
    dtypeFloat32,
    x.index,
    x.index,
  ]);
  const q = m.reshape(x, [1, sequence, HEADS, HEAD_DIM]);
  const k = m.reshape(m.mul(m.slice(x, 2, 0, KV_WIDTH), 0.5), [1, sequence, KV_HEADS, HEAD_DIM]);
  const v = m.reshape(m.slice(x, 2, WIDTH - KV_WIDTH, WIDTH), [1, sequence, KV_HEADS, HEAD_DIM]);
  for (const [update, cache] of [
    [k, state.key],
    [v, state.value],
  ] as [TensorValue, SharedBuffer][]) {
    const placeholder = g.addTensor('float32', [1]);
    g.addKernelCall('llama::update_cache.out', [update.index, m.use(cache).index, start, placeholder.index, placeholder.index]);
  }
  const out = g.addTensor('float32', [1, sequence, HEADS, HEAD_DIM]);
  g.addKernelCall('llama::custom_sdpa.out', [
    q.index,
    m.use(state.key).index,
    m.use(state.value).index,
    start,
    g.addValue({ kind: 'null' }),
    g.addValue({ kind: 'double', value: 0 }),
    g.addValue({ kind: 'bool', value: true }),
    g.addValue({ kind: 'null' }),
    out.index,
    out.index,
  ]);
  m.output(out);
}

function buildProgram(): Uint8Array {
  const program = new ProgramBuilder();
  const weights = program.constant('embedding.weight', 'uint8', [VOCAB, WIDTH / 2], packedWeights());
  const scaleBits = new Uint16Array(VOCAB * GROUPS);
  for (let r = 0; r < VOCAB; r++) for (let gi = 0; gi < GROUPS; gi++) scaleBits[r * GROUPS + gi] = HALF_SCALES[scaleOf(r, gi)] as number;
  const state: State = {
    weights,
    scales: program.constant('embedding.scales', 'float16', [VOCAB, GROUPS], scaleBits),
    key: program.sharedBuffer('key_cache', 'float32', [1, CONTEXT, KV_HEADS, HEAD_DIM]),
    value: program.sharedBuffer('value_cache', 'float32', [1, CONTEXT, KV_HEADS, HEAD_DIM]),
  };
  program.method('prefill', (m) => attentionMethod(m, state, PREFILL));
  program.method('decode', (m) => attentionMethod(m, state, 1));
  return program.toPte();
}

// The reference: every token so far, causal attention with grouped heads.
function referenceOutputs(tokens: number[], from: number): number[] {
  const rows = tokens.map(embeddingRow);
  const out: number[] = [];
  for (let r = from; r < tokens.length; r++) {
    for (let h = 0; h < HEADS; h++) {
      const kvh = Math.floor(h / (HEADS / KV_HEADS));
      const q = (rows[r] as number[]).slice(h * HEAD_DIM, (h + 1) * HEAD_DIM);
      const logits = rows.slice(0, r + 1).map((row) => {
        const key = row.slice(kvh * HEAD_DIM, (kvh + 1) * HEAD_DIM).map((x) => x * 0.5);
        return key.reduce((sum, kx, d) => sum + kx * (q[d] as number), 0) / Math.sqrt(HEAD_DIM);
      });
      const top = Math.max(...logits);
      const weightsOf = logits.map((l) => Math.exp(l - top));
      const total = weightsOf.reduce((a, b) => a + b, 0);
      for (let d = 0; d < HEAD_DIM; d++) {
        let acc = 0;
        rows.slice(0, r + 1).forEach((row, j) => {
          acc += ((weightsOf[j] as number) / total) * (row[WIDTH - KV_WIDTH + kvh * HEAD_DIM + d] as number);
        });
        out.push(acc);
      }
    }
  }
  return out;
}

function expectClose(actual: Float32Array, expected: number[]): void {
  expect(actual.length).toBe(expected.length);
  const worst = Math.max(...expected.map((e, i) => Math.abs(e - (actual[i] as number))));
  expect(worst).toBeLessThan(1e-5);
}

describe('LLM custom ops in a program', () => {
  const pte = buildProgram();

  it('prefill then decode share the KV cache and match the reference', async () => {
    const module = await Module.load(pte, { shareMemoryArenas: true });
    const tokens = [1, 4, 2, 5, 0];
    const [prefill] = await module.execute('prefill', [Tensor.int64([1, PREFILL], tokens.slice(0, PREFILL)), Tensor.int64([1], [0])]);
    expectClose((prefill as Tensor).data as Float32Array, referenceOutputs(tokens.slice(0, PREFILL), 0));
    for (let position = PREFILL; position < tokens.length; position++) {
      const [decoded] = await module.execute('decode', [Tensor.int64([1, 1], [tokens[position] as number]), Tensor.int64([1], [position])]);
      expectClose((decoded as Tensor).data as Float32Array, referenceOutputs(tokens.slice(0, position + 1), position));
    }
    await module.dispose();
  });

  it('without shared state decode does not see what prefill wrote', async () => {
    const module = await Module.load(pte, { shareMemoryArenas: false });
    const tokens = [1, 4, 2, 5];
    await module.execute('prefill', [Tensor.int64([1, PREFILL], tokens.slice(0, PREFILL)), Tensor.int64([1], [0])]);
    const [decoded] = await module.execute('decode', [Tensor.int64([1, 1], [5]), Tensor.int64([1], [PREFILL])]);
    const shared = referenceOutputs(tokens, PREFILL);
    const worst = Math.max(...shared.map((e, i) => Math.abs(e - (((decoded as Tensor).data as Float32Array)[i] as number))));
    expect(worst).toBeGreaterThan(1e-3);
    await module.dispose();
  });

  it('a start_pos past the cache is refused and the cache keeps its contents', async () => {
    const module = await Module.load(pte, { shareMemoryArenas: true });
    const tokens = [3, 1, 2, 4];
    await module.execute('prefill', [Tensor.int64([1, PREFILL], tokens.slice(0, PREFILL)), Tensor.int64([1], [0])]);
    await expect(module.execute('decode', [Tensor.int64([1, 1], [0]), Tensor.int64([1], [CONTEXT])])).rejects.toMatchObject({
      code: 'INVALID_INPUT',
      message: expect.stringContaining('start_pos 8'),
    });
    const [decoded] = await module.execute('decode', [Tensor.int64([1, 1], [4]), Tensor.int64([1], [PREFILL])]);
    expectClose((decoded as Tensor).data as Float32Array, referenceOutputs(tokens, PREFILL));
    await module.dispose();
  });
});
