// The operators random graphs chain: for each, which input shapes it takes,
// how it builds its node (attributes and constant operands drawn from its own
// seed) and how far two runtimes may differ on it.
import type { TestNode } from '../onnx/onnx-writer.js';
import { broadcast, GraphBuilder, Rng, size, Unbuildable, type Tolerance, type Value } from './graph.js';

export interface OpSpec {
  name: string;
  accepts(shape: readonly number[]): boolean;
  build(b: GraphBuilder, rng: Rng, x: Value): Value;
  tolerance: Tolerance;
}

const EXACT: Tolerance = { rtol: 1e-6, atol: 0 };
const TRANSCENDENTAL: Tolerance = { rtol: 2e-5, atol: 1e-6 };
const ACCUMULATING: Tolerance = { rtol: 1e-4, atol: 1e-5 };

const anyShape = (shape: readonly number[]): boolean => shape.length >= 1;

function unary(name: string, tolerance: Tolerance, attributes?: (rng: Rng) => Omit<TestNode, 'op' | 'inputs' | 'outputs'>): OpSpec {
  return {
    name,
    accepts: anyShape,
    tolerance,
    build: (b, rng, x) => b.node(name, [x.name], x.shape, attributes?.(rng) ?? {}),
  };
}

/** A shape that broadcasts against `shape`: the same, some dims 1, fewer leading dims, a scalar, or one more leading dim. */
function partnerShape(rng: Rng, shape: readonly number[]): number[] {
  const roll = rng.next();
  if (roll < 0.35) return [...shape];
  if (roll < 0.55) return shape.map((d) => (rng.chance(0.5) ? 1 : d));
  if (roll < 0.7) return shape.slice(rng.int(1, shape.length));
  if (roll < 0.8) return [];
  if (roll < 0.9) return [rng.int(2, 3), ...shape.map((d) => (rng.chance(0.3) ? 1 : d))];
  return shape.map((d) => (d === 1 && rng.chance(0.5) ? rng.int(2, 3) : d));
}

/** The second operand of a binary op: a runtime input or a constant, on either side. */
function binaryOperands(b: GraphBuilder, rng: Rng, x: Value, constantLow = -2, constantHigh = 2): [Value, Value] {
  const shape = partnerShape(rng, x.shape);
  const other = rng.chance(0.3) ? b.weight(rng, shape, constantLow, constantHigh) : b.input(shape);
  return rng.chance(0.25) ? [other, x] : [x, other];
}

function binary(name: string, tolerance: Tolerance): OpSpec {
  return {
    name,
    accepts: anyShape,
    tolerance,
    build: (b, rng, x) => {
      const [l, r] = binaryOperands(b, rng, x);
      return b.node(name, [l.name, r.name], broadcast(l.shape, r.shape));
    },
  };
}

function variadic(name: string, tolerance: Tolerance): OpSpec {
  return {
    name,
    accepts: anyShape,
    tolerance,
    build: (b, rng, x) => {
      const parts = [x];
      for (let i = rng.int(0, 2); i > 0; i--)
        parts.push(rng.chance(0.3) ? b.weight(rng, partnerShape(rng, x.shape), -2, 2) : b.input(partnerShape(rng, x.shape)));
      const ordered = rng.shuffle(parts);
      return b.node(
        name,
        ordered.map((p) => p.name),
        ordered.reduce((s, p) => broadcast(s, p.shape), [] as number[]),
      );
    },
  };
}

function normalizedAxis(rng: Rng, rank: number): number {
  const axis = rng.int(0, rank - 1);
  return rng.chance(0.3) ? axis - rank : axis;
}

