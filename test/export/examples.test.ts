import { describe, expect, it } from 'vitest';

import {
  buildExample,
  createGruStreamWeights,
  createKvDecoderWeights,
  EXAMPLE_NAMES,
  exampleReference,
  erf,
  float32Tensor,
  GRU_STREAM_CONFIG,
  GruStreamReference,
  int64Tensor,
  KV_DECODER_CONFIG,
  KvDecoderReference,
  kvDecoderFullSequence,
  SeededRandom,
  type ReferenceTensor,
} from '../../lib/tools/examples/index.js';
import { ScalarType, type Tensor } from '../../lib/generated/program/program_generated.js';
import { bufferSizes, methodByName, methodNames, readProgram, segmentBytes, tensorAt } from './pte-reader.js';

const SCALAR_TYPES: Record<string, ScalarType> = { float32: ScalarType.FLOAT, int64: ScalarType.LONG };

function exported(name: string) {
  const builder = buildExample(name);
  const { bytes, plan } = builder.export();
  return { builder, bytes, plan, program: readProgram(bytes) };
}

function sizesOf(tensor: Tensor): number[] {
  return Array.from(tensor.sizesArray() ?? []);
}

function offsetOf(tensor: Tensor): number {
  const allocation = tensor.allocationInfo()!;
  return allocation.memoryOffsetLow() + allocation.memoryOffsetHigh() * 2 ** 32;
}

function maxAbsDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}

describe.each(EXAMPLE_NAMES)('%s program', (name) => {
  it('stores each weight once and every method refers to the same entry', () => {
    const { builder, bytes, program } = exported(name);
    const graph = builder.programGraph;
    const constantSegment = program.constantSegment()!;
    const offsets = Array.from({ length: constantSegment.offsetsLength() }, (_, i) => Number(constantSegment.offsets(i)!));
    const segment = segmentBytes(bytes, program, constantSegment.segmentIndex());
    const indexByName = new Map<string, number>();
    for (const method of graph.methods) {
      const plan = methodByName(program, method.name);
      method.values.forEach((value, index) => {
        if (value.kind !== 'tensor' || value.origin.kind !== 'constant') return;
        const constant = value.origin.constant;
        const tensor = tensorAt(plan, index)!;
        expect(tensor.allocationInfo(), `${constant.name} is not planned`).toBeNull();
        const idx = tensor.dataBufferIdx();
        expect(idx).toBeGreaterThan(0);
        if (indexByName.has(constant.name)) expect(idx, `${constant.name} in ${method.name}`).toBe(indexByName.get(constant.name));
        indexByName.set(constant.name, idx);
        const stored = segment.subarray(offsets[idx]!, offsets[idx]! + constant.nbytes);
        expect(Buffer.from(stored).equals(Buffer.from(constant.bytes)), `bytes of ${constant.name}`).toBe(true);
      });
    }
    // One stored entry per distinct weight (the examples hold no two identical weights).
    expect(new Set(indexByName.values()).size).toBe(indexByName.size);
    expect(offsets.length - 1).toBe(indexByName.size);
  });

  it('places shared state in mem_id 2 with one size and the same offsets in every method', () => {
    const { builder, program, plan } = exported(name);
    const stateful = builder.programGraph.sharedBuffers.length > 0;
    const sizes = methodNames(program).map((m) => bufferSizes(methodByName(program, m)));
    for (const s of sizes) expect(s).toHaveLength(stateful ? 3 : 2);
    if (!stateful) return;
    expect(new Set(sizes.map((s) => s[2])).size).toBe(1);
    expect(sizes[0]![2]).toBe(plan.sharedBytes);
    const placement = new Map<string, string>();
    for (const methodName of methodNames(program)) {
      const method = methodByName(program, methodName);
      for (let i = 0; i < method.valuesLength(); i++) {
        const tensor = tensorAt(method, i);
        if (tensor?.allocationInfo()?.memoryId() !== 2) continue;
        const fqn = tensor.extraTensorInfo()?.fullyQualifiedName();
        expect(fqn, `mem_id 2 tensor v${i} of ${methodName} is named`).toBeTruthy();
        const where = JSON.stringify({
          offset: offsetOf(tensor),
          sizes: sizesOf(tensor),
          type: tensor.scalarType(),
          init: tensor.dataBufferIdx(),
        });
        if (placement.has(fqn!)) expect(where, `${fqn} in ${methodName}`).toBe(placement.get(fqn!));
        placement.set(fqn!, where);
        const slot = plan.shared.find((s) => s.name === fqn)!;
        expect(offsetOf(tensor)).toBe(slot.offset);
      }
    }
    expect([...placement.keys()].sort()).toEqual(builder.programGraph.sharedBuffers.map((b) => b.name).sort());
  });

  it('has the signature of its reference, and the reference session runs', () => {
    const { program } = exported(name);
    const reference = exampleReference(name);
    expect(methodNames(program)).toEqual([...reference.methods]);
    const signature = (tensors: readonly ReferenceTensor[]) => tensors.map((t) => `${SCALAR_TYPES[t.dtype]}:${t.shape.join('x')}`);
    for (const call of reference.session()) {
      const method = methodByName(program, call.method);
      const inputs = Array.from({ length: method.inputsLength() }, (_, i) => tensorAt(method, method.inputs(i)!)!);
      expect(signature(call.inputs), `${call.method} inputs`).toEqual(inputs.map((t) => `${t.scalarType()}:${sizesOf(t).join('x')}`));
      const outputs = reference.execute(call.method, call.inputs);
      const declared = Array.from({ length: method.outputsLength() }, (_, i) => tensorAt(method, method.outputs(i)!)!);
      expect(signature(outputs), `${call.method} outputs`).toEqual(declared.map((t) => `${t.scalarType()}:${sizesOf(t).join('x')}`));
      for (const out of outputs) expect(Array.from(out.data as Float32Array).every(Number.isFinite)).toBe(true);
    }
  });
});

