// Import-time rewrites of paddle2onnx graphs: BatchNormalization, Mul and Add
// by constants (from Constant nodes as paddle2onnx writes weights) fold into
// the convolution before them, Mul and Add of an input into an unpadded
// convolution after them, and x * Clip(x + 3, 0, 6) / 6 becomes one
// HardSwish, so no elementwise pass is left for them at run time.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { Module, Program, Tensor } from '../../lib/index.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { relativeDifference } from '../../lib/tools/bench/onnx-graphs.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { onnxModel, type TestNode } from './onnx-writer.js';

const INPUT = [1, 3, 10, 12];
const CHANNELS = 6;

function constantNode(name: string, dims: number[], floats: number[]): TestNode {
  return { op: 'Constant', inputs: [], outputs: [name], tensors: { value: { name, dims, floats } } };
}

/** Conv, BN, a scalar Mul (constant first), a per-channel Add, then paddle2onnx's opset-9 hardswish; every weight a Constant node. */
function convChain(addShape: number[] = [1, CHANNELS, 1, 1], addValues = CHANNELS): Uint8Array {
  const next = seededUniform(21);
  const values = (n: number, low: number, high: number): number[] => Array.from({ length: n }, () => next(low, high));
  const nodes: TestNode[] = [
    constantNode('w', [CHANNELS, 3, 3, 3], values(CHANNELS * 27, -0.4, 0.4)),
    constantNode('gamma', [CHANNELS], values(CHANNELS, 0.8, 1.2)),
    constantNode('beta', [CHANNELS], values(CHANNELS, -0.2, 0.2)),
    constantNode('mean', [CHANNELS], values(CHANNELS, -0.2, 0.2)),
    constantNode('var', [CHANNELS], values(CHANNELS, 0.5, 1.5)),
    constantNode('scale', [1], [1.3]),
    constantNode('shift', addShape, values(addValues, -0.5, 0.5)),
    constantNode('three', [1], [3]),
    constantNode('six', [1], [6]),
    { op: 'Conv', inputs: ['x', 'w'], outputs: ['conv'], ints: { kernel_shape: [3, 3], pads: [1, 1, 1, 1] } },
    { op: 'BatchNormalization', inputs: ['conv', 'gamma', 'beta', 'mean', 'var'], outputs: ['bn'], float: { epsilon: 1e-5 } },
    { op: 'Mul', inputs: ['scale', 'bn'], outputs: ['scaled'] },
    { op: 'Add', inputs: ['scaled', 'shift'], outputs: ['shifted'] },
    { op: 'Add', inputs: ['shifted', 'three'], outputs: ['plus3'] },
    { op: 'Clip', inputs: ['plus3'], outputs: ['clipped'], float: { min: 0, max: 6 } },
    { op: 'Mul', inputs: ['shifted', 'clipped'], outputs: ['gated'] },
    { op: 'Div', inputs: ['gated', 'six'], outputs: ['y'] },
  ];
  return onnxModel(
    { nodes, inputs: [{ name: 'x', type: 1, shape: INPUT }], outputs: [{ name: 'y', type: 1, shape: [1, CHANNELS, 10, 12] }] },
    9,
  );
}

/** A per-channel Mul and a scalar Add (constant first) before a conv of `kernel` with `pads` and `group` groups. */
function affineThenConv(kernel: number, pads: number, group: number): Uint8Array {
  const next = seededUniform(33);
  const values = (n: number, low: number, high: number): number[] => Array.from({ length: n }, () => next(low, high));
  const nodes: TestNode[] = [
    constantNode('scale', [1, 3, 1, 1], values(3, 0.5, 1.5)),
    constantNode('shift', [1], [0.25]),
    constantNode('w', [CHANNELS, 3 / group, kernel, kernel], values((CHANNELS * 3 * kernel * kernel) / group, -0.5, 0.5)),
    constantNode('b', [CHANNELS], values(CHANNELS, -0.1, 0.1)),
    { op: 'Mul', inputs: ['x', 'scale'], outputs: ['scaled'] },
    { op: 'Add', inputs: ['shift', 'scaled'], outputs: ['shifted'] },
    {
      op: 'Conv',
      inputs: ['shifted', 'w', 'b'],
      outputs: ['y'],
      ints: { kernel_shape: [kernel, kernel], pads: [pads, pads, pads, pads] },
      int: { group },
    },
  ];
  const size = (d: number): number => d + 2 * pads - kernel + 1;
  return onnxModel(
    { nodes, inputs: [{ name: 'x', type: 1, shape: INPUT }], outputs: [{ name: 'y', type: 1, shape: [1, CHANNELS, size(10), size(12)] }] },
    13,
  );
}

function operators(bytes: Uint8Array): string[] {
  return Program.load(bytes)
    .describe()
    .methods.find((m) => m.name === 'forward')!.operators;
}

async function differenceFromOnnxruntime(model: Uint8Array, xnnpack: boolean): Promise<number> {
  const next = seededUniform(8);
  const data = Float32Array.from({ length: INPUT.reduce((a, b) => a * b, 1) }, () => next(-2, 2));
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const expected = (await session.run({ x: new ort.Tensor('float32', data, INPUT) })).y!.data as Float32Array;
  await session.release();
  const module = await Module.load(importOnnx(model, { xnnpack }).bytes);
  const actual = (await module.run('forward', { x: Tensor.float32(INPUT, data) })).y!.toArray() as number[];
  await module.dispose();
  return relativeDifference(actual, expected);
}

describe('import-time rewrites', () => {
  it('folds BN, a constant Mul and a per-channel Add into the conv and fuses the hardswish', async () => {
    const model = convChain();
    expect(operators(importOnnx(model, { xnnpack: false }).bytes).sort()).toEqual(['aten::convolution.out', 'aten::hardswish.out']);
    expect(importOnnx(model).calls).toEqual({ delegate: 1, kernel: 0 });
    for (const xnnpack of [true, false]) expect(await differenceFromOnnxruntime(model, xnnpack)).toBeLessThan(1e-5);
  });

  it('leaves an Add that broadcasts along the width (not per channel) as an add', async () => {
    const model = convChain([12], 12);
    const ops = operators(importOnnx(model, { xnnpack: false }).bytes);
    expect(ops).toContain('aten::add.out');
    expect(ops).toContain('aten::hardswish.out');
    expect(await differenceFromOnnxruntime(model, false)).toBeLessThan(1e-5);
  });

  for (const group of [1, 3]) {
    it(`folds a Mul and an Add of the input into an unpadded 1x1 conv with ${group} group(s)`, async () => {
      const model = affineThenConv(1, 0, group);
      expect(operators(importOnnx(model, { xnnpack: false }).bytes)).toEqual(['aten::convolution.out']);
      for (const xnnpack of [true, false]) expect(await differenceFromOnnxruntime(model, xnnpack)).toBeLessThan(1e-5);
    });
  }

  it('leaves the Mul and Add before a padded conv (its zero padding would read the shift)', async () => {
    const model = affineThenConv(3, 1, 1);
    const kernels = operators(importOnnx(model, { xnnpack: false }).bytes).sort();
    expect(kernels).toEqual(['aten::add.Scalar_out', 'aten::convolution.out', 'aten::mul.out']);
    expect(await differenceFromOnnxruntime(model, false)).toBeLessThan(1e-5);
  });
});
