// `etna inspect --json` on every real program reports what the testdata
// README lists for it; the corrupt file is refused with INVALID_PROGRAM.
import { expect, it } from 'vitest';

import { runCli } from './helpers/cli.js';
import { describeWithTestdata, testdataFiles, testdataPath } from './helpers/testdata.js';

interface IO {
  kind: string;
  dtype?: string;
  shape?: number[];
  dynamism?: string;
  planned?: boolean;
}
interface MethodJson {
  name: string;
  inputs: IO[];
  outputs: IO[];
  operators: string[];
  delegates: string[];
  instructions: Record<string, number>;
  memoryPlan: number[];
  constantBytes: number;
}
interface InspectJson {
  file: string;
  identifier: string;
  extendedHeader: { headerLength: number; programSize: number; segmentBaseOffset: number } | null;
  segments: number;
  namedDataKeys: number;
  delegates: { id: string; location: string; bytes: number }[];
  methods: MethodJson[];
}

const f32 = (...shape: number[]): IO => ({ kind: 'tensor', dtype: 'float32', shape });
const i64 = (...shape: number[]): IO => ({ kind: 'tensor', dtype: 'int64', shape });

interface Expected {
  header: [number, number, number] | null; // headerLength, programSize, segmentBaseOffset
  segments: number;
  namedData: number;
  methods: {
    name: string;
    inputs: IO[];
    outputs: IO[];
    operators: string[];
    delegates: string[];
    instructions: Record<string, number>;
    memoryPlan: number[];
  }[];
}

// Facts from ../shared/testdata/pte/README.md.
const EXPECTED: Record<string, Expected> = {
  'djl_add_unplanned_xnnpack.pte': {
    header: [32, 1048, 1152],
    segments: 2,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [{ ...f32(1), planned: false }, { ...f32(1), planned: false }],
        outputs: [{ ...f32(1), planned: true }],
        operators: [],
        delegates: ['XnnpackBackend'],
        instructions: { DelegateCall: 1 },
        memoryPlan: [0, 80],
      },
    ],
  },
  'djl_conv_xnnpack.pte': {
    header: [32, 1232, 1280],
    segments: 4,
    namedData: 2,
    methods: [
      {
        name: 'forward',
        inputs: [f32(1, 3, 16, 16)],
        outputs: [f32(1, 8, 16, 16)],
        operators: [],
        delegates: ['XnnpackBackend'],
        instructions: { DelegateCall: 1 },
        memoryPlan: [0, 11328],
      },
    ],
  },
  'djl_lin129_planned.pte': {
    header: [32, 1208, 1280],
    segments: 4,
    namedData: 2,
    methods: [
      {
        name: 'forward',
        inputs: [{ ...f32(129), planned: true }],
        outputs: [{ ...f32(64), planned: true }],
        operators: [],
        delegates: ['XnnpackBackend'],
        instructions: { DelegateCall: 1 },
        memoryPlan: [0, 848],
      },
    ],
  },
  'et_ModuleLinear-no-constant-segment.pte': {
    header: null,
    segments: 0,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [f32(2, 2)],
        outputs: [f32(2, 2)],
        operators: ['aten::mul.out', 'aten::add.out'],
        delegates: [],
        instructions: { KernelCall: 2 },
        memoryPlan: [0, 32],
      },
    ],
  },
  'et_add.pte': {
    header: null,
    segments: 1,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [f32(1), f32(1)],
        outputs: [f32(1)],
        operators: ['aten::add.out'],
        delegates: [],
        instructions: { KernelCall: 1 },
        memoryPlan: [0, 48],
      },
    ],
  },
  'et_arduino_add_model.pte': {
    header: [32, 1040, 1152],
    segments: 1,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [f32(3)],
        outputs: [f32(3)],
        operators: ['aten::add.out'],
        delegates: [],
        instructions: { KernelCall: 1 },
        memoryPlan: [0, 32],
      },
    ],
  },
  'et_model_constant_buffer.pte': {
    header: null,
    segments: 0,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [f32(1, 2)],
        outputs: [f32(1)],
        operators: ['aten::mean.out', 'aten::eq.Scalar_out', 'aten::clone.out', 'aten::where.self_out'],
        delegates: [],
        instructions: { KernelCall: 4 },
        memoryPlan: [0, 64],
      },
    ],
  },
  'et_softmax_pr17248.pte': {
    header: null,
    segments: 1,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [f32(2, 4096)],
        outputs: [f32(2, 4096)],
        operators: ['aten::_softmax.out'],
        delegates: [],
        instructions: { KernelCall: 1 },
        memoryPlan: [0, 65536],
      },
    ],
  },
  'et_xor_training.pte': {
    header: [24, 13704, 13824],
    segments: 1,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [f32(1, 2), i64(1)],
        outputs: [f32(), i64(1), f32(10, 2), f32(10), f32(2, 10), f32(2), f32(10, 2), f32(10), f32(2, 10), f32(2)],
        operators: [
          'aten::permute_copy.out', 'aten::addmm.out', 'aten::sigmoid.out', 'aten::alias_copy.out',
          'aten::_log_softmax.out', 'aten::ne.Scalar_out', 'aten::scalar_tensor.out', 'aten::where.self_out',
          'aten::unsqueeze_copy.out', 'aten::gather.out', 'aten::squeeze_copy.dims_out', 'aten::neg.out',
          'aten::sum.IntList_out', 'dim_order_ops::_to_dim_order_copy.out', 'aten::div.out', 'aten::argmax.out',
          'aten::full_like.out', 'aten::scatter.value_out', 'aten::mul.out', 'aten::exp.out', 'aten::sub.out',
          'aten::mm.out', 'aten::view_copy.out',
        ],
        delegates: [],
        instructions: { KernelCall: 66 },
        memoryPlan: [0, 624],
      },
      {
        name: '__et_training_gradients_index_forward',
        inputs: [],
        outputs: [{ kind: 'int' }],
        operators: [],
        delegates: [],
        instructions: {},
        memoryPlan: [0],
      },
      {
        name: '__et_training_fqn_forward',
        inputs: [],
        outputs: [{ kind: 'string' }, { kind: 'string' }, { kind: 'string' }, { kind: 'string' }],
        operators: [],
        delegates: [],
        instructions: {},
        memoryPlan: [0],
      },
      {
        name: '__et_training_parameters_index_forward',
        inputs: [],
        outputs: [{ kind: 'int' }],
        operators: [],
        delegates: [],
        instructions: {},
        memoryPlan: [0],
      },
    ],
  },
  'nodeet_mul.pte': {
    header: null,
    segments: 0,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [f32(3, 2), f32(3, 2)],
        outputs: [f32(3, 2)],
        operators: ['aten::mul.out'],
        delegates: [],
        instructions: { KernelCall: 1 },
        memoryPlan: [0, 96],
      },
    ],
  },
  'npr_add_xnnpack.pte': {
    header: [32, 1088, 1152],
    segments: 2,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [f32(3), f32(3)],
        outputs: [f32(3)],
        operators: [],
        delegates: ['XnnpackBackend'],
        instructions: { DelegateCall: 1 },
        memoryPlan: [0, 112],
      },
    ],
  },
  'npr_dtypes.pte': {
    header: null,
    segments: 1,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [i64(1), f32(1)],
        outputs: [i64(1), f32(1)],
        operators: ['aten::add.out'],
        delegates: [],
        instructions: { KernelCall: 2 },
        memoryPlan: [0, 48],
      },
    ],
  },
  'npr_multi_method.pte': {
    header: [32, 2240, 2304],
    segments: 1,
    namedData: 0,
    methods: ['double', 'forward'].map((name) => ({
      name,
      inputs: [f32(2)],
      outputs: [f32(2)],
      operators: ['dim_order_ops::_to_dim_order_copy.out', 'aten::add.out'],
      delegates: [],
      instructions: { KernelCall: 2 },
      memoryPlan: [0, 48],
    })),
  },
};