function reduce(name: string, tolerance: Tolerance): OpSpec {
  return {
    name,
    accepts: anyShape,
    tolerance,
    build: (b, rng, x) => {
      const rank = x.shape.length;
      const keep = rng.chance(0.5) ? 1 : 0;
      const all = rng.chance(0.2);
      const axes = all
        ? []
        : rng
            .shuffle(x.shape.map((_, i) => i))
            .slice(0, rng.int(1, rank))
            .map((a) => (rng.chance(0.3) ? a - rank : a));
      const reduced = all ? x.shape.map((_, i) => i) : axes.map((a) => (a < 0 ? a + rank : a));
      const shape = x.shape.flatMap((d, i) => (reduced.includes(i) ? (keep ? [1] : []) : [d]));
      if (name === 'ReduceSum') {
        return b.node(name, all ? [x.name] : [x.name, b.int64s(axes)], shape, { int: { keepdims: keep } });
      }
      return b.node(name, [x.name], shape, { int: { keepdims: keep }, ...(all ? {} : { ints: { axes } }) });
    },
  };
}

function softmax(name: string): OpSpec {
  return {
    name,
    accepts: anyShape,
    tolerance: ACCUMULATING,
    build: (b, rng, x) => b.node(name, [x.name], x.shape, rng.chance(0.3) ? {} : { int: { axis: normalizedAxis(rng, x.shape.length) } }),
  };
}

const spatialInput = (shape: readonly number[]): boolean =>
  (shape.length === 3 || shape.length === 4) && shape.slice(2).every((d) => d >= 1);

/** Window geometry for Conv and pooling that leaves every output dim at least 1. */
function window(rng: Rng, spatial: readonly number[], withDilation: boolean) {
  const kernel = spatial.map((d) => rng.int(1, Math.min(4, d + 1)));
  const autoPad = rng.chance(0.15) ? rng.pick(['SAME_UPPER', 'SAME_LOWER', 'VALID']) : 'NOTSET';
  const same = autoPad === 'SAME_UPPER' || autoPad === 'SAME_LOWER';
  // onnxruntime takes SAME padding only undilated, with strides no longer than the window.
  const strides = spatial.map((_, i) => (rng.chance(0.6) ? 1 : Math.min(rng.int(2, 3), same ? kernel[i]! : 3)));
  const dilations = spatial.map(() => (withDilation && !same && rng.chance(0.25) ? 2 : 1));
  const pads = [...kernel, ...kernel].map((k) => (rng.chance(0.5) ? 0 : rng.int(0, k - 1)));
  const out = spatial.map((d, i) => {
    if (same) return Math.ceil(d / strides[i]!);
    const span = dilations[i]! * (kernel[i]! - 1) + 1;
    const extent = d + (autoPad === 'VALID' ? 0 : pads[i]! + pads[i + spatial.length]!);
    return Math.floor((extent - span) / strides[i]!) + 1;
  });
  if (out.some((d) => d < 1)) throw new Unbuildable('window larger than its input');
  const attributes: Omit<TestNode, 'op' | 'inputs' | 'outputs'> = {
    ints: { kernel_shape: kernel, strides, ...(withDilation ? { dilations } : {}), ...(autoPad === 'NOTSET' ? { pads } : {}) },
    ...(autoPad === 'NOTSET' ? {} : { strings: { auto_pad: autoPad } }),
  };
  return { kernel, strides, dilations, pads, autoPad, out, attributes };
}

const conv: OpSpec = {
  name: 'Conv',
  accepts: spatialInput,
  tolerance: ACCUMULATING,
  build: (b, rng, x) => {
    const [n, c, ...spatial] = x.shape as [number, number, ...number[]];
    const groupChoices = [1, c].filter((g, i, all) => all.indexOf(g) === i && c % g === 0);
    const group = rng.chance(0.3) ? rng.pick(groupChoices) : 1;
    const outChannels = group * rng.int(1, 3);
    const geometry = window(rng, spatial, true);
    const w = rng.chance(0.9)
      ? b.weight(rng, [outChannels, c / group, ...geometry.kernel])
      : b.input([outChannels, c / group, ...geometry.kernel]);
    const inputs = [x.name, w.name];
    if (rng.chance(0.6)) inputs.push(b.weight(rng, [outChannels]).name);
    return b.node('Conv', inputs, [n, outChannels, ...geometry.out], {
      ...geometry.attributes,
      ...(group === 1 ? {} : { int: { group } }),
    });
  },
};

