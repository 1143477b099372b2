// paddle2onnx-style graphs with seeded random weights: a MobileNetV3-style
// text-line classifier and a DBNet-style text detector (MobileNetV3-ish
// backbone, FPN with nearest Resize, ConvTranspose head, Sigmoid). Every conv
// is followed by an unfused BatchNormalization, as paddle2onnx writes them.
import { ONNX_DTYPE_CODES } from '../../onnx/dtype.js';
import { Lcg } from '../../random.js';
import { writeOnnxModel, type OnnxAttributeValue, type OnnxGraphInitializer, type OnnxGraphNode } from './graph-writer.js';

export const CLASSIFIER_INPUT_SHAPE = [1, 3, 48, 192] as const;
export const DETECTOR_INPUT_SHAPE = [1, 3, 320, 320] as const;
export const RECOGNIZER_INPUT_SHAPE = [1, 3, 48, 320] as const;
// TensorProto data types of Cast's `to`.
const { int32: INT32, int64: INT64 } = ONNX_DTYPE_CODES;
/** HardSwish needs opset 14; Resize keeps its opset-11 form (X, roi, scales). */
export const PADDLE_STYLE_OPSET = 14;

/** A seeded uniform generator (LCG), so every build of a graph has the same weights. */
export function seededUniform(seed: number): (low: number, high: number) => number {
  const generator = new Lcg(seed);
  return (low, high) => generator.uniform(low, high);
}

type Activation = 'relu' | 'hardswish' | 'swish' | 'none';
/** A square size, or [height, width]. */
type Pair = number | readonly [number, number];

