// The addon's own checks of what crosses into it: lib/module.ts sends only
// well-formed calls, so these call the addon directly with what it must
// refuse, never convert past a type's range.
import { describe, expect, it } from 'vitest';

import { native } from '../../lib/native.js';
import { testdataPath } from '../helpers/testdata.js';

function refusal(action: () => unknown): { code: string; message: string } {
  try {
    action();
  } catch (error) {
    return error as { code: string; message: string };
  }
  throw new Error('expected the addon to refuse the call');
}

describe('the addon boundary', () => {
  it('refuses method indices, ScalarType codes and sizes that are not whole numbers in range', async () => {
    const { module } = await native().loadModule(testdataPath('et_add.pte'), {
      share: 'auto',
      numThreads: 1,
      threadPool: 'shared',
      mmap: false,
    });
    const one = (scalarType: number, shape: number[] = [1]) => ({ scalarType, shape, data: new Float32Array(1) });
    const out = [new ArrayBuffer(4)];
    expect(module.executeSync(0, [one(6), one(6)], out)).toHaveLength(1);
    for (const index of [-1, 0.5, 2 ** 32, Number.NaN, 1e300]) {
      const error = refusal(() => module.executeSync(index, [one(6), one(6)], out));
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(/method index must be a non-negative integer/);
    }
    expect(refusal(() => module.executeSync(1, [one(6), one(6)], out)).code).toBe('METHOD_NOT_FOUND');
    for (const code of [-1, 6.5, 30, 256, 2 ** 31, 1e300, Number.NaN]) {
      const error = refusal(() => module.executeSync(0, [one(code), one(6)], out));
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(/input 0: unknown ScalarType code/);
    }
    for (const size of [-1, 0.5, 2 ** 63, 1e300, Number.POSITIVE_INFINITY]) {
      const error = refusal(() => module.executeSync(0, [one(6, [size]), one(6)], out));
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(/input 0: shape\[0\] is not a non-negative integer/);
    }
    module.dispose();
  });
});