describe('kv-decoder', () => {
  it('keeps four caches back to back in mem_id 2 and starts them as zeros', () => {
    const { program } = exported('kv-decoder');
    const cacheBytes = KV_DECODER_CONFIG.context * KV_DECODER_CONFIG.modelDim * 4;
    for (const methodName of ['prefill', 'decode', 'reset']) {
      const method = methodByName(program, methodName);
      const caches: [string, number, number][] = [];
      for (let i = 0; i < method.valuesLength(); i++) {
        const tensor = tensorAt(method, i);
        if (tensor?.allocationInfo()?.memoryId() === 2)
          caches.push([tensor.extraTensorInfo()!.fullyQualifiedName()!, offsetOf(tensor), tensor.dataBufferIdx()]);
      }
      expect(caches.sort((a, b) => a[1] - b[1])).toEqual([
        ['layers.0.key_cache', 0, 0],
        ['layers.0.value_cache', cacheBytes, 0],
        ['layers.1.key_cache', 2 * cacheBytes, 0],
        ['layers.1.value_cache', 3 * cacheBytes, 0],
      ]);
      expect(bufferSizes(method)[2]).toBe(4 * cacheBytes);
    }
    expect(program.mutableDataSegmentsLength()).toBe(0);
  });

  it('decode after prefill equals the whole sequence computed at once without a cache', () => {
    const weights = createKvDecoderWeights();
    const random = new SeededRandom(99);
    const tokens = Array.from({ length: 12 }, () => random.integer(KV_DECODER_CONFIG.vocab));
    const full = kvDecoderFullSequence(weights, tokens);
    const V = KV_DECODER_CONFIG.vocab;
    const reference = new KvDecoderReference(weights);
    const prefill = reference.prefill(tokens.slice(0, 8), 0);
    expect(maxAbsDifference(prefill, full.subarray(0, 8 * V))).toBeLessThan(1e-4);
    for (let pos = 8; pos < 12; pos++) {
      const logits = reference.decode(tokens[pos]!, pos);
      expect(maxAbsDifference(logits, full.subarray(pos * V, (pos + 1) * V)), `position ${pos}`).toBeLessThan(1e-4);
    }
    // The logits are not degenerate: positions disagree on the most likely next token somewhere.
    const argmax = (row: Float32Array) => row.indexOf(Math.max(...row));
    const choices = new Set(Array.from({ length: 12 }, (_, p) => argmax(full.subarray(p * V, (p + 1) * V))));
    expect(choices.size).toBeGreaterThan(1);
  });

  it('accepts a padded last chunk: padding is overwritten before any query sees it', () => {
    const weights = createKvDecoderWeights();
    const tokens = [5, 17, 200, 3, 3, 90, 41, 250, 7, 66, 128];
    const full = kvDecoderFullSequence(weights, tokens);
    const V = KV_DECODER_CONFIG.vocab;
    const reference = new KvDecoderReference(weights);
    reference.prefill(tokens.slice(0, 8), 0);
    const second = reference.prefill([tokens[8]!, 1, 2, 3, 4, 5, 6, 250], 8); // one real token, then padding at 9..15
    expect(maxAbsDifference(second.subarray(0, V), full.subarray(8 * V, 9 * V))).toBeLessThan(1e-4);
    for (let pos = 9; pos < tokens.length; pos++) {
      expect(maxAbsDifference(reference.decode(tokens[pos]!, pos), full.subarray(pos * V, (pos + 1) * V)), `position ${pos}`).toBeLessThan(
        1e-4,
      );
    }
  });

  it('reset clears the state: the same chunk gives the same logits again', () => {
    const reference = new KvDecoderReference();
    const chunk = [int64Tensor([1, 8], [1, 2, 3, 4, 5, 6, 7, 8]), int64Tensor([1], [0])];
    const first = reference.execute('prefill', chunk)[0]!.data as Float32Array;
    reference.execute('decode', [int64Tensor([1, 1], [9]), int64Tensor([1], [8])]);
    const decoded = reference.execute('decode', [int64Tensor([1, 1], [10]), int64Tensor([1], [9])])[0]!.data as Float32Array;
    expect(reference.execute('reset', [])).toEqual([]);
    const again = reference.execute('prefill', chunk)[0]!.data as Float32Array;
    expect(Array.from(again)).toEqual(Array.from(first));
    const fresh = new KvDecoderReference();
    fresh.execute('prefill', chunk);
    fresh.execute('decode', [int64Tensor([1, 1], [9]), int64Tensor([1], [8])]);
    expect(Array.from(fresh.execute('decode', [int64Tensor([1, 1], [10]), int64Tensor([1], [9])])[0]!.data as Float32Array)).toEqual(
      Array.from(decoded),
    );
  });

  it('rejects positions outside the context and wrong inputs', () => {
    const reference = new KvDecoderReference();
    const { context } = KV_DECODER_CONFIG;
    expect(() => reference.decode(1, context)).toThrow(`position ${context} is outside the context 0..${context - 1}`);
    expect(() => reference.prefill([1, 2, 3, 4, 5, 6, 7, 8], context - 7)).toThrow(`position ${context} is outside`);
    expect(() => reference.execute('decode', [float32Tensor([1, 1], [1]), int64Tensor([1], [0])])).toThrow(
      /decode: input 0 'token' must be int64\[1, 1\], got float32\[1, 1\]/,
    );
    expect(() => reference.execute('generate', [])).toThrow(/no method 'generate'/);
  });
});