function inspect(name: string): InspectJson {
  const result = runCli(['inspect', '--json', testdataPath(name)]);
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as InspectJson;
}

describeWithTestdata('etna inspect --json on the real programs', () => {
  it('covers every valid file in the testdata folder', () => {
    const valid = testdataFiles().filter((name) => name !== 'djl_corrupt.pte');
    expect(Object.keys(EXPECTED).sort()).toEqual(valid);
  });

  for (const [name, expected] of Object.entries(EXPECTED)) {
    it(`reports ${name} as its README describes`, () => {
      const report = inspect(name);
      expect(report.identifier).toBe('ET12');
      expect(report.file).toBe(testdataPath(name));
      if (expected.header === null) {
        expect(report.extendedHeader).toBeNull();
      } else {
        const [headerLength, programSize, segmentBaseOffset] = expected.header;
        expect(report.extendedHeader).toEqual({ headerLength, programSize, segmentBaseOffset });
      }
      expect(report.segments).toBe(expected.segments);
      expect(report.namedDataKeys).toBe(expected.namedData);
      expect(report.methods.map((m) => m.name)).toEqual(expected.methods.map((m) => m.name));
      for (const [i, want] of expected.methods.entries()) {
        const got = report.methods[i] as MethodJson;
        expect(got.inputs).toMatchObject(want.inputs);
        expect(got.outputs).toMatchObject(want.outputs);
        expect(got.inputs.length).toBe(want.inputs.length);
        expect(got.outputs.length).toBe(want.outputs.length);
        expect(got.operators).toEqual(want.operators);
        expect(got.delegates).toEqual(want.delegates);
        expect(got.instructions).toEqual(want.instructions);
        expect(got.memoryPlan).toEqual(want.memoryPlan);
      }
      const delegateIds = report.methods.flatMap((m) => m.delegates);
      expect(report.delegates.map((d) => d.id)).toEqual(delegateIds);
      for (const delegate of report.delegates) {
        expect(delegate.location).toBe('segment');
        expect(delegate.bytes).toBeGreaterThan(30);
      }
    });
  }

  it('reports tensor IO with every documented field', () => {
    const [input] = inspect('djl_add_unplanned_xnnpack.pte').methods[0]!.inputs;
    expect(Object.keys(input!).sort()).toEqual(['dtype', 'dynamism', 'kind', 'planned', 'shape']);
    expect(input).toEqual({ kind: 'tensor', dtype: 'float32', shape: [1], dynamism: 'static', planned: false });
  });

  it('refuses djl_corrupt.pte with INVALID_PROGRAM and says why', () => {
    const result = runCli(['inspect', '--json', testdataPath('djl_corrupt.pte')]);
    expect(result.status).toBe(1);
    const report = JSON.parse(result.stdout) as { error: { code: string; message: string } };
    expect(report.error.code).toBe('INVALID_PROGRAM');
    expect(report.error.message).toMatch(/not an ExecuTorch program.*expected 'ET12'/);
  });

  it('prints a readable summary without --json', () => {
    const result = runCli(['inspect', testdataPath('npr_multi_method.pte')]);
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/method double/);
    expect(result.stdout).toMatch(/method forward/);
    expect(result.stdout).toMatch(/dim_order_ops::_to_dim_order_copy\.out, aten::add\.out/);
  });

  it('names a missing file in a readable line and exits 1', () => {
    const result = runCli(['inspect', testdataPath('no-such-file.pte')]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/INVALID_PROGRAM: cannot open .*no-such-file\.pte/);
  });
});
