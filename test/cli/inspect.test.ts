// `etna inspect --json` on every real program reports what the testdata
// README lists for it; the corrupt file is refused with INVALID_PROGRAM; a
// .ptd file lists its tensors, and damaged .ptd bytes are refused the same way.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { readExternalData } from '../../lib/cli/external-data.js';
import { EtnaError } from '../../lib/index.js';
import { runCli } from '../helpers/cli.js';
import { testdataDir, testdataFiles, testdataPath } from '../helpers/testdata.js';

interface IO {
  name?: string;
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

// Facts from test/fixtures/pte/README.md.
const EXPECTED: Record<string, Expected> = {
  'djl_add_unplanned_xnnpack.pte': {
    header: [32, 1048, 1152],
    segments: 2,
    namedData: 0,
    methods: [
      {
        name: 'forward',
        inputs: [
          { ...f32(1), planned: false },
          { ...f32(1), planned: false },
        ],
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
          'aten::permute_copy.out',
          'aten::addmm.out',
          'aten::sigmoid.out',
          'aten::alias_copy.out',
          'aten::_log_softmax.out',
          'aten::ne.Scalar_out',
          'aten::scalar_tensor.out',
          'aten::where.self_out',
          'aten::unsqueeze_copy.out',
          'aten::gather.out',
          'aten::squeeze_copy.dims_out',
          'aten::neg.out',
          'aten::sum.IntList_out',
          'dim_order_ops::_to_dim_order_copy.out',
          'aten::div.out',
          'aten::argmax.out',
          'aten::full_like.out',
          'aten::scatter.value_out',
          'aten::mul.out',
          'aten::exp.out',
          'aten::sub.out',
          'aten::mm.out',
          'aten::view_copy.out',
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

describe('etna inspect --json on the real programs', () => {
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
    expect(Object.keys(input!).sort()).toEqual(['dtype', 'dynamism', 'kind', 'name', 'planned', 'shape']);
    expect(input).toEqual({ name: 'input_0', kind: 'tensor', dtype: 'float32', shape: [1], dynamism: 'static', planned: false });
  });

  it('names inputs and outputs, in JSON and in text, as the program names them', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-inspect-names-'));
    try {
      const file = path.join(dir, 'encoder-decoder.pte');
      expect(runCli(['export-example', 'encoder-decoder', file]).status).toBe(0);
      const json = runCli(['inspect', '--json', file]);
      expect(json.status, json.stderr).toBe(0);
      const [encode, decode] = (JSON.parse(json.stdout) as InspectJson).methods;
      expect(encode!.inputs.map((v) => v.name)).toEqual(['x']);
      expect(encode!.outputs.map((v) => v.name)).toEqual(['code']);
      expect(decode!.inputs.map((v) => v.name)).toEqual(['code']);
      expect(decode!.outputs.map((v) => v.name)).toEqual(['reconstruction']);
      const text = runCli(['inspect', file]);
      expect(text.status).toBe(0);
      expect(text.stdout).toMatch(/method encode\n\s+inputs\s+x float32\[1x32\]\n\s+outputs\s+code float32\[1x8\]\n/);
      expect(text.stdout).toMatch(/method decode\n\s+inputs\s+code float32\[1x8\]\n\s+outputs\s+reconstruction float32\[1x32\]\n/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
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
    const result = runCli(['inspect', path.join(testdataDir, 'no-such-file.pte')]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/INVALID_PROGRAM: cannot open .*no-such-file\.pte/);
  });
});

describe('etna inspect on a .ptd external data file', () => {
  const ptd = testdataPath('et_xor_training.ptd');

  it('lists its tensors with --json: the parameters the training program reads, shaped as its outputs', () => {
    const result = runCli(['inspect', '--json', ptd]);
    expect(result.status, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout) as {
      file: string;
      identifier: string;
      segments: number;
      tensors: { key: string; dtype: string; shape: number[]; bytes: number }[];
    };
    expect(report.file).toBe(ptd);
    expect(report.identifier).toBe('FT01');
    expect(report.tensors.map((t) => t.key)).toEqual(['net.linear.weight', 'net.linear.bias', 'net.linear2.weight', 'net.linear2.bias']);
    // forward returns the parameters themselves as outputs 6 to 9 (testdata README).
    const forward = inspect('et_xor_training.pte').methods.find((m) => m.name === 'forward')!;
    expect(report.tensors.map(({ dtype, shape }) => ({ dtype, shape }))).toEqual(
      forward.outputs.slice(6).map(({ dtype, shape }) => ({ dtype, shape })),
    );
    for (const tensor of report.tensors) expect(tensor.bytes).toBe(4 * tensor.shape.reduce((a, b) => a * b, 1));
    expect(report.segments).toBe(4);
  });

  it('prints one readable line per tensor without --json', () => {
    const result = runCli(['inspect', ptd]);
    expect(result.status, result.stderr).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`${ptd}: external data (FT01), 760 B, 4 tensors in 4 segments`);
    expect(lines.slice(1).map((line) => line.trim().split(/\s+/))).toEqual([
      ['net.linear.weight', 'float32[10x2]', '80', 'B'],
      ['net.linear.bias', 'float32[10]', '40', 'B'],
      ['net.linear2.weight', 'float32[2x10]', '80', 'B'],
      ['net.linear2.bias', 'float32[2]', '8', 'B'],
    ]);
  });

  it('refuses a truncated or damaged .ptd in one INVALID_PROGRAM line', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-ptd-'));
    try {
      const bytes = fs.readFileSync(ptd);
      const truncated = path.join(dir, 'truncated.ptd');
      fs.writeFileSync(truncated, bytes.subarray(0, 40));
      const result = runCli(['inspect', truncated]);
      expect(result.status).toBe(1);
      expect(result.stderr).toBe(`etna inspect: INVALID_PROGRAM: external data: file is 40 bytes, too short for a FlatTensor header\n`);
      // The root vtable (at byte 58) claims a fourth field: the layout written before mid-2025.
      const old = Buffer.from(bytes);
      expect(old.readUInt16LE(58)).toBe(10);
      old.writeUInt16LE(12, 58);
      fs.writeFileSync(path.join(dir, 'old.ptd'), old);
      const json = runCli(['inspect', '--json', path.join(dir, 'old.ptd')]);
      expect(json.status).toBe(1);
      expect(JSON.parse(json.stdout).error).toEqual({
        code: 'INVALID_PROGRAM',
        message: expect.stringMatching(/FlatTensor layout written before mid-2025/),
      });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads every single-byte corruption of the header and FlatBuffer either whole or as INVALID_PROGRAM', () => {
    const bytes = new Uint8Array(fs.readFileSync(ptd));
    const region = 48 + Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(24, true));
    const messages = new Set<string>();
    for (let at = 0; at < region; at++) {
      for (const value of [0x00, 0x7f, 0xff, (bytes[at]! + 1) & 0xff]) {
        const damaged = bytes.slice();
        damaged[at] = value;
        try {
          const { tensors } = readExternalData(damaged);
          for (const tensor of tensors) expect(tensor.bytes).toBeLessThanOrEqual(damaged.length);
        } catch (error) {
          expect(error).toBeInstanceOf(EtnaError);
          expect((error as EtnaError).code).toBe('INVALID_PROGRAM');
          messages.add((error as EtnaError).message.replace(/\d+/g, 'N'));
        }
      }
    }
    // Damage is caught by different checks, each naming what is wrong.
    expect(messages.size).toBeGreaterThan(5);
    for (const message of messages) expect(message).toMatch(/^external data: /);
  });
});