function pool(name: 'MaxPool' | 'AveragePool'): OpSpec {
  return {
    name,
    accepts: spatialInput,
    tolerance: name === 'MaxPool' ? EXACT : ACCUMULATING,
    build: (b, rng, x) => {
      const spatial = x.shape.slice(2);
      const geometry = window(rng, spatial, name === 'MaxPool');
      const ceilOut = spatial.map((d, i) => {
        const span = geometry.dilations[i]! * (geometry.kernel[i]! - 1) + 1;
        return Math.ceil((d + geometry.pads[i]! + geometry.pads[i + spatial.length]! - span) / geometry.strides[i]!) + 1;
      });
      // Where ceil mode's last window would start past the input, the kernels (onnxruntime's and etna's) drop it but
      // ONNX shape inference does not, and onnxruntime then refuses the ops after it: such windows use floor mode.
      const dropsWindow = ceilOut.some((o, i) => (o - 1) * geometry.strides[i]! >= spatial[i]! + geometry.pads[i]!);
      const ceil = geometry.autoPad === 'NOTSET' && !dropsWindow && rng.chance(0.25);
      const out = ceil ? ceilOut : geometry.out;
      const int: Record<string, number> = {};
      if (ceil) int.ceil_mode = 1;
      if (name === 'AveragePool' && rng.chance(0.4)) int.count_include_pad = 1;
      return b.node(name, [x.name], [x.shape[0]!, x.shape[1]!, ...out], { ...geometry.attributes, int });
    },
  };
}

function globalPool(name: string): OpSpec {
  return {
    name,
    accepts: spatialInput,
    tolerance: ACCUMULATING,
    build: (b, _rng, x) => b.node(name, [x.name], [x.shape[0]!, x.shape[1]!, ...x.shape.slice(2).map(() => 1)]),
  };
}

const matmul: OpSpec = {
  name: 'MatMul',
  accepts: anyShape,
  tolerance: ACCUMULATING,
  build: (b, rng, x) => {
    const k = x.shape[x.shape.length - 1]!;
    const n = rng.int(1, 6);
    if (rng.chance(0.6)) {
      const w = b.weight(rng, [k, n]);
      return b.node('MatMul', [x.name, w.name], [...x.shape.slice(0, -1), n]);
    }
    // A runtime right operand, with batch dims that broadcast.
    const batch = x.shape.slice(0, -2);
    const rightBatch = batch.slice(rng.int(0, batch.length)).map((d) => (rng.chance(0.3) ? 1 : d));
    const right = b.input([...rightBatch, k, n]);
    const outBatch = broadcast(batch, rightBatch);
    const outShape = x.shape.length === 1 ? [...outBatch, n] : [...outBatch, x.shape[x.shape.length - 2]!, n];
    return b.node('MatMul', [x.name, right.name], outShape);
  },
};

const gemm: OpSpec = {
  name: 'Gemm',
  accepts: (shape) => shape.length === 2,
  tolerance: ACCUMULATING,
  build: (b, rng, x) => {
    const transA = rng.chance(0.25) ? 1 : 0;
    const transB = rng.chance(0.5) ? 1 : 0;
    const [m, k] = transA ? [x.shape[1]!, x.shape[0]!] : [x.shape[0]!, x.shape[1]!];
    const n = rng.int(1, 6);
    const bShape = transB ? [n, k] : [k, n];
    const right = rng.chance(0.75) ? b.weight(rng, bShape) : b.input(bShape);
    const inputs = [x.name, right.name];
    if (rng.chance(0.7)) inputs.push(b.weight(rng, rng.pick([[n], [1, n], [m, n], [m, 1], []])).name);
    const float: Record<string, number> = {};
    if (rng.chance(0.2)) float.alpha = rng.pick([0.5, 2, -1]);
    if (rng.chance(0.2)) float.beta = rng.pick([0, 0.5, 2]);
    return b.node('Gemm', inputs, [m, n], { int: { transA, transB }, float });
  },
};

