// The authored examples run in etna and match their plain-TypeScript
// references; without shared arenas the stateful ones must diverge.
import { describe, expect, it } from 'vitest';

import { EXAMPLE_NAMES, exampleReference, exportExample, type ExampleReference } from '../../lib/tools/examples/index.js';
import { Module, Tensor } from '../../lib/index.js';

function maxRelativeError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) {
    const scale = Math.max(1, Math.abs(expected[i]!));
    worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!) / scale);
  }
  return worst;
}

async function compareSession(name: string, module: Module, reference: ExampleReference, steps = 20): Promise<number> {
  let worst = 0;
  for (const call of reference.session().slice(0, steps)) {
    const want = reference.execute(call.method, call.inputs);
    const got = await module.execute(call.method, call.inputs);
    expect(got.length, `${name}.${call.method}`).toBe(want.length);
    for (const [i, expected] of want.entries()) {
      const actual = got[i] as Tensor;
      expect(actual.shape).toEqual([...expected.shape]);
      worst = Math.max(worst, maxRelativeError(actual.data as Float32Array, expected.data as Float32Array));
    }
  }
  return worst;
}

describe('authored examples on the executor', () => {
  for (const name of EXAMPLE_NAMES) {
    it(`${name}: 20 calls with shareMemoryArenas true match the reference within 1e-4`, async () => {
      const module = await Module.load(exportExample(name), { shareMemoryArenas: true });
      const reference = exampleReference(name);
      expect(reference.session().length).toBeGreaterThanOrEqual(Math.min(20, reference.session().length));
      const worst = await compareSession(name, module, reference);
      expect(worst).toBeLessThan(1e-4);
      await module.dispose();
    });
  }

  for (const name of ['kv-decoder', 'gru-stream']) {
    it(`${name}: state is shared by default ('auto') and lost without sharing`, async () => {
      const bytes = exportExample(name);
      const auto = await Module.load(bytes);
      expect(auto.memoryReport().mode).toBe('shared');
      expect(await compareSession(name, auto, exampleReference(name))).toBeLessThan(1e-4);
      await auto.dispose();

      const unshared = await Module.load(bytes, { shareMemoryArenas: false });
      expect(unshared.memoryReport().mode).toBe('unshared');
      expect(await compareSession(name, unshared, exampleReference(name))).toBeGreaterThan(1e-3);
      await unshared.dispose();
    });
  }

  it('encoder-decoder needs no state: unshared matches too', async () => {
    const module = await Module.load(exportExample('encoder-decoder'), { shareMemoryArenas: false });
    expect(await compareSession('encoder-decoder', module, exampleReference('encoder-decoder'))).toBeLessThan(1e-4);
    await module.dispose();
  });
});
