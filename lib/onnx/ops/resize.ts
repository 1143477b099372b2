// ONNX Resize (opsets 10 to 19) and Upsample over the two spatial dims of an
// NCHW tensor. Each output coordinate maps to an input coordinate the way
// ONNX Runtime computes it (float32 arithmetic). Where that map is what a
// PyTorch upsample kernel computes, the node becomes that kernel (which the
// XNNPACK delegate runs: bilinear as its resize node, whole-factor nearest as
// a broadcast copy); any other map is lowered exactly with index_select
// gathers (and, for linear, a weighted sum of the two gathered neighbours).
import { toNumbers } from '../constant.js';
import { dtypeOf, shapeOf, type NodeView, type OnnxValue } from '../context.js';
import { arith, indexSelect } from './common.js';

type CoordinateMode = 'half_pixel' | 'pytorch_half_pixel' | 'align_corners' | 'asymmetric' | 'tf_half_pixel_for_nn';
type NearestMode = 'round_prefer_floor' | 'round_prefer_ceil' | 'floor' | 'ceil' | 'opset10';

const COORDINATE_MODES: readonly string[] = ['half_pixel', 'pytorch_half_pixel', 'align_corners', 'asymmetric', 'tf_half_pixel_for_nn'];
const NEAREST_MODES: readonly string[] = ['round_prefer_floor', 'round_prefer_ceil', 'floor', 'ceil'];

const f32 = Math.fround;

/** One spatial dim of the resize: sizes and the scale ONNX Runtime divides by. */
interface Axis {
  readonly inSize: number;
  readonly outSize: number;
  readonly scale: number;
}

/** The input coordinate output coordinate `x` reads, before rounding or clamping. */
function sourceCoordinate(mode: CoordinateMode, x: number, axis: Axis): number {
  const { inSize, outSize, scale } = axis;
  switch (mode) {
    case 'asymmetric':
      return f32(x / scale);
    case 'pytorch_half_pixel':
      return outSize > 1 ? f32(f32(f32(x + 0.5) / scale) - 0.5) : 0;
    case 'tf_half_pixel_for_nn':
      return f32(f32(x + 0.5) / scale);
    case 'align_corners':
      return outSize === 1 ? 0 : f32(f32(x * (inSize - 1)) / (outSize - 1));
    case 'half_pixel':
      return f32(f32(f32(x + 0.5) / scale) - 0.5);
  }
}

function nearestIndex(mode: NearestMode, coordinate: number, downsampling: boolean): number {
  switch (mode) {
    case 'opset10':
      return downsampling ? Math.ceil(coordinate) : Math.trunc(coordinate);
    case 'floor':
      return Math.floor(coordinate);
    case 'ceil':
      return Math.ceil(coordinate);
    case 'round_prefer_ceil':
      return Math.sign(coordinate) * Math.round(Math.abs(coordinate));
    case 'round_prefer_floor':
      return coordinate === Math.trunc(coordinate) + 0.5
        ? Math.floor(coordinate)
        : Math.sign(coordinate) * Math.round(Math.abs(coordinate));
  }
}

const clampIndex = (i: number, size: number): number => Math.min(Math.max(i, 0), size - 1);

function nearestMap(coordinateMode: CoordinateMode, nearestMode: NearestMode, axis: Axis): number[] {
  return Array.from({ length: axis.outSize }, (_, x) =>
    clampIndex(nearestIndex(nearestMode, sourceCoordinate(coordinateMode, x, axis), axis.scale < 1), axis.inSize),
  );
}

/** Two neighbours and their weights per output position, as ONNX Runtime's bilinear kernel reads them. */
interface LinearTaps {
  readonly low: number[];
  readonly high: number[];
  readonly lowWeight: number[];
  readonly highWeight: number[];
}

function linearTaps(coordinateMode: CoordinateMode, axis: Axis): LinearTaps {
  const taps: LinearTaps = { low: [], high: [], lowWeight: [], highWeight: [] };
  for (let x = 0; x < axis.outSize; x++) {
    const c = Math.min(Math.max(sourceCoordinate(coordinateMode, x, axis), 0), axis.inSize - 1);
    const low = Math.min(Math.trunc(c), axis.inSize - 1);
    const high = Math.min(low + 1, axis.inSize - 1);
    const frac = low === high ? 0 : f32(c - low);
    taps.low.push(low);
    taps.high.push(high);
    taps.lowWeight.push(f32(1 - frac));
    taps.highWeight.push(frac);
  }
  return taps;
}

/** PyTorch's nearest map (portable upsample_nearest2d): floor(x * float(in / out)). */
function pytorchNearestMap(axis: Axis): number[] {
  const ratio = f32(1 / (axis.outSize / axis.inSize));
  return Array.from({ length: axis.outSize }, (_, x) => Math.min(Math.floor(f32(x * ratio)), axis.inSize - 1));
}

const sameList = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((v, i) => v === b[i]);

