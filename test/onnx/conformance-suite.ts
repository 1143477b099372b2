// ONNX's own node tests (Debian's libonnx-testdata) as a conformance suite for
// the importer: each test model is imported as a one-method program, run in
// etna and compared with the stored outputs; onnxruntime-node runs the same
// model in the same pass as a control.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

import { Module, Tensor, type DType } from '../../lib/index.js';
import { constFromProto, decodeModel, decodeTensor, importOnnx, type ConstTensor } from '../../lib/onnx/index.js';

export const NODE_TEST_ROOT = process.env.ETNA_ONNX_TESTDATA ?? '/usr/share/libonnx-testdata/data/node';
export const haveNodeTests = fs.existsSync(path.join(NODE_TEST_ROOT, 'test_abs', 'model.onnx'));

/** The op types of suite v1 (79): the Silero/RNN core plus ops that lower to the portable set. */
export const SUITE_OPS: ReadonlySet<string> = new Set([
  'LayerNormalization',
  'ArgMax',
  'TopK',
  'GatherND',
  'MaxPool',
  'AveragePool',
  'Concat',
  'Gemm',
  'Reshape',
  'Shape',
  'ReduceSum',
  'ConvTranspose',
  'Pow',
  'Flatten',
  'Slice',
  'Unsqueeze',
  'ReduceMean',
  'Clip',
  'ReduceMax',
  'ReduceMin',
  'ReduceL2',
  'ReduceSumSquare',
  'Split',
  'Transpose',
  'Softmax',
  'LogSoftmax',
  'Conv',
  'Dropout',
  'Max',
  'Min',
  'GRU',
  'Gather',
  'BatchNormalization',
  'Sub',
  'Mul',
  'Div',
  'MatMul',
  'LSTM',
  'Not',
  'LeakyRelu',
  'HardSigmoid',
  'Elu',
  'Selu',
  'Sum',
  'Mean',
  'Sigmoid',
  'Tanh',
  'Sqrt',
  'Add',
  'Squeeze',
  'InstanceNormalization',
  'GlobalAveragePool',
  'PRelu',
  'Exp',
  'Log',
  'Neg',
  'Reciprocal',
  'Floor',
  'Ceil',
  'Sin',
  'Cos',
  'Softplus',
  'Expand',
  'Where',
  'Tile',
  'Greater',
  'Less',
  'Relu',
  'Pad',
  'Identity',
  'ConstantOfShape',
  'Constant',
  'If',
  'HardSwish',
  'Erf',
  'Abs',
  'Round',
  'Sign',
  'Range',
  'Resize',
  'Upsample',
]);

// ONNX element types the suite keeps: float, int64, bool.
const SUITE_ELEMENT_TYPES = new Set([1, 7, 9]);

export interface NodeTestCase {
  name: string;
  op: string;
  dir: string;
}

/** Non-expanded node tests of the suite's ops whose every input and output is float32, int64 or bool, without random ops. */
export function suiteCases(): NodeTestCase[] {
  if (!haveNodeTests) return [];
  const cases: NodeTestCase[] = [];
  for (const name of fs.readdirSync(NODE_TEST_ROOT).sort()) {
    if (name.endsWith('_expanded') || name.includes('training_dropout')) continue;
    const dir = path.join(NODE_TEST_ROOT, name);
    const modelPath = path.join(dir, 'model.onnx');
    if (!fs.existsSync(modelPath)) continue;
    let model;
    try {
      model = decodeModel(fs.readFileSync(modelPath));
    } catch {
      continue;
    }
    // A test's op is its one node, not a Constant feeding it (some tests build an input that way).
    const op = (model.graph.nodes.find((n) => n.opType !== 'Constant') ?? model.graph.nodes[0])?.opType;
    if (op === undefined || !SUITE_OPS.has(op)) continue;
    const slots = [...model.graph.inputs, ...model.graph.outputs];
    if (!slots.every((s) => SUITE_ELEMENT_TYPES.has(s.elemType))) continue;
    cases.push({ name, op, dir });
  }
  return cases;
}

function readPb(file: string, what: string): ConstTensor {
  return constFromProto(decodeTensor(fs.readFileSync(file)), what);
}

function dataFiles(dir: string, prefix: 'input' | 'output'): string[] {
  const setDir = path.join(dir, 'test_data_set_0');
  return fs
    .readdirSync(setDir)
    .filter((f) => f.startsWith(`${prefix}_`) && f.endsWith('.pb'))
    .sort((a, b) => Number(a.slice(prefix.length + 1, -3)) - Number(b.slice(prefix.length + 1, -3)))
    .map((f) => path.join(setDir, f));
}

export interface CaseResult {
  status: 'pass' | 'fail' | 'error';
  detail?: string;
}

/** Element-wise |actual - expected| <= atol + rtol * |expected|, NaN matching NaN. */
export function closeEnough(
  actual: ArrayLike<number | bigint>,
  expected: ArrayLike<number | bigint>,
  rtol = 1e-3,
  atol = 1e-7,
): string | undefined {
  if (actual.length !== expected.length) return `length ${actual.length} vs ${expected.length}`;
  let worst = 0;
  let worstAt = -1;
  for (let i = 0; i < expected.length; i++) {
    const a = Number(actual[i]!);
    const e = Number(expected[i]!);
    if (Number.isNaN(e) && Number.isNaN(a)) continue;
    if (a === e) continue;
    const excess = Math.abs(a - e) - (atol + rtol * Math.abs(e));
    if (!(excess <= 0) && (worstAt < 0 || excess > worst || Number.isNaN(excess))) {
      worst = excess;
      worstAt = i;
    }
  }
  return worstAt < 0 ? undefined : `element ${worstAt}: ${Number(actual[worstAt]!)} vs expected ${Number(expected[worstAt]!)}`;
}

