// Static quantization: QuantizeLinear and DequantizeLinear alone and as the
// Q -> DQ pairs onnxruntime's quantize_static writes, per tensor and per axis,
// uint8 and int8 (int32 for dequantized biases), compared bit for bit with
// onnxruntime on portable kernels and on the XNNPACK delegate: rounding ties,
// a division where a product with the reciprocal rounds differently,
// saturation, infinities and NaN. Blocked quantization and the types etna has
// no dtype for are refused naming the node.
import { describe, expect, it } from 'vitest';

import { EtnaError } from '../../lib/errors.js';
import { ONNX_DTYPE_CODES } from '../../lib/onnx/dtype.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { type Feeds, runEtna, runOrt } from './engines.js';
import { onnxModel, type TestGraph, type TestInitializer } from './onnx-writer.js';

const { float32: FLOAT, uint8: UINT8, int8: INT8, uint16: UINT16, int32: INT32 } = ONNX_DTYPE_CODES;
// Element types etna has no dtype for, so they are not in the table.
const FLOAT8E4M3FN = 17;
const INT4 = 22;

/** Bit for bit: the same numbers, NaN for NaN, -0 for -0. */
function expectSame(actual: readonly number[], expected: readonly number[], what: string): void {
  expect(actual.length, what).toBe(expected.length);
  expected.forEach((e, i) => expect(Object.is(actual[i], e), `${what}[${i}]: ${actual[i]} vs ${e}`).toBe(true));
}

const PATHS = [
  { name: 'portable kernels', xnnpack: false },
  { name: 'XNNPACK', xnnpack: true },
] as const;

async function expectAsOnnxruntime(model: Uint8Array, feeds: Feeds, outputs: readonly string[]): Promise<void> {
  const expected = await runOrt(model, feeds);
  for (const path of PATHS) {
    const etna = await runEtna(model, feeds, path.xnnpack);
    for (const name of outputs) expectSame(etna[name]!, expected[name]!, `${name} (${path.name})`);
  }
}

const f32 = Math.fround;

/** The float32 `steps` representable values above `x` (below for negative steps). */
function nextFloat32(x: number, steps: number): number {
  const bits = new Int32Array(new Float32Array([x]).buffer);
  bits[0]! += x >= 0 ? steps : -steps;
  return new Float32Array(bits.buffer)[0]!;
}

interface Parameters {
  readonly scale: readonly number[];
  /** Absent: QuantizeLinear's default, a uint8 zero point of 0. */
  readonly zeroPoint?: readonly number[];
  readonly type: 'uint8' | 'int8';
  readonly axis?: number;
}

function parameterInitializers(p: Parameters, prefix: string): TestInitializer[] {
  const dims = p.scale.length === 1 ? [] : [p.scale.length];
  const scale: TestInitializer = { name: `${prefix}_scale`, dims, floats: [...p.scale] };
  if (p.zeroPoint === undefined) return [scale];
  return [scale, { name: `${prefix}_zero_point`, dims, floats: [...p.zeroPoint], int8: p.type }];
}

function parameterInputs(p: Parameters, prefix: string): string[] {
  return p.zeroPoint === undefined ? [`${prefix}_scale`] : [`${prefix}_scale`, `${prefix}_zero_point`];
}

/** x (float32) -> QuantizeLinear -> y, and y -> DequantizeLinear -> z with the same parameters. */
function quantizeGraph(shape: number[], p: Parameters): TestGraph {
  const axis = p.axis === undefined ? {} : { int: { axis: p.axis } };
  const type = p.zeroPoint === undefined || p.type === 'uint8' ? UINT8 : INT8;
  return {
    nodes: [
      { op: 'QuantizeLinear', inputs: ['x', ...parameterInputs(p, 'q')], outputs: ['y'], name: 'quantize', ...axis },
      { op: 'DequantizeLinear', inputs: ['y', ...parameterInputs(p, 'q')], outputs: ['z'], name: 'dequantize', ...axis },
    ],
    inputs: [{ name: 'x', type: FLOAT, shape }],
    outputs: [
      { name: 'y', type },
      { name: 'z', type: FLOAT },
    ],
    initializers: parameterInitializers(p, 'q'),
  };
}

