// Inference-mode BatchNormalization at import time. A BN reading the only
// output of a Conv or ConvTranspose with constant weights disappears into that Conv (scaled
// weights, shifted bias); any other BN with constant parameters becomes a
// per-channel multiply and add by import-time tensors. Either way nothing is
// normalised at run time, and the delegate sees one convolution (or two
// arithmetic nodes) instead of rsqrt calls on constants.
import { numel } from '../shape.js';
import { fromNumbers, toNumbers, type ConstTensor } from './constant.js';
import { producers, readCounts, type GraphTables } from './graph-info.js';
import type { OnnxGraph, OnnxNode } from './proto.js';

/** Per-channel factor gamma / sqrt(var + eps) and shift beta - mean * factor, in float64. */
export interface ChannelAffine {
  readonly scale: Float64Array;
  readonly shift: Float64Array;
}

export function batchNormAffine(
  gamma: ConstTensor,
  beta: ConstTensor,
  mean: ConstTensor,
  variance: ConstTensor,
  epsilon: number,
): ChannelAffine | undefined {
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

export interface FoldedConvAffines {
  /** The graph's nodes with every folded BN, Mul and Add removed and its Conv rewritten. */
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
  const taps = numel(shape.slice(2));
  if (conv.opType === 'Conv') return { count: shape[0]!, at: (i) => Math.floor(i / (numel(shape) / shape[0]!)) };
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
 * A constant Mul or Add operand as a per-channel affine over a conv output of
 * `rank` dims and `channels` channels: one value, or `channels` values along
 * dim 1 with every other dim 1 (so broadcasting keeps the output's shape).
 */
export function channelOperand(tensor: ConstTensor, rank: number, channels: number): number[] | undefined {
  if (tensor.dtype !== 'float32' || tensor.shape.length > rank) return undefined;
  const values = toNumbers(tensor);
  if (values.length === 1) return new Array<number>(channels).fill(values[0]!);
  const channelAxis = tensor.shape.length - (rank - 1);
  if (channelAxis < 0 || tensor.shape[channelAxis] !== channels || values.length !== channels) return undefined;
  return values;
}

/**
 * Folds into a Conv or ConvTranspose with constant weights (and bias) each
 * per-channel affine reading its single-use output: an inference BN
 * (W'[o] = W[o] * s[o], b'[o] = b[o] * s[o] + shift[o]), a Mul by a constant
 * (a shift of 0) or an Add of one (a scale of 1), in float64. Chains fold
 * one after another (paddle2onnx writes PP-LCNet's learnable affine as a Mul
 * and an Add after the BN). Constants come from initializers or Constant nodes.
 */
export function foldAffinesIntoConvs(graph: OnnxGraph, { constant, freshName }: GraphTables): FoldedConvAffines {
  const reads = readCounts(graph);
  const producer = producers(graph.nodes);

  const constants = new Map<string, ConstTensor>();
  const weights = (name: string | undefined): ConstTensor | undefined =>
    name === undefined ? undefined : (constants.get(name) ?? constant(name));
  const replaced = new Map<OnnxNode, OnnxNode>();
  const removed = new Set<OnnxNode>();
  for (const node of graph.nodes) {
    const isArithmetic = (node.opType === 'Mul' || node.opType === 'Add') && node.inputs.length === 2;
    if (!isInferenceBatchNorm(node) && !isArithmetic) continue;
    // The operand that may come from a conv; for Mul and Add, the other one must be constant.
    const operand = isArithmetic && constant(node.inputs[0]) !== undefined ? 1 : 0;
    const x = node.inputs[operand]!;
    const original = producer.get(x);
    const conv = original === undefined ? undefined : (replaced.get(original) ?? original);
    if (original === undefined || conv === undefined || (conv.opType !== 'Conv' && conv.opType !== 'ConvTranspose')) continue;
    if (conv.outputs[0] !== x || reads.get(x) !== 1) continue;
    const weight = weights(conv.inputs[1]);
    const bias = conv.inputs[2] === undefined || conv.inputs[2] === '' ? undefined : weights(conv.inputs[2]);
    if (weight === undefined || weight.dtype !== 'float32' || ((conv.inputs[2] ?? '') !== '' && bias === undefined)) continue;
    const channelOf = outputChannelOf(conv, weight.shape);
    if (channelOf === undefined) continue;
    const outChannels = channelOf.count;
    let affine: ChannelAffine | undefined;
    if (isArithmetic) {
      const other = constant(node.inputs[1 - operand]);
      const values = other === undefined ? undefined : channelOperand(other, weight.shape.length, outChannels);
      if (values !== undefined) {
        affine =
          node.opType === 'Mul'
            ? { scale: Float64Array.from(values), shift: new Float64Array(outChannels) }
            : { scale: new Float64Array(outChannels).fill(1), shift: Float64Array.from(values) };
      }
    } else {
      const params = node.inputs.slice(1, 5).map(constant);
      if (params.length === 4 && params.every((p) => p !== undefined)) {
        const [gamma, beta, mean, variance] = params as [ConstTensor, ConstTensor, ConstTensor, ConstTensor];
        affine = batchNormAffine(gamma, beta, mean, variance, epsilonOf(node));
      }
    }
    if (affine === undefined || affine.scale.length !== outChannels) continue;

    const w = toNumbers(weight);
    const scaled = w.map((value, i) => value * affine.scale[channelOf.at(i)]!);
    const b = bias === undefined ? new Array<number>(outChannels).fill(0) : toNumbers(bias);
    const shifted = Array.from({ length: outChannels }, (_, o) => b[o]! * affine.scale[o]! + affine.shift[o]!);
    const weightName = freshName(`${node.outputs[0]}_folded_weight`);
    const biasName = freshName(`${node.outputs[0]}_folded_bias`);
    constants.set(weightName, fromNumbers('float32', weight.shape, scaled));
    constants.set(biasName, fromNumbers('float32', [outChannels], shifted));
    replaced.set(original, { ...conv, inputs: [conv.inputs[0]!, weightName, biasName], outputs: [node.outputs[0]!] });
    producer.set(node.outputs[0]!, original);
    removed.add(node);
  }
  const nodes = graph.nodes.filter((n) => !removed.has(n)).map((n) => replaced.get(n) ?? n);
  return { nodes, constants, folded: removed.size };
}

/** Whether a Conv reads no padding: an affine of its input then commutes with it. */
function unpadded(conv: OnnxNode): boolean {
  const autoPad = conv.attributes.find((a) => a.name === 'auto_pad')?.s;
  const mode = autoPad === undefined ? 'NOTSET' : new TextDecoder().decode(autoPad);
  const pads = conv.attributes.find((a) => a.name === 'pads')?.ints ?? [];
  return (mode === 'NOTSET' || mode === 'VALID') && pads.every((p) => Number(p) === 0);
}

/**
 * Folds into an unpadded Conv with constant weights each per-input-channel
 * Mul or Add by a constant whose single-use output the Conv reads
 * (PP-LCNet's learnable scale and bias after an activation, before a 1x1
 * conv): conv(x + b) moves sum(W[o] * b) into the bias, conv(x * a) scales
 * W[o, c] by a[c], computed in float64. A padded Conv would pad the affine's
 * input with zeros where the model pads its output, so it is left alone.
 */
export function foldInputAffinesIntoConvs(
  nodes: readonly OnnxNode[],
  folded: ReadonlyMap<string, ConstTensor>,
  graph: OnnxGraph,
  { constant, freshName }: GraphTables,
): FoldedConvAffines {
  const constants = new Map(folded);
  const weights = (name: string | undefined): ConstTensor | undefined =>
    name === undefined || name === '' ? undefined : (constants.get(name) ?? constant(name));
  const reads = readCounts({ ...graph, nodes: [...nodes] });
  const producer = producers(nodes);
  const removed = new Set<OnnxNode>();
  const replaced = new Map<OnnxNode, OnnxNode>();
  for (const original of nodes) {
    if (original.opType !== 'Conv' || !unpadded(original)) continue;
    let conv = original;
    for (;;) {
      const x = conv.inputs[0]!;
      const affine = producer.get(x);
      const weight = weights(conv.inputs[1]);
      const hasBias = (conv.inputs[2] ?? '') !== '';
      const bias = hasBias ? weights(conv.inputs[2]) : undefined;
      if (affine === undefined || (affine.opType !== 'Mul' && affine.opType !== 'Add') || affine.inputs.length !== 2) break;
      if (reads.get(x) !== 1 || graph.outputs.some((o) => o.name === x)) break;
      if (weight === undefined || weight.dtype !== 'float32' || (hasBias && bias === undefined)) break;
      const operand = constant(affine.inputs[0]) !== undefined ? 1 : 0;
      const other = constant(affine.inputs[1 - operand]);
      const groups = Number(conv.attributes.find((a) => a.name === 'group')?.i ?? 1n);
      const [outChannels, groupIn] = weight.shape as [number, number];
      const perChannel = other === undefined ? undefined : channelOperand(other, weight.shape.length, groupIn * groups);
      if (perChannel === undefined || groups < 1 || outChannels % groups !== 0) break;
      const taps = numel(weight.shape.slice(2));
      const channelOfElement = (i: number): number => {
        const o = Math.floor(i / (groupIn * taps));
        return Math.floor(o / (outChannels / groups)) * groupIn + (Math.floor(i / taps) % groupIn);
      };
      const w = toNumbers(weight);
      const b = bias === undefined ? new Array<number>(outChannels).fill(0) : toNumbers(bias);
      const source = affine.inputs[operand]!;
      let inputs: string[];
      if (affine.opType === 'Mul') {
        const scaledName = freshName(`${conv.outputs[0]}_input_scaled_weight`);
        constants.set(
          scaledName,
          fromNumbers(
            'float32',
            weight.shape,
            w.map((v, i) => v * perChannel[channelOfElement(i)]!),
          ),
        );
        inputs = [source, scaledName, ...conv.inputs.slice(2)];
      } else {
        const shifted = [...b];
        w.forEach((v, i) => {
          shifted[Math.floor(i / (groupIn * taps))]! += v * perChannel[channelOfElement(i)]!;
        });
        const shiftedName = freshName(`${conv.outputs[0]}_input_shifted_bias`);
        constants.set(shiftedName, fromNumbers('float32', [outChannels], shifted));
        inputs = [source, conv.inputs[1]!, shiftedName];
      }
      conv = { ...conv, inputs };
      removed.add(affine);
    }
    if (conv !== original) replaced.set(original, conv);
  }
  return { nodes: nodes.filter((n) => !removed.has(n)).map((n) => replaced.get(n) ?? n), constants, folded: removed.size };
}
