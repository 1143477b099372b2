// The llama-8da4w example: every linear 8da4w in the XNNPACK delegate, a
// 4-bit embedding, update_cache into shared state and custom_sdpa. Prefill
// plus 32 greedy decode steps against the float32 TypeScript reference that
// uses the same dequantized weights and per-token activation quantization.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';
import { runBenchmarks } from '../../lib/tools/bench/harness.js';

import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { Module, Tensor } from '../../lib/index.js';
import { buildLlama8da4w, LLAMA_8DA4W_CONFIG as C, Llama8da4wReference } from '../../lib/tools/examples/llama-8da4w.js';
import { payloadGraph } from '../helpers/xnnpack-payload.js';
import { argmax, worstDifference } from '../helpers/logits.js';

// The delegate's int32 dot products are exact and its weights are the
// reference's; what differs is float32 summation order (sums, norms,
// softmax). One such difference can move an activation across an int8
// rounding boundary, shifting a logit by about one quantization step of its
// inputs, well under 1e-3 here; measured differences are around 1e-6.
const LOGIT_TOLERANCE = 1e-3;

describe('llama-8da4w example', () => {
  const lowered = buildLlama8da4w().export({ xnnpack: true });

  it('writes its linears into XNNPACK delegates and keeps the LLM ops portable', () => {
    const kernels = new Set(lowered.program.methods.flatMap((method) => method.operators.map((op) => op.name)));
    for (const op of ['quantized_decomposed::embedding_4bit', 'llama::update_cache', 'llama::custom_sdpa']) expect(kernels).toContain(op);
    expect(kernels).not.toContain('aten::mm');
    expect(kernels).not.toContain('aten::addmm');
    // 7 linears per layer and the output projection, each a Convert and a FullyConnected, in each of the two methods;
    // each RMSNorm's mean of squares (2 per layer and the final one) is a FullyConnected sum with unit weights.
    const nodeTypes = lowered.program.delegatePayloads!.flatMap((payload) => {
      const graph = payloadGraph(payload);
      return Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!.nodeType());
    });
    const linears = 2 * (7 * C.layers + 1);
    const norms = 2 * (2 * C.layers + 1);
    expect(nodeTypes.filter((type) => type === NodeUnion.XNNFullyConnected)).toHaveLength(linears + norms);
    expect(nodeTypes.filter((type) => type === NodeUnion.XNNConvert)).toHaveLength(linears);
  });

  it('prefill then 32 greedy decode steps match the reference and pick the same tokens', async () => {
    const module = await Module.load(lowered.bytes, { shareMemoryArenas: true });
    const reference = new Llama8da4wReference();
    const prompt = [3, 141, 59, 26, 53, 58, 97, 93];
    const [prefill] = await module.execute('prefill', [Tensor.int64([1, C.prefillLength], prompt), Tensor.int64([1], [0])]);
    const expected = reference.prefill(prompt, 0);
    const logits = (prefill as Tensor).data as Float32Array;
    expect(worstDifference(logits, expected)).toBeLessThan(LOGIT_TOLERANCE);

    const last = (values: Float32Array): Float32Array => values.subarray((C.prefillLength - 1) * C.vocab);
    let token = argmax(last(logits));
    expect(token).toBe(argmax(last(expected)));
    const generated: number[] = [];
    for (let step = 0; step < 32; step++) {
      const pos = C.prefillLength + step;
      const want = reference.decode(token, pos);
      const [decoded] = await module.execute('decode', [Tensor.int64([1, 1], [token]), Tensor.int64([1], [pos])]);
      const got = (decoded as Tensor).data as Float32Array;
      expect(worstDifference(got, want), `step ${step}`).toBeLessThan(LOGIT_TOLERANCE);
      expect(argmax(got), `step ${step}`).toBe(argmax(want));
      token = argmax(got);
      generated.push(token);
    }
    // The continuation depends on the cache prefill wrote: not one token repeated throughout.
    expect(new Set(generated).size).toBeGreaterThan(1);
    await module.dispose();
  });

  it('reset empties the caches: the same prompt gives the same logits again', async () => {
    const module = await Module.load(lowered.bytes, { shareMemoryArenas: true });
    const prompt = [7, 7, 1, 2, 250, 4, 9, 0];
    const run = async (): Promise<Float32Array> => {
      const [out] = await module.execute('prefill', [Tensor.int64([1, C.prefillLength], prompt), Tensor.int64([1], [0])]);
      return ((out as Tensor).data as Float32Array).slice();
    };
    const first = await run();
    await module.execute('decode', [Tensor.int64([1, 1], [5]), Tensor.int64([1], [C.prefillLength])]);
    await module.execute('reset', []);
    expect(worstDifference(await run(), first)).toBe(0);
    await module.dispose();
  });

  it('a position past the context is refused and leaves the caches as they were', async () => {
    const module = await Module.load(lowered.bytes, { shareMemoryArenas: true });
    const reference = new Llama8da4wReference();
    const prompt = [9, 8, 7, 6, 5, 4, 3, 2];
    await module.execute('prefill', [Tensor.int64([1, C.prefillLength], prompt), Tensor.int64([1], [0])]);
    reference.prefill(prompt, 0);
    await expect(module.execute('decode', [Tensor.int64([1, 1], [1]), Tensor.int64([1], [C.context])])).rejects.toMatchObject({
      code: 'INVALID_INPUT',
    });
    const [decoded] = await module.execute('decode', [Tensor.int64([1, 1], [1]), Tensor.int64([1], [C.prefillLength])]);
    expect(worstDifference((decoded as Tensor).data as Float32Array, reference.decode(1, C.prefillLength))).toBeLessThan(LOGIT_TOLERANCE);
    await module.dispose();
  });

  // /proc/self/smaps: the kilobytes of `path`'s mappings resident in this process.
  function residentKiB(path: string): number {
    let inMapping = false;
    let kib = 0;
    for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
      if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inMapping = line.endsWith(` ${path}`);
      else if (inMapping && line.startsWith('Rss:')) kib += Number(line.split(/\s+/)[1]);
    }
    return kib;
  }

  it('loaded with { mmap: true }, the file pages its load read are given back, and calls read what they need again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'etna-mmap-'));
    try {
      const path = join(dir, 'llama.pte');
      writeFileSync(path, lowered.bytes);
      const copied = await Module.load(lowered.bytes, { shareMemoryArenas: true });
      const mapped = await Module.load(path, { shareMemoryArenas: true, mmap: true });
      // Packing read every 4-bit weight, and the FlatBuffer region was copied.
      expect(residentKiB(path) * 1024).toBeLessThan(lowered.bytes.length / 20);
      const prompt = [3, 141, 59, 26, 53, 58, 97, 93];
      for (const method of ['prefill', 'decode'] as const) {
        const inputs =
          method === 'prefill'
            ? [Tensor.int64([1, C.prefillLength], prompt), Tensor.int64([1], [0])]
            : [Tensor.int64([1, 1], [5]), Tensor.int64([1], [C.prefillLength])];
        const [want] = await copied.execute(method, inputs);
        const [got] = await mapped.execute(method, inputs);
        expect((got as Tensor).data, method).toEqual((want as Tensor).data);
      }
      await copied.dispose();
      await mapped.dispose();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('etna export-example writes it lowered to XNNPACK without --xnnpack', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'etna-llama-'));
    try {
      const out = join(dir, 'llama.pte');
      expect(runExportExample('llama-8da4w', out)).toBe(0);
      const module = await Module.load(new Uint8Array(readFileSync(out)), { shareMemoryArenas: true });
      expect(module.memoryReport().packedWeightBytes).toBeGreaterThan(0);
      await module.dispose();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('etna bench runs it on etna only (no ONNX form) and its outputs match the reference', async () => {
    const report = await runBenchmarks({
      files: [],
      examples: ['llama-8da4w'],
      quick: true,
      threads: 1,
      iterations: 3,
      warmup: 1,
      progress: false,
      sessions: [],
    });
    expect(report.results.map((r) => r.config)).toEqual(['etna-shared', 'etna-unshared']);
    const shared = report.results.find((r) => r.config === 'etna-shared')!;
    expect(shared.outputsMatch).toBe(true);
    expect(Object.keys(shared.latency).sort()).toEqual(['decode', 'prefill', 'reset']);
  }, 120_000);
});