describe('QuantizeLinear and DequantizeLinear per tensor', () => {
  const next = seededUniform(21);
  // x / scale exactly halfway for scale 0.5: ties, which must round to even before the zero point is added.
  const halves = [-2.25, -1.75, -1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 1.75, 2.25, 62.75, 63.25, -63.75, -64.25];
  // For scale 0.1 (not exact in float32): x within 4 ulps of (k + 0.5) * scale, where x / scale and
  // x * (1 / scale) sometimes round to different integers.
  const nearTies = Array.from({ length: 200 }, (_, k) => {
    const base = f32((k - 100 + 0.5) * f32(0.1));
    return Array.from({ length: 9 }, (_, j) => nextFloat32(base, j - 4));
  }).flat();
  const CASES: readonly { name: string; x: readonly number[]; p: Parameters }[] = [
    {
      name: 'uint8, random values',
      x: Array.from({ length: 40 }, () => next(-7, 7)),
      p: { scale: [0.05], zeroPoint: [128], type: 'uint8' },
    },
    { name: 'int8, random values', x: Array.from({ length: 40 }, () => next(-7, 7)), p: { scale: [0.05], zeroPoint: [-5], type: 'int8' } },
    { name: 'uint8, ties with an odd zero point', x: halves, p: { scale: [0.5], zeroPoint: [3], type: 'uint8' } },
    { name: 'int8, ties with an odd zero point', x: halves, p: { scale: [0.5], zeroPoint: [-1], type: 'int8' } },
    { name: 'uint8, near-ties of a scale float32 cannot hold', x: nearTies, p: { scale: [0.1], zeroPoint: [100], type: 'uint8' } },
    { name: 'int8, near-ties of a scale float32 cannot hold', x: nearTies, p: { scale: [0.1], zeroPoint: [0], type: 'int8' } },
    {
      name: 'uint8, saturation and infinities',
      x: [1e6, -1e6, Infinity, -Infinity, 12.74, 12.76, -0.01, 3.4e38, -3.4e38],
      p: { scale: [0.05], zeroPoint: [0], type: 'uint8' },
    },
    {
      name: 'int8, saturation and infinities',
      x: [1e6, -1e6, Infinity, -Infinity, 6.37, 6.38, -6.41, -6.42, -0],
      p: { scale: [0.05], zeroPoint: [0], type: 'int8' },
    },
    { name: 'uint8, NaN (the lower bound)', x: [Number.NaN, 1, -1, Number.NaN], p: { scale: [0.05], zeroPoint: [17], type: 'uint8' } },
    { name: 'int8, NaN (the lower bound)', x: [Number.NaN, 1, -1, Number.NaN], p: { scale: [0.05], zeroPoint: [9], type: 'int8' } },
    { name: 'no zero point (uint8 0)', x: Array.from({ length: 20 }, () => next(-3, 9)), p: { scale: [0.037], type: 'uint8' } },
  ];
  for (const c of CASES) {
    it(`${c.name}: y and its dequantized z as onnxruntime's, both paths`, async () => {
      await expectAsOnnxruntime(onnxModel(quantizeGraph([c.x.length], c.p), 13), { x: { type: FLOAT, shape: [c.x.length], data: c.x } }, [
        'y',
        'z',
      ]);
    });
  }

  it('the near-ties tell a division from a product with the reciprocal', () => {
    const scale = f32(0.1);
    const reciprocal = f32(1 / scale);
    const roundEven = (v: number): number => {
      const r = Math.round(v);
      return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
    };
    const apart = nearTies.filter((x) => roundEven(f32(x / scale)) !== roundEven(f32(x * reciprocal)));
    expect(apart.length).toBeGreaterThan(0);
  });
});

