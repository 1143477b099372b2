// Nodes are imported in dependency order whatever their order in the file, as
// onnxruntime loads them; a graph with a cycle is refused naming a node on it.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { EtnaError, Module, Tensor } from '../../lib/index.js';
import { importOnnx, readOnnxModel } from '../../lib/onnx/index.js';
import { sortNodes } from '../../lib/onnx/toposort.js';
import { onnxModel, type TestGraph } from './onnx-writer.js';

const f32 = (name: string, shape: (number | string)[]) => ({ name, type: 1, shape });

// y = relu(cast(x) * w), with the Cast of the input written last, as some converters append it.
const CAST_LAST: TestGraph = {
  nodes: [
    { op: 'Mul', inputs: ['x_cast', 'w'], outputs: ['m'], name: 'scale' },
    { op: 'Relu', inputs: ['m'], outputs: ['y'], name: 'relu' },
    { op: 'Cast', inputs: ['x'], outputs: ['x_cast'], name: 'graph_input_cast', int: { to: 1 } },
  ],
  inputs: [f32('x', [2, 3])],
  outputs: [f32('y', [2, 3])],
  initializers: [{ name: 'w', dims: [3], floats: [2, -1, 0.5] }],
};

function refusal(model: Uint8Array): EtnaError {
  try {
    importOnnx(model);
  } catch (error) {
    expect(error).toBeInstanceOf(EtnaError);
    return error as EtnaError;
  }
  throw new Error('the import was expected to fail');
}

describe('nodes are sorted topologically at import', () => {
  it('a graph whose input Cast comes after its readers imports and matches onnxruntime', async () => {
    const bytes = onnxModel(CAST_LAST);
    const imported = importOnnx(bytes);
    const data = Float32Array.from([1, 2, 3, -4, -5, 6]);
    const module = await Module.load(imported.bytes);
    const [y] = (await module.execute('forward', [new Tensor('float32', [2, 3], data)])) as Tensor[];
    module.dispose();
    const session = await ort.InferenceSession.create(bytes);
    const expected = (await session.run({ x: new ort.Tensor('float32', data, [2, 3]) })).y!.data as Float32Array;
    await session.release();
    expect(Array.from(y!.data as Float32Array)).toEqual(Array.from(expected));
    expect(Array.from(expected)).toEqual([2, 0, 1.5, 0, 5, 3]);
  });

  it('keeps a sorted graph in its order and puts producers first otherwise', () => {
    const sorted = readOnnxModel(onnxModel({ ...CAST_LAST, nodes: [CAST_LAST.nodes[2]!, CAST_LAST.nodes[0]!, CAST_LAST.nodes[1]!] })).graph;
    expect(sortNodes(sorted).map((n) => n.name)).toEqual(['graph_input_cast', 'scale', 'relu']);
    const reversed = readOnnxModel(
      onnxModel({ ...CAST_LAST, nodes: [CAST_LAST.nodes[1]!, CAST_LAST.nodes[0]!, CAST_LAST.nodes[2]!] }),
    ).graph;
    expect(sortNodes(reversed).map((n) => n.name)).toEqual(['graph_input_cast', 'scale', 'relu']);
  });

  it('orders a node after the producer of a value its If branch reads from outside', () => {
    const graph: TestGraph = {
      nodes: [
        {
          op: 'If',
          inputs: ['cond'],
          outputs: ['y'],
          name: 'choose',
          graphs: {
            then_branch: { nodes: [{ op: 'Relu', inputs: ['late'], outputs: ['t'] }], inputs: [], outputs: [f32('t', [2])] },
            else_branch: { nodes: [{ op: 'Neg', inputs: ['late'], outputs: ['e'] }], inputs: [], outputs: [f32('e', [2])] },
          },
        },
        { op: 'Abs', inputs: ['x'], outputs: ['late'], name: 'produce' },
      ],
      inputs: [f32('x', [2]), { name: 'cond', type: 9, shape: [] }],
      outputs: [f32('y', [2])],
    };
    expect(sortNodes(readOnnxModel(onnxModel(graph)).graph).map((n) => n.name)).toEqual(['produce', 'choose']);
  });

  it('a cycle is refused naming a node on it and the path', () => {
    const cycle: TestGraph = {
      nodes: [
        { op: 'Add', inputs: ['x', 'b'], outputs: ['a'], name: 'add' },
        { op: 'Relu', inputs: ['a'], outputs: ['b'], name: 'relu' },
        { op: 'Neg', inputs: ['b'], outputs: ['y'], name: 'neg' },
      ],
      inputs: [f32('x', [2])],
      outputs: [f32('y', [2])],
    };
    const error = refusal(onnxModel(cycle));
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toBe(
      "node 'add' (Add) is on a cycle: 'add' (Add) -> 'relu' (Relu) -> 'add' (Add); an ONNX graph must be acyclic",
    );
  });

  it('a node reading its own output is a cycle too', () => {
    const self: TestGraph = {
      nodes: [{ op: 'Add', inputs: ['x', 'y'], outputs: ['y'], name: 'accumulate' }],
      inputs: [f32('x', [2])],
      outputs: [f32('y', [2])],
    };
    expect(refusal(onnxModel(self)).message).toMatch(
      /^node 'accumulate' \(Add\) is on a cycle: 'accumulate' \(Add\) -> 'accumulate' \(Add\);/,
    );
  });
});
