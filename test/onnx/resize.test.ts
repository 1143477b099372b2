// ONNX Resize, Upsample and ConvTranspose against onnxruntime: every mode on
// both the XNNPACK delegate and portable kernels, and which of them the
// delegate takes whole (no portable kernel left).
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { EtnaError } from '../../lib/errors.js';
import { Module, Tensor } from '../../lib/index.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { writeOnnxModel, type OnnxAttributeValue, type OnnxGraphInitializer } from '../../lib/tools/onnx-emitter/graph-writer.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { relativeDifference } from '../../lib/tools/bench/onnx-graphs.js';

const IN_SHAPE = [1, 3, 5, 7];

function seeded(count: number, seed: number, low = -1, high = 1): Float32Array {
  const next = seededUniform(seed);
  return Float32Array.from({ length: count }, () => next(low, high));
}

async function compare(
  model: Uint8Array,
  inShape: readonly number[],
  options: { xnnpack: boolean },
): Promise<{ error: number; calls: { delegate: number; kernel: number }; shape: readonly number[] }> {
  const data = seeded(
    inShape.reduce((a, b) => a * b, 1),
    5,
  );
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const expected = (await session.run({ x: new ort.Tensor('float32', data, [...inShape]) })).y!;
  await session.release();
  const imported = importOnnx(model, options);
  const module = await Module.load(imported.bytes);
  const actual = (await module.run('forward', { x: Tensor.float32([...inShape], data) })).y!;
  await module.dispose();
  expect(actual.shape).toEqual([...expected.dims]);
  return {
    error: relativeDifference(actual.toArray() as number[], expected.data as Float32Array),
    calls: imported.calls,
    shape: expected.dims,
  };
}

interface ResizeCase {
  name: string;
  opset: number;
  attributes: Record<string, OnnxAttributeValue>;
  scales?: number[];
  sizes?: number[];
  /** Whether the resize runs inside the delegate (no portable kernel). */
  delegated: boolean;
}

/** x -> Relu -> Resize -> Relu: the Relus give the delegate something to run around the resize. */
function resizeModel(c: ResizeCase): Uint8Array {
  const initializers: OnnxGraphInitializer[] = [];
  const inputs = ['r'];
  if (c.opset >= 11) {
    initializers.push({ name: 'roi', dims: [0], float32: new Float32Array(0) });
    inputs.push('roi');
  }
  if (c.scales !== undefined) {
    initializers.push({ name: 'scales', dims: [c.scales.length], float32: Float32Array.from(c.scales) });
    inputs.push('scales');
  } else {
    inputs.push('');
  }
  if (c.sizes !== undefined) {
    initializers.push({ name: 'sizes', dims: [c.sizes.length], int64: c.sizes });
    inputs.push('sizes');
  }
  return writeOnnxModel(
    {
      nodes: [
        { op: 'Relu', inputs: ['x'], outputs: ['r'] },
        { op: 'Resize', inputs, outputs: ['z'], attributes: c.attributes },
        { op: 'Sigmoid', inputs: ['z'], outputs: ['y'] },
      ],
      inputs: [{ name: 'x', shape: IN_SHAPE }],
      outputs: [{ name: 'y' }],
      initializers,
    },
    c.opset,
  );
}

const s = (value: string): OnnxAttributeValue => ({ string: value });

