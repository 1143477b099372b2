// paddle2onnx-style graphs with seeded random weights: a MobileNetV3-style
// text-line classifier and a DBNet-style text detector (MobileNetV3-ish
// backbone, FPN with nearest Resize, ConvTranspose head, Sigmoid). Every conv
// is followed by an unfused BatchNormalization, as paddle2onnx writes them.
import { writeOnnxModel, type OnnxAttributeValue, type OnnxGraphInitializer, type OnnxGraphNode } from './graph-writer.js';

export const CLASSIFIER_INPUT_SHAPE = [1, 3, 48, 192] as const;
export const DETECTOR_INPUT_SHAPE = [1, 3, 320, 320] as const;
/** HardSwish needs opset 14; Resize keeps its opset-11 form (X, roi, scales). */
export const PADDLE_STYLE_OPSET = 14;

/** A seeded uniform generator (LCG), so every build of a graph has the same weights. */
export function seededUniform(seed: number): (low: number, high: number) => number {
  let state = seed >>> 0;
  return (low, high) => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return low + (high - low) * (state / 2 ** 32);
  };
}

type Activation = 'relu' | 'hardswish' | 'none';

interface Tensor {
  readonly name: string;
  /** [N, C, H, W]. */
  readonly shape: readonly [number, number, number, number];
}

class GraphBuilder {
  readonly nodes: OnnxGraphNode[] = [];
  readonly initializers: OnnxGraphInitializer[] = [];
  private count = 0;
  private readonly random: (low: number, high: number) => number;

  constructor(seed: number) {
    this.random = seededUniform(seed);
  }

  private fresh(prefix: string): string {
    return `${prefix}_${this.count++}`;
  }

  private weights(dims: readonly number[], low: number, high: number): string {
    const name = this.fresh('w');
    const size = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(size);
    for (let i = 0; i < size; i++) data[i] = this.random(low, high);
    this.initializers.push({ name, dims, float32: data });
    return name;
  }

  ints(values: readonly number[]): string {
    const name = this.fresh('c');
    this.initializers.push({ name, dims: [values.length], int64: values });
    return name;
  }

  floats(values: readonly number[]): string {
    const name = this.fresh('c');
    this.initializers.push({ name, dims: [values.length], float32: Float32Array.from(values) });
    return name;
  }

  node(op: string, inputs: readonly string[], attributes?: Record<string, OnnxAttributeValue>): string {
    const out = this.fresh(op.toLowerCase());
    this.nodes.push({ op, inputs, outputs: [out], ...(attributes === undefined ? {} : { attributes }) });
    return out;
  }

  private batchNorm(x: string, channels: number): string {
    return this.node('BatchNormalization', [
      x,
      this.weights([channels], 0.8, 1.2),
      this.weights([channels], -0.1, 0.1),
      this.weights([channels], -0.1, 0.1),
      this.weights([channels], 0.5, 1.5),
    ], { epsilon: { float: 1e-5 } });
  }

  activation(x: string, act: Activation): string {
    if (act === 'relu') return this.node('Relu', [x]);
    if (act === 'hardswish') return this.node('HardSwish', [x]);
    return x;
  }

  /** Conv (no bias) + BatchNormalization + activation. */
  convBn(x: Tensor, outChannels: number, kernel: number, stride: number, act: Activation, groups = 1): Tensor {
    const [n, c, h, w] = x.shape;
    const pad = Math.floor(kernel / 2);
    const fanIn = (c / groups) * kernel * kernel;
    const bound = Math.sqrt(3 / fanIn);
    const conv = this.node('Conv', [x.name, this.weights([outChannels, c / groups, kernel, kernel], -bound, bound)], {
      kernel_shape: { ints: [kernel, kernel] }, strides: { ints: [stride, stride] }, pads: { ints: [pad, pad, pad, pad] }, group: { int: groups }, dilations: { ints: [1, 1] },
    });
    const out = Math.floor((h + 2 * pad - kernel) / stride) + 1;
    const outW = Math.floor((w + 2 * pad - kernel) / stride) + 1;
    return { name: this.activation(this.batchNorm(conv, outChannels), act), shape: [n, outChannels, out, outW] };
  }

