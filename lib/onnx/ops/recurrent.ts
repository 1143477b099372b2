// LSTM and GRU unrolled over the sequence, with ONNX's gate orders; the
// input projection of every step is one matrix product per direction.
import { toNumbers } from '../constant.js';
import { dtypeOf, shapeOf, type ImportContext, type NodeView, type OnnxValue } from '../context.js';
import { arith, cat, permute, reshape, slice, unary } from './common.js';
import { mm } from './matmul.js';

interface RecurrentSetup {
  x: OnnxValue;
  /** X as [seq*batch, input]: every step's rows, multiplied by W once per direction. */
  xRows: OnnxValue;
  gates: number;
  seq: number;
  batch: number;
  hidden: number;
  directions: number;
  reverse: boolean[];
}

function recurrentSetup(node: NodeView, gates: number): RecurrentSetup {
  if (node.int('layout', 0) !== 0) node.fail('layout=1 (batch first) is not supported');
  if (node.attribute('clip') !== undefined) node.fail('clip is not supported');
  if (node.attribute('activations') !== undefined) {
    const acts = node.strings('activations')!;
    const defaults = gates === 4 ? ['Sigmoid', 'Tanh', 'Tanh'] : ['Sigmoid', 'Tanh'];
    if (acts.some((a, i) => a !== defaults[i % defaults.length]))
      node.fail(`activations ${acts.join(',')} are not supported (only the defaults)`);
  }
  if (node.optional(4) !== undefined) {
    const lens = node.constInput(4, 'sequence_lens');
    const seq = shapeOf(node.input(0))[0]!;
    if (toNumbers(lens).some((l) => l !== seq)) node.fail('sequence_lens shorter than the sequence are not supported');
  }
  const x = node.input(0);
  const [seq, batch] = shapeOf(x) as [number, number];
  const hidden = node.int('hidden_size', shapeOf(node.input(2))[2]!);
  const direction = node.string('direction', 'forward');
  const reverse = direction === 'bidirectional' ? [false, true] : [direction === 'reverse'];
  const xRows = reshape(node.ctx, x, [seq * batch, shapeOf(x)[2]!]);
  return { x, xRows, gates, seq, batch, hidden, directions: reverse.length, reverse };
}

interface DirectionInputs {
  /** X·Wᵀ for every step: [seq*batch, gates*H]. */
  readonly projected: OnnxValue;
  /** Rᵀ: [H, gates*H]. */
  readonly rT: OnnxValue;
  /** Wb and Rb of the direction, each [gates*H], when the node has B. */
  readonly bias?: { readonly input: OnnxValue; readonly recurrent: OnnxValue };
}

function directionInputs(node: NodeView, setup: RecurrentSetup, d: number): DirectionInputs {
  const { ctx } = node;
  const width = setup.gates * setup.hidden;
  const wT = directionWeight(ctx, node.input(1), d);
  const rT = directionWeight(ctx, node.input(2), d);
  const projected = mm(ctx, setup.xRows, wT);
  const b = node.optional(3);
  if (b === undefined) return { projected, rT };
  const row = reshape(ctx, slice(ctx, b, 0, d, d + 1), [2 * width]);
  return { projected, rT, bias: { input: slice(ctx, row, 0, 0, width), recurrent: slice(ctx, row, 0, width, 2 * width) } };
}

/** Initial state input `index` of direction d as [batch, H]; zeros when the node has none. */
function initialState(node: NodeView, setup: RecurrentSetup, index: number, d: number): OnnxValue {
  const { ctx } = node;
  const { batch, hidden } = setup;
  const v = node.optional(index);
  if (v === undefined) return ctx.constant(dtypeOf(setup.x), [batch, hidden], new Array<number>(batch * hidden).fill(0));
  return reshape(ctx, slice(ctx, v, 0, d, d + 1), [batch, hidden]);
}

/** Weight matrix of direction d transposed to [in, gates*H]. */
function directionWeight(ctx: ImportContext, w: OnnxValue, d: number): OnnxValue {
  const shape = shapeOf(w);
  const one = reshape(ctx, slice(ctx, w, 0, d, d + 1), shape.slice(1));
  return permute(ctx, one, [1, 0]);
}

function gate(ctx: ImportContext, v: OnnxValue, index: number, hidden: number): OnnxValue {
  return slice(ctx, v, 1, index * hidden, (index + 1) * hidden);
}

function stackSteps(ctx: ImportContext, steps: readonly OnnxValue[], batch: number, hidden: number): OnnxValue {
  return cat(
    ctx,
    steps.map((h) => reshape(ctx, h, [1, 1, batch, hidden])),
    0,
  );
}

