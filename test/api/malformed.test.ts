// Malformed programs never crash the process: every truncation and byte
// corruption of every real file either loads or throws INVALID_PROGRAM.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';

import { EtnaError, Program } from '../../lib/index.js';
import { Lcg } from '../../lib/random.js';
import { testdataFiles, testdataPath } from '../helpers/testdata.js';

function outcome(bytes: Uint8Array): 'loaded' | 'rejected' {
  try {
    const program = Program.load(bytes);
    program.describe();
    return 'loaded';
  } catch (error) {
    expect(error).toBeInstanceOf(EtnaError);
    expect((error as EtnaError).code).toBe('INVALID_PROGRAM');
    expect((error as EtnaError).message.length).toBeGreaterThan(10);
    return 'rejected';
  }
}

describe('malformed programs', () => {
  const files = testdataFiles().filter((name) => name !== 'djl_corrupt.pte');

  for (const name of files) {
    it(`${name}: every truncation point gives a program or INVALID_PROGRAM`, () => {
      const original = fs.readFileSync(testdataPath(name));
      let rejected = 0;
      const step = Math.max(1, Math.floor(original.length / 400));
      for (let cut = 0; cut < original.length; cut += step) {
        if (outcome(original.subarray(0, cut)) === 'rejected') rejected++;
      }
      expect(rejected).toBeGreaterThan(0);
      expect(outcome(original)).toBe('loaded');
    });

    it(`${name}: random byte corruptions give a program or INVALID_PROGRAM`, () => {
      const original = fs.readFileSync(testdataPath(name));
      const random = new Lcg(name.length * 7919);
      const next = (): number => random.nextUint32();
      for (let trial = 0; trial < 400; trial++) {
        const bytes = Uint8Array.from(original);
        const flips = 1 + (next() % 4);
        for (let k = 0; k < flips; k++) bytes[next() % bytes.length] ^= 1 + (next() % 255);
        outcome(bytes);
      }
    });
  }

  it('explains a truncated segment region with byte offsets', () => {
    const original = fs.readFileSync(testdataPath('djl_conv_xnnpack.pte'));
    const truncated = original.subarray(0, original.length - 100);
    expect(() => Program.load(truncated)).toThrow(/segment.*past the end of the 3260-byte file/);
  });

  it('names the field when the FlatBuffer is damaged', () => {
    const bytes = Uint8Array.from(fs.readFileSync(testdataPath('et_add.pte')));
    bytes[0] = 0xff; // root table offset now points past the end
    bytes[1] = 0xff;
    expect(() => Program.load(bytes)).toThrow(/malformed FlatBuffer: root table offset \d+ \(byte 0\)/);
  });

  it('refuses what is not bytes or a path', () => {
    expect(() => Program.load(42 as unknown as string)).toThrow(EtnaError);
  });
});
