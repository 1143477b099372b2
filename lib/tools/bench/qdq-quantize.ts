// Static quantization of a float ONNX model into the QDQ form onnxruntime's
// quantize_static writes, for the corpus of `etna bench zoo`: no npm package
// ships such a model, so the corpus derives one from a real float network.
//
// As quantize_static (MinMax calibration, QDQ format, int8 activations and
// weights, per-channel weights, dedicated QDQ pairs) after its pre-processing:
// - the graph is upgraded to opset 13 (Clip, Slice, Squeeze and Unsqueeze attributes become
//   inputs), Constant nodes become initializers, and a BatchNormalization
//   reading a Conv's only result folds into that Conv's weights and bias;
// - every Conv (2-D), MatMul (2-D constant right matrix) and Gemm with
//   constant weights is quantized: its activation input and its result (after
//   a Relu or Clip reading only it) get QuantizeLinear, then a
//   DequantizeLinear for each product that reads them and one shared by
//   float readers; weights are int8 per output channel, symmetric
//   (scale max |w| / 127, codes rounded half to even into [-127, 127]); biases
//   int32 at input scale x weight scale;
// - activations are int8, asymmetric: the range [min(0, min), max(0, max)]
//   over the calibration runs (onnxruntime on seeded inputs uniform in
//   [-1, 1)), scale range / 255, zero point round(-128 - min / scale);
// - a scale below float32's smallest normal number becomes 1 with zero point
//   0, and a range that reached ±Inf is an error.
// Everything else stays float between DequantizeLinear and QuantizeLinear.
import type * as Ort from 'onnxruntime-node';

import { EtnaError } from '../../errors.js';
import { roundHalfEven } from '../../export/quantize.js';
import { constFromProto, fromNumbers, toNumbers, type ConstTensor } from '../../onnx/constant.js';
import { ONNX_DTYPE_CODES } from '../../onnx/dtype.js';
import { readOnnxModel } from '../../onnx/index.js';
import type { OnnxAttribute, OnnxTensorProto } from '../../onnx/proto.js';
import { numel } from '../../shape.js';
import { writeValue } from '../onnx-emitter/graph-writer.js';
import { ProtoWriter } from '../onnx-emitter/protobuf.js';
import { seededUniform } from '../onnx-emitter/paddle-style.js';

const QDQ_OPSET = 13;
const INT8_MIN = -128;
const INT8_MAX = 127;
const WEIGHT_MAX = 127;
const CALIBRATION_RUNS = 8;
/** float32's smallest normal number: quantize_static takes any smaller scale as 1, with zero point 0. */
const SMALLEST_SCALE = 1.1754943508222875e-38;
/** Ops whose opset 9 to 12 forms read the same at opset 13 once Clip's and Slice's attributes are inputs. */
const SAME_AT_OPSET_13: ReadonlySet<string> = new Set([
  'Conv',
  'BatchNormalization',
  'Add',
  'Sub',
  'Mul',
  'Div',
  'Relu',
  'HardSigmoid',
  'Sigmoid',
  'GlobalAveragePool',
  'AveragePool',
  'MaxPool',
  'Shape',
  'Cast',
  'Concat',
  'Reshape',
  'MatMul',
  'Gemm',
  'Transpose',
  'Flatten',
  'Identity',
  'ReduceMean',
  'Pow',
  'Sqrt',
  'Resize',
  'ConvTranspose',
]);

interface Node {
  op: string;
  name: string;
  inputs: string[];
  outputs: string[];
  attributes: OnnxAttribute[];
}

function floatAttribute(node: Node, name: string): number | undefined {
  return node.attributes.find((a) => a.name === name)?.f;
}

function intsAttribute(node: Node, name: string): number[] | undefined {
  const a = node.attributes.find((attribute) => attribute.name === name);
  return a === undefined ? undefined : a.ints.map(Number);
}