  /** ConvTranspose (kernel 2, stride 2, with bias) + optional BatchNormalization + activation. */
  deconv(x: Tensor, outChannels: number, act: Activation, batchNorm: boolean): Tensor {
    const [n, c, h, w] = x.shape;
    const bound = Math.sqrt(3 / (c * 4));
    let y = this.node('ConvTranspose', [x.name, this.weights([c, outChannels, 2, 2], -bound, bound), this.weights([outChannels], -0.1, 0.1)], {
      kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] }, pads: { ints: [0, 0, 0, 0] }, group: { int: 1 }, dilations: { ints: [1, 1] },
    });
    if (batchNorm) y = this.batchNorm(y, outChannels);
    return { name: this.activation(y, act), shape: [n, outChannels, h * 2, w * 2] };
  }

  /** Squeeze-and-excitation: pool, 1x1 reduce + Relu, 1x1 expand, HardSigmoid, scale. */
  squeezeExcite(x: Tensor): Tensor {
    const c = x.shape[1];
    const squeezed = Math.max(8, Math.floor(c / 4));
    const pooled = this.node('GlobalAveragePool', [x.name]);
    const bound = (fan: number): number => Math.sqrt(3 / fan);
    const reduce = this.node('Relu', [this.node('Conv', [pooled, this.weights([squeezed, c, 1, 1], -bound(c), bound(c)), this.weights([squeezed], -0.1, 0.1)], { kernel_shape: { ints: [1, 1] } })]);
    const expand = this.node('Conv', [reduce, this.weights([c, squeezed, 1, 1], -bound(squeezed), bound(squeezed)), this.weights([c], -0.1, 0.1)], { kernel_shape: { ints: [1, 1] } });
    const gate = this.node('HardSigmoid', [expand], { alpha: { float: 0.2 }, beta: { float: 0.5 } });
    return { name: this.node('Mul', [x.name, gate]), shape: x.shape };
  }

  /** MobileNetV3 inverted residual: expand 1x1, depthwise k x k, optional SE, project 1x1, residual when shapes allow. */
  invertedResidual(x: Tensor, kernel: number, expand: number, out: number, se: boolean, act: Activation, stride: number): Tensor {
    let y = x.shape[1] === expand ? x : this.convBn(x, expand, 1, 1, act);
    y = this.convBn(y, expand, kernel, stride, act, expand);
    if (se) y = this.squeezeExcite(y);
    y = this.convBn(y, out, 1, 1, 'none');
    if (stride === 1 && x.shape[1] === out) return { name: this.node('Add', [x.name, y.name]), shape: y.shape };
    return y;
  }

  /** Nearest Resize by `factor` as paddle2onnx writes it (opset 11: X, roi, scales; asymmetric, floor). */
  upsample(x: Tensor, factor: number): Tensor {
    const [n, c, h, w] = x.shape;
    const name = this.node('Resize', [x.name, this.floats([]), this.floats([1, 1, factor, factor])], {
      mode: { string: 'nearest' }, coordinate_transformation_mode: { string: 'asymmetric' }, nearest_mode: { string: 'floor' },
    });
    return { name, shape: [n, c, h * factor, w * factor] };
  }

  add(a: Tensor, b: Tensor): Tensor {
    return { name: this.node('Add', [a.name, b.name]), shape: a.shape };
  }

  gemm(x: string, inFeatures: number, outFeatures: number): string {
    const bound = Math.sqrt(3 / inFeatures);
    return this.node('Gemm', [x, this.weights([outFeatures, inFeatures], -bound, bound), this.weights([outFeatures], -0.1, 0.1)], { transB: { int: 1 } });
  }
}

