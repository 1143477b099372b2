// TopK and GatherND, as real detectors use them (a YOLO head picks its best
// boxes with TopK and gathers them with GatherND): the values and indices
// onnxruntime gives, and clear refusals of what cannot be lowered.
import { describe, expect, it } from 'vitest';

import { EtnaError } from '../../lib/index.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { runEtna, runOrt, type Feeds } from './engines.js';
import { onnxModel, type TestInitializer, type TestNode } from './onnx-writer.js';

const FLOAT = 1;
const INT64 = 7;

function seeded(count: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: count }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    // Few distinct values, so that ties (which keep ascending index order) are common.
    return ((s >>> 8) % 13) - 6;
  });
}

async function bothRuntimes(model: Uint8Array, feeds: Feeds): Promise<void> {
  const [etna, ort] = await Promise.all([runEtna(model, feeds, true), runOrt(model, feeds)]);
  expect(Object.keys(etna).sort()).toEqual(Object.keys(ort).sort());
  for (const name of Object.keys(ort)) expect(etna[name], name).toEqual(ort[name]);
}

function topKModel(shape: number[], k: number, attrs: Record<string, number>, opset = 17): Uint8Array {
  const outShape = shape.map((d, i) => (i === ((attrs.axis ?? -1) + shape.length) % shape.length ? k : d));
  const node: TestNode = { op: 'TopK', inputs: ['x', 'k'], outputs: ['values', 'indices'], int: attrs };
  return onnxModel(
    {
      nodes: [node],
      inputs: [{ name: 'x', type: FLOAT, shape }],
      outputs: [
        { name: 'values', type: FLOAT, shape: outShape },
        { name: 'indices', type: INT64, shape: outShape },
      ],
      initializers: [{ name: 'k', dims: [1], floats: [], int64s: [k] }],
    },
    opset,
  );
}

function gatherNdModel(data: number[], indices: number[], batchDims: number, index: TestInitializer | undefined): Uint8Array {
  const outShape = [...indices.slice(0, -1), ...data.slice(batchDims + indices.at(-1)!)];
  return onnxModel({
    nodes: [{ op: 'GatherND', inputs: ['x', 'i'], outputs: ['y'], int: { batch_dims: batchDims } }],
    inputs: [{ name: 'x', type: FLOAT, shape: data }, ...(index ? [] : [{ name: 'i', type: INT64, shape: indices }])],
    outputs: [{ name: 'y', type: FLOAT, shape: outShape }],
    initializers: index ? [index] : [],
  });
}

describe('TopK', () => {
  const shape = [2, 5, 7];
  const x = { type: FLOAT, shape, data: seeded(70, 3) };
  for (const [label, k, attrs] of [
    ['largest along the last axis', 3, {}],
    ['smallest along axis 1', 4, { axis: 1, largest: 0 }],
    ['negative axis, all of it', 5, { axis: -2 }],
    ['k = 0', 0, { axis: 0 }],
  ] as const) {
    it(`gives onnxruntime's values and indices: ${label}`, async () => {
      await bothRuntimes(topKModel(shape, k, attrs), { x });
    });
  }

  it('returns the same elements unsorted, in sorted order (ONNX leaves the order open)', async () => {
    const etna = await runEtna(topKModel(shape, 3, { sorted: 0 }), { x }, true);
    const sorted = await runOrt(topKModel(shape, 3, {}), { x });
    const unsorted = await runOrt(topKModel(shape, 3, { sorted: 0 }), { x });
    expect(etna).toEqual(sorted);
    const rows = (r: Record<string, number[]>): string[] =>
      Array.from({ length: 10 }, (_, row) =>
        JSON.stringify([0, 1, 2].map((j) => [r.values![row * 3 + j], r.indices![row * 3 + j]]).sort((a, b) => a[1]! - b[1]!)),
      );
    expect(rows(etna)).toEqual(rows(unsorted));
  });

  it('puts NaN first among the largest, as PyTorch does', async () => {
    const data = [1, NaN, 3, -Infinity, Infinity, 2];
    const out = await runEtna(topKModel([6], 3, {}), { x: { type: FLOAT, shape: [6], data } }, true);
    expect(out.values).toEqual([NaN, Infinity, 3]);
    expect(out.indices).toEqual([1, 4, 2]);
  });

  it('refuses a K larger than its axis, naming it', () => {
    expect(() => importOnnx(topKModel([2, 5], 6, {}), {})).toThrow(/K 6 is outside \[0, 5\]/);
    try {
      importOnnx(topKModel([2, 5], 6, {}), {});
    } catch (error) {
      expect(error).toBeInstanceOf(EtnaError);
      expect((error as EtnaError).code).toBe('INVALID_INPUT');
    }
  });

  it('refuses a K computed at run time', () => {
    const model = onnxModel({
      nodes: [{ op: 'TopK', inputs: ['x', 'k'], outputs: ['values', 'indices'] }],
      inputs: [
        { name: 'x', type: FLOAT, shape: [4] },
        { name: 'k', type: INT64, shape: [1] },
      ],
      outputs: [
        { name: 'values', type: FLOAT },
        { name: 'indices', type: INT64 },
      ],
    });
    expect(() => importOnnx(model, {})).toThrow(/K \(input 1, 'k'\) must be known at import time/);
  });
});

describe('GatherND', () => {
  const data = [3, 4, 5];
  const x = { type: FLOAT, shape: data, data: seeded(60, 9) };
  it('picks whole rows, elements and negative indices as onnxruntime does', async () => {
    // Rows of one index (whole [4, 5] planes), of two ([5] rows) and of three (elements), some counted from the end.
    for (const [indices, values] of [
      [
        [2, 1],
        [2, -3],
      ],
      [
        [3, 2],
        [0, 1, -1, -4, 2, 3],
      ],
      [
        [2, 2, 3],
        [0, 0, 0, 2, 3, 4, -1, -1, -1, 1, 2, -5],
      ],
    ] as const) {
      await bothRuntimes(gatherNdModel(data, [...indices], 0, undefined), {
        x,
        i: { type: INT64, shape: [...indices], data: [...values] },
      });
    }
  });

  it('gathers within each batch with batch_dims 1', async () => {
    await bothRuntimes(gatherNdModel(data, [3, 2, 2], 1, undefined), {
      x,
      i: { type: INT64, shape: [3, 2, 2], data: [0, 1, 3, 4, 1, 1, -1, 0, 2, 2, 0, 3] },
    });
  });

  it('refuses an index outside its dim when the call runs, rather than pick another element', async () => {
    // [0, 7] would land on a valid flattened position (7 < 4 * 5) if the dims were not checked.
    const model = gatherNdModel(data, [1, 2], 0, undefined);
    const call = runEtna(model, { x, i: { type: INT64, shape: [1, 2], data: [0, 7] } }, true);
    await expect(call).rejects.toThrow(EtnaError);
    await expect(runOrt(model, { x, i: { type: INT64, shape: [1, 2], data: [0, 7] } })).rejects.toThrow();
  });

  it('refuses rows longer than the data has dims', () => {
    const model = gatherNdModel([3, 4], [2, 3], 0, { name: 'i', dims: [2, 3], floats: [], int64s: [0, 0, 0, 1, 1, 1] });
    expect(() => importOnnx(model, {})).toThrow(/index rows of 3 with batch_dims 0 exceed data of rank 2/);
  });
});
