// A training program whose parameters live in a .ptd file: the forward pass
// returns the loss, gradients and parameters, checked against the same
// network computed here from the returned parameters.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';

import { EtnaError, Module, Tensor } from '../../lib/index.js';
import { testdataPath } from '../helpers/testdata.js';

const PROGRAM = 'et_xor_training.pte';
const DATA = 'et_xor_training.ptd';

// loss = -log_softmax(W2 sigmoid(W1 x + b1) + b2)[label], and its gradients.
function reference(x: number[], label: number, w1: number[], b1: number[], w2: number[], b2: number[]) {
  const hidden = b1.map((b, j) => 1 / (1 + Math.exp(-(b + w1[2 * j]! * x[0]! + w1[2 * j + 1]! * x[1]!))));
  const logits = b2.map((b, k) => b + hidden.reduce((sum, h, j) => sum + h * w2[10 * k + j]!, 0));
  const max = Math.max(...logits);
  const exps = logits.map((v) => Math.exp(v - max));
  const total = exps.reduce((a, b) => a + b, 0);
  const probs = exps.map((e) => e / total);
  const loss = -Math.log(probs[label]!);
  const dLogits = probs.map((p, k) => p - (k === label ? 1 : 0));
  const dW2 = dLogits.flatMap((d) => hidden.map((h) => d * h));
  const dHidden = hidden.map((_, j) => dLogits.reduce((sum, d, k) => sum + d * w2[10 * k + j]!, 0));
  const dZ = dHidden.map((d, j) => d * hidden[j]! * (1 - hidden[j]!));
  const dW1 = dZ.flatMap((d) => [d * x[0]!, d * x[1]!]);
  return { loss, dW1, db1: dZ, dW2, db2: dLogits };
}

function close(actual: number[], expected: number[]): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((v, i) => expect(v).toBeCloseTo(expected[i]!, 5));
}

describe('external data (.ptd)', () => {
  for (const source of ['path', 'bytes'] as const) {
    it(`runs the xor training step with its parameters from the .ptd (${source})`, async () => {
      const externalData = source === 'path' ? testdataPath(DATA) : new Uint8Array(fs.readFileSync(testdataPath(DATA)));
      const m = await Module.load(testdataPath(PROGRAM), { externalData });
      const fqns = await m.execute('__et_training_fqn_forward', []);
      expect(fqns).toEqual(['net.linear.weight', 'net.linear.bias', 'net.linear2.weight', 'net.linear2.bias']);
      const [gradientsAt] = await m.execute('__et_training_gradients_index_forward', []);
      const [parametersAt] = await m.execute('__et_training_parameters_index_forward', []);
      expect([gradientsAt, parametersAt]).toEqual([2n, 6n]);

      for (const [x, label] of [
        [[1, 0], 1],
        [[0, 1], 1],
        [[1, 1], 0],
      ] as const) {
        const outputs = (await m.execute('forward', [Tensor.float32([1, 2], x), Tensor.int64([1], [label])])) as Tensor[];
        const [w1, b1, w2, b2] = outputs.slice(6).map((t) => t.toArray());
        const want = reference([...x], label, w1!, b1!, w2!, b2!);
        expect(outputs[0]!.shape).toEqual([]);
        expect(outputs[0]!.toArray()[0]).toBeCloseTo(want.loss, 5);
        close(outputs[2]!.toArray(), want.dW1);
        close(outputs[3]!.toArray(), want.db1);
        close(outputs[4]!.toArray(), want.dW2);
        close(outputs[5]!.toArray(), want.db2);
      }
      await m.dispose();
    });
  }

  it('says which file is missing when the .ptd is not given', async () => {
    const m = await Module.load(testdataPath(PROGRAM), { shareMemoryArenas: false });
    await expect(m.execute('forward', [Tensor.float32([1, 2], [1, 0]), Tensor.int64([1], [1])])).rejects.toMatchObject({
      code: 'INVALID_PROGRAM',
      message: expect.stringMatching(/external data \('net\.linear\.weight'\); load the module with its \.ptd file/),
    });
    await m.dispose();
  });

  it('refuses a file that is not a .ptd', async () => {
    const error = await Module.load(testdataPath(PROGRAM), { externalData: testdataPath('et_add.pte') }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EtnaError);
    expect((error as EtnaError).code).toBe('INVALID_PROGRAM');
    expect((error as EtnaError).message).toMatch(/not 'FT01'|too short/);
  });
});
