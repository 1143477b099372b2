// Operators that pick, join or pad along axes: Slice, Gather, GatherND,
// Concat, Split and Pad.
import { numel } from '../../shape.js';
import { elementAt, toNumbers } from '../constant.js';
import { dtypeOf, shapeOf, type NodeView, type OnnxValue } from '../context.js';
import { normalizeAxis } from '../fold.js';
import { arith, cat, compare, constantPad, indexSelect, reshape, slice, where } from './common.js';
import { reduceKernel } from './reduce.js';

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

/**
 * GatherND (batch_dims 0 and more): each index row [i_0 .. i_m-1] picks
 * data[b.., i_0, .., i_m-1, ...]. The rows become positions in data viewed
 * with its batch and indexed dims flattened (a negative index counts from its
 * dim's end, as ONNX allows), and one index_select gathers them.
 */
export function gatherNd(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const data = node.input(0);
  const indices = node.input(1);
  const shape = shapeOf(data);
  const indexShape = shapeOf(indices);
  const batch = node.int('batch_dims', 0);
  if (dtypeOf(indices) !== 'int64') node.invalid(`indices are ${dtypeOf(indices)}, not int64`);
  const m = indexShape.at(-1);
  if (indexShape.length === 0 || m === undefined) node.invalid('indices is a scalar; GatherND needs index rows');
  if (!Number.isInteger(batch) || batch < 0 || batch >= Math.min(shape.length, indexShape.length)) {
    node.invalid(`batch_dims ${batch} is outside [0, ${Math.min(shape.length, indexShape.length) - 1}]`);
  }
  if (batch + m > shape.length) node.invalid(`index rows of ${m} with batch_dims ${batch} exceed data of rank ${shape.length}`);
  if (shape.slice(0, batch).some((d, i) => d !== indexShape[i])) node.invalid('the batch dims of data and indices differ');
  const indexed = shape.slice(batch, batch + m);
  const rows = numel(indexShape.slice(0, -1));
  const perBatch = rows / Math.max(1, numel(shape.slice(0, batch)));
  // Strides of the flattened (batch, indexed) dims: a batch's rows start at batch * numel(indexed).
  const strides = indexed.map((_, j) => numel(indexed.slice(j + 1)));
  const flatRows = reshape(ctx, indices, [rows, m]);
  const wrapped = where(
    ctx,
    node,
    compare(ctx, node, 'lt', flatRows, ctx.constant('int64', [], [0])),
    arith(ctx, node, 'add', flatRows, ctx.constant('int64', [m], indexed)),
    flatRows,
  );
  // An index outside its dim adds the whole flattened size, so that index_select refuses the row
  // rather than pick another element.
  const total = ctx.constant('int64', [], [numel(shape.slice(0, batch + m))]);
  const outside = (x: OnnxValue): OnnxValue =>
    where(ctx, node, compare(ctx, node, 'ge', wrapped, ctx.constant('int64', [m], indexed)), total, x);
  const terms = where(
    ctx,
    node,
    compare(ctx, node, 'lt', wrapped, ctx.constant('int64', [], [0])),
    total,
    outside(arith(ctx, node, 'mul', wrapped, ctx.constant('int64', [m], strides))),
  );
  let position = reduceKernel(ctx, 'sum', terms, [1], false);
  if (batch > 0) {
    const offsets = Array.from({ length: rows }, (_, r) => Math.floor(r / perBatch) * numel(indexed));
    position = arith(ctx, node, 'add', position, ctx.constant('int64', [rows], offsets));
  }
  const rest = shape.slice(batch + m);
  const flatData = reshape(ctx, data, [numel(shape.slice(0, batch + m)), ...rest]);
  const picked = ctx.emit('aten::index_select.out', [ctx.tensor(flatData), { int: 0 }, ctx.tensor(position)], dtypeOf(data), [
    rows,
    ...rest,
  ]);
  return [reshape(ctx, picked, [...indexShape.slice(0, -1), ...rest])];
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