/** Imports and runs one node test in etna. */
export async function runInEtna(testCase: NodeTestCase): Promise<CaseResult> {
  const modelBytes = fs.readFileSync(path.join(testCase.dir, 'model.onnx'));
  const model = decodeModel(modelBytes);
  const initializers = new Set(model.graph.initializers.map((t) => t.name));
  const graphInputs = model.graph.inputs.filter((i) => !initializers.has(i.name));
  const inputFiles = dataFiles(testCase.dir, 'input');
  const bind: Record<string, ConstTensor> = {};
  const shapes: Record<string, number[]> = {};
  const runtime: Tensor[] = [];
  // Float inputs a Resize or Upsample reads as roi or scales are parameters too.
  const floatParameters = new Set(
    model.graph.nodes.filter((n) => n.opType === 'Resize' || n.opType === 'Upsample').flatMap((n) => n.inputs.slice(1)),
  );
  graphInputs.forEach((info, i) => {
    const file = inputFiles[i];
    if (file === undefined) return;
    const tensor = readPb(file, `${testCase.name} input ${i}`);
    // Integer and bool inputs are shapes, axes, indices...: bound at import like Silero's sr.
    if (tensor.dtype !== 'float32' || floatParameters.has(info.name)) {
      bind[info.name] = tensor;
      return;
    }
    shapes[info.name] = [...tensor.shape];
    runtime.push(new Tensor('float32', tensor.shape, tensor.data as Float32Array));
  });
  let module: Module | undefined;
  try {
    const imported = importOnnx(modelBytes, { bind, shapes, method: 'forward' });
    module = await Module.load(imported.bytes);
    const results = await module.execute('forward', runtime);
    const expected = dataFiles(testCase.dir, 'output').map((f, i) => readPb(f, `${testCase.name} output ${i}`));
    for (let i = 0; i < expected.length; i++) {
      const want = expected[i]!;
      const got = results[i];
      if (!(got instanceof Tensor)) return { status: 'fail', detail: `output ${i} is not a tensor` };
      if (got.shape.join('x') !== want.shape.join('x'))
        return { status: 'fail', detail: `output ${i} shape [${got.shape}] vs expected [${want.shape}]` };
      const mismatch = closeEnough(got.data as ArrayLike<number | bigint>, want.data as ArrayLike<number | bigint>);
      if (mismatch !== undefined) return { status: 'fail', detail: `output ${i} ${mismatch}` };
    }
    return { status: 'pass' };
  } catch (error) {
    return { status: 'error', detail: (error as Error).message.split('\n')[0] };
  } finally {
    await module?.dispose();
  }
}

interface OrtTensor {
  data: ArrayLike<number | bigint>;
  dims: readonly number[];
}
interface OrtSession {
  inputNames: readonly string[];
  run(feeds: Record<string, unknown>): Promise<Record<string, OrtTensor>>;
  release(): Promise<void>;
}
interface OrtModule {
  InferenceSession: { create(bytes: Uint8Array, options?: object): Promise<OrtSession> };
  Tensor: new (type: string, data: unknown, dims: readonly number[]) => unknown;
}

let ort: OrtModule | null | undefined;

/** onnxruntime-node when it is installed and loads, else null. */
export function loadOrt(): OrtModule | null {
  if (ort !== undefined) return ort;
  try {
    ort = createRequire(import.meta.url)('onnxruntime-node') as OrtModule;
  } catch {
    ort = null;
  }
  return ort;
}

const ORT_TYPES: Partial<Record<DType, string>> = { float32: 'float32', int64: 'int64', bool: 'bool' };

/** Runs one node test in onnxruntime-node: the control. */
export async function runInOrt(testCase: NodeTestCase): Promise<CaseResult> {
  const runtime = loadOrt();
  if (runtime === null) return { status: 'error', detail: 'onnxruntime-node is not available' };
  const modelBytes = fs.readFileSync(path.join(testCase.dir, 'model.onnx'));
  let session: OrtSession | undefined;
  try {
    session = await runtime.InferenceSession.create(modelBytes, { intraOpNumThreads: 1 });
    const inputFiles = dataFiles(testCase.dir, 'input');
    const feeds: Record<string, unknown> = {};
    session.inputNames.forEach((name, i) => {
      const file = inputFiles[i];
      if (file === undefined) return;
      const t = readPb(file, name);
      feeds[name] = new runtime.Tensor(
        ORT_TYPES[t.dtype]!,
        t.dtype === 'bool' ? Array.from(t.data as Uint8Array, (v) => v !== 0) : t.data,
        t.shape,
      );
    });
    const outputs = await session.run(feeds);
    const values = Object.values(outputs);
    const expected = dataFiles(testCase.dir, 'output').map((f, i) => readPb(f, `output ${i}`));
    for (let i = 0; i < expected.length; i++) {
      const got = values[i];
      if (got === undefined) return { status: 'fail', detail: `output ${i} missing` };
      const data =
        typeof (got.data as ArrayLike<unknown>)[0] === 'boolean'
          ? Array.from(got.data as unknown as ArrayLike<boolean>, (v) => (v ? 1 : 0))
          : got.data;
      const mismatch = closeEnough(data, expected[i]!.data as ArrayLike<number | bigint>);
      if (mismatch !== undefined) return { status: 'fail', detail: `output ${i} ${mismatch}` };
    }
    return { status: 'pass' };
  } catch (error) {
    return { status: 'error', detail: (error as Error).message.split('\n')[0] };
  } finally {
    await session?.release();
  }
}