/** The float graph upgraded to opset 13, with its constants as initializers and BatchNormalizations folded into Convs. */
function prepare(bytes: Uint8Array): { nodes: Node[]; constants: Map<string, ConstTensor>; inputs: string[]; outputs: string[] } {
  const model = readOnnxModel(bytes);
  const opset = model.opsets.get('') ?? model.opsets.get('ai.onnx') ?? 1;
  const graph = model.graph;
  const constants = new Map<string, ConstTensor>();
  for (const init of graph.initializers) constants.set(init.name, constFromProto(init, `initializer '${init.name}'`));
  const nodes: Node[] = [];
  let added = 0;
  const constant = (tensor: ConstTensor): string => {
    const name = `qdq_constant_${added++}`;
    constants.set(name, tensor);
    return name;
  };
  for (const source of graph.nodes) {
    const node: Node = {
      op: source.opType,
      name: source.name,
      inputs: [...source.inputs],
      outputs: [...source.outputs],
      attributes: source.attributes,
    };
    if (source.domain !== '' && source.domain !== 'ai.onnx') throw new EtnaError('UNSUPPORTED_OPERATOR', `qdq: domain '${source.domain}'`);
    if (node.op === 'Constant') {
      const value = source.attributes.find((a) => a.name === 'value');
      if (value?.t === undefined) throw new EtnaError('UNSUPPORTED_OPERATOR', `qdq: Constant '${source.name}' without a tensor value`);
      constants.set(node.outputs[0]!, constFromProto(value.t, `Constant '${source.name}'`));
      continue;
    }
    if (opset < QDQ_OPSET && node.op === 'Clip') {
      const low = floatAttribute(node, 'min') ?? -3.4028234663852886e38;
      const high = floatAttribute(node, 'max') ?? 3.4028234663852886e38;
      node.inputs = [node.inputs[0]!, constant(fromNumbers('float32', [], [low])), constant(fromNumbers('float32', [], [high]))];
      node.attributes = [];
    } else if (opset < 10 && node.op === 'Slice') {
      const starts = intsAttribute(node, 'starts') ?? [];
      const ends = intsAttribute(node, 'ends') ?? [];
      const axes = intsAttribute(node, 'axes') ?? starts.map((_, i) => i);
      const list = (values: number[]): string => constant(fromNumbers('int64', [values.length], values));
      node.inputs = [node.inputs[0]!, list(starts), list(ends), list(axes)];
      node.attributes = [];
    } else if (opset < QDQ_OPSET && (node.op === 'Squeeze' || node.op === 'Unsqueeze')) {
      const axes = intsAttribute(node, 'axes');
      node.inputs = axes === undefined ? [node.inputs[0]!] : [node.inputs[0]!, constant(fromNumbers('int64', [axes.length], axes))];
      node.attributes = [];
    } else if (opset < QDQ_OPSET && !SAME_AT_OPSET_13.has(node.op) && !(node.op === 'Softmax' || node.op === 'Slice')) {
      throw new EtnaError('UNSUPPORTED_OPERATOR', `qdq: ${node.op} at opset ${opset} is not upgraded to opset ${QDQ_OPSET} here`);
    }
    nodes.push(node);
  }
  return {
    nodes: foldBatchNorms(nodes, constants),
    constants,
    inputs: graph.inputs.filter((i) => !constants.has(i.name)).map((i) => i.name),
    outputs: graph.outputs.map((o) => o.name),
  };
}

/** Conv -> BatchNormalization (inference) as one Conv with scaled weights and a shifted bias, computed in float64. */
function foldBatchNorms(nodes: Node[], constants: Map<string, ConstTensor>): Node[] {
  const readers = new Map<string, number>();
  for (const node of nodes) for (const name of node.inputs) readers.set(name, (readers.get(name) ?? 0) + 1);
  const producer = new Map<string, Node>();
  for (const node of nodes) for (const name of node.outputs) producer.set(name, node);
  const folded = new Set<Node>();
  for (const norm of nodes) {
    if (norm.op !== 'BatchNormalization' || norm.outputs.length !== 1) continue;
    const conv = producer.get(norm.inputs[0]!);
    const [gamma, beta, mean, variance] = norm.inputs.slice(1).map((name) => constants.get(name));
    const weight = conv === undefined ? undefined : constants.get(conv.inputs[1]!);
    if (conv?.op !== 'Conv' || readers.get(conv.outputs[0]!) !== 1 || weight === undefined) continue;
    if (gamma === undefined || beta === undefined || mean === undefined || variance === undefined) continue;
    const epsilon = floatAttribute(norm, 'epsilon') ?? 1e-5;
    const channels = weight.shape[0]!;
    const perChannel = numel(weight.shape) / channels;
    const w = toNumbers(weight);
    const b =
      conv.inputs[2] !== undefined && conv.inputs[2] !== ''
        ? toNumbers(constants.get(conv.inputs[2])!)
        : new Array<number>(channels).fill(0);
    const [g, bt, m, v] = [gamma, beta, mean, variance].map(toNumbers) as [number[], number[], number[], number[]];
    const factor = g.map((gc, c) => gc / Math.sqrt(v[c]! + epsilon));
    const weightName = `${conv.outputs[0]}_folded_weight`;
    const biasName = `${conv.outputs[0]}_folded_bias`;
    constants.set(
      weightName,
      fromNumbers(
        'float32',
        weight.shape,
        w.map((value, i) => value * factor[Math.floor(i / perChannel)]!),
      ),
    );
    constants.set(
      biasName,
      fromNumbers(
        'float32',
        [channels],
        b.map((value, c) => (value - m[c]!) * factor[c]! + bt[c]!),
      ),
    );
    conv.inputs = [conv.inputs[0]!, weightName, biasName];
    conv.outputs = [norm.outputs[0]!];
    folded.add(norm);
  }
  return nodes.filter((node) => !folded.has(node));
}