const concat: OpSpec = {
  name: 'Concat',
  accepts: anyShape,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const axis = normalizedAxis(rng, x.shape.length);
    const a = axis < 0 ? axis + x.shape.length : axis;
    const parts = [x];
    for (let i = rng.int(1, 3); i > 0; i--) {
      const shape = [...x.shape];
      shape[a] = rng.int(1, 3);
      parts.push(rng.chance(0.2) ? b.weight(rng, shape) : b.input(shape));
    }
    const ordered = rng.shuffle(parts);
    const shape = [...x.shape];
    shape[a] = ordered.reduce((s, p) => s + p.shape[a]!, 0);
    return b.node(
      'Concat',
      ordered.map((p) => p.name),
      shape,
      { int: { axis } },
    );
  },
};

const transpose: OpSpec = {
  name: 'Transpose',
  accepts: anyShape,
  tolerance: EXACT,
  build: (b, rng, x) => {
    if (rng.chance(0.2)) return b.node('Transpose', [x.name], [...x.shape].reverse());
    const perm = rng.shuffle(x.shape.map((_, i) => i));
    return b.node(
      'Transpose',
      [x.name],
      perm.map((p) => x.shape[p]!),
      { ints: { perm } },
    );
  },
};

function factorize(rng: Rng, total: number): number[] {
  const rank = rng.int(1, 4);
  const dims: number[] = [];
  let left = total;
  for (let i = 0; i < rank - 1; i++) {
    const divisors = Array.from({ length: left }, (_, j) => j + 1).filter((d) => left % d === 0 && d <= 8);
    const d = rng.pick(divisors);
    dims.push(d);
    left /= d;
  }
  dims.push(left);
  return rng.shuffle(dims);
}

const reshape: OpSpec = {
  name: 'Reshape',
  accepts: (shape) => anyShape(shape) && size(shape) > 0,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const shape = factorize(rng, size(x.shape));
    const requested = [...shape];
    if (rng.chance(0.3)) requested[rng.int(0, requested.length - 1)] = -1;
    return b.node('Reshape', [x.name, b.int64s(requested)], shape);
  },
};

const flatten: OpSpec = {
  name: 'Flatten',
  accepts: anyShape,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const axis = rng.int(0, x.shape.length);
    return b.node('Flatten', [x.name], [size(x.shape.slice(0, axis)), size(x.shape.slice(axis))], { int: { axis } });
  },
};

const unsqueeze: OpSpec = {
  name: 'Unsqueeze',
  accepts: (shape) => shape.length >= 1 && shape.length <= 4,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const rank = x.shape.length + 1;
    const axis = rng.int(0, rank - 1);
    const shape = [...x.shape];
    shape.splice(axis, 0, 1);
    return b.node('Unsqueeze', [x.name, b.int64s([rng.chance(0.3) ? axis - rank : axis])], shape);
  },
};

const squeeze: OpSpec = {
  name: 'Squeeze',
  accepts: (shape) => shape.length >= 2 && shape.includes(1),
  tolerance: EXACT,
  build: (b, rng, x) => {
    const ones = x.shape.map((d, i) => (d === 1 ? i : -1)).filter((i) => i >= 0);
    if (ones.length === x.shape.length) ones.pop();
    if (ones.length === 0) throw new Unbuildable('nothing to squeeze');
    const axes = ones.slice(0, rng.int(1, ones.length));
    return b.node(
      'Squeeze',
      [x.name, b.int64s(axes)],
      x.shape.filter((_, i) => !axes.includes(i)),
    );
  },
};

