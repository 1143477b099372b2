// Conv and ConvTranspose: 1-D and 2-D, with ONNX's pads and auto_pad, the
// im2col form ONNX Runtime sums in for short 1-D outputs on the delegate, and
// blocked sums for long dot products on portable kernels.
import type { DType } from '../../dtypes.js';
import { numel } from '../../shape.js';
import { dtypeOf, shapeOf, type ImportContext, type NodeView, type OnnxValue } from '../context.js';
import { arith, cat, constantPad, indexSelect, permute, reshape, slice, windowPads } from './common.js';
import { BLOCK_TERMS, pairwiseSum, toDelegate, widened } from './matmul.js';

/** What Conv and ConvTranspose read alike: inputs, shapes and window attributes with ONNX's defaults. */
export function convSetup(node: NodeView, what: string) {
  const x = node.input(0);
  const w = node.input(1);
  const xShape = shapeOf(x);
  const wShape = shapeOf(w);
  const spatial = xShape.length - 2;
  if (spatial < 1 || spatial > 2) node.fail(`only 1-D and 2-D ${what} are supported, input is ${JSON.stringify(xShape)}`);
  return {
    x,
    w,
    bias: node.optional(2),
    xShape,
    wShape,
    spatial,
    groups: node.int('group', 1),
    kernel: node.ints('kernel_shape') ?? wShape.slice(2),
    strides: node.ints('strides') ?? new Array<number>(spatial).fill(1),
    dilations: node.ints('dilations') ?? new Array<number>(spatial).fill(1),
  };
}

/** aten::convolution's window: per spatial dim; `outputPadding` makes it transposed. */
export interface ConvolutionWindow {
  strides: readonly number[];
  padding: readonly number[];
  dilations: readonly number[];
  outputPadding?: readonly number[];
  groups: number;
}

/** One `aten::convolution.out` of x by w (+ bias), in `dtype`, into `outShape`. */
export function convolution(
  ctx: ImportContext,
  x: OnnxValue,
  w: OnnxValue,
  bias: OnnxValue | undefined,
  window: ConvolutionWindow,
  dtype: DType,
  outShape: readonly number[],
): OnnxValue {
  const spatial = window.strides.length;
  return ctx.emit(
    'aten::convolution.out',
    [
      ctx.tensor(x),
      ctx.tensor(w),
      bias === undefined ? null : ctx.tensor(bias),
      { intList: [...window.strides] },
      { intList: [...window.padding] },
      { intList: [...window.dilations] },
      { bool: window.outputPadding !== undefined },
      { intList: window.outputPadding === undefined ? new Array<number>(spatial).fill(0) : [...window.outputPadding] },
      { int: window.groups },
    ],
    dtype,
    [...outShape],
  );
}

export function conv(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const { w, bias, xShape, wShape, spatial, kernel, strides, dilations, groups, ...setup } = convSetup(node, 'convolutions');
  let { x } = setup;
  let pads = windowPads(node, xShape.slice(2), kernel, strides, dilations);
  const symmetric = pads.slice(0, spatial).every((p, i) => p === pads[i + spatial]);
  if (!symmetric) {
    x = constantPad(ctx, x, pads, 0);
    pads = new Array<number>(2 * spatial).fill(0);
  }
  const inShape = shapeOf(x);
  const outShape = [inShape[0]!, wShape[0]!];
  for (let i = 0; i < spatial; i++) {
    outShape.push(Math.floor((inShape[i + 2]! + 2 * pads[i]! - dilations[i]! * (kernel[i]! - 1) - 1) / strides[i]!) + 1);
  }
  const inPerGroup = wShape[1]!;
  const wideConv = widened(ctx, [x, w, bias], ([wx, ww, wb]) =>
    convolution(ctx, wx!, ww!, wb, { strides, padding: pads.slice(0, spatial), dilations, groups }, 'float64', outShape),
  );
  if (wideConv !== undefined) return [wideConv];
  if (toDelegate(ctx, x, w, bias)) {
    if (spatial === 1 && groups === 1 && dilations[0] === 1 && outShape[2]! <= IM2COL_MAX_POSITIONS) {
      return [im2colConv1d(ctx, node, constantPad(ctx, x, pads, 0), w, bias, strides[0]!, outShape)];
    }
    if (spatial === 1) {
      // The delegate takes 2-D convolutions: a 1-D one is the same with H = 1.
      const x4 = reshape(ctx, x, [inShape[0]!, inShape[1]!, 1, inShape[2]!]);
      const w4 = reshape(ctx, w, [wShape[0]!, wShape[1]!, 1, wShape[2]!]);
      const y4 = convolution(
        ctx,
        x4,
        w4,
        bias,
        { strides: [1, strides[0]!], padding: [0, pads[0]!], dilations: [1, dilations[0]!], groups },
        'float32',
        [outShape[0]!, outShape[1]!, 1, outShape[2]!],
      );
      return [reshape(ctx, y4, outShape)];
    }
  }
  if (groups === 1 && numel(kernel) * inPerGroup > BLOCK_TERMS && dilations.every((d) => d === 1) && !toDelegate(ctx, x, w, bias)) {
    return [blockedConv(ctx, node, constantPad(ctx, x, pads, 0), w, bias, strides, kernel, outShape)];
  }
  return [convolution(ctx, x, w, bias, { strides, padding: pads.slice(0, spatial), dilations, groups }, dtypeOf(x), outShape)];
}