/** A product whose weights are constant: the input it quantizes, its weight layout and the tensor its Q reads. */
interface Product {
  readonly node: Node;
  /** Axis of the weight's output channels. */
  readonly axis: number;
  /** The product's result, or the Relu or Clip reading only it. */
  readonly result: string;
}

function findProducts(nodes: readonly Node[], constants: ReadonlyMap<string, ConstTensor>, outputs: ReadonlySet<string>): Product[] {
  const readers = new Map<string, Node[]>();
  for (const node of nodes) for (const name of node.inputs) readers.set(name, [...(readers.get(name) ?? []), node]);
  const products: Product[] = [];
  for (const node of nodes) {
    const weight = constants.get(node.inputs[1] ?? '');
    if (weight === undefined || constants.has(node.inputs[0]!)) continue;
    const bias = node.inputs[2] !== undefined && node.inputs[2] !== '' ? constants.get(node.inputs[2]) : undefined;
    if ((node.inputs[2] ?? '') !== '' && bias === undefined) continue;
    let axis: number;
    if (node.op === 'Conv' && weight.shape.length === 4) axis = 0;
    else if (node.op === 'MatMul' && weight.shape.length === 2) axis = 1;
    else if (node.op === 'Gemm' && weight.shape.length === 2 && node.attributes.every((a) => a.name === 'transB')) {
      axis = node.attributes.some((a) => a.name === 'transB' && a.i === 1n) ? 0 : 1;
    } else continue;
    let result = node.outputs[0]!;
    const next = readers.get(result);
    if (next?.length === 1 && (next[0]!.op === 'Relu' || next[0]!.op === 'Clip') && !outputs.has(result)) result = next[0]!.outputs[0]!;
    products.push({ node, axis, result });
  }
  return products;
}