/** MobileNetV3-style classifier over a 48x192 text-line crop; output 'prob' [1, classes]. */
export function mobilenetV3Classifier(classes = 4): Uint8Array {
  const g = new GraphBuilder(7);
  let x: Tensor = { name: 'x', shape: [...CLASSIFIER_INPUT_SHAPE] };
  x = g.convBn(x, 16, 3, 2, 'hardswish');
  x = g.invertedResidual(x, 3, 16, 16, true, 'relu', 2);
  x = g.invertedResidual(x, 3, 72, 24, false, 'relu', 2);
  x = g.invertedResidual(x, 3, 88, 24, false, 'relu', 1);
  x = g.invertedResidual(x, 5, 96, 40, true, 'hardswish', 2);
  x = g.invertedResidual(x, 5, 240, 40, true, 'hardswish', 1);
  x = g.invertedResidual(x, 5, 120, 48, true, 'hardswish', 1);
  x = g.convBn(x, 288, 1, 1, 'hardswish');
  const pooled = g.node('Flatten', [g.node('GlobalAveragePool', [x.name])], { axis: { int: 1 } });
  const hidden = g.node('HardSwish', [g.gemm(pooled, 288, 128)]);
  const logits = g.gemm(hidden, 128, classes);
  g.nodes.push({ op: 'Softmax', inputs: [logits], outputs: ['prob'], attributes: { axis: { int: 1 } } });
  return writeOnnxModel({
    nodes: g.nodes,
    inputs: [{ name: 'x', shape: CLASSIFIER_INPUT_SHAPE }],
    outputs: [{ name: 'prob', shape: [1, classes] }],
    initializers: g.initializers,
  }, PADDLE_STYLE_OPSET);
}

/** DBNet-style detector at 320x320; output 'maps' [1, 1, 320, 320], a text probability per pixel. */
export function dbnetDetector(): Uint8Array {
  const g = new GraphBuilder(11);
  let x: Tensor = { name: 'x', shape: [...DETECTOR_INPUT_SHAPE] };
  x = g.convBn(x, 16, 3, 2, 'hardswish'); // 160
  const c2 = g.invertedResidual(x, 3, 16, 16, true, 'relu', 2); // 80
  let c3 = g.invertedResidual(c2, 3, 64, 24, false, 'relu', 2); // 40
  c3 = g.invertedResidual(c3, 3, 72, 24, false, 'relu', 1);
  let c4 = g.invertedResidual(c3, 5, 72, 40, true, 'hardswish', 2); // 20
  c4 = g.invertedResidual(c4, 5, 120, 40, true, 'hardswish', 1);
  let c5 = g.invertedResidual(c4, 5, 120, 48, true, 'hardswish', 2); // 10
  c5 = g.invertedResidual(c5, 5, 144, 48, true, 'hardswish', 1);

  // FPN: 1x1 lateral convs to 32 channels, top-down nearest x2 Resize and Add.
  const inner = 32;
  const [in2, in3, in4, in5] = [c2, c3, c4, c5].map((c) => g.convBn(c, inner, 1, 1, 'none')) as [Tensor, Tensor, Tensor, Tensor];
  const p5 = in5;
  const p4 = g.add(in4, g.upsample(p5, 2));
  const p3 = g.add(in3, g.upsample(p4, 2));
  const p2 = g.add(in2, g.upsample(p3, 2));
  const quarter = inner / 4;
  const [o2, o3, o4, o5] = [p2, p3, p4, p5].map((p) => g.convBn(p, quarter, 3, 1, 'none')) as [Tensor, Tensor, Tensor, Tensor];
  const fused = g.node('Concat', [g.upsample(o5, 8).name, g.upsample(o4, 4).name, g.upsample(o3, 2).name, o2.name], { axis: { int: 1 } });

  // DB head: 3x3 conv + BN + Relu, two ConvTranspose x2 (the first with BN + Relu), Sigmoid.
  let head: Tensor = { name: fused, shape: [1, inner, o2.shape[2], o2.shape[3]] };
  head = g.convBn(head, inner / 4, 3, 1, 'relu');
  head = g.deconv(head, inner / 4, 'relu', true);
  head = g.deconv(head, 1, 'none', false);
  g.nodes.push({ op: 'Sigmoid', inputs: [head.name], outputs: ['maps'] });
  return writeOnnxModel({
    nodes: g.nodes,
    inputs: [{ name: 'x', shape: DETECTOR_INPUT_SHAPE }],
    outputs: [{ name: 'maps', shape: [1, 1, DETECTOR_INPUT_SHAPE[2], DETECTOR_INPUT_SHAPE[3]] }],
    initializers: g.initializers,
  }, PADDLE_STYLE_OPSET);
}