describe('gru-stream', () => {
  it('serializes the hidden state with its initial value (case D) and reset copies it back', () => {
    const { program, bytes, builder } = exported('gru-stream');
    const h0 = createGruStreamWeights().initialHidden;
    const mutable = program.mutableDataSegments(0)!;
    expect(Array.from({ length: mutable.offsetsLength() }, (_, i) => Number(mutable.offsets(i)!))).toEqual([0, 0]);
    const initial = segmentBytes(bytes, program, mutable.segmentIndex());
    expect(Array.from(new Float32Array(initial.slice().buffer))).toEqual(Array.from(h0));
    for (const methodName of ['step', 'reset']) {
      const method = methodByName(program, methodName);
      const states = Array.from({ length: method.valuesLength() }, (_, i) => tensorAt(method, i)).filter(
        (t) => t?.allocationInfo()?.memoryId() === 2,
      );
      expect(states).toHaveLength(1);
      expect(states[0]!.dataBufferIdx()).toBe(1);
      expect(offsetOf(states[0]!)).toBe(0);
      expect(sizesOf(states[0]!)).toEqual([1, GRU_STREAM_CONFIG.hiddenSize]);
    }
    const reset = builder.programGraph.method('reset');
    expect(reset.instructions).toHaveLength(1);
    const source = reset.tensorNode(reset.instructions[0]!.args[1]!);
    expect(source.origin.kind === 'constant' && Array.from(new Float32Array(source.origin.constant.bytes.slice().buffer))).toEqual(
      Array.from(h0),
    );
  });

  it('reset restores the initial output; without it the state changes the output', () => {
    const reference = new GruStreamReference();
    const frame = new SeededRandom(5).uniform(GRU_STREAM_CONFIG.frameSize, 1);
    const first = reference.step(frame);
    const second = reference.step(frame);
    expect(maxAbsDifference(first, second)).toBeGreaterThan(1e-3);
    reference.step(new Float32Array(GRU_STREAM_CONFIG.frameSize).fill(0.25));
    reference.execute('reset', []);
    expect(Array.from(reference.state)).toEqual(Array.from(createGruStreamWeights().initialHidden));
    expect(Array.from(reference.step(frame))).toEqual(Array.from(first));
  });

  it('matches the textbook GRU equations', () => {
    const weights = createGruStreamWeights();
    const reference = new GruStreamReference(weights);
    const frame = new SeededRandom(8).uniform(GRU_STREAM_CONFIG.frameSize, 1);
    const { frameSize: F, hiddenSize: H } = GRU_STREAM_CONFIG;
    const h = weights.initialHidden;
    const dot = (w: Float32Array, row: number, width: number, x: Float32Array) => x.reduce((sum, v, i) => sum + v * w[row * width + i]!, 0);
    const gate = (k: number, i: number, r = 1) =>
      dot(weights.input.weight, k * H + i, F, frame) +
      weights.input.bias[k * H + i]! +
      r * (dot(weights.recurrent.weight, k * H + i, H, h) + weights.recurrent.bias[k * H + i]!);
    const sig = (v: number) => 1 / (1 + Math.exp(-v));
    const expected = Array.from({ length: H }, (_, i) => {
      const r = sig(gate(0, i));
      const z = sig(gate(1, i));
      const n = Math.tanh(
        dot(weights.input.weight, 2 * H + i, F, frame) +
          weights.input.bias[2 * H + i]! +
          r * (dot(weights.recurrent.weight, 2 * H + i, H, h) + weights.recurrent.bias[2 * H + i]!),
      );
      return (1 - z) * n + z * h[i]!;
    });
    reference.step(frame);
    expect(maxAbsDifference(reference.state, expected)).toBeLessThan(1e-5);
  });
});