function tensorProto(w: ProtoWriter, name: string, tensor: ConstTensor): void {
  const data = tensor.data as ArrayBufferView;
  for (const d of tensor.shape) w.int(1, d);
  w.int(2, ONNX_DTYPE_CODES[tensor.dtype])
    .string(8, name)
    .bytes(9, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
}

function attribute(w: ProtoWriter, a: OnnxAttribute): void {
  w.string(1, a.name);
  if (a.f !== undefined) w.float(2, a.f);
  if (a.i !== undefined) w.int(3, a.i);
  if (a.s !== undefined) w.bytes(4, a.s);
  if (a.t !== undefined) w.message(5, (t) => tensorProto(t, a.t!.name, constFromProto(a.t as OnnxTensorProto, a.name)));
  if (a.g !== undefined) throw new EtnaError('UNSUPPORTED_OPERATOR', `qdq: graph attribute '${a.name}'`);
  for (const v of a.floats) w.float(7, v);
  for (const v of a.ints) w.int(8, v);
  for (const v of a.strings) w.bytes(9, v);
  w.int(20, a.type);
}

/** ModelProto bytes at opset 13; graph outputs (float32) without shapes. */
function writeModel(
  nodes: readonly Node[],
  constants: ReadonlyMap<string, ConstTensor>,
  inputs: readonly { name: string; shape: readonly number[] }[],
  outputs: readonly string[],
): Uint8Array {
  // Initializers no node reads (weights replaced by their codes, folded normalizations) are left out.
  const read = new Set(nodes.flatMap((node) => node.inputs));
  const model = new ProtoWriter();
  model.int(1, 8);
  model.message(7, (g) => {
    nodes.forEach((node, i) =>
      g.message(1, (w) => {
        for (const input of node.inputs) w.string(1, input);
        for (const output of node.outputs) w.string(2, output);
        w.string(3, node.name || `${node.op}_${i}`).string(4, node.op);
        for (const a of node.attributes) w.message(5, (attributeWriter) => attribute(attributeWriter, a));
      }),
    );
    g.string(2, 'qdq');
    for (const [name, tensor] of constants) if (read.has(name)) g.message(5, (w) => tensorProto(w, name, tensor));
    for (const input of inputs) g.message(11, (w) => writeValue(w, input));
    for (const output of outputs) g.message(12, (w) => writeValue(w, { name: output }));
  });
  model.message(8, (o) => o.string(1, '').int(2, QDQ_OPSET));
  return model.finish();
}

/** Per-tensor int8 parameters of an observed range, as quantize_static computes them. */
function activationParameters(low: number, high: number): { scale: number; zeroPoint: number } {
  const rmin = Math.min(low, 0);
  const rmax = Math.max(high, 0);
  const exact = (rmax - rmin) / (INT8_MAX - INT8_MIN);
  if (exact < SMALLEST_SCALE) return { scale: 1, zeroPoint: 0 };
  const scale = Math.fround(exact);
  return { scale, zeroPoint: Math.max(INT8_MIN, Math.min(INT8_MAX, roundHalfEven(INT8_MIN - rmin / scale))) };
}

/**
 * The QDQ model of `bytes` at the given input shapes. Only float32 graph
 * inputs are supported (each gets seeded uniform data for calibration).
 */
export async function quantizeStatic(
  ort: typeof Ort,
  bytes: Uint8Array,
  shapes: Readonly<Record<string, readonly number[]>>,
): Promise<Uint8Array> {
  const { nodes, constants, inputs, outputs } = prepare(bytes);
  const inputShapes = inputs.map((name) => {
    const shape = shapes[name];
    if (shape === undefined) throw new EtnaError('INVALID_INPUT', `qdq: no shape given for input '${name}'`);
    return { name, shape };
  });
  const graphOutputs = new Set(outputs);
  const products = findProducts(nodes, constants, graphOutputs);
  const quantized = new Set<string>();
  // A quantized result that is a graph output is computed under another name; a DequantizeLinear writes the output.
  const renamed = new Map<string, string>(); // inner name -> graph output
  for (const product of products) {
    quantized.add(product.node.inputs[0]!);
    let result = product.result;
    if (graphOutputs.has(result)) {
      const inner = `${result}_before_quantization`;
      for (const node of nodes) node.outputs = node.outputs.map((name) => (name === result ? inner : name));
      renamed.set(inner, result);
      result = inner;
    }
    quantized.add(result);
  }
  const innerOutputs = outputs.map((name) => [...renamed].find(([, output]) => output === name)?.[0] ?? name);

  // Calibration: every quantized tensor's range over seeded runs of the float model.
  const observed = [...quantized];
  const calibrated = [...new Set([...innerOutputs, ...observed])];
  const session = await ort.InferenceSession.create(writeModel(nodes, constants, inputShapes, calibrated), { intraOpNumThreads: 1 });
  const ranges = new Map<string, [number, number]>(observed.map((name) => [name, [Infinity, -Infinity]]));
  try {
    const next = seededUniform(77);
    for (let run = 0; run < CALIBRATION_RUNS; run++) {
      const feeds = Object.fromEntries(
        inputShapes.map(({ name, shape }) => [
          name,
          new ort.Tensor(
            'float32',
            Float32Array.from({ length: numel(shape) }, () => next(-1, 1)),
            [...shape],
          ),
        ]),
      );
      const results = await session.run(feeds);
      for (const name of observed) {
        const range = ranges.get(name)!;
        for (const v of results[name]!.data as Float32Array) {
          if (v < range[0]) range[0] = v;
          if (v > range[1]) range[1] = v;
        }
      }
    }
  } finally {
    await session.release();
  }
  for (const [name, [low, high]] of ranges) {
    // An infinite range would make an infinite scale, which no runtime takes.
    if (!Number.isFinite(low) || !Number.isFinite(high)) {
      throw new EtnaError(
        'INVALID_INPUT',
        `qdq: tensor '${name}' reached ${Number.isFinite(low) ? high : low} in calibration on seeded inputs`,
      );
    }
  }

  const parameters = new Map<string, { scale: string; zeroPoint: string; value: { scale: number; zeroPoint: number } }>();
  for (const name of observed) {
    const value = activationParameters(...ranges.get(name)!);
    const scale = `${name}_scale`;
    const zeroPoint = `${name}_zero_point`;
    constants.set(scale, fromNumbers('float32', [], [value.scale]));
    constants.set(zeroPoint, fromNumbers('int8', [], [value.zeroPoint]));
    parameters.set(name, { scale, zeroPoint, value });
  }

  const rewritten: Node[] = [];
  const quantizedName = (name: string): string => `${name}_quantized`;
  const sharedDequantized = new Set<string>();
  const dequantize = (name: string, output: string): Node => {
    const p = parameters.get(name)!;
    return {
      op: 'DequantizeLinear',
      name: `${output}_node`,
      inputs: [quantizedName(name), p.scale, p.zeroPoint],
      outputs: [output],
      attributes: [],
    };
  };
  const quantize = (name: string): Node => {
    const p = parameters.get(name)!;
    return {
      op: 'QuantizeLinear',
      name: `${quantizedName(name)}_node`,
      inputs: [name, p.scale, p.zeroPoint],
      outputs: [quantizedName(name)],
      attributes: [],
    };
  };
  for (const name of inputs) if (quantized.has(name)) rewritten.push(quantize(name));
  const productOf = new Map(products.map((p) => [p.node, p]));
  let dedicated = 0;
  for (const node of nodes) {
    const product = productOf.get(node);
    const activation = node.inputs[0]!;
    node.inputs = node.inputs.map((name, i) => {
      if (!quantized.has(name)) return name;
      if (product !== undefined && i === 0) {
        const output = `${name}_dequantized_${dedicated++}`;
        rewritten.push(dequantize(name, output));
        return output;
      }
      const output = `${name}_dequantized`;
      if (!sharedDequantized.has(name)) {
        sharedDequantized.add(name);
        rewritten.push(dequantize(name, output));
      }
      return output;
    });
    if (product !== undefined) rewritten.push(...quantizeWeights(product, constants, parameters.get(activation)!.value.scale));
    rewritten.push(node);
    for (const name of node.outputs) {
      if (!quantized.has(name)) continue;
      rewritten.push(quantize(name));
      const output = renamed.get(name);
      if (output !== undefined) rewritten.push(dequantize(name, output));
    }
  }
  return writeModel(rewritten, constants, inputShapes, outputs);
}

/** The product's weights as int8 codes per output channel and its bias as int32, each read through a DequantizeLinear. */
function quantizeWeights(product: Product, constants: Map<string, ConstTensor>, inputScale: number): Node[] {
  const { node, axis } = product;
  const weight = constants.get(node.inputs[1]!)!;
  const channels = weight.shape[axis]!;
  const inner = weight.shape.slice(axis + 1).reduce((a, b) => a * b, 1);
  const values = toNumbers(weight);
  const channelOf = (i: number): number => Math.floor(i / inner) % channels;
  const largest = new Array<number>(channels).fill(0);
  values.forEach((v, i) => {
    largest[channelOf(i)] = Math.max(largest[channelOf(i)]!, Math.abs(v));
  });
  const scales = largest.map((m) => (m / WEIGHT_MAX < SMALLEST_SCALE ? 1 : Math.fround(m / WEIGHT_MAX)));
  const codes = values.map((v, i) => Math.max(-WEIGHT_MAX, Math.min(WEIGHT_MAX, roundHalfEven(v / scales[channelOf(i)]!))));
  const base = node.outputs[0]!;
  const axisAttribute: OnnxAttribute = { name: 'axis', type: 2, i: BigInt(axis), floats: [], ints: [], strings: [] };
  constants.set(`${base}_weight_quantized`, fromNumbers('int8', weight.shape, codes));
  constants.set(`${base}_weight_scale`, fromNumbers('float32', [channels], scales));
  constants.set(`${base}_weight_zero_point`, fromNumbers('int8', [channels], new Array<number>(channels).fill(0)));
  const added: Node[] = [
    {
      op: 'DequantizeLinear',
      name: `${base}_weight_node`,
      inputs: [`${base}_weight_quantized`, `${base}_weight_scale`, `${base}_weight_zero_point`],
      outputs: [`${base}_weight`],
      attributes: [axisAttribute],
    },
  ];
  node.inputs[1] = `${base}_weight`;
  const biasName = node.inputs[2];
  if (biasName !== undefined && biasName !== '') {
    const bias = toNumbers(constants.get(biasName)!);
    const biasScales = scales.map((s) => Math.fround(inputScale * s));
    constants.set(
      `${base}_bias_quantized`,
      fromNumbers(
        'int32',
        [channels],
        bias.map((b, c) => roundHalfEven(b / biasScales[c]!)),
      ),
    );
    constants.set(`${base}_bias_scale`, fromNumbers('float32', [channels], biasScales));
    constants.set(`${base}_bias_zero_point`, fromNumbers('int32', [channels], new Array<number>(channels).fill(0)));
    added.push({
      op: 'DequantizeLinear',
      name: `${base}_bias_node`,
      inputs: [`${base}_bias_quantized`, `${base}_bias_scale`, `${base}_bias_zero_point`],
      outputs: [`${base}_bias`],
      attributes: [{ ...axisAttribute, i: 0n }],
    });
    node.inputs[2] = `${base}_bias`;
  }
  return added;
}
