// The real XNNPACK programs through the public API, checked against
// references computed here from each file's own weights.
import fs from 'node:fs';
import * as flatbuffers from 'flatbuffers';
import { describe, expect, it } from 'vitest';

import { Program as ProgramTable } from '../../lib/generated/program/etna/pte/program.js';
import { Module, Tensor } from '../../lib/index.js';
import { Lcg } from '../../lib/random.js';
import { testdataPath } from '../helpers/testdata.js';

// Named data blobs of a .pte, by key.
function namedData(file: string): Map<string, Float32Array> {
  const bytes = fs.readFileSync(file);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const segmentBase = Number(view.getBigUint64(24, true)); // eh00 header
  const root = ProgramTable.getRootAsProgram(new flatbuffers.ByteBuffer(new Uint8Array(bytes)));
  const out = new Map<string, Float32Array>();
  for (let i = 0; i < root.namedDataLength(); i++) {
    const entry = root.namedData(i)!;
    const segment = root.segments(entry.segmentIndex())!;
    const start = segmentBase + Number(segment.offset());
    const copy = new Uint8Array(bytes.subarray(start, start + Number(segment.size())));
    out.set(entry.key()!, new Float32Array(copy.buffer));
  }
  return out;
}

function random(n: number, seed: number): number[] {
  const generator = new Lcg(seed);
  return Array.from({ length: n }, () => generator.signed());
}

describe('XNNPACK programs', () => {
  for (const file of ['npr_add_xnnpack.pte', 'djl_add_unplanned_xnnpack.pte']) {
    it(`${file} adds on XNNPACK`, async () => {
      const m = await Module.load(testdataPath(file));
      const n = m.methodMeta('forward').inputs[0]!.shape![0]!;
      const a = random(n, 1);
      const b = random(n, 2);
      const [y] = await m.execute('forward', [Tensor.float32([n], a), Tensor.float32([n], b)]);
      (y as Tensor).toArray().forEach((v, i) => expect(v).toBeCloseTo(Math.fround(a[i]!) + Math.fround(b[i]!), 6));
      await m.dispose();
    });
  }

  it('djl_lin129_planned.pte computes W x + b from its named-data weights', async () => {
    const blobs = [...namedData(testdataPath('djl_lin129_planned.pte')).values()];
    const weight = blobs.find((blob) => blob.length === 64 * 129)!;
    const bias = blobs.find((blob) => blob.length === 64)!;
    expect(weight).toBeDefined();
    expect(bias).toBeDefined();
    const x = random(129, 3);
    for (const shareMemoryArenas of [true, false]) {
      const m = await Module.load(testdataPath('djl_lin129_planned.pte'), { shareMemoryArenas });
      const [y] = await m.execute('forward', [Tensor.float32([129], x)]);
      const actual = (y as Tensor).toArray();
      expect(actual.length).toBe(64);
      for (let o = 0; o < 64; o++) {
        let sum = bias[o]!;
        for (let i = 0; i < 129; i++) sum += weight[o * 129 + i]! * Math.fround(x[i]!);
        expect(Math.abs(actual[o]! - sum) / Math.max(1, Math.abs(sum))).toBeLessThan(1e-4);
      }
      expect(m.memoryReport().packedWeightBytes).toBeGreaterThanOrEqual(64 * 129 * 4);
      await m.dispose();
    }
  });

  it('djl_conv_xnnpack.pte runs a convolution and reports its packed weights', async () => {
    const m = await Module.load(testdataPath('djl_conv_xnnpack.pte'));
    const x = Tensor.float32([1, 3, 16, 16], random(3 * 16 * 16, 4));
    const [y1] = await m.execute('forward', [x]);
    const [y2] = m.executeSync('forward', [x]);
    expect((y1 as Tensor).shape).toEqual([1, 8, 16, 16]);
    expect((y1 as Tensor).toArray()).toEqual((y2 as Tensor).toArray());
    expect((y1 as Tensor).toArray().some((v) => v !== 0)).toBe(true);
    const report = m.memoryReport();
    expect(report.packedWeightBytes).toBeGreaterThan(0);
    await m.dispose();
  });
});