function spatialAxes(node: NodeView, x: OnnxValue): Axis[] {
  const shape = shapeOf(x);
  const rank = shape.length;
  if (rank !== 4) node.fail(`only 4-D (NCHW) inputs are supported, input is ${JSON.stringify(shape)}`);
  // Upsample and Resize-10 take (X, scales); Resize-11 on takes (X, roi, scales, sizes). Upsample before opset 9 has a scales attribute.
  const legacy = node.op === 'Upsample' || node.opset < 11;
  const scalesInput = legacy ? 1 : 2;
  const axesAttr = node.ints('axes');
  const axes = axesAttr === undefined ? shape.map((_, i) => i) : axesAttr.map((a) => (a < 0 ? a + rank : a));
  if (axes.some((a) => a < 0 || a >= rank)) node.fail(`axes ${JSON.stringify(axesAttr)} are out of range for rank ${rank}`);
  const sizes = !legacy && node.optional(3) !== undefined ? toNumbers(node.constInput(3, 'sizes')) : [];
  const scales =
    node.op === 'Upsample' && node.opset < 9
      ? (node.floats('scales') ?? [])
      : node.optional(scalesInput) === undefined
        ? []
        : toNumbers(node.constInput(scalesInput, 'scales'));
  const perDim: { outSize: number; scale: number }[] = shape.map((d) => ({ outSize: d, scale: 1 }));
  if (sizes.length > 0) {
    if (sizes.length !== axes.length) node.fail(`sizes has ${sizes.length} entries for ${axes.length} axes`);
    const policy = node.string('keep_aspect_ratio_policy', 'stretch');
    if (policy !== 'stretch') node.fail(`keep_aspect_ratio_policy '${policy}' is not supported (only stretch)`);
    axes.forEach((a, i) => {
      perDim[a] = { outSize: sizes[i]!, scale: f32(sizes[i]! / shape[a]!) };
    });
  } else if (scales.length > 0) {
    if (scales.length !== axes.length) node.fail(`scales has ${scales.length} entries for ${axes.length} axes`);
    axes.forEach((a, i) => {
      const scale = f32(scales[i]!);
      if (!(scale > 0)) node.fail(`scale ${scale} for axis ${a} must be positive`);
      perDim[a] = { outSize: Math.trunc(f32(scale * shape[a]!)), scale };
    });
  } else {
    node.fail('needs constant scales or sizes');
  }
  if (perDim[0]!.outSize !== shape[0] || perDim[1]!.outSize !== shape[1]) node.fail('resizing the batch or channel dim is not supported');
  if (perDim.some((d) => d.outSize < 1)) node.fail(`output shape ${JSON.stringify(perDim.map((d) => d.outSize))} is empty`);
  return [2, 3].map((d) => ({ inSize: shape[d]!, outSize: perDim[d]!.outSize, scale: perDim[d]!.scale }));
}

/** Resize, and Upsample (its older form). */
export function resize(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const x = node.input(0);
  const mode = node.string('mode', 'nearest');
  if (mode !== 'nearest' && mode !== 'linear') node.fail(`mode '${mode}' is not supported (nearest and linear are)`);
  if (node.int('antialias', 0) !== 0) node.fail('antialias=1 is not supported');
  const legacy = node.op === 'Upsample' || node.opset < 11;
  const coordinateName = legacy ? 'asymmetric' : node.string('coordinate_transformation_mode', 'half_pixel');
  if (!COORDINATE_MODES.includes(coordinateName)) node.fail(`coordinate_transformation_mode '${coordinateName}' is not supported`);
  const coordinateMode = coordinateName as CoordinateMode;
  const nearestName = legacy ? 'opset10' : node.string('nearest_mode', 'round_prefer_floor');
  if (!legacy && !NEAREST_MODES.includes(nearestName)) node.fail(`nearest_mode '${nearestName}' is not supported`);
  const axes = spatialAxes(node, x);
  const [outH, outW] = [axes[0]!.outSize, axes[1]!.outSize];
  const outShape = [...shapeOf(x).slice(0, 2), outH, outW];
  if (axes.every((a) => a.outSize === a.inSize && a.scale === 1)) return [x];

  if (mode === 'nearest') {
    const maps = axes.map((axis) => nearestMap(coordinateMode, nearestName as NearestMode, axis));
    if (maps.every((map, i) => sameList(map, pytorchNearestMap(axes[i]!)))) {
      return [ctx.emit('aten::upsample_nearest2d.vec_out', [ctx.tensor(x), { intList: [outH, outW] }, null], dtypeOf(x), outShape)];
    }
    return [indexSelect(ctx, indexSelect(ctx, x, 2, maps[0]!), 3, maps[1]!)];
  }

  // PyTorch's bilinear grid: half-pixel centres at scale out/in clamped at 0, or aligned corners.
  const halfPixel = axes.every((a) => {
    const centres = coordinateMode === 'half_pixel' || (coordinateMode === 'pytorch_half_pixel' && a.outSize > 1);
    return centres && a.scale === f32(a.outSize / a.inSize);
  });
  const alignCorners = coordinateMode === 'align_corners';
  if (halfPixel || alignCorners) {
    return [
      ctx.emit(
        'aten::upsample_bilinear2d.vec_out',
        [ctx.tensor(x), { intList: [outH, outW] }, { bool: alignCorners }, null],
        dtypeOf(x),
        outShape,
      ),
    ];
  }
  let y = x;
  axes.forEach((axis, i) => {
    const dim = i + 2;
    const taps = linearTaps(coordinateMode, axis);
    if (axis.inSize === axis.outSize && taps.low.every((v, k) => v === k && taps.highWeight[k] === 0)) return;
    const weightShape = [1, 1, 1, 1];
    weightShape[dim] = axis.outSize;
    const low = arith(ctx, node, 'mul', indexSelect(ctx, y, dim, taps.low), ctx.constant(dtypeOf(x), weightShape, taps.lowWeight));
    const high = arith(ctx, node, 'mul', indexSelect(ctx, y, dim, taps.high), ctx.constant(dtypeOf(x), weightShape, taps.highWeight));
    y = arith(ctx, node, 'add', low, high);
  });
  return [y];
}