const slice: OpSpec = {
  name: 'Slice',
  accepts: anyShape,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const rank = x.shape.length;
    const axes = rng.shuffle(x.shape.map((_, i) => i)).slice(0, rng.int(1, rank));
    const shape = [...x.shape];
    const starts: number[] = [];
    const ends: number[] = [];
    const steps: number[] = [];
    for (const axis of axes) {
      const dim = x.shape[axis]!;
      const step = rng.chance(0.7) ? 1 : rng.pick([2, -1, -2]);
      let start: number;
      let end: number;
      if (step > 0) {
        start = rng.int(0, dim - 1);
        end = rng.int(start + 1, dim);
        shape[axis] = Math.ceil((end - start) / step);
      } else {
        start = rng.int(0, dim - 1);
        end = rng.int(-1, start - 1);
        shape[axis] = Math.ceil((start - end) / -step);
      }
      if (shape[axis]! < 1) throw new Unbuildable('empty slice');
      // Out-of-range and negative bounds clamp and count from the end.
      starts.push(rng.chance(0.2) ? start - dim : start);
      ends.push(end === -1 ? -dim - 1 - rng.int(0, 3) : end === dim && rng.chance(0.3) ? 2 ** 31 : end);
      steps.push(step);
    }
    const inputs = [x.name, b.int64s(starts), b.int64s(ends), b.int64s(axes.map((a) => (rng.chance(0.2) ? a - rank : a)))];
    if (steps.some((s) => s !== 1) || rng.chance(0.5)) inputs.push(b.int64s(steps));
    return b.node('Slice', inputs, shape);
  },
};

const pad: OpSpec = {
  name: 'Pad',
  accepts: (shape) => anyShape(shape) && shape.every((d) => d >= 2),
  tolerance: EXACT,
  build: (b, rng, x) => {
    const rank = x.shape.length;
    const mode = rng.pick(['constant', 'constant', 'reflect', 'edge']);
    const limit = (d: number): number => (mode === 'reflect' ? d - 1 : 2);
    const pads = [...x.shape, ...x.shape].map((d) => (rng.chance(0.5) ? 0 : rng.int(0, limit(d))));
    const inputs = [x.name, b.int64s(pads)];
    if (mode === 'constant' && rng.chance(0.5)) inputs.push(b.constant([], [rng.pick([0, 1.5, -2, Number.NaN])]).name);
    return b.node(
      'Pad',
      inputs,
      x.shape.map((d, i) => d + pads[i]! + pads[i + rank]!),
      { strings: { mode } },
    );
  },
};

const clip: OpSpec = {
  name: 'Clip',
  accepts: anyShape,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const low = rng.uniform(-2, 0.5);
    const high = rng.chance(0.1) ? low : low + rng.uniform(0, 3);
    const inputs = [x.name];
    const which = rng.int(0, 2);
    inputs.push(which === 1 ? '' : b.constant([], [low]).name);
    if (which !== 0) inputs.push(b.constant([], [high]).name);
    return b.node('Clip', inputs, x.shape);
  },
};

const pow: OpSpec = {
  name: 'Pow',
  accepts: anyShape,
  tolerance: TRANSCENDENTAL,
  build: (b, rng, x) => {
    if (rng.chance(0.6)) {
      const e = b.constant([], [rng.pick([2, 3, 0.5, -1, 0, -2, 1.5])]);
      return b.node('Pow', [x.name, e.name], x.shape);
    }
    const e = b.input(partnerShape(rng, x.shape));
    return b.node('Pow', [x.name, e.name], broadcast(x.shape, e.shape));
  },
};

const prelu: OpSpec = {
  name: 'PRelu',
  accepts: anyShape,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const shape = x.shape.slice(rng.int(0, x.shape.length)).map((d) => (rng.chance(0.5) ? 1 : d));
    const slope = rng.chance(0.5) ? b.weight(rng, shape) : b.input(shape);
    return b.node('PRelu', [x.name, slope.name], x.shape);
  },
};