function pair(value: Pair): readonly [number, number] {
  return typeof value === 'number' ? [value, value] : value;
}

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
    return this.node(
      'BatchNormalization',
      [
        x,
        this.weights([channels], 0.8, 1.2),
        this.weights([channels], -0.1, 0.1),
        this.weights([channels], -0.1, 0.1),
        this.weights([channels], 0.5, 1.5),
      ],
      { epsilon: { float: 1e-5 } },
    );
  }

  activation(x: string, act: Activation): string {
    if (act === 'relu') return this.node('Relu', [x]);
    if (act === 'hardswish') return this.node('HardSwish', [x]);
    // paddle2onnx writes swish as x * sigmoid(beta * x).
    if (act === 'swish') return this.node('Mul', [x, this.node('Sigmoid', [this.node('Mul', [x, this.floats([1])])])]);
    return x;
  }

  /** Conv (no bias) + BatchNormalization + activation; pads keep the size at stride 1. */
  convBn(x: Tensor, outChannels: number, kernelSize: Pair, strides: Pair, act: Activation, groups = 1): Tensor {
    const [n, c, h, w] = x.shape;
    const [kh, kw] = pair(kernelSize);
    const [sh, sw] = pair(strides);
    const [ph, pw] = [Math.floor(kh / 2), Math.floor(kw / 2)];
    const bound = Math.sqrt(3 / ((c / groups) * kh * kw));
    const conv = this.node('Conv', [x.name, this.weights([outChannels, c / groups, kh, kw], -bound, bound)], {
      kernel_shape: { ints: [kh, kw] },
      strides: { ints: [sh, sw] },
      pads: { ints: [ph, pw, ph, pw] },
      group: { int: groups },
      dilations: { ints: [1, 1] },
    });
    const outH = Math.floor((h + 2 * ph - kh) / sh) + 1;
    const outW = Math.floor((w + 2 * pw - kw) / sw) + 1;
    return { name: this.activation(this.batchNorm(conv, outChannels), act), shape: [n, outChannels, outH, outW] };
  }

  /** ConvTranspose (kernel 2, stride 2, with bias) + optional BatchNormalization + activation. */
  deconv(x: Tensor, outChannels: number, act: Activation, batchNorm: boolean): Tensor {
    const [n, c, h, w] = x.shape;
    const bound = Math.sqrt(3 / (c * 4));
    let y = this.node(
      'ConvTranspose',
      [x.name, this.weights([c, outChannels, 2, 2], -bound, bound), this.weights([outChannels], -0.1, 0.1)],
      {
        kernel_shape: { ints: [2, 2] },
        strides: { ints: [2, 2] },
        pads: { ints: [0, 0, 0, 0] },
        group: { int: 1 },
        dilations: { ints: [1, 1] },
      },
    );
    if (batchNorm) y = this.batchNorm(y, outChannels);
    return { name: this.activation(y, act), shape: [n, outChannels, h * 2, w * 2] };
  }

  /** Squeeze-and-excitation: pool, 1x1 reduce + Relu, 1x1 expand, HardSigmoid, scale. */
  squeezeExcite(x: Tensor): Tensor {
    const c = x.shape[1];
    const squeezed = Math.max(8, Math.floor(c / 4));
    const pooled = this.node('GlobalAveragePool', [x.name]);
    const bound = (fan: number): number => Math.sqrt(3 / fan);
    const reduce = this.node('Relu', [
      this.node('Conv', [pooled, this.weights([squeezed, c, 1, 1], -bound(c), bound(c)), this.weights([squeezed], -0.1, 0.1)], {
        kernel_shape: { ints: [1, 1] },
      }),
    ]);
    const expand = this.node(
      'Conv',
      [reduce, this.weights([c, squeezed, 1, 1], -bound(squeezed), bound(squeezed)), this.weights([c], -0.1, 0.1)],
      { kernel_shape: { ints: [1, 1] } },
    );
    const gate = this.node('HardSigmoid', [expand], { alpha: { float: 0.2 }, beta: { float: 0.5 } });
    return { name: this.node('Mul', [x.name, gate]), shape: x.shape };
  }

  /** MobileNetV3 inverted residual: expand 1x1, depthwise k x k, optional SE, project 1x1, residual when shapes allow. */
  invertedResidual(x: Tensor, kernel: number, expand: number, out: number, se: boolean, act: Activation, stride: Pair): Tensor {
    let y = x.shape[1] === expand ? x : this.convBn(x, expand, 1, 1, act);
    y = this.convBn(y, expand, kernel, stride, act, expand);
    if (se) y = this.squeezeExcite(y);
    y = this.convBn(y, out, 1, 1, 'none');
    if (pair(stride).every((s) => s === 1) && x.shape[1] === out) return { name: this.node('Add', [x.name, y.name]), shape: y.shape };
    return y;
  }

  /** Nearest Resize by `factor` as paddle2onnx writes it (opset 11: X, roi, scales; asymmetric, floor). */
  upsample(x: Tensor, factor: number): Tensor {
    const [n, c, h, w] = x.shape;
    const name = this.node('Resize', [x.name, this.floats([]), this.floats([1, 1, factor, factor])], {
      mode: { string: 'nearest' },
      coordinate_transformation_mode: { string: 'asymmetric' },
      nearest_mode: { string: 'floor' },
    });
    return { name, shape: [n, c, h * factor, w * factor] };
  }

  add(a: Tensor, b: Tensor): Tensor {
    return { name: this.node('Add', [a.name, b.name]), shape: a.shape };
  }

  /** MatMul by [in, out] weights, then Add of the bias, as paddle2onnx writes a linear layer. */
  linear(x: string, inFeatures: number, outFeatures: number): string {
    const bound = Math.sqrt(3 / inFeatures);
    return this.node('Add', [
      this.node('MatMul', [x, this.weights([inFeatures, outFeatures], -bound, bound)]),
      this.weights([outFeatures], -0.1, 0.1),
    ]);
  }

  /** LayerNormalization over the last dim, decomposed: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add. */
  layerNorm(x: string, features: number): string {
    const centred = this.node('Sub', [x, this.node('ReduceMean', [x], { axes: { ints: [-1] } })]);
    const variance = this.node('ReduceMean', [this.node('Pow', [centred, this.floats([2])])], { axes: { ints: [-1] } });
    const normalised = this.node('Div', [centred, this.node('Sqrt', [this.node('Add', [variance, this.floats([1e-5])])])]);
    return this.node('Add', [this.node('Mul', [normalised, this.weights([features], 0.8, 1.2)]), this.weights([features], -0.1, 0.1)]);
  }

  /** Dim `axis` of `x`'s runtime shape, through the int32 round trip paddle2onnx writes. */
  shapeDim(x: string, axis: number): string {
    const shape = this.node('Cast', [this.node('Shape', [x])], { to: { int: INT32 } });
    const dim = this.node('Slice', [shape, this.ints([axis]), this.ints([axis + 1]), this.ints([0])]);
    return this.node('Cast', [dim], { to: { int: INT64 } });
  }

  /** Reshape to `dims`, where 'T' is dim `axis` of `like`'s runtime shape (a Shape/Slice/Concat chain). */
  reshapeLike(x: string, dims: readonly (number | 'T')[], like: string, axis: number): string {
    const parts = dims.map((d) => (d === 'T' ? this.shapeDim(like, axis) : this.ints([d])));
    return this.node('Reshape', [x, this.node('Concat', parts, { axis: { int: 0 } })]);
  }

  /**
   * SVTR global mixing block on tokens [1, T, D]: pre-norm multi-head
   * attention (one qkv MatMul, Reshape/Transpose to heads, Slice + Squeeze,
   * scaled q, MatMul, Softmax, MatMul, Transpose/Reshape back, projection)
   * and a swish MLP, each with a residual Add.
   */
  svtrBlock(x: string, features: number, heads: number): string {
    const headDim = features / heads;
    const normed = this.layerNorm(x, features);
    const qkv = this.reshapeLike(this.linear(normed, features, 3 * features), [0, 'T', 3, heads, headDim], normed, 1);
    const split = this.node('Transpose', [qkv], { perm: { ints: [2, 0, 3, 1, 4] } });
    const part = (i: number): string =>
      this.node('Squeeze', [this.node('Slice', [split, this.ints([i]), this.ints([i + 1]), this.ints([0])]), this.ints([0])]);
    const q = this.node('Mul', [part(0), this.floats([1 / Math.sqrt(headDim)])]);
    const k = this.node('Transpose', [part(1)], { perm: { ints: [0, 1, 3, 2] } });
    const v = part(2);
    const attention = this.node('Softmax', [this.node('MatMul', [q, k])], { axis: { int: 3 } });
    const mixed = this.node('Transpose', [this.node('MatMul', [attention, v])], { perm: { ints: [0, 2, 1, 3] } });
    const merged = this.reshapeLike(mixed, [0, 'T', features], normed, 1);
    const attended = this.node('Add', [x, this.linear(merged, features, features)]);
    const hidden = this.activation(this.linear(this.layerNorm(attended, features), features, 2 * features), 'swish');
    return this.node('Add', [attended, this.linear(hidden, 2 * features, features)]);
  }

  gemm(x: string, inFeatures: number, outFeatures: number): string {
    const bound = Math.sqrt(3 / inFeatures);
    return this.node('Gemm', [x, this.weights([outFeatures, inFeatures], -bound, bound), this.weights([outFeatures], -0.1, 0.1)], {
      transB: { int: 1 },
    });
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
  return writeOnnxModel(
    {
      nodes: g.nodes,
      inputs: [{ name: 'x', shape: CLASSIFIER_INPUT_SHAPE }],
      outputs: [{ name: 'prob', shape: [1, classes] }],
      initializers: g.initializers,
    },
    PADDLE_STYLE_OPSET,
  );
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
  return writeOnnxModel(
    {
      nodes: g.nodes,
      inputs: [{ name: 'x', shape: DETECTOR_INPUT_SHAPE }],
      outputs: [{ name: 'maps', shape: [1, 1, DETECTOR_INPUT_SHAPE[2], DETECTOR_INPUT_SHAPE[3]] }],
      initializers: g.initializers,
    },
    PADDLE_STYLE_OPSET,
  );
}

