// Operators that pick, join or pad along axes: Slice, Gather, Concat,
// Split and Pad.
import { numel } from '../../shape.js';
import { elementAt, toNumbers } from '../constant.js';
import { dtypeOf, shapeOf, type NodeView, type OnnxValue } from '../context.js';
import { normalizeAxis } from '../fold.js';
import { arith, cat, constantPad, indexSelect, reshape, slice } from './common.js';

export function pad(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  let x = node.input(0);
  const shape = shapeOf(x);
  const rank = shape.length;
  const mode = node.string('mode', 'constant');
  let pads: number[];
  let value = 0;
  let runtimeValue: OnnxValue | undefined;
  if (node.opset < 11) {
    pads = node.ints('pads') ?? node.fail('pads is required');
    value = node.float('value', 0);
  } else {
    pads = node.constInts(1, 'pads') ?? node.fail('pads is required');
    const valueInput = node.optional(2);
    if (valueInput?.kind === 'tensor' && mode === 'constant') runtimeValue = valueInput;
    else if (valueInput !== undefined) value = elementAt(node.constInput(2, 'constant_value'), 0);
    const axes = node.constInts(3, 'axes');
    if (axes !== undefined) {
      const full = new Array<number>(2 * rank).fill(0);
      axes.forEach((a, i) => {
        const axis = normalizeAxis(a, rank);
        full[axis] = pads[i]!;
        full[axis + rank] = pads[i + axes.length]!;
      });
      pads = full;
    }
  }
  // Negative pads crop first.
  for (let d = 0; d < rank; d++) {
    const cropBegin = Math.max(0, -pads[d]!);
    const cropEnd = Math.max(0, -pads[d + rank]!);
    if (cropBegin > 0 || cropEnd > 0) x = slice(ctx, x, d, cropBegin, shapeOf(x)[d]! - cropEnd);
  }
  pads = pads.map((p) => Math.max(p, 0));
  if (mode === 'constant' && runtimeValue !== undefined) {
    // The pad value is only known at run time: pad with 0 and add value * (1 where padded).
    const zeros = ctx.constant(dtypeOf(x), shapeOf(x), new Array<number>(numel(shapeOf(x))).fill(0));
    const mask = constantPad(ctx, zeros, pads, 1);
    return [arith(ctx, node, 'add', constantPad(ctx, x, pads, 0), arith(ctx, node, 'mul', mask, reshape(ctx, runtimeValue, [])))];
  }
  if (mode === 'constant') return [constantPad(ctx, x, pads, value)];
  for (let d = 0; d < rank; d++) {
    const before = pads[d]!;
    const after = pads[d + rank]!;
    if (before === 0 && after === 0) continue;
    const size = shapeOf(x)[d]!;
    const positions: number[] = [];
    for (let i = -before; i < size + after; i++) {
      if (mode === 'edge') positions.push(Math.min(Math.max(i, 0), size - 1));
      else if (mode === 'wrap') positions.push(((i % size) + size) % size);
      else if (mode === 'reflect') {
        if (size === 1) {
          positions.push(0);
          continue;
        }
        const period = 2 * (size - 1);
        const m = ((i % period) + period) % period;
        positions.push(m < size ? m : period - m);
      } else node.fail(`mode '${mode}' is not supported`);
    }
    x = indexSelect(ctx, x, d, positions);
  }
  return [x];
}

export function sliceOp(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  let x = node.input(0);
  const shape = shapeOf(x);
  let starts: number[];
  let ends: number[];
  let axes: number[] | undefined;
  let steps: number[] | undefined;
  if (node.opset < 10) {
    starts = node.ints('starts') ?? node.fail('starts is required');
    ends = node.ints('ends') ?? node.fail('ends is required');
    axes = node.ints('axes');
  } else {
    starts = node.constInts(1, 'starts')!;
    ends = node.constInts(2, 'ends')!;
    axes = node.constInts(3, 'axes');
    steps = node.constInts(4, 'steps');
  }
  axes = (axes ?? starts.map((_, i) => i)).map((a) => normalizeAxis(a, shape.length));
  axes.forEach((axis, i) => {
    const size = shape[axis]!;
    const step = steps?.[i] ?? 1;
    let start = starts[i]!;
    let end = ends[i]!;
    if (start < 0) start += size;
    if (end < 0) end += size;
    if (step > 0) {
      start = Math.min(Math.max(start, 0), size);
      end = Math.min(Math.max(end, 0), size);
      x = slice(ctx, x, axis, start, Math.max(start, end), step);
    } else {
      start = Math.min(Math.max(start, 0), size - 1);
      end = Math.min(Math.max(end, -1), size - 1);
      const positions: number[] = [];
      for (let p = start; p > end; p += step) positions.push(p);
      x = indexSelect(ctx, x, axis, positions);
    }
  });
  return [x];
}

export function gather(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const data = node.input(0);
  const indices = node.input(1);
  const shape = shapeOf(data);
  const axis = normalizeAxis(node.int('axis', 0), shape.length);
  const indexShape = shapeOf(indices);
  const outShape = [...shape.slice(0, axis), ...indexShape, ...shape.slice(axis + 1)];
  if (indices.kind === 'const') {
    const positions = toNumbers(indices.tensor).map((i) => (i < 0 ? i + shape[axis]! : i));
    if (indexShape.length === 0) {
      if (data.kind === 'const') return [reshape(ctx, slice(ctx, data, axis, positions[0]!, positions[0]! + 1), outShape)];
      return [ctx.emit('aten::select_copy.int_out', [ctx.tensor(data), { int: axis }, { int: positions[0]! }], dtypeOf(data), outShape)];
    }
    return [reshape(ctx, indexSelect(ctx, data, axis, positions), outShape)];
  }
  const flatIndex = reshape(ctx, indices, [numel(indexShape)]);
  const selectedShape = [...shape];
  selectedShape[axis] = numel(indexShape);
  const selected = ctx.emit(
    'aten::index_select.out',
    [ctx.tensor(data), { int: axis }, ctx.tensor(flatIndex)],
    dtypeOf(data),
    selectedShape,
  );
  return [reshape(ctx, selected, outShape)];
}

export function concat(node: NodeView): OnnxValue[] {
  const parts = node.inputs.filter((v): v is OnnxValue => v !== undefined);
  const rank = shapeOf(parts[0]!).length;
  const axis = normalizeAxis(node.int('axis', 0), rank);
  return [cat(node.ctx, parts, axis)];
}

export function split(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const shape = shapeOf(x);
  const axis = normalizeAxis(node.int('axis', 0), shape.length);
  const count = node.node.outputs.length;
  let sizes = node.opset >= 13 ? node.constInts(1, 'split') : node.ints('split');
  if (sizes === undefined) {
    const numOutputs = node.opset >= 18 ? node.int('num_outputs', count) : count;
    const chunk = Math.ceil(shape[axis]! / numOutputs);
    sizes = Array.from({ length: numOutputs }, (_, i) => Math.min(chunk, shape[axis]! - i * chunk));
  }
  let start = 0;
  return sizes.map((size) => {
    const part = slice(ctx, x, axis, start, start + size);
    start += size;
    return part;
  });
}
