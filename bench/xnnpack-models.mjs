// The benchmark models, authored with etna's ProgramBuilder. Weights come
// from the same generator as bench/xnnpack-raw.cpp, so both compute the same
// numbers.
import { ProgramBuilder } from '../dist/export/index.js';

export const FEATURES = 1024;
export const MLP_LAYERS = 4;
export const IMAGE = 64;
export const CONV_LAYERS = [
  { inChannels: 3, outChannels: 16, stride: 1 },
  { inChannels: 16, outChannels: 32, stride: 2 },
  { inChannels: 32, outChannels: 32, stride: 1 },
];

export function randomValues(count, seed, scale) {
  let state = seed >>> 0;
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    out[i] = ((state / 2 ** 32) * 2 - 1) * scale;
  }
  return out;
}

/** forward(x [batch, 1024]) = 4 linear 1024 -> 1024 layers, relu between them. */
export function buildMlp(batch) {
  const program = new ProgramBuilder();
  const layers = Array.from({ length: MLP_LAYERS }, (_, l) => ({
    weight: program.constant(`layer${l}.weight`, 'float32', [FEATURES, FEATURES], randomValues(FEATURES * FEATURES, 100 + l, 0.03)),
    bias: program.constant(`layer${l}.bias`, 'float32', [FEATURES], randomValues(FEATURES, 200 + l, 0.1)),
  }));
  program.method('forward', (m) => {
    let x = m.input('x', 'float32', [batch, FEATURES]);
    layers.forEach((layer, l) => {
      x = m.linear(x, layer.weight, layer.bias);
      if (l + 1 < layers.length) x = m.relu(x);
    });
    m.output(x);
  });
  return program;
}

export function mlpInput(batch) {
  return randomValues(batch * FEATURES, 7, 1);
}

/** forward(x [1, 3, 64, 64]) = three 3x3 convolutions (pad 1; strides 1, 2, 1) with relu: [1, 32, 32, 32]. */
export function buildConvNet() {
  const program = new ProgramBuilder();
  const layers = CONV_LAYERS.map((layer, l) => ({
    ...layer,
    weight: program.constant(
      `conv${l}.weight`,
      'float32',
      [layer.outChannels, layer.inChannels, 3, 3],
      randomValues(layer.outChannels * layer.inChannels * 9, 300 + l, 0.2),
    ),
    bias: program.constant(`conv${l}.bias`, 'float32', [layer.outChannels], randomValues(layer.outChannels, 400 + l, 0.05)),
  }));
  program.method('forward', (m) => {
    let x = m.input('x', 'float32', [1, CONV_LAYERS[0].inChannels, IMAGE, IMAGE]);
    for (const layer of layers) x = m.relu(m.conv2d(x, layer.weight, layer.bias, { stride: layer.stride, padding: 1 }));
    m.output(x);
  });
  return program;
}

export function convInput() {
  return randomValues(CONV_LAYERS[0].inChannels * IMAGE * IMAGE, 9, 1);
}
