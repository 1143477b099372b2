// NaN and infinities pass through programs lowered to XNNPACK exactly as
// through the portable kernels (and as PyTorch and onnxruntime compute them):
// the linked XNNPACK's clamps turn NaN into -Infinity, so calls with NaN or
// infinite inputs run on the delegate's NaN-keeping variant (docs/xnnpack.md).
import { describe, expect, it } from 'vitest';

import { ProgramBuilder } from '../../lib/export/index.js';
import { Module, Tensor } from '../../lib/index.js';
import { Lcg } from '../../lib/random.js';

const values = (count: number, seed: number, scale: number): Float32Array => new Lcg(seed).signedFloat32(count, scale);

// add(x, 1), relu(x), an MLP (linear, relu, linear) and a softmax.
function build(): ProgramBuilder {
  const program = new ProgramBuilder();
  const w1 = program.constant('w1', 'float32', [8, 3], values(24, 1, 0.5));
  const b1 = program.constant('b1', 'float32', [8], values(8, 2, 0.1));
  const w2 = program.constant('w2', 'float32', [2, 8], values(16, 3, 0.5));
  const b2 = program.constant('b2', 'float32', [2], values(2, 4, 0.1));
  program.method('forward', (m) => {
    const x = m.input('x', 'float32', [4]);
    const rows = m.input('rows', 'float32', [4, 3]);
    const scores = m.input('scores', 'float32', [4, 3]);
    m.output(m.add(x, 1), m.relu(x), m.linear(m.relu(m.linear(rows, w1, b1)), w2, b2), m.softmax(scores, -1));
  });
  return program;
}

// Same NaN positions, the same infinities, finite values close.
function expectSameSpecials(actual: Float32Array, expected: Float32Array, what: string): void {
  expect(actual.length, what).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) {
    const want = expected[i]!;
    const got = actual[i]!;
    if (Number.isNaN(want) || !Number.isFinite(want)) {
      expect(Object.is(got, want) || (Number.isNaN(got) && Number.isNaN(want)), `${what}[${i}]: ${got} vs ${want}`).toBe(true);
    } else {
      expect(Math.abs(got - want), `${what}[${i}]: ${got} vs ${want}`).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(want)));
    }
  }
}

describe('NaN and infinities through XNNPACK', () => {
  it('add, relu, an MLP and softmax keep NaN as the portable kernels do', async () => {
    const x = Tensor.float32([4], [NaN, -Infinity, Infinity, 2]);
    const rows = Tensor.float32([4, 3], [NaN, 1, 1, 0.5, -0.25, 1, Infinity, -Infinity, 0, 1, 2, 3]);
    const scores = Tensor.float32([4, 3], [NaN, 1, 2, Infinity, 0, 1, -Infinity, 0, 1, -Infinity, -Infinity, -Infinity]);
    const inputs = [x, rows, scores];
    const lowered = await Module.load(build().export({ xnnpack: true }).bytes);
    const portable = await Module.load(build().toPte());
    const got = (await lowered.execute('forward', inputs)) as Tensor[];
    const want = (await portable.execute('forward', inputs)) as Tensor[];
    await Promise.all([lowered.dispose(), portable.dispose()]);

    expect(Array.from(got[0]!.data as Float32Array)).toEqual([NaN, -Infinity, Infinity, 3]);
    expect(Array.from(got[1]!.data as Float32Array)).toEqual([NaN, 0, Infinity, 2]);
    const mlp = got[2]!.data as Float32Array;
    // Row 0 (NaN) is NaN, rows 1 and 3 finite; row 2 (Infinity and -Infinity) as the portable kernels say.
    expect([mlp[0], mlp[1]].every(Number.isNaN)).toBe(true);
    expect([mlp[2], mlp[3], mlp[6], mlp[7]].every(Number.isFinite)).toBe(true);
    const softmax = got[3]!.data as Float32Array;
    // A row with NaN or a largest value of +-Infinity is NaN; -Infinity scores get exactly 0.
    expect(Array.from(softmax.subarray(0, 6)).every(Number.isNaN)).toBe(true);
    expect(softmax[6]).toBe(0);
    expect(Array.from(softmax.subarray(9, 12)).every(Number.isNaN)).toBe(true);
    for (let i = 0; i < want.length; i++) {
      expectSameSpecials(got[i]!.data as Float32Array, want[i]!.data as Float32Array, `output ${i}`);
    }
  });

  it("finite calls after a NaN call give the fast variant's finite results again", async () => {
    const lowered = await Module.load(build().export({ xnnpack: true }).bytes);
    const portable = await Module.load(build().toPte());
    const finite = [
      Tensor.float32([4], [0.5, -1, 3, 2]),
      Tensor.float32([4, 3], values(12, 7, 2)),
      Tensor.float32([4, 3], values(12, 8, 4)),
    ];
    const special = [Tensor.float32([4], [NaN, 1, 1, 1]), ...finite.slice(1)];
    const want = (await portable.execute('forward', finite)) as Tensor[];
    const before = (await lowered.execute('forward', finite)) as Tensor[];
    const nan = (await lowered.execute('forward', special)) as Tensor[];
    const after = (await lowered.execute('forward', finite)) as Tensor[];
    await Promise.all([lowered.dispose(), portable.dispose()]);
    expect(Number.isNaN((nan[0]!.data as Float32Array)[0])).toBe(true);
    for (let i = 0; i < want.length; i++) {
      expect(Array.from(after[i]!.data as Float32Array)).toEqual(Array.from(before[i]!.data as Float32Array));
      expectSameSpecials(after[i]!.data as Float32Array, want[i]!.data as Float32Array, `output ${i}`);
    }
  });
});