const whereCompare: OpSpec = {
  name: 'Where',
  accepts: anyShape,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const comparison = rng.pick(['Greater', 'Less', 'Equal', 'GreaterOrEqual', 'LessOrEqual']);
    const threshold = rng.chance(0.5) ? b.constant([], [rng.pick([0, 0.5, -1])]) : b.input(partnerShape(rng, x.shape));
    const condShape = broadcast(x.shape, threshold.shape);
    const cond = b.fresh('v');
    b.nodes.push({ op: comparison, inputs: [x.name, threshold.name], outputs: [cond] });
    const other = b.input(partnerShape(rng, x.shape));
    const [first, second] = rng.chance(0.5) ? [x, other] : [other, x];
    return b.node('Where', [cond, first.name, second.name], broadcast(broadcast(condShape, first.shape), second.shape));
  },
};

const batchNorm: OpSpec = {
  name: 'BatchNormalization',
  accepts: (shape) => shape.length >= 2,
  tolerance: TRANSCENDENTAL,
  build: (b, rng, x) => {
    const c = x.shape[1]!;
    const params = [b.weight(rng, [c], 0.5, 2), b.weight(rng, [c]), b.weight(rng, [c]), b.weight(rng, [c], 0.1, 3)];
    return b.node('BatchNormalization', [x.name, ...params.map((p) => p.name)], x.shape, { float: { epsilon: rng.pick([1e-5, 1e-3]) } });
  },
};

const instanceNorm: OpSpec = {
  name: 'InstanceNormalization',
  accepts: (shape) => shape.length >= 3,
  tolerance: ACCUMULATING,
  build: (b, rng, x) => {
    const c = x.shape[1]!;
    return b.node('InstanceNormalization', [x.name, b.weight(rng, [c], 0.5, 2).name, b.weight(rng, [c]).name], x.shape);
  },
};

const layerNorm: OpSpec = {
  name: 'LayerNormalization',
  accepts: anyShape,
  tolerance: ACCUMULATING,
  build: (b, rng, x) => {
    const axis = normalizedAxis(rng, x.shape.length);
    const normalized = x.shape.slice(axis < 0 ? axis + x.shape.length : axis);
    const inputs = [x.name, b.weight(rng, normalized, 0.5, 2).name];
    if (rng.chance(0.6)) inputs.push(b.weight(rng, normalized).name);
    return b.node('LayerNormalization', inputs, x.shape, { int: { axis } });
  },
};

const argReduce: OpSpec = {
  name: 'ArgMax',
  accepts: anyShape,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const op = rng.pick(['ArgMax', 'ArgMin']);
    const rank = x.shape.length;
    const axis = rng.int(0, rank - 1);
    const keep = rng.chance(0.5) ? 1 : 0;
    const shape = x.shape.flatMap((d, i) => (i === axis ? (keep ? [1] : []) : [d]));
    const picked = b.fresh('v');
    b.nodes.push({ op, inputs: [x.name], outputs: [picked], int: { axis, keepdims: keep, select_last_index: rng.chance(0.3) ? 1 : 0 } });
    return b.node('Cast', [picked], shape, { int: { to: 1 } });
  },
};

const tile: OpSpec = {
  name: 'Tile',
  accepts: (shape) => anyShape(shape) && size(shape) <= 64,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const repeats = x.shape.map(() => (rng.chance(0.6) ? 1 : rng.int(2, 3)));
    return b.node(
      'Tile',
      [x.name, b.int64s(repeats)],
      x.shape.map((d, i) => d * repeats[i]!),
    );
  },
};

const expand: OpSpec = {
  name: 'Expand',
  accepts: anyShape,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const target = x.shape.map((d) => (d === 1 && rng.chance(0.6) ? rng.int(2, 4) : rng.chance(0.2) ? 1 : d));
    const requested = rng.chance(0.3) ? [rng.int(1, 2), ...target] : target;
    return b.node('Expand', [x.name, b.int64s(requested)], broadcast(x.shape, requested));
  },
};

const gather: OpSpec = {
  name: 'Gather',
  accepts: anyShape,
  tolerance: EXACT,
  build: (b, rng, x) => {
    const rank = x.shape.length;
    const axis = rng.int(0, rank - 1);
    const dim = x.shape[axis]!;
    const count = rng.int(1, 4);
    const indices = Array.from({ length: count }, () => rng.int(-dim, dim - 1));
    const name = b.fresh('i');
    b.initializers.push({ name, dims: [count], floats: [], int64s: indices });
    return b.node('Gather', [x.name, name], [...x.shape.slice(0, axis), count, ...x.shape.slice(axis + 1)], { int: { axis } });
  },
};

