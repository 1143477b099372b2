// 2-D pooling as one portable kernel (`avg_pool2d`, `max_pool2d_with_indices`),
// whose windows follow the input's size at run time. The default lowering
// gathers windows with import-time indices, which hold for one size only; a
// graph imported for a range of input sizes uses these kernels instead.
import type { ImportContext, OnnxValue } from '../context.js';
import { dtypeOf, shapeOf } from '../context.js';

export interface PoolWindow {
  readonly kernel: readonly number[];
  readonly strides: readonly number[];
  readonly dilations: readonly number[];
  /** ONNX order: all begins, then all ends. */
  readonly pads: readonly number[];
  readonly ceil: boolean;
  readonly includePad: boolean;
}

/**
 * The pooled value, or undefined when the kernels cannot express the window
 * (not 2-D, asymmetric pads, pads over half the window, a dilated average, a
 * dilated max window over padding only, a dtype other than float32).
 */
export function poolKernel(ctx: ImportContext, kind: 'max' | 'average', x: OnnxValue, window: PoolWindow): OnnxValue | undefined {
  const shape = shapeOf(x);
  const { kernel, strides, dilations, pads, ceil } = window;
  if (shape.length !== 4 || dtypeOf(x) !== 'float32' || kernel.length !== 2) return undefined;
  const padding = [pads[0]!, pads[1]!];
  if (pads[2] !== padding[0] || pads[3] !== padding[1]) return undefined;
  if (padding.some((p, i) => p * 2 > kernel[i]!)) return undefined;
  if (kind === 'average' && dilations.some((d) => d !== 1)) return undefined;
  const outSpatial = [0, 1].map((i) => {
    const span = dilations[i]! * (kernel[i]! - 1) + 1;
    const extent = shape[i + 2]! + 2 * padding[i]!;
    let out = (ceil ? Math.ceil : Math.floor)((extent - span) / strides[i]!) + 1;
    // A last window starting past the input and its leading pad is dropped, as ONNX and PyTorch do.
    if (ceil && (out - 1) * strides[i]! >= shape[i + 2]! + padding[i]!) out--;
    return out;
  });
  if (outSpatial.some((o) => o < 1)) return undefined;
  // A dilated max window that reads only padding gives 0 in the kernel and on XNNPACK; the gathered lowering gives
  // the lowest float, as onnxruntime does.
  const paddingOnly = (i: number): boolean =>
    windowOnlyInPadding(shape[i + 2]!, outSpatial[i]!, kernel[i]!, strides[i]!, padding[i]!, dilations[i]!);
  if (kind === 'max' && [0, 1].some(paddingOnly)) return undefined;
  const outShape = [shape[0]!, shape[1]!, ...outSpatial];
  if (kind === 'average') {
    const args = [
      ctx.tensor(x),
      { intList: kernel },
      { intList: strides },
      { intList: padding },
      { bool: ceil },
      { bool: window.includePad },
      null,
    ];
    return ctx.emit('aten::avg_pool2d.out', args, 'float32', outShape);
  }
  const values = ctx.out('float32', outShape);
  const indices = ctx.out('int64', outShape);
  const g = ctx.m.graph;
  const ints = (list: readonly number[]): number =>
    g.addValue({
      kind: 'intList',
      items: list.map((v) => g.addValue({ kind: 'int', value: BigInt(v) })),
    });
  g.addKernelCall('aten::max_pool2d_with_indices.out', [
    ctx.m.use(ctx.tensor(x)).index,
    ints(kernel),
    ints(strides),
    ints(padding),
    ints(dilations),
    g.addValue({ kind: 'bool', value: ceil }),
    values.index,
    indices.index,
    g.addValue({ kind: 'tensorList', items: [values.index, indices.index] }),
  ]);
  return { kind: 'tensor', tensor: values, dtype: 'float32', shape: outShape };
}

/** Whether some output position's window (along one dim) has every tap in the padding. */
function windowOnlyInPadding(input: number, output: number, kernel: number, stride: number, pad: number, dilation: number): boolean {
  for (let o = 0; o < output; o++) {
    let inside = false;
    for (let t = 0; t < kernel && !inside; t++) {
      const at = o * stride - pad + t * dilation;
      inside = at >= 0 && at < input;
    }
    if (!inside) return true;
  }
  return false;
}