// ONNX Runtime computes a 1-D convolution as im2col rows (channel-major,
// tap-minor) times the weights, each sum accumulated in that order from zero,
// with the bias added afterwards. XNNPACK's own convolution sums taps first
// and starts from the bias; in recurrent models (Silero's LSTM state) that
// rounding difference feeds back. For short outputs the importer therefore
// builds the im2col rows from slices and runs the product as a fully
// connected layer, which XNNPACK sums in row order from zero.
const IM2COL_MAX_POSITIONS = 16;

function im2colConv1d(
  ctx: ImportContext,
  node: NodeView,
  x: OnnxValue,
  w: OnnxValue,
  bias: OnnxValue | undefined,
  stride: number,
  outShape: readonly number[],
): OnnxValue {
  const [batch, channels] = shapeOf(x) as [number, number, number];
  const [outChannels, , taps] = shapeOf(w) as [number, number, number];
  const positions = outShape[2]!;
  const terms = channels * taps;
  const rows: OnnxValue[] = [];
  for (let l = 0; l < positions; l++) {
    rows.push(reshape(ctx, slice(ctx, x, 2, l * stride, l * stride + taps), [batch, 1, terms]));
  }
  const columns = reshape(ctx, cat(ctx, rows, 1), [batch * positions, terms]);
  const weight = permute(ctx, reshape(ctx, w, [outChannels, terms]), [1, 0]);
  let y = ctx.emit('aten::mm.out', [ctx.tensor(columns), ctx.tensor(weight)], 'float32', [batch * positions, outChannels]);
  if (bias !== undefined) y = arith(ctx, node, 'add', y, bias);
  if (positions === 1) return reshape(ctx, y, outShape);
  return permute(ctx, reshape(ctx, y, [batch, positions, outChannels]), [0, 2, 1]);
}

function blockedConv(
  ctx: ImportContext,
  node: NodeView,
  x: OnnxValue,
  w: OnnxValue,
  bias: OnnxValue | undefined,
  strides: readonly number[],
  kernel: readonly number[],
  outShape: readonly number[],
): OnnxValue {
  const spatial = kernel.length;
  const channels = shapeOf(w)[1]!;
  const window = numel(kernel);
  const channelBlock = Math.max(1, Math.floor(BLOCK_TERMS / window));
  // Split taps only for 1-D kernels longer than a block.
  const tapBlock = spatial === 1 && window > BLOCK_TERMS ? BLOCK_TERMS : kernel[spatial - 1]!;
  const lastKernel = kernel[spatial - 1]!;
  const outLast = outShape[outShape.length - 1]!;
  const partials: OnnxValue[] = [];
  for (let c = 0; c < channels; c += channelBlock) {
    const cEnd = Math.min(channels, c + channelBlock);
    const wChannels = slice(ctx, w, 1, c, cEnd);
    const xChannels = slice(ctx, x, 1, c, cEnd);
    for (let t = 0; t < lastKernel; t += tapBlock) {
      const tEnd = Math.min(lastKernel, t + tapBlock);
      const wPart = tapBlock === lastKernel ? wChannels : slice(ctx, wChannels, 2 + spatial - 1, t, tEnd);
      const lastDim = 2 + spatial - 1;
      const needed = (outLast - 1) * strides[spatial - 1]! + (tEnd - t);
      const xPart = tapBlock === lastKernel ? xChannels : slice(ctx, xChannels, lastDim, t, t + needed);
      partials.push(
        convolution(
          ctx,
          xPart,
          wPart,
          undefined,
          { strides, padding: new Array<number>(spatial).fill(0), dilations: new Array<number>(spatial).fill(1), groups: 1 },
          dtypeOf(x),
          outShape,
        ),
      );
    }
  }
  const sum = pairwiseSum(ctx, partials);
  if (bias === undefined) return sum;
  return arith(ctx, node, 'add', sum, reshape(ctx, bias, [shapeOf(bias)[0]!, ...new Array<number>(spatial).fill(1)]));
}

