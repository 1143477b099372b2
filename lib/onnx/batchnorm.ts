// Inference-mode BatchNormalization at import time. A BN reading the only
// output of a Conv or ConvTranspose with constant weights disappears into that Conv (scaled
// weights, shifted bias); any other BN with constant parameters becomes a
// per-channel multiply and add by import-time tensors. Either way nothing is
// normalised at run time, and the delegate sees one convolution (or two
// arithmetic nodes) instead of rsqrt calls on constants.
import { constFromProto, fromNumbers, shapeSize, toNumbers, type ConstTensor } from './constant.js';
import type { OnnxGraph, OnnxNode } from './proto.js';

/** Per-channel factor gamma / sqrt(var + eps) and shift beta - mean * factor, in float64. */
export interface ChannelAffine {
  readonly scale: Float64Array;
  readonly shift: Float64Array;
}

export function batchNormAffine(gamma: ConstTensor, beta: ConstTensor, mean: ConstTensor, variance: ConstTensor, epsilon: number): ChannelAffine | undefined {
  const [g, b, m, v] = [gamma, beta, mean, variance].map(toNumbers) as [number[], number[], number[], number[]];
  const channels = g.length;
  if (b.length !== channels || m.length !== channels || v.length !== channels) return undefined;
  const scale = new Float64Array(channels);
  const shift = new Float64Array(channels);
  for (let c = 0; c < channels; c++) {
    scale[c] = g[c]! / Math.sqrt(v[c]! + epsilon);
    shift[c] = b[c]! - m[c]! * scale[c]!;
  }
  return { scale, shift };
}

function epsilonOf(node: OnnxNode): number {
  return node.attributes.find((a) => a.name === 'epsilon')?.f ?? 1e-5;
}

function isInferenceBatchNorm(node: OnnxNode): boolean {
  const training = node.attributes.find((a) => a.name === 'training_mode')?.i ?? 0n;
  return node.opType === 'BatchNormalization' && training === 0n && node.outputs.slice(1).every((o) => o === '');
}

/** How often each value name is read by `graph` (its nodes, nested graphs and outputs). */
function readCounts(graph: OnnxGraph, counts = new Map<string, number>()): Map<string, number> {
  const read = (name: string): void => {
    if (name !== '') counts.set(name, (counts.get(name) ?? 0) + 1);
  };
  for (const node of graph.nodes) {
    node.inputs.forEach(read);
    for (const attr of node.attributes) if (attr.g !== undefined) readCounts(attr.g, counts);
  }
  graph.outputs.forEach((o) => read(o.name));
  return counts;
}

export interface FoldedBatchNorms {
  /** The graph's nodes with every folded BN removed and its Conv rewritten. */
  readonly nodes: OnnxNode[];
  /** The rewritten Conv weights and biases, under fresh names. */
  readonly constants: ReadonlyMap<string, ConstTensor>;
  readonly folded: number;
}

/**
 * The output channel each weight element feeds: Conv weights are
 * [out, in / groups, ...k]; ConvTranspose weights are [in, out / groups, ...k].
 */
function outputChannelOf(conv: OnnxNode, shape: readonly number[]): { count: number; at: (i: number) => number } | undefined {
  const taps = shapeSize(shape.slice(2));
  if (conv.opType === 'Conv') return { count: shape[0]!, at: (i) => Math.floor(i / (shapeSize(shape) / shape[0]!)) };
  const groups = Number(conv.attributes.find((a) => a.name === 'group')?.i ?? 1n);
  const [inChannels, groupOut] = shape as [number, number];
  if (groups < 1 || inChannels % groups !== 0) return undefined;
  const groupIn = inChannels / groups;
  return {
    count: groupOut * groups,
    at: (i) => Math.floor(Math.floor(i / (groupOut * taps)) / groupIn) * groupOut + (Math.floor(i / taps) % groupOut),
  };
}

/**
 * Folds each inference BN whose input is the single-use output of a Conv
 * with constant weights (and bias) into that Conv:
 * W'[o] = W[o] * s[o], b'[o] = b[o] * s[o] + shift[o], computed in float64.
 */
export function foldBatchNormsIntoConvs(graph: OnnxGraph): FoldedBatchNorms {
  const initializers = new Map(graph.initializers.map((t) => [t.name, t]));
  const constant = (name: string | undefined): ConstTensor | undefined => {
    const proto = name === undefined || name === '' ? undefined : initializers.get(name);
    return proto === undefined ? undefined : constFromProto(proto, `initializer '${proto.name}'`);
  };
  const reads = readCounts(graph);
  const producer = new Map<string, OnnxNode>();
  for (const node of graph.nodes) for (const out of node.outputs) if (out !== '') producer.set(out, node);
  const taken = new Set<string>([...initializers.keys(), ...producer.keys(), ...graph.inputs.map((i) => i.name)]);
  const freshName = (base: string): string => {
    let name = base;
    for (let k = 1; taken.has(name); k++) name = `${base}_${k}`;
    taken.add(name);
    return name;
  };

  const constants = new Map<string, ConstTensor>();
  const replaced = new Map<OnnxNode, OnnxNode>();
  const removed = new Set<OnnxNode>();
  for (const bn of graph.nodes) {
    if (!isInferenceBatchNorm(bn)) continue;
    const x = bn.inputs[0]!;
    const conv = producer.get(x);
    if (conv === undefined || (conv.opType !== 'Conv' && conv.opType !== 'ConvTranspose') || replaced.has(conv) || conv.outputs[0] !== x || reads.get(x) !== 1) continue;
    const weight = constant(conv.inputs[1]);
    const bias = conv.inputs[2] === undefined || conv.inputs[2] === '' ? undefined : constant(conv.inputs[2]);
    if (weight === undefined || weight.dtype !== 'float32' || ((conv.inputs[2] ?? '') !== '' && bias === undefined)) continue;
    const params = bn.inputs.slice(1, 5).map(constant);
    if (params.length !== 4 || params.some((p) => p === undefined)) continue;
    const [gamma, beta, mean, variance] = params as [ConstTensor, ConstTensor, ConstTensor, ConstTensor];
    const affine = batchNormAffine(gamma, beta, mean, variance, epsilonOf(bn));
    const channelOf = outputChannelOf(conv, weight.shape);
    const outChannels = channelOf === undefined ? 0 : channelOf.count;
    if (channelOf === undefined || affine === undefined || affine.scale.length !== outChannels) continue;

    const w = toNumbers(weight);
    const scaled = w.map((value, i) => value * affine.scale[channelOf.at(i)]!);
    const b = bias === undefined ? new Array<number>(outChannels).fill(0) : toNumbers(bias);
    const shifted = Array.from({ length: outChannels }, (_, o) => b[o]! * affine.scale[o]! + affine.shift[o]!);
    const weightName = freshName(`${bn.outputs[0]}_folded_weight`);
    const biasName = freshName(`${bn.outputs[0]}_folded_bias`);
    constants.set(weightName, fromNumbers('float32', weight.shape, scaled));
    constants.set(biasName, fromNumbers('float32', [outChannels], shifted));
    replaced.set(conv, { ...conv, inputs: [conv.inputs[0]!, weightName, biasName], outputs: [bn.outputs[0]!] });
    removed.add(bn);
  }
  const nodes = graph.nodes.filter((n) => !removed.has(n)).map((n) => replaced.get(n) ?? n);
  return { nodes, constants, folded: removed.size };
}