const RESIZE_CASES: ResizeCase[] = [
  {
    name: 'nearest x2, default modes (half_pixel, round_prefer_floor)',
    opset: 13,
    attributes: { mode: s('nearest') },
    scales: [1, 1, 2, 2],
    delegated: true,
  },
  {
    name: 'nearest x2 x3, asymmetric floor (paddle2onnx)',
    opset: 11,
    attributes: { mode: s('nearest'), coordinate_transformation_mode: s('asymmetric'), nearest_mode: s('floor') },
    scales: [1, 1, 2, 3],
    delegated: true,
  },
  {
    name: 'nearest x3, asymmetric round_prefer_ceil',
    opset: 13,
    attributes: { mode: s('nearest'), coordinate_transformation_mode: s('asymmetric'), nearest_mode: s('round_prefer_ceil') },
    scales: [1, 1, 3, 3],
    delegated: false,
  },
  {
    name: 'nearest to 9x11, align_corners',
    opset: 13,
    attributes: { mode: s('nearest'), coordinate_transformation_mode: s('align_corners') },
    sizes: [1, 3, 9, 11],
    delegated: true,
  },
  {
    name: 'nearest down to 3x4, half_pixel ceil',
    opset: 13,
    attributes: { mode: s('nearest'), nearest_mode: s('ceil') },
    sizes: [1, 3, 3, 4],
    delegated: true,
  },
  {
    name: 'nearest x1.5, pytorch_half_pixel round_prefer_floor',
    opset: 19,
    attributes: { mode: s('nearest'), coordinate_transformation_mode: s('pytorch_half_pixel') },
    scales: [1, 1, 1.5, 1.5],
    delegated: false,
  },
  { name: 'nearest x2, opset 10', opset: 10, attributes: { mode: s('nearest') }, scales: [1, 1, 2, 2], delegated: true },
  { name: 'nearest down x0.6, opset 10', opset: 10, attributes: { mode: s('nearest') }, scales: [1, 1, 0.6, 0.6], delegated: true },
  { name: 'linear x2, half_pixel', opset: 13, attributes: { mode: s('linear') }, scales: [1, 1, 2, 2], delegated: true },
  {
    name: 'linear to 8x12, pytorch_half_pixel',
    opset: 13,
    attributes: { mode: s('linear'), coordinate_transformation_mode: s('pytorch_half_pixel') },
    sizes: [1, 3, 8, 12],
    delegated: true,
  },
  {
    name: 'linear to 9x13, align_corners',
    opset: 13,
    attributes: { mode: s('linear'), coordinate_transformation_mode: s('align_corners') },
    sizes: [1, 3, 9, 13],
    delegated: true,
  },
  {
    name: 'linear to 1x13, align_corners (one row reads row 0)',
    opset: 13,
    attributes: { mode: s('linear'), coordinate_transformation_mode: s('align_corners') },
    sizes: [1, 3, 1, 13],
    delegated: true,
  },
  { name: 'linear down to 3x4, half_pixel', opset: 18, attributes: { mode: s('linear') }, sizes: [1, 3, 3, 4], delegated: true },
  {
    name: 'linear x2, asymmetric',
    opset: 13,
    attributes: { mode: s('linear'), coordinate_transformation_mode: s('asymmetric') },
    scales: [1, 1, 2, 2],
    delegated: false,
  },
  {
    name: 'linear to 1x14, pytorch_half_pixel (a single row reads row 0)',
    opset: 13,
    attributes: { mode: s('linear'), coordinate_transformation_mode: s('pytorch_half_pixel') },
    sizes: [1, 3, 1, 14],
    delegated: false,
  },
  {
    name: 'linear x1.5, half_pixel (scale is not out/in)',
    opset: 13,
    attributes: { mode: s('linear') },
    scales: [1, 1, 1.5, 1.5],
    delegated: true,
  },
  { name: 'linear x2, opset 10 (asymmetric)', opset: 10, attributes: { mode: s('linear') }, scales: [1, 1, 2, 2], delegated: false },
  {
    name: 'linear sizes over axes [2, 3], opset 18',
    opset: 18,
    attributes: { mode: s('linear'), axes: { ints: [2, 3] } },
    sizes: [10, 14],
    delegated: true,
  },
];

describe('ONNX Resize', () => {
  for (const c of RESIZE_CASES) {
    it(`${c.name} matches onnxruntime on XNNPACK and portable kernels`, async () => {
      const model = resizeModel(c);
      const lowered = await compare(model, IN_SHAPE, { xnnpack: true });
      expect(lowered.error).toBeLessThan(1e-5);
      if (c.delegated) expect(lowered.calls).toEqual({ delegate: 1, kernel: 0 });
      else expect(lowered.calls.kernel).toBeGreaterThan(0);
      const portable = await compare(model, IN_SHAPE, { xnnpack: false });
      expect(portable.error).toBeLessThan(1e-5);
      expect(portable.calls.delegate).toBe(0);
    });
  }

  it('Upsample (opset 9) imports as nearest with asymmetric coordinates', async () => {
    const model = writeOnnxModel(
      {
        nodes: [{ op: 'Upsample', inputs: ['x', 'scales'], outputs: ['y'], attributes: { mode: s('nearest') } }],
        inputs: [{ name: 'x', shape: IN_SHAPE }],
        outputs: [{ name: 'y' }],
        initializers: [{ name: 'scales', dims: [4], float32: Float32Array.of(1, 1, 2, 3) }],
      },
      9,
    );
    const result = await compare(model, IN_SHAPE, { xnnpack: false });
    expect(result.shape).toEqual([1, 3, 10, 21]);
    expect(result.error).toBe(0);
  });

  it('Upsample (opset 7) reads its scales attribute', async () => {
    const model = writeOnnxModel(
      {
        nodes: [{ op: 'Upsample', inputs: ['x'], outputs: ['y'], attributes: { mode: s('linear'), scales: { floats: [1, 1, 2, 2] } } }],
        inputs: [{ name: 'x', shape: IN_SHAPE }],
        outputs: [{ name: 'y' }],
        initializers: [],
      },
      7,
    );
    const result = await compare(model, IN_SHAPE, { xnnpack: true });
    expect(result.shape).toEqual([1, 3, 10, 14]);
    expect(result.error).toBeLessThan(1e-5);
  });

  it('names the attribute it cannot import', () => {
    const cubic = resizeModel({ name: 'cubic', opset: 13, attributes: { mode: s('cubic') }, scales: [1, 1, 2, 2], delegated: false });
    expect(() => importOnnx(cubic)).toThrow(EtnaError);
    expect(() => importOnnx(cubic)).toThrow(/mode 'cubic' is not supported/);
    const crop = resizeModel({
      name: 'crop',
      opset: 13,
      attributes: { mode: s('linear'), coordinate_transformation_mode: s('tf_crop_and_resize') },
      scales: [1, 1, 2, 2],
      delegated: false,
    });
    expect(() => importOnnx(crop)).toThrow(/coordinate_transformation_mode 'tf_crop_and_resize' is not supported/);
    const channels = resizeModel({
      name: 'channels',
      opset: 13,
      attributes: { mode: s('nearest') },
      scales: [1, 2, 2, 2],
      delegated: false,
    });
    expect(() => importOnnx(channels)).toThrow(/resizing the batch or channel dim/);
  });

  it('needs scales or sizes known at import time', () => {
    const model = writeOnnxModel(
      {
        nodes: [{ op: 'Resize', inputs: ['x', '', 'scales'], outputs: ['y'], attributes: { mode: s('nearest') } }],
        inputs: [
          { name: 'x', shape: IN_SHAPE },
          { name: 'scales', shape: [4] },
        ],
        outputs: [{ name: 'y' }],
        initializers: [],
      },
      13,
    );
    expect(() => importOnnx(model)).toThrow(/scales \(input 2, 'scales'\) must be known at import time/);
  });
});

