// Lowered programs share delegate memory across methods: the same weights
// pack once however many methods use them, and with shared arenas the
// delegates' workspace is the largest single need rather than the sum.
import { describe, expect, it } from 'vitest';

import { ProgramBuilder } from '../../lib/export/index.js';
import type { MethodBuilder } from '../../lib/export/method-builder.js';
import { Module, Tensor } from '../../lib/index.js';
import { Lcg } from '../../lib/random.js';

const randomValues = (count: number, seed: number, scale = 1): Float32Array => new Lcg(seed).signedFloat32(count, scale);

// Methods load (and their delegates initialise) on first call: call each once with zeros.
async function loadAllMethods(module: Module): Promise<void> {
  for (const name of module.methodNames) {
    const inputs = module
      .methodMeta(name)
      .inputs.map((input) => Tensor.float32(input.shape!, new Float32Array(input.shape!.reduce((a, b) => a * b, 1))));
    await module.execute(name, inputs);
  }
}

const FEATURES = 1024;
const WEIGHT = randomValues(FEATURES * FEATURES, 21, 0.05);
const WEIGHT_BYTES = WEIGHT.byteLength;

// k methods, each a linear over the same 1024x1024 weight (4 MiB) with its own batch size.
function sharedWeightProgram(methods: number): Uint8Array {
  const program = new ProgramBuilder();
  const weight = program.constant('shared.weight', 'float32', [FEATURES, FEATURES], WEIGHT);
  for (let k = 0; k < methods; k++) {
    program.method(`forward${k}`, (m) => {
      m.output(m.linear(m.input('x', 'float32', [k + 1, FEATURES]), weight));
    });
  }
  return program.toPte({ xnnpack: true });
}

describe('packed weights', () => {
  it('the same weight used by 1, 2 or 4 methods is packed once', async () => {
    const packed: number[] = [];
    const x = randomValues(FEATURES, 22);
    const expected = new Float32Array(4);
    for (let o = 0; o < expected.length; o++) {
      let sum = 0;
      for (let i = 0; i < FEATURES; i++) sum += WEIGHT[o * FEATURES + i]! * x[i]!;
      expected[o] = sum;
    }
    for (const methods of [1, 2, 4]) {
      const module = await Module.load(sharedWeightProgram(methods), { shareMemoryArenas: true });
      for (let k = 0; k < methods; k++) {
        const rows = new Float32Array((k + 1) * FEATURES);
        rows.set(x, k * FEATURES);
        const [y] = await module.execute(`forward${k}`, [Tensor.float32([k + 1, FEATURES], rows)]);
        const last = ((y as Tensor).data as Float32Array).subarray(k * FEATURES);
        for (let o = 0; o < expected.length; o++) expect(Math.abs(last[o]! - expected[o]!)).toBeLessThan(1e-4);
      }
      packed.push(module.memoryReport().packedWeightBytes);
      await module.dispose();
    }
    expect(packed[0]).toBeGreaterThanOrEqual(WEIGHT_BYTES);
    expect(packed).toEqual([packed[0], packed[0], packed[0]]);
  });

  it('each module packs its own copy', async () => {
    const bytes = sharedWeightProgram(2);
    const one = await Module.load(bytes);
    const two = await Module.load(bytes);
    await loadAllMethods(one);
    await loadAllMethods(two);
    expect(one.memoryReport().packedWeightBytes).toBeGreaterThanOrEqual(WEIGHT_BYTES);
    expect(two.memoryReport().packedWeightBytes).toBe(one.memoryReport().packedWeightBytes);
    await Promise.all([one.dispose(), two.dispose()]);
  });
});

// Two methods whose delegates hold intermediates of very different sizes.
function workspaceProgram(which: 'both' | 'small' | 'large'): Uint8Array {
  const program = new ProgramBuilder();
  const inW = program.constant('in.weight', 'float32', [256, 64], randomValues(256 * 64, 31, 0.1));
  const outW = program.constant('out.weight', 'float32', [64, 256], randomValues(64 * 256, 32, 0.1));
  const body = (rows: number) => (m: MethodBuilder) => {
    const x = m.input('x', 'float32', [rows, 64]);
    m.output(m.linear(m.tanh(m.linear(x, inW)), outW));
  };
  if (which !== 'large') program.method('small', body(1));
  if (which !== 'small') program.method('large', body(32));
  return program.toPte({ xnnpack: true });
}

describe('delegate workspace', () => {
  it('is the largest single need with sharing on and the sum with it off', async () => {
    const single = async (which: 'small' | 'large'): Promise<number> => {
      const module = await Module.load(workspaceProgram(which), { shareMemoryArenas: false });
      await loadAllMethods(module);
      const bytes = module.memoryReport().workspaceBytes;
      await module.dispose();
      return bytes;
    };
    const small = await single('small');
    const large = await single('large');
    expect(small).toBeGreaterThan(0);
    expect(large).toBeGreaterThan(small);

    const bytes = workspaceProgram('both');
    const shared = await Module.load(bytes, { shareMemoryArenas: true });
    const unshared = await Module.load(bytes, { shareMemoryArenas: false });
    await loadAllMethods(shared);
    await loadAllMethods(unshared);
    expect(shared.memoryReport().workspaceBytes).toBe(Math.max(small, large));
    expect(unshared.memoryReport().workspaceBytes).toBe(small + large);

    // Both configurations still compute the same results through their workspaces.
    const x = Tensor.float32([32, 64], randomValues(32 * 64, 33));
    const [a] = await shared.execute('large', [x]);
    const [b] = await unshared.execute('large', [x]);
    expect((a as Tensor).toArray()).toEqual((b as Tensor).toArray());
    const [c] = shared.executeSync('small', [Tensor.float32([1, 64], randomValues(64, 34))]);
    expect((c as Tensor).shape).toEqual([1, 64]);
    await Promise.all([shared.dispose(), unshared.dispose()]);
  });
});