const split: OpSpec = {
  name: 'Split',
  accepts: (shape) => shape.some((d) => d >= 2),
  tolerance: EXACT,
  build: (b, rng, x) => {
    const axis = rng.pick(x.shape.map((d, i) => (d >= 2 ? i : -1)).filter((i) => i >= 0));
    const dim = x.shape[axis]!;
    const first = rng.int(1, dim - 1);
    const names = [b.fresh('v'), b.fresh('v')];
    b.nodes.push({ op: 'Split', inputs: [x.name, b.int64s([first, dim - first])], outputs: names, int: { axis } });
    const rest = [...x.shape];
    rest[axis] = dim - first;
    b.sideOutputs.push({ name: names[1]!, shape: rest });
    const shape = [...x.shape];
    shape[axis] = first;
    return { name: names[0]!, shape };
  },
};

export const OPS: readonly OpSpec[] = [
  unary('Relu', EXACT),
  unary('Sigmoid', TRANSCENDENTAL),
  unary('Tanh', TRANSCENDENTAL),
  unary('Exp', TRANSCENDENTAL),
  unary('Log', TRANSCENDENTAL),
  unary('Sqrt', TRANSCENDENTAL),
  unary('Neg', EXACT),
  unary('Abs', EXACT),
  unary('Sin', TRANSCENDENTAL),
  unary('Cos', TRANSCENDENTAL),
  unary('Floor', EXACT),
  unary('Ceil', EXACT),
  unary('Round', EXACT),
  unary('Erf', TRANSCENDENTAL),
  unary('Reciprocal', TRANSCENDENTAL),
  unary('Softplus', TRANSCENDENTAL),
  unary('Sign', EXACT),
  unary('HardSwish', TRANSCENDENTAL),
  unary('LeakyRelu', EXACT, (rng) => (rng.chance(0.5) ? {} : { float: { alpha: rng.pick([0.1, 0.2, 1.5]) } })),
  unary('Elu', TRANSCENDENTAL, (rng) => (rng.chance(0.5) ? {} : { float: { alpha: rng.pick([0.5, 2]) } })),
  unary('Selu', TRANSCENDENTAL),
  unary('HardSigmoid', TRANSCENDENTAL, (rng) =>
    rng.chance(0.5) ? {} : { float: { alpha: rng.pick([0.1, 1 / 6]), beta: rng.pick([0.5, 0.3]) } },
  ),
  binary('Add', EXACT),
  binary('Sub', EXACT),
  binary('Mul', EXACT),
  binary('Div', TRANSCENDENTAL),
  variadic('Max', EXACT),
  variadic('Min', EXACT),
  variadic('Sum', EXACT),
  variadic('Mean', TRANSCENDENTAL),
  pow,
  prelu,
  clip,
  whereCompare,
  matmul,
  gemm,
  conv,
  pool('MaxPool'),
  pool('AveragePool'),
  globalPool('GlobalAveragePool'),
  globalPool('GlobalMaxPool'),
  reduce('ReduceSum', ACCUMULATING),
  reduce('ReduceMean', ACCUMULATING),
  reduce('ReduceMax', EXACT),
  reduce('ReduceMin', EXACT),
  reduce('ReduceSumSquare', ACCUMULATING),
  reduce('ReduceL1', ACCUMULATING),
  reduce('ReduceL2', ACCUMULATING),
  reduce('ReduceLogSumExp', ACCUMULATING),
  softmax('Softmax'),
  softmax('LogSoftmax'),
  batchNorm,
  instanceNorm,
  layerNorm,
  argReduce,
  concat,
  transpose,
  reshape,
  flatten,
  unsqueeze,
  squeeze,
  slice,
  pad,
  tile,
  expand,
  gather,
  split,
];