interface DeconvCase {
  name: string;
  inChannels: number;
  outPerGroup: number;
  kernel: [number, number];
  attributes: Record<string, OnnxAttributeValue>;
  batchNorm?: boolean;
}

function convTransposeModel(c: DeconvCase): Uint8Array {
  const groups = c.attributes.group !== undefined && 'int' in c.attributes.group ? c.attributes.group.int : 1;
  const outChannels = c.outPerGroup * groups;
  const initializers: OnnxGraphInitializer[] = [
    {
      name: 'w',
      dims: [c.inChannels, c.outPerGroup, ...c.kernel],
      float32: seeded(c.inChannels * c.outPerGroup * c.kernel[0] * c.kernel[1], 9),
    },
    { name: 'b', dims: [outChannels], float32: seeded(outChannels, 10) },
  ];
  const nodes = [{ op: 'ConvTranspose', inputs: ['x', 'w', 'b'], outputs: [c.batchNorm ? 't' : 'y'], attributes: c.attributes }];
  if (c.batchNorm) {
    for (const [name, seed, low, high] of [
      ['g', 11, 0.5, 2],
      ['beta', 12, -1, 1],
      ['m', 13, -1, 1],
      ['v', 14, 0.2, 2],
    ] as const) {
      initializers.push({ name, dims: [outChannels], float32: seeded(outChannels, seed, low, high) });
    }
    nodes.push({ op: 'BatchNormalization', inputs: ['t', 'g', 'beta', 'm', 'v'], outputs: ['y'], attributes: {} });
  }
  return writeOnnxModel({ nodes, inputs: [{ name: 'x', shape: [1, c.inChannels, 6, 5] }], outputs: [{ name: 'y' }], initializers }, 13);
}

const DECONV_CASES: DeconvCase[] = [
  { name: 'kernel 2 stride 2', inChannels: 4, outPerGroup: 3, kernel: [2, 2], attributes: { strides: { ints: [2, 2] } } },
  {
    name: 'kernel 3 stride 2, pads 1, output_padding 1',
    inChannels: 4,
    outPerGroup: 5,
    kernel: [3, 3],
    attributes: { strides: { ints: [2, 2] }, pads: { ints: [1, 1, 1, 1] }, output_padding: { ints: [1, 1] } },
  },
  {
    name: 'groups 2, dilation 2, kernel 3x2',
    inChannels: 4,
    outPerGroup: 3,
    kernel: [3, 2],
    attributes: { group: { int: 2 }, dilations: { ints: [2, 2] }, strides: { ints: [1, 2] } },
  },
  {
    name: 'followed by a folded BatchNormalization',
    inChannels: 4,
    outPerGroup: 2,
    kernel: [2, 2],
    attributes: { strides: { ints: [2, 2] }, group: { int: 2 } },
    batchNorm: true,
  },
];

describe('ONNX ConvTranspose', () => {
  for (const c of DECONV_CASES) {
    it(`${c.name}: one delegate call matching onnxruntime, and the same on portable kernels`, async () => {
      const model = convTransposeModel(c);
      const inShape = [1, c.inChannels, 6, 5];
      const lowered = await compare(model, inShape, { xnnpack: true });
      expect(lowered.calls).toEqual({ delegate: 1, kernel: 0 });
      expect(lowered.error).toBeLessThan(1e-5);
      const portable = await compare(model, inShape, { xnnpack: false });
      expect(portable.error).toBeLessThan(1e-5);
      if (c.batchNorm) expect(importOnnx(model).nodes.folded).toBe(1);
    });
  }

  it('asymmetric pads keep the portable lowering', async () => {
    const model = convTransposeModel({
      name: 'asym',
      inChannels: 2,
      outPerGroup: 2,
      kernel: [3, 3],
      attributes: { strides: { ints: [2, 2] }, pads: { ints: [0, 1, 1, 0] } },
    });
    const result = await compare(model, [1, 2, 6, 5], { xnnpack: true });
    expect(result.error).toBeLessThan(1e-5);
  });
});