describe('encoder-decoder', () => {
  it('is stateless and decodes with the encoder matrices', () => {
    const reference = exampleReference('encoder-decoder');
    const x = float32Tensor([1, 32], new SeededRandom(3).uniform(32, 1));
    const [code] = reference.execute('encode', [x]);
    expect(code!.shape).toEqual([1, 8]);
    expect(Array.from(reference.execute('encode', [x])[0]!.data as Float32Array)).toEqual(Array.from(code!.data as Float32Array));
    const [reconstruction] = reference.execute('decode', [code!]);
    expect(reconstruction!.shape).toEqual([1, 32]);
    expect(Array.from(reconstruction!.data as Float32Array).every((v) => v > 0 && v < 1)).toBe(true);
    const { builder } = exported('encoder-decoder');
    const constantsOf = (method: string) =>
      builder.programGraph
        .method(method)
        .values.flatMap((v) => (v.kind === 'tensor' && v.origin.kind === 'constant' ? [v.origin.constant.name] : []));
    const shared = constantsOf('encode').filter((n) => constantsOf('decode').includes(n));
    expect(shared.sort()).toEqual(['encoder.layer1.weight', 'encoder.layer2.weight']);
  });
});

describe('reference helpers', () => {
  it('erf is accurate across both of its formulas', () => {
    const known: [number, number][] = [
      [0, 0],
      [0.5, 0.5204998778130465],
      [1, 0.8427007929497149],
      [2.4, 0.999311486103355],
      [2.6, 0.9997639655834707],
      [3, 0.9999779095030014],
      [-1.5, -0.9661051464753108],
    ];
    for (const [x, value] of known) expect(Math.abs(erf(x) - value), `erf(${x})`).toBeLessThan(1e-12);
  });

  it('gives every caller a fresh reference with its own state', () => {
    const a = exampleReference('gru-stream');
    const b = exampleReference('gru-stream');
    const frame = float32Tensor([1, 16], new Float32Array(16).fill(0.5));
    const first = a.execute('step', [frame])[0]!.data;
    a.execute('step', [frame]);
    expect(Array.from(b.execute('step', [frame])[0]!.data as Float32Array)).toEqual(Array.from(first as Float32Array));
    expect(() => exampleReference('nope')).toThrow(
      /unknown example 'nope' \(available: kv-decoder, gru-stream, encoder-decoder, kv-decoder-large, llama-8da4w\)/,
    );
  });
});