export function lstm(node: NodeView): (OnnxValue | undefined)[] {
  const { ctx } = node;
  const setup = recurrentSetup(node, 4);
  const { seq, batch, hidden } = setup;
  if (node.optional(7) !== undefined) {
    const peepholes = node.input(7);
    if (peepholes.kind !== 'const' || toNumbers(peepholes.tensor).some((v) => v !== 0)) node.fail('peephole weights are not supported');
  }
  if (node.int('input_forget', 0) !== 0) node.fail('input_forget=1 is not supported');
  const ys: OnnxValue[] = [];
  const hs: OnnxValue[] = [];
  const cs: OnnxValue[] = [];
  for (let d = 0; d < setup.directions; d++) {
    const { projected, rT, bias: biases } = directionInputs(node, setup, d);
    // Added after both products, the order ONNX Runtime uses.
    const bias = biases && arith(ctx, node, 'add', biases.input, biases.recurrent);
    let h = initialState(node, setup, 5, d);
    let c = initialState(node, setup, 6, d);
    const outputs: OnnxValue[] = new Array<OnnxValue>(seq);
    for (let step = 0; step < seq; step++) {
      const t = setup.reverse[d] ? seq - 1 - step : step;
      const xt = slice(ctx, projected, 0, t * batch, (t + 1) * batch);
      let gates = arith(ctx, node, 'add', xt, mm(ctx, h, rT));
      if (bias !== undefined) gates = arith(ctx, node, 'add', gates, bias);
      const i = unary(ctx, 'aten::sigmoid.out', gate(ctx, gates, 0, hidden));
      const o = unary(ctx, 'aten::sigmoid.out', gate(ctx, gates, 1, hidden));
      const f = unary(ctx, 'aten::sigmoid.out', gate(ctx, gates, 2, hidden));
      const candidate = unary(ctx, 'aten::tanh.out', gate(ctx, gates, 3, hidden));
      c = arith(ctx, node, 'add', arith(ctx, node, 'mul', f, c), arith(ctx, node, 'mul', i, candidate));
      h = arith(ctx, node, 'mul', o, unary(ctx, 'aten::tanh.out', c));
      outputs[t] = h;
    }
    ys.push(stackSteps(ctx, outputs, batch, hidden));
    hs.push(reshape(ctx, h, [1, batch, hidden]));
    cs.push(reshape(ctx, c, [1, batch, hidden]));
  }
  return [cat(ctx, ys, 1), cat(ctx, hs, 0), cat(ctx, cs, 0)];
}

export function gru(node: NodeView): (OnnxValue | undefined)[] {
  const { ctx } = node;
  const setup = recurrentSetup(node, 3);
  const { seq, batch, hidden } = setup;
  const linearBeforeReset = node.int('linear_before_reset', 0) !== 0;
  const ys: OnnxValue[] = [];
  const hs: OnnxValue[] = [];
  const one = ctx.constant(dtypeOf(setup.x), [], [1]);
  for (let d = 0; d < setup.directions; d++) {
    const inputs = directionInputs(node, setup, d);
    const { rT } = inputs;
    const projected = inputs.bias ? arith(ctx, node, 'add', inputs.projected, inputs.bias.input) : inputs.projected;
    const recurrentBias = inputs.bias?.recurrent;
    const rzT = slice(ctx, rT, 1, 0, 2 * hidden);
    const rhT = slice(ctx, rT, 1, 2 * hidden, 3 * hidden);
    const rbZr = recurrentBias && slice(ctx, recurrentBias, 0, 0, 2 * hidden);
    const rbH = recurrentBias && slice(ctx, recurrentBias, 0, 2 * hidden, 3 * hidden);
    let h = initialState(node, setup, 5, d);
    const outputs: OnnxValue[] = new Array<OnnxValue>(seq);
    for (let step = 0; step < seq; step++) {
      const t = setup.reverse[d] ? seq - 1 - step : step;
      const xt = slice(ctx, projected, 0, t * batch, (t + 1) * batch);
      let hr = mm(ctx, h, rzT);
      if (rbZr) hr = arith(ctx, node, 'add', hr, rbZr);
      const zr = unary(ctx, 'aten::sigmoid.out', arith(ctx, node, 'add', slice(ctx, xt, 1, 0, 2 * hidden), hr));
      const z = gate(ctx, zr, 0, hidden);
      const r = gate(ctx, zr, 1, hidden);
      let recurrent: OnnxValue;
      if (linearBeforeReset) {
        let hh = mm(ctx, h, rhT);
        if (rbH) hh = arith(ctx, node, 'add', hh, rbH);
        recurrent = arith(ctx, node, 'mul', r, hh);
      } else {
        recurrent = mm(ctx, arith(ctx, node, 'mul', r, h), rhT);
        if (rbH) recurrent = arith(ctx, node, 'add', recurrent, rbH);
      }
      const candidate = unary(ctx, 'aten::tanh.out', arith(ctx, node, 'add', slice(ctx, xt, 1, 2 * hidden, 3 * hidden), recurrent));
      // h' = (1 - z) * candidate + z * h
      const keep = arith(ctx, node, 'sub', one, z);
      h = arith(ctx, node, 'add', arith(ctx, node, 'mul', keep, candidate), arith(ctx, node, 'mul', z, h));
      outputs[t] = h;
    }
    ys.push(stackSteps(ctx, outputs, batch, hidden));
    hs.push(reshape(ctx, h, [1, batch, hidden]));
  }
  return [cat(ctx, ys, 1), cat(ctx, hs, 0)];
}