describe('QuantizeLinear and DequantizeLinear per axis', () => {
  const shape = [2, 3, 4];
  const next = seededUniform(22);
  const x = Array.from({ length: 24 }, () => next(-4, 4));
  const CASES: readonly { name: string; p: Parameters }[] = [
    { name: 'int8 along axis 1 (the default)', p: { scale: [0.02, 0.05, 0.11], zeroPoint: [0, -3, 7], type: 'int8' } },
    { name: 'uint8 along axis 2', p: { scale: [0.03, 0.01, 0.07, 0.2], zeroPoint: [128, 120, 0, 255], type: 'uint8', axis: 2 } },
    { name: 'int8 along axis -3', p: { scale: [0.02, 0.04], zeroPoint: [1, -1], type: 'int8', axis: -3 } },
  ];
  for (const c of CASES) {
    it(`${c.name}: y and z as onnxruntime's, both paths`, async () => {
      await expectAsOnnxruntime(onnxModel(quantizeGraph(shape, c.p), 13), { x: { type: FLOAT, shape, data: x } }, ['y', 'z']);
    });
  }
});

describe('DequantizeLinear of graph inputs and constants', () => {
  it('uint8 and int8 inputs, per tensor and per axis, as onnxruntime', async () => {
    const model = onnxModel(
      {
        nodes: [
          { op: 'DequantizeLinear', inputs: ['a', 'a_scale', 'a_zero_point'], outputs: ['da'] },
          { op: 'DequantizeLinear', inputs: ['b', 'b_scale', 'b_zero_point'], outputs: ['db'], int: { axis: 0 } },
          { op: 'DequantizeLinear', inputs: ['a', 'a_scale'], outputs: ['da_no_zero_point'] },
        ],
        inputs: [
          { name: 'a', type: UINT8, shape: [6] },
          { name: 'b', type: INT8, shape: [3, 2] },
        ],
        outputs: [
          { name: 'da', type: FLOAT },
          { name: 'db', type: FLOAT },
          { name: 'da_no_zero_point', type: FLOAT },
        ],
        initializers: [
          { name: 'a_scale', dims: [], floats: [0.0173] },
          { name: 'a_zero_point', dims: [], floats: [131], int8: 'uint8' },
          { name: 'b_scale', dims: [3], floats: [0.3, 1e-3, 7.1] },
          { name: 'b_zero_point', dims: [3], floats: [-128, 0, 127], int8: 'int8' },
        ],
      },
      13,
    );
    await expectAsOnnxruntime(
      model,
      {
        a: { type: UINT8, shape: [6], data: [0, 255, 131, 130, 1, 254] },
        b: { type: INT8, shape: [3, 2], data: [-128, 127, 0, -1, 127, -128] },
      },
      ['da', 'db', 'da_no_zero_point'],
    );
  });

  it('an int32 input and int32 and int8 constants (a bias and per-channel weights) as onnxruntime', async () => {
    const bias = [2 ** 24 + 1, -(2 ** 30) - 3, 0, 123456789];
    const model = onnxModel(
      {
        nodes: [
          { op: 'DequantizeLinear', inputs: ['i', 'i_scale'], outputs: ['di'] },
          { op: 'DequantizeLinear', inputs: ['bias', 'i_scale', 'bias_zero_point'], outputs: ['dbias'] },
          { op: 'DequantizeLinear', inputs: ['w', 'w_scale', 'w_zero_point'], outputs: ['dw'], int: { axis: 0 } },
          { op: 'Add', inputs: ['di', 'dbias'], outputs: ['sum'] },
          { op: 'Mul', inputs: ['dw', 'one'], outputs: ['weights'] },
        ],
        inputs: [{ name: 'i', type: INT32, shape: [4] }],
        outputs: [
          { name: 'di', type: FLOAT },
          { name: 'sum', type: FLOAT },
          { name: 'weights', type: FLOAT },
        ],
        initializers: [
          { name: 'i_scale', dims: [], floats: [3.1e-5] },
          { name: 'bias', dims: [4], floats: bias, int32: true },
          { name: 'bias_zero_point', dims: [], floats: [0], int32: true },
          { name: 'w', dims: [2, 3], floats: [-128, 127, 5, -7, 0, 99], int8: 'int8' },
          { name: 'w_scale', dims: [2], floats: [0.013, 0.77] },
          { name: 'w_zero_point', dims: [2], floats: [0, 0], int8: 'int8' },
          { name: 'one', dims: [], floats: [1] },
        ],
      },
      13,
    );
    await expectAsOnnxruntime(model, { i: { type: INT32, shape: [4], data: [2 ** 24 + 3, -(2 ** 31), 2 ** 31 - 1, -77] } }, [
      'di',
      'sum',
      'weights',
    ]);
  });
});

