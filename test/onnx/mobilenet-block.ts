// A paddle2onnx-style MobileNetV3 block written as ONNX: conv -> BN ->
// HardSwish -> depthwise conv -> BN -> Clip(0, 6) -> squeeze-and-excitation
// (GlobalAveragePool, 1x1 convs, Relu, HardSigmoid, Mul) -> GlobalAveragePool
// -> Flatten -> Gemm -> Softmax, with seeded random weights.
import { Lcg } from '../../lib/random.js';
import { onnxModel, type TestGraph, type TestInitializer } from './onnx-writer.js';

export const BLOCK_INPUT_SHAPE = [1, 3, 48, 192];

/** `count` values uniform in [low, high) from a seeded generator. */
export function seededValues(count: number, seed: number, low = -1, high = 1): number[] {
  const random = new Lcg(seed);
  return Array.from({ length: count }, () => random.uniform(low, high));
}

function weight(name: string, dims: number[], seed: number, low = -0.5, high = 0.5): TestInitializer {
  return {
    name,
    dims,
    floats: seededValues(
      dims.reduce((a, b) => a * b, 1),
      seed,
      low,
      high,
    ),
  };
}

/** gamma, beta, mean and a positive variance for `channels` channels. */
function batchNormParams(prefix: string, channels: number, seed: number): TestInitializer[] {
  return [
    weight(`${prefix}_gamma`, [channels], seed, 0.5, 1.5),
    weight(`${prefix}_beta`, [channels], seed + 1),
    weight(`${prefix}_mean`, [channels], seed + 2),
    weight(`${prefix}_var`, [channels], seed + 3, 0.2, 2),
  ];
}

const f32 = (name: string, shape: number[]) => ({ name, type: 1, shape });
const bn = (input: string, prefix: string, output: string) => ({
  op: 'BatchNormalization',
  inputs: [input, `${prefix}_gamma`, `${prefix}_beta`, `${prefix}_mean`, `${prefix}_var`],
  outputs: [output],
  float: { epsilon: 1e-5 },
});

const CHANNELS = 16;
const SQUEEZED = 4;
const CLASSES = 10;

export const MOBILENET_BLOCK: TestGraph = {
  nodes: [
    { op: 'Conv', inputs: ['x', 'w1'], outputs: ['c1'], ints: { pads: [1, 1, 1, 1], strides: [2, 2], kernel_shape: [3, 3] } },
    bn('c1', 'bn1', 'n1'),
    { op: 'HardSwish', inputs: ['n1'], outputs: ['a1'] },
    {
      op: 'Conv',
      inputs: ['a1', 'w2', 'b2'],
      outputs: ['c2'],
      ints: { pads: [1, 1, 1, 1], kernel_shape: [3, 3] },
      int: { group: CHANNELS },
    },
    bn('c2', 'bn2', 'n2'),
    { op: 'Clip', inputs: ['n2', 'clip_min', 'clip_max'], outputs: ['a2'] },
    { op: 'GlobalAveragePool', inputs: ['a2'], outputs: ['se_pool'] },
    { op: 'Conv', inputs: ['se_pool', 'w3', 'b3'], outputs: ['se_down'] },
    { op: 'Relu', inputs: ['se_down'], outputs: ['se_relu'] },
    { op: 'Conv', inputs: ['se_relu', 'w4', 'b4'], outputs: ['se_up'] },
    { op: 'HardSigmoid', inputs: ['se_up'], outputs: ['se_gate'], float: { alpha: 1 / 6, beta: 0.5 } },
    { op: 'Mul', inputs: ['a2', 'se_gate'], outputs: ['se_out'] },
    { op: 'GlobalAveragePool', inputs: ['se_out'], outputs: ['pooled'] },
    { op: 'Flatten', inputs: ['pooled'], outputs: ['flat'], int: { axis: 1 } },
    { op: 'Gemm', inputs: ['flat', 'w5', 'b5'], outputs: ['logits'], int: { transB: 1 } },
    { op: 'Softmax', inputs: ['logits'], outputs: ['prob'], int: { axis: -1 } },
  ],
  inputs: [f32('x', BLOCK_INPUT_SHAPE)],
  outputs: [f32('prob', [1, CLASSES])],
  initializers: [
    weight('w1', [CHANNELS, 3, 3, 3], 1),
    ...batchNormParams('bn1', CHANNELS, 10),
    weight('w2', [CHANNELS, 1, 3, 3], 2),
    weight('b2', [CHANNELS], 3),
    ...batchNormParams('bn2', CHANNELS, 20),
    { name: 'clip_min', dims: [], floats: [0] },
    { name: 'clip_max', dims: [], floats: [6] },
    weight('w3', [SQUEEZED, CHANNELS, 1, 1], 4),
    weight('b3', [SQUEEZED], 5),
    weight('w4', [CHANNELS, SQUEEZED, 1, 1], 6),
    weight('b4', [CHANNELS], 7),
    weight('w5', [CLASSES, CHANNELS], 8),
    weight('b5', [CLASSES], 9),
  ],
};

export function mobilenetBlockModel(): Uint8Array {
  return onnxModel(MOBILENET_BLOCK, 17);
}