export function convTranspose(node: NodeView): OnnxValue[] {
  const { ctx } = node;
  const { bias, xShape, wShape, spatial, kernel, strides, dilations, groups, ...setup } = convSetup(node, 'transposed convolutions');
  let { x, w } = setup;
  const outputPadding = node.ints('output_padding') ?? new Array<number>(spatial).fill(0);
  const outputShape = node.ints('output_shape');
  const autoPad = node.string('auto_pad', 'NOTSET');
  let pads = node.ints('pads') ?? new Array<number>(2 * spatial).fill(0);
  const inputSpatial = xShape.slice(2);
  if (outputShape !== undefined || autoPad === 'SAME_UPPER' || autoPad === 'SAME_LOWER') {
    const target = outputShape !== undefined ? outputShape.slice(-spatial) : inputSpatial.map((d, i) => d * strides[i]!);
    pads = new Array<number>(2 * spatial).fill(0);
    for (let i = 0; i < spatial; i++) {
      const total = strides[i]! * (inputSpatial[i]! - 1) + outputPadding[i]! + ((kernel[i]! - 1) * dilations[i]! + 1) - target[i]!;
      const small = Math.floor(total / 2);
      pads[i] = autoPad === 'SAME_UPPER' ? small : total - small;
      pads[i + spatial] = total - pads[i]!;
    }
  }
  const symmetric = pads.slice(0, spatial).every((p, i) => p === pads[i + spatial]);
  const delegable = outputPadding.every((p, i) => p >= 0 && p < strides[i]!) && pads.every((p) => p >= 0);
  if (spatial === 2 && symmetric && toDelegate(ctx, x, w, bias) && delegable) {
    // The delegate's transposed convolution, with ONNX's geometry:
    // out = (in - 1) * stride - 2 * pad + dilation * (k - 1) + output_padding + 1.
    const outShape = [xShape[0]!, wShape[1]! * groups];
    for (let i = 0; i < spatial; i++) {
      outShape.push((inputSpatial[i]! - 1) * strides[i]! - 2 * pads[i]! + dilations[i]! * (kernel[i]! - 1) + outputPadding[i]! + 1);
    }
    return [
      convolution(ctx, x, w, bias, { strides, padding: pads.slice(0, spatial), dilations, outputPadding, groups }, 'float32', outShape),
    ];
  }
  // Insert stride-1 zeros between input positions, then correlate with the flipped kernel.
  for (let i = 0; i < spatial; i++) {
    const s = strides[i]!;
    if (s === 1) continue;
    const dim = i + 2;
    const shape = shapeOf(x);
    const before = [...shape.slice(0, dim + 1), 1, ...shape.slice(dim + 1)];
    const withAxis = reshape(ctx, x, before);
    const zerosShape = [...before];
    zerosShape[dim + 1] = s - 1;
    const zeros = ctx.constant(dtypeOf(x), zerosShape, new Array<number>(numel(zerosShape)).fill(0));
    const interleaved = cat(ctx, [withAxis, zeros], dim + 1);
    const merged = [...shape];
    merged[dim] = shape[dim]! * s;
    x = slice(ctx, reshape(ctx, interleaved, merged), dim, 0, (shape[dim]! - 1) * s + 1);
  }
  const cin = wShape[0]!;
  const coutPerGroup = wShape[1]!;
  const ks = wShape.slice(2);
  w = reshape(ctx, w, [groups, cin / groups, coutPerGroup, ...ks]);
  w = permute(ctx, w, [0, 2, 1, ...ks.map((_, i) => i + 3)]);
  w = reshape(ctx, w, [groups * coutPerGroup, cin / groups, ...ks]);
  for (let i = 0; i < spatial; i++)
    w = indexSelect(
      ctx,
      w,
      i + 2,
      Array.from({ length: ks[i]! }, (_, k) => ks[i]! - 1 - k),
    );
  const fullPads: number[] = [];
  for (let i = 0; i < spatial; i++) fullPads.push(dilations[i]! * (kernel[i]! - 1) - pads[i]!);
  for (let i = 0; i < spatial; i++) fullPads.push(dilations[i]! * (kernel[i]! - 1) - pads[i + spatial]! + outputPadding[i]!);
  // Negative pads crop.
  for (let i = 0; i < spatial; i++) {
    const dim = i + 2;
    const size = shapeOf(x)[dim]!;
    const cropBegin = Math.max(0, -fullPads[i]!);
    const cropEnd = Math.max(0, -fullPads[i + spatial]!);
    if (cropBegin > 0 || cropEnd > 0) x = slice(ctx, x, dim, cropBegin, size - cropEnd);
  }
  x = constantPad(
    ctx,
    x,
    fullPads.map((p) => Math.max(p, 0)),
    0,
  );
  const inShape = shapeOf(x);
  const outShape = [inShape[0]!, groups * coutPerGroup];
  for (let i = 0; i < spatial; i++) outShape.push(inShape[i + 2]! - dilations[i]! * (kernel[i]! - 1));
  return [
    convolution(
      ctx,
      x,
      w,
      bias,
      { strides: new Array<number>(spatial).fill(1), padding: new Array<number>(spatial).fill(0), dilations, groups },
      dtypeOf(x),
      outShape,
    ),
  ];
}