describe('refusals name the node', () => {
  const refusal = (graph: TestGraph, opset: number, pattern: RegExp): void => {
    let caught: unknown;
    try {
      importOnnx(onnxModel(graph, opset));
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(EtnaError);
    expect((caught as EtnaError).code).toBe('UNSUPPORTED_OPERATOR');
    expect((caught as EtnaError).message).toMatch(pattern);
  };
  const single = (op: string, zeroPoint: TestInitializer, scaleDims: number[], extra: Partial<TestGraph['nodes'][0]> = {}): TestGraph => ({
    nodes: [{ op, inputs: ['x', 's', 'zp'], outputs: ['y'], name: 'the_node', ...extra }],
    inputs: [{ name: 'x', type: op === 'QuantizeLinear' ? FLOAT : INT8, shape: [4, 4] }],
    outputs: [{ name: 'y', type: op === 'QuantizeLinear' ? INT8 : FLOAT }],
    initializers: [{ name: 's', dims: scaleDims, floats: new Array<number>(scaleDims.reduce((a, b) => a * b, 1)).fill(0.5) }, zeroPoint],
  });

  it('blocked quantization (block_size)', () => {
    const zp = { name: 'zp', dims: [4, 2], floats: new Array<number>(8).fill(0), int8: 'int8' as const };
    for (const op of ['QuantizeLinear', 'DequantizeLinear']) {
      refusal(single(op, zp, [4, 2], { int: { axis: 1, block_size: 2 } }), 21, new RegExp(`node 'the_node' \\(${op}\\): block_size 2`));
    }
  });

  it('a scale of rank 2 without block_size', () => {
    const zp = { name: 'zp', dims: [4, 2], floats: new Array<number>(8).fill(0), int8: 'int8' as const };
    refusal(single('DequantizeLinear', zp, [4, 2]), 13, /node 'the_node' \(DequantizeLinear\): the scale has shape \[4,2\]/);
  });

  it('float8 and int4 zero points', () => {
    for (const type of [FLOAT8E4M3FN, INT4]) {
      const zp = { name: 'zp', dims: [], floats: [0], byteType: type };
      refusal(
        single('QuantizeLinear', zp, []),
        21,
        new RegExp(`node 'the_node' \\(QuantizeLinear\\): input 'zp' has ONNX element type ${type}`),
      );
    }
  });

  it('a 16-bit zero point', () => {
    const zp = { name: 'zp', dims: [], floats: [0, 0], byteType: UINT16 };
    refusal(single('QuantizeLinear', zp, []), 21, /node 'the_node' \(QuantizeLinear\): the zero point is uint16/);
  });

  it('an int32 DequantizeLinear with a zero point other than 0', () => {
    const graph: TestGraph = {
      nodes: [{ op: 'DequantizeLinear', inputs: ['x', 's', 'zp'], outputs: ['y'], name: 'the_node' }],
      inputs: [{ name: 'x', type: INT32, shape: [4] }],
      outputs: [{ name: 'y', type: FLOAT }],
      initializers: [
        { name: 's', dims: [], floats: [0.5] },
        { name: 'zp', dims: [], floats: [3], int32: true },
      ],
    };
    refusal(graph, 13, /node 'the_node' \(DequantizeLinear\): an int32 x takes a zero point of 0/);
  });
});
