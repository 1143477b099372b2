// MaxPool and AveragePool (as one kernel when it fits, else as windows
// gathered with import-time indices), and the global pools.
import { numel } from '../../shape.js';
import { dtypeOf, shapeOf } from '../context.js';
import { arith, constantPad, indexSelect, LOWEST_FLOAT32, reshape, windowPads, type OpHandler } from './common.js';
import { poolKernel } from './pool-kernel.js';
import { reduceKernel } from './reduce.js';

export function pool(kind: 'max' | 'average'): OpHandler {
  return (node) => {
    const { ctx } = node;
    const wantIndices = kind === 'max' && node.node.outputs.length > 1 && node.node.outputs[1] !== '';
    const columnMajor = node.int('storage_order', 0) !== 0;
    const x = node.input(0);
    const shape = shapeOf(x);
    const spatial = shape.length - 2;
    const kernel = node.ints('kernel_shape') ?? node.fail('kernel_shape is required');
    const strides = node.ints('strides') ?? new Array<number>(spatial).fill(1);
    const dilations = node.ints('dilations') ?? new Array<number>(spatial).fill(1);
    const ceil = node.int('ceil_mode', 0) !== 0;
    const includePad = node.int('count_include_pad', 0) !== 0;
    const pads = windowPads(node, shape.slice(2), kernel, strides, dilations);
    // On XNNPACK a 2-D pool is one delegate node where the delegate can run it
    // (a max in either mode; an average in floor mode with padding left out of
    // it); a graph imported for a range of sizes needs the kernels' run-time
    // windows whatever the backend.
    const delegable = ctx.xnnpack && (kind === 'max' || (!ceil && !(includePad && pads.some((p) => p !== 0))));
    if ((delegable || ctx.followsInputSize) && !wantIndices && !columnMajor) {
      const pooled = poolKernel(ctx, kind, x, { kernel, strides, dilations, pads, ceil, includePad });
      if (pooled !== undefined) return [pooled];
    }
    const inSpatial = shape.slice(2);
    const outSpatial: number[] = [];
    const padEnds: number[] = [];
    for (let i = 0; i < spatial; i++) {
      const extent = inSpatial[i]! + pads[i]! + pads[i + spatial]!;
      const span = dilations[i]! * (kernel[i]! - 1) + 1;
      let out = (ceil ? Math.ceil : Math.floor)((extent - span) / strides[i]!) + 1;
      if (ceil && (out - 1) * strides[i]! >= inSpatial[i]! + pads[i]!) out--;
      outSpatial.push(out);
      padEnds.push(Math.max(pads[i + spatial]!, (out - 1) * strides[i]! + span - inSpatial[i]! - pads[i]!));
    }
    const padded = constantPad(ctx, x, [...pads.slice(0, spatial), ...padEnds], kind === 'max' ? LOWEST_FLOAT32 : 0);
    const paddedSpatial = shapeOf(padded).slice(2);
    const windowCount = numel(kernel);
    const outCount = numel(outSpatial);
    const indices: number[] = [];
    const sourcePositions: number[] = [];
    const divisors: number[] = [];
    const outIndex = new Array<number>(spatial).fill(0);
    for (let o = 0; o < outCount; o++) {
      const kIndex = new Array<number>(spatial).fill(0);
      let count = 0;
      for (let k = 0; k < windowCount; k++) {
        let flat = 0;
        let inside = true;
        let insidePads = true;
        for (let d = 0; d < spatial; d++) {
          const p = outIndex[d]! * strides[d]! + kIndex[d]! * dilations[d]!;
          flat = flat * paddedSpatial[d]! + p;
          const original = p - pads[d]!;
          if (original < 0 || original >= inSpatial[d]!) inside = false;
          if (p >= inSpatial[d]! + pads[d]! + pads[d + spatial]!) insidePads = false;
        }
        indices.push(flat);
        let source = 0;
        if (columnMajor)
          for (let d = spatial - 1; d >= 0; d--)
            source = source * inSpatial[d]! + (outIndex[d]! * strides[d]! + kIndex[d]! * dilations[d]! - pads[d]!);
        else
          for (let d = 0; d < spatial; d++)
            source = source * inSpatial[d]! + (outIndex[d]! * strides[d]! + kIndex[d]! * dilations[d]! - pads[d]!);
        sourcePositions.push(source);
        if (includePad ? insidePads : inside) count++;
        for (let d = spatial - 1; d >= 0; d--) {
          if (++kIndex[d]! < kernel[d]!) break;
          kIndex[d] = 0;
        }
      }
      divisors.push(count);
      for (let d = spatial - 1; d >= 0; d--) {
        if (++outIndex[d]! < outSpatial[d]!) break;
        outIndex[d] = 0;
      }
    }
    const [n, c] = shape as [number, number];
    const flat = reshape(ctx, padded, [n, c, numel(paddedSpatial)]);
    const windows = reshape(ctx, indexSelect(ctx, flat, 2, indices), [n, c, outCount, windowCount]);
    if (kind === 'max') {
      const values = reshape(ctx, reduceKernel(ctx, 'amax', windows, [3], false), [n, c, ...outSpatial]);
      if (!wantIndices) return [values];
      // Indices are flat over the whole input tensor: window position -> input position, plus (n*C + c)*plane.
      const which = ctx.emit('aten::argmax.out', [ctx.tensor(windows), { int: 3 }, { bool: false }], 'int64', [n, c, outCount]);
      const rowStart = ctx.constant(
        'int64',
        [outCount],
        Array.from({ length: outCount }, (_, o) => o * windowCount),
      );
      const tablePosition = reshape(ctx, arith(ctx, node, 'add', which, rowStart), [n * c * outCount]);
      const table = ctx.tensor(ctx.constant('int64', [sourcePositions.length], sourcePositions));
      const picked = ctx.emit('aten::index_select.out', [table, { int: 0 }, ctx.tensor(tablePosition)], 'int64', [n * c * outCount]);
      const plane = numel(inSpatial);
      const planeStart = ctx.constant(
        'int64',
        [n, c, 1],
        Array.from({ length: n * c }, (_, i) => i * plane),
      );
      const flatIndex = arith(ctx, node, 'add', reshape(ctx, picked, [n, c, outCount]), planeStart);
      return [values, reshape(ctx, flatIndex, [n, c, ...outSpatial])];
    }
    const sums = reduceKernel(ctx, 'sum', windows, [3], false);
    const divided = arith(ctx, node, 'div', sums, ctx.constant(dtypeOf(x), [outCount], divisors));
    return [reshape(ctx, divided, [n, c, ...outSpatial])];
  };
}

/** GlobalAveragePool and GlobalMaxPool: a mean or max over every spatial dim, kept as size 1. */
export function globalPool(kind: 'mean' | 'amax'): OpHandler {
  return (node) => {
    const x = node.input(0);
    return [
      reduceKernel(
        node.ctx,
        kind,
        x,
        shapeOf(x)
          .slice(2)
          .map((_, i) => i + 2),
        true,
      ),
    ];
  };
}
