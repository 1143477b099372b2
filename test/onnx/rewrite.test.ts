// Import-time rewrites of paddle2onnx graphs: BatchNormalization, Mul and Add
// by constants (from Constant nodes as paddle2onnx writes weights) fold into
// the convolution before them, and x * Clip(x + 3, 0, 6) / 6 becomes one
// HardSwish, so no elementwise pass is left for them at run time.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { Module, Program, Tensor } from '../../lib/index.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { relativeDifference } from '../../lib/tools/bench-onnx-graphs.js';
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
  return onnxModel({ nodes, inputs: [{ name: 'x', type: 1, shape: INPUT }], outputs: [{ name: 'y', type: 1, shape: [1, CHANNELS, 10, 12] }] }, 9);
}

function operators(bytes: Uint8Array): string[] {
  return Program.load(bytes).describe().methods.find((m) => m.name === 'forward')!.operators;
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
});
