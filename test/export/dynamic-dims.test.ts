// Tensors marked with dynamic dims are written DYNAMIC_BOUND, planned at their
// largest shape and run smaller; inside an XNNPACK delegate a reshape leaves
// its varying dim for the delegate to infer and a slice takes it to the end.
import { describe, expect, it } from 'vitest';

import { NodeUnion, StaticReshape, StaticSlice } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { EtnaError, Module, Tensor } from '../../lib/index.js';
import { ProgramBuilder, type MethodBuilder, type TensorValue } from '../../lib/export/index.js';
import { payloadGraph } from '../helpers/xnnpack-payload.js';

const MAX_LENGTH = 6;

/** y = softmax(reshape(x[:, 1:, :] * 2, [3, L, 2]) viewed back): x is [4, L, 2] with L varying up to 6. */
function program(): ProgramBuilder {
  const p = new ProgramBuilder();
  p.method('forward', (m: MethodBuilder) => {
    const x = m.input('x', 'float32', [4, MAX_LENGTH, 2]);
    m.graph.markDynamic(x.index, [1]);
    const mark = (t: TensorValue, dims: number[]): TensorValue => {
      m.graph.markDynamic(t.index, dims);
      return t;
    };
    const rows = mark(m.slice(x, 0, 1, 4), [1]);
    const doubled = mark(m.mul(rows, 2), [1]);
    const flat = mark(m.reshape(doubled, [3, MAX_LENGTH * 2]), [1]);
    const view = m.graph.value(m.graph.instructions.at(-1)!.args[1]!);
    if (view.kind !== 'intList') throw new Error('reshape sizes are not a list');
    m.graph.values[view.items[1]!] = { kind: 'int', value: -1n };
    const y = mark(m.softmax(flat, 1), [1]);
    m.output({ y });
  });
  return p;
}

function expected(length: number, data: Float32Array): number[] {
  const out: number[] = [];
  for (let r = 1; r < 4; r++) {
    const row = Array.from(data.subarray(r * length * 2, (r + 1) * length * 2), (v) => v * 2);
    const peak = Math.max(...row);
    const exps = row.map((v) => Math.exp(v - peak));
    const sum = exps.reduce((a, b) => a + b, 0);
    out.push(...exps.map((e) => e / sum));
  }
  return out;
}

describe('dynamic dims in authored programs', () => {
  for (const xnnpack of [false, true]) {
    it(`run at every length up to the bound (${xnnpack ? 'XNNPACK' : 'portable'})`, async () => {
      const { bytes, program: pte } = program().export({ xnnpack });
      if (xnnpack) {
        expect(pte.delegatePayloads).toHaveLength(1);
        const graph = payloadGraph(pte.delegatePayloads![0]!);
        const nodes = Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!);
        const slice = nodes.find((n) => n.nodeType() === NodeUnion.XNNStaticSlice)!.node(new StaticSlice()) as StaticSlice;
        // The varying length (dim 1) is 0 in both: "to the end" for the slice, "infer" for the reshape.
        expect([...slice.offsetsArray()!]).toEqual([1, 0, 0]);
        expect([...slice.sizesArray()!]).toEqual([3, 0, 2]);
        const reshapes = nodes
          .filter((n) => n.nodeType() === NodeUnion.XNNStaticReshape)
          .map((n) => n.node(new StaticReshape()) as StaticReshape);
        expect(reshapes.map((r) => Array.from({ length: r.newShapeLength() }, (_, i) => r.newShape(i)))).toEqual([[3, 0]]);
      }
      const module = await Module.load(bytes);
      expect(module.methodMeta('forward').inputs[0]!.dynamism).toBe('bound');
      expect(module.methodMeta('forward').outputs[0]!.dynamism).toBe('bound');
      for (const length of [1, 3, MAX_LENGTH]) {
        const data = Float32Array.from({ length: 4 * length * 2 }, (_, i) => Math.sin(i * 0.7));
        const { y } = await module.run('forward', { x: Tensor.float32([4, length, 2], data) });
        expect(y!.shape).toEqual([3, length * 2]);
        const want = expected(length, data);
        (y!.toArray() as number[]).forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 5));
      }
      await expect(
        module.run('forward', { x: Tensor.float32([4, MAX_LENGTH + 1, 2], new Float32Array(4 * (MAX_LENGTH + 1) * 2)) }),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT' });
      await module.dispose();
    });
  }

  it('refuses dynamic dims on constants and dims outside the tensor', () => {
    const p = new ProgramBuilder();
    const weight = p.constant('w', 'float32', [2], [1, 2]);
    p.method('forward', (m) => {
      const w = m.use(weight);
      expect(() => m.graph.markDynamic(w.index, [0])).toThrow(EtnaError);
      const x = m.input('x', 'float32', [2, 3]);
      expect(() => m.graph.markDynamic(x.index, [2])).toThrow(/outside tensor v\d+ of rank 2/);
      m.output({ y: m.relu(x) });
    });
  });
});