/**
 * SVTR-style text recogniser over a 48x320 crop, as PP-OCRv4's is written:
 * a MobileNetV3-ish conv stem down to height 3, AveragePool 3x2 to one row
 * of 40 columns, a conv neck, two SVTR blocks on 40 tokens of 120 features
 * (decomposed LayerNorm, 8-head attention), a conv fusion with the pooled
 * shortcut, Squeeze, Transpose, and a linear + Softmax head; output 'probs'
 * [1, 40, classes].
 */
export function svtrRecognizer(classes = 97): Uint8Array {
  const g = new GraphBuilder(13);
  const features = 120;
  let x: Tensor = { name: 'x', shape: [...RECOGNIZER_INPUT_SHAPE] };
  x = g.convBn(x, 16, 3, 2, 'hardswish'); // 24 x 160
  x = g.invertedResidual(x, 3, 32, 24, false, 'hardswish', 2); // 12 x 80
  x = g.invertedResidual(x, 5, 64, 40, true, 'hardswish', [2, 1]); // 6 x 80
  x = g.invertedResidual(x, 5, 96, 48, true, 'hardswish', [2, 1]); // 3 x 80
  x = g.convBn(x, 96, 1, 1, 'hardswish');
  const [n, c, h, w] = x.shape;
  const pooled: Tensor = {
    name: g.node('AveragePool', [x.name], { kernel_shape: { ints: [3, 2] }, strides: { ints: [3, 2] }, pads: { ints: [0, 0, 0, 0] } }),
    shape: [n, c, h / 3, w / 2],
  };
  const steps = pooled.shape[3];

  // Neck: 1x3 and 1x1 convs with swish, flattened to tokens [1, T, D].
  const neck = g.convBn(g.convBn(pooled, c / 4, [1, 3], 1, 'swish'), features, 1, 1, 'swish');
  const flat = g.reshapeLike(neck.name, [0, features, -1], neck.name, 0);
  let tokens = g.node('Transpose', [flat], { perm: { ints: [0, 2, 1] } });
  for (let block = 0; block < 2; block++) tokens = g.svtrBlock(tokens, features, 8);
  tokens = g.layerNorm(tokens, features);

  // Back to [1, D, 1, T], fused with the pooled shortcut, down to one row of class scores.
  const image: Tensor = {
    name: g.node('Transpose', [g.reshapeLike(tokens, [0, 1, steps, features], tokens, 0)], { perm: { ints: [0, 3, 1, 2] } }),
    shape: [n, features, 1, steps],
  };
  const projected = g.convBn(image, c, 1, 1, 'swish');
  const fused: Tensor = { name: g.node('Concat', [pooled.name, projected.name], { axis: { int: 1 } }), shape: [n, 2 * c, 1, steps] };
  const head = g.convBn(g.convBn(fused, c / 4, [1, 3], 1, 'swish'), c, 1, 1, 'swish');
  const sequence = g.node('Transpose', [g.node('Squeeze', [head.name, g.ints([2])])], { perm: { ints: [0, 2, 1] } });
  g.nodes.push({ op: 'Softmax', inputs: [g.linear(sequence, c, classes)], outputs: ['probs'], attributes: { axis: { int: 2 } } });
  return writeOnnxModel(
    {
      nodes: g.nodes,
      inputs: [{ name: 'x', shape: RECOGNIZER_INPUT_SHAPE }],
      outputs: [{ name: 'probs', shape: [1, steps, classes] }],
      initializers: g.initializers,
    },
    PADDLE_STYLE_OPSET,
  );
}
