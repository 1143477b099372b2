import fs from 'node:fs';

import { describe, expect, it } from 'vitest';

import { ProgramBuilder, serializePte, type LoweringPass, type PteProgram } from '../../lib/export/index.js';
import { exportExample, KV_DECODER_CONFIG, EXAMPLE_NAMES } from '../../lib/tools/examples/index.js';
import { DataLocation, ScalarType } from '../../lib/generated/program/program_generated.js';
import { testdataPath } from '../helpers/testdata.js';
import { reluToBackend, syntheticProgram } from './programs.js';
import {
  bufferSizes,
  decodeWithFlatc,
  methodByName,
  methodNames,
  operatorKeys,
  readExtendedHeader,
  readProgram,
  rootOffset,
  segmentBytes,
} from './pte-reader.js';

const alignUp = (value: number, alignment: number): number => Math.ceil(value / alignment) * alignment;

/**
 * Checks the layout rules of spec section 1.4 on any .pte bytes and returns
 * what it parsed. Run on upstream files too, so the rules are the real ones.
 */
function checkLayout(bytes: Uint8Array, { exactSize = true } = {}) {
  expect(new TextDecoder().decode(bytes.subarray(4, 8))).toBe('ET12');
  const header = readExtendedHeader(bytes);
  const program = readProgram(bytes);
  const segments = Array.from({ length: program.segmentsLength() }, (_, i) => ({
    offset: Number(program.segments(i)!.offset()),
    size: Number(program.segments(i)!.size()),
  }));
  segments.forEach((segment, i) => {
    expect(segment.offset % 128, `segment ${i} offset ${segment.offset}`).toBe(0);
    if (i > 0) expect(segment.offset).toBeGreaterThanOrEqual(segments[i - 1]!.offset + segments[i - 1]!.size);
  });
  const segmentEnd = segments.reduce((end, s) => Math.max(end, s.offset + s.size), 0);
  if (header === null) {
    expect(segmentEnd, 'a file without header has no segment data').toBe(0);
  } else {
    expect(header.length).toBeGreaterThanOrEqual(24);
    expect(header.programSize).toBeLessThanOrEqual(header.segmentBaseOffset);
    expect(header.segmentBaseOffset % 128).toBe(0);
    expect(header.segmentBaseOffset).toBe(alignUp(header.programSize, 128));
    // The root table lies after the spliced header.
    expect(rootOffset(bytes)).toBeGreaterThanOrEqual(8 + alignUp(header.length, 16));
    expect(rootOffset(bytes)).toBeLessThan(header.programSize);
    expect(
      bytes.subarray(header.programSize, header.segmentBaseOffset).every((b) => b === 0),
      'padding before the segments is zero',
    ).toBe(true);
    if (header.segmentDataSize !== undefined) expect(header.segmentDataSize).toBe(segmentEnd);
    if (exactSize) expect(bytes.byteLength).toBe(header.segmentBaseOffset + segmentEnd);
    else expect(bytes.byteLength).toBeGreaterThanOrEqual(header.segmentBaseOffset + segmentEnd);
  }
  const constantSegment = program.constantSegment();
  const constantOffsets =
    constantSegment === null ? [] : Array.from({ length: constantSegment.offsetsLength() }, (_, i) => Number(constantSegment.offsets(i)!));
  if (constantOffsets.length > 0) {
    expect(constantOffsets[0], 'entry 0 is the placeholder').toBe(0);
    if (constantOffsets.length > 1) expect(constantOffsets[1], 'the first constant starts the segment').toBe(0);
    constantOffsets.forEach((offset, k) => {
      expect(offset % 16, `constant ${k} offset ${offset}`).toBe(0);
      if (k > 0) expect(offset).toBeGreaterThanOrEqual(constantOffsets[k - 1]!);
    });
    expect(constantSegment!.segmentIndex()).toBeLessThan(Math.max(segments.length, 1));
  }
  return { header, program, segments, constantOffsets };
}

function constantBlob(bytes: Uint8Array, layout: ReturnType<typeof checkLayout>, index: number, nbytes: number): Uint8Array {
  const segment = segmentBytes(bytes, layout.program, layout.program.constantSegment()!.segmentIndex());
  return segment.subarray(layout.constantOffsets[index]!, layout.constantOffsets[index]! + nbytes);
}

describe('.pte layout (spec 1.4)', () => {
  it.each(EXAMPLE_NAMES)('%s follows every header, segment and offset rule', (name) => {
    const bytes = exportExample(name);
    const layout = checkLayout(bytes);
    expect(layout.header).not.toBeNull();
    expect(layout.header!.length).toBe(32);
  });

  it('places constants 16-aligned, initial values unpadded, payloads and named data in 128-aligned segments', () => {
    const builder = syntheticProgram();
    const { bytes, layout: written } = builder.export({ lowering: [reluToBackend] });
    const layout = checkLayout(bytes);
    const { program, header } = layout;

    // Constants: placeholder, then 12, 5 and 24 bytes -> offsets 0, 0, 16, 32; segment ends unpadded at 56.
    expect(layout.constantOffsets).toEqual([0, 0, 16, 32]);
    expect(layout.segments[0]).toEqual({ offset: 0, size: 56 });
    expect(Array.from(new Float32Array(constantBlob(bytes, layout, 1, 12).slice().buffer))).toEqual([1, 2, 3]);
    expect(Array.from(new Int8Array(constantBlob(bytes, layout, 2, 5).slice().buffer))).toEqual([1, -2, 3, -4, 5]);

    // Initial values: one mutable_data_segments entry, blobs back to back.
    expect(program.mutableDataSegmentsLength()).toBe(1);
    const mutable = program.mutableDataSegments(0)!;
    const mutableOffsets = Array.from({ length: mutable.offsetsLength() }, (_, i) => Number(mutable.offsets(i)!));
    expect(mutableOffsets).toEqual([0, 0, 3]);
    const initial = segmentBytes(bytes, program, mutable.segmentIndex());
    expect(initial.byteLength).toBe(11);
    expect(Array.from(initial.subarray(0, 3))).toEqual([7, 8, 9]);
    expect(Array.from(new Float32Array(initial.slice(3).buffer))).toEqual([0.5, -0.5]);

    // The delegate payload went to a segment; named data: equal bytes share one segment, alignment honoured.
    const forward = methodByName(program, 'forward');
    expect(forward.delegatesLength()).toBe(1);
    const delegate = forward.delegates(0)!;
    expect(delegate.id()).toBe('TestBackend');
    expect(delegate.processed()!.location()).toBe(DataLocation.SEGMENT);
    const payload = segmentBytes(bytes, program, delegate.processed()!.index());
    expect(new TextDecoder().decode(payload)).toBe('relu payload for 3 args');
    expect(delegate.compileSpecs(0)!.key()).toBe('mode');
    expect(Array.from(delegate.compileSpecs(0)!.valueArray()!)).toEqual([7]);
    const named = new Map(
      Array.from({ length: program.namedDataLength() }, (_, i) => [program.namedData(i)!.key()!, program.namedData(i)!.segmentIndex()]),
    );
    expect([...named.keys()]).toEqual(['weights-a', 'weights-b', 'weights-c']);
    expect(named.get('weights-a')).toBe(named.get('weights-b'));
    expect(named.get('weights-c')).not.toBe(named.get('weights-a'));
    expect(Array.from(segmentBytes(bytes, program, named.get('weights-a')!))).toEqual([1, 2, 3, 4, 5]);
    expect(layout.segments[named.get('weights-a')!]!.offset % 256).toBe(0);
    expect(segmentBytes(bytes, program, named.get('weights-c')!).every((b) => b === 9)).toBe(true);
    expect(written.segments.map((s) => s.purpose)).toEqual(['constants', 'mutable-data', 'delegate', 'named-data', 'named-data']);

    // The DelegateCall replaced the relu kernel call.
    expect(operatorKeys(forward)).not.toContain('aten::relu.out');
    expect(header!.segmentDataSize).toBe(layout.segments[4]!.offset + 300);
  });

  it('adds exactly the padded header length to the root offset', () => {
    const { bytes, layout } = syntheticProgram().export();
    const header = readExtendedHeader(bytes)!;
    expect(header.programSize).toBe(layout.flatbufferSize + 32);
    // Remove the header again: the result must be the plain FlatBuffer with the original root offset.
    const plain = new Uint8Array(header.programSize - 32);
    plain.set(bytes.subarray(0, 8), 0);
    plain.set(bytes.subarray(40, header.programSize), 8);
    new DataView(plain.buffer).setUint32(0, rootOffset(bytes) - 32, true);
    const spliced = readProgram(bytes);
    const original = readProgram(plain);
    expect(methodNames(original)).toEqual(methodNames(spliced));
    for (const name of methodNames(spliced)) {
      expect(bufferSizes(methodByName(original, name))).toEqual(bufferSizes(methodByName(spliced, name)));
      expect(operatorKeys(methodByName(original, name))).toEqual(operatorKeys(methodByName(spliced, name)));
    }
  });

  it('writes no header when there is no segment data', () => {
    const program = new ProgramBuilder();
    program.method('forward', (m) => {
      const a = m.input('a', 'float32', [1]);
      const b = m.input('b', 'float32', [1]);
      m.output(m.add(a, b));
    });
    const { bytes, layout } = program.export();
    expect(readExtendedHeader(bytes)).toBeNull();
    expect(bytes.byteLength).toBe(layout.flatbufferSize);
    const parsed = checkLayout(bytes);
    // Like upstream files without constants: one empty constant segment, offsets [0].
    expect(parsed.segments).toEqual([{ offset: 0, size: 0 }]);
    expect(parsed.constantOffsets).toEqual([0]);
    const forward = methodByName(parsed.program, 'forward');
    expect(bufferSizes(forward)).toEqual([0, 48]);
    expect(operatorKeys(forward)).toEqual(['aten::add.out']);
  });

  it('aligns inline delegate data to 16 bytes in the file, with and without a header', () => {
    for (const withConstant of [false, true]) {
      const program = new ProgramBuilder();
      const scale = withConstant ? program.constant('scale', 'float32', [1], [2]) : null;
      program.method('forward', (m) => {
        const x = m.input('x', 'float32', [3]);
        m.output(m.relu(scale === null ? x : m.mul(x, scale)));
      });
      const pass: LoweringPass = {
        name: 'inline-payloads',
        run(method, context) {
          // Payload sizes chosen so that a 1-aligned vector would start off the 16-byte grid.
          const first = context.addDelegatePayload(new Uint8Array(13).fill(1));
          const second = context.addDelegatePayload(new Uint8Array(7).fill(2));
          method.delegates.push(
            { backendId: 'A', payload: first, compileSpecs: [] },
            { backendId: 'B', payload: second, compileSpecs: [] },
          );
        },
      };
      const { bytes } = program.export({ lowering: [pass], writer: { delegatePlacement: 'inline' } });
      const parsed = checkLayout(bytes);
      expect(parsed.header === null).toBe(!withConstant);
      expect(parsed.program.backendDelegateDataLength()).toBe(2);
      for (let i = 0; i < 2; i++) {
        const data = parsed.program.backendDelegateData(i)!.dataArray()!;
        expect(data.byteOffset - bytes.byteOffset, `inline payload ${i}`).toSatisfy((offset: number) => offset % 16 === 0);
        expect(data.every((b) => b === i + 1)).toBe(true);
      }
      const forward = methodByName(parsed.program, 'forward');
      expect(forward.delegates(0)!.processed()!.location()).toBe(DataLocation.INLINE);
      expect(forward.delegates(1)!.processed()!.index()).toBe(1);
    }
  });

  it('writes the same bytes every time', () => {
    for (const name of EXAMPLE_NAMES) expect(Buffer.from(exportExample(name)).equals(Buffer.from(exportExample(name))), name).toBe(true);
  });

  it('rejects descriptions a runtime would refuse, naming the method', () => {
    const base: PteProgram = {
      methods: [
        {
          name: 'forward',
          values: [{ kind: 'tensor', scalarType: ScalarType.FLOAT, sizes: [4], allocation: { memoryId: 1, offset: 16 } }],
          inputs: [0],
          outputs: [0],
          instructions: [],
          operators: [],
          delegates: [],
          nonConstBufferSizes: [0, 16],
        },
      ],
      constants: [],
    };
    expect(() => serializePte(base)).toThrow(/method 'forward': value 0: bytes \[16, 32\) exceed arena 1 of 16 bytes/);
    const badList: PteProgram = {
      ...base,
      methods: [
        { ...base.methods[0]!, nonConstBufferSizes: [0, 32], values: [...base.methods[0]!.values, { kind: 'intList', items: [0] }] },
      ],
    };
    expect(() => serializePte(badList)).toThrow(/IntList item 0 is not an Int value/);
    const badConstant: PteProgram = {
      ...base,
      methods: [{ ...base.methods[0]!, values: [{ kind: 'tensor', scalarType: ScalarType.FLOAT, sizes: [1], dataBufferIdx: 1 }] }],
    };
    expect(() => serializePte(badConstant)).toThrow(/constant 1 is out of range \(0 stored\)/);
  });
});

describe('flatc decodes the written programs against schema/program.fbs', () => {
  it('kv-decoder', () => {
    const json = decodeWithFlatc(exportExample('kv-decoder')) as {
      execution_plan: {
        name: string;
        non_const_buffer_sizes: number[];
        operators: { name: string; overload?: string }[];
        inputs: number[];
        outputs: number[];
      }[];
      constant_segment: { segment_index?: number; offsets: number[] };
      segments: { offset?: number; size: number }[];
      mutable_data_segments?: unknown;
    };
    expect(json.execution_plan.map((p) => p.name)).toEqual(['prefill', 'decode', 'reset']);
    for (const plan of json.execution_plan) {
      expect(plan.non_const_buffer_sizes).toHaveLength(3);
      // Keys and values of each layer: layers x 2 caches x context x modelDim float32.
      const { layers, context, modelDim } = KV_DECODER_CONFIG;
      expect(plan.non_const_buffer_sizes[2]).toBe(layers * 2 * context * modelDim * 4);
    }
    const prefill = json.execution_plan[0]!;
    expect(prefill.inputs).toHaveLength(2);
    expect(prefill.outputs).toHaveLength(1);
    const ops = prefill.operators.map((o) => (o.overload ? `${o.name}.${o.overload}` : o.name));
    for (const op of [
      'aten::embedding.out',
      'aten::native_layer_norm.out',
      'aten::addmm.out',
      'aten::permute_copy.out',
      'aten::bmm.out',
      'aten::_softmax.out',
      'aten::gelu.out',
      'aten::index_put_',
      'aten::view_copy.out',
      'aten::add.out',
      'aten::mul.Scalar_out',
    ]) {
      expect(ops).toContain(op);
    }
    expect(json.execution_plan[2]!.operators).toEqual([{ name: 'aten::copy_', overload: '' }]);
    expect(json.mutable_data_segments).toBeUndefined();
    expect(json.segments).toHaveLength(1);
  });

  it('a program with initial values, delegates and named data', () => {
    const { bytes } = syntheticProgram().export({ lowering: [reluToBackend] });
    const json = decodeWithFlatc(bytes) as {
      execution_plan: {
        name: string;
        values: { val_type: string; val: Record<string, unknown> }[];
        delegates: { id: string; processed: { location: string; index: number } }[];
        chains: { instructions: { instr_args_type: string; instr_args: { args: number[] } }[] }[];
      }[];
      mutable_data_segments: { segment_index: number; offsets: number[] }[];
      named_data: { key: string; segment_index: number }[];
      segments: { offset?: number; size: number }[];
    };
    const forward = json.execution_plan[0]!;
    expect(forward.delegates).toEqual([
      { id: 'TestBackend', processed: { location: 'SEGMENT', index: 2 }, compile_specs: [{ key: 'mode', value: [7] }] },
    ]);
    expect(forward.chains[0]!.instructions.map((i) => i.instr_args_type)).toContain('DelegateCall');
    expect(json.mutable_data_segments).toEqual([{ segment_index: 1, offsets: [0, 0, 3] }]);
    expect(json.named_data.map((n) => n.key)).toEqual(['weights-a', 'weights-b', 'weights-c']);
    // The state tensors: planned in mem_id 2, named, and the initialized ones carry their initial-value index.
    const stateTensors = forward.values
      .filter((v) => v.val_type === 'Tensor' && (v.val.allocation_info as { memory_id: number } | undefined)?.memory_id === 2)
      .map((v) => ({
        name: (v.val.extra_tensor_info as { fully_qualified_name: string }).fully_qualified_name,
        init: v.val.data_buffer_idx ?? 0,
      }));
    expect(stateTensors).toEqual([
      { name: 'level', init: 2 },
      { name: 'counter', init: 1 },
    ]);
  });
});

describe('the layout checks hold for upstream files', () => {
  it.each([
    'et_arduino_add_model.pte',
    'npr_multi_method.pte',
    'djl_conv_xnnpack.pte',
    'djl_lin129_planned.pte',
    'et_add.pte',
    'et_softmax_pr17248.pte',
  ])('%s', (file) => {
    const bytes = new Uint8Array(fs.readFileSync(testdataPath(file)));
    const layout = checkLayout(bytes);
    if (file === 'et_arduino_add_model.pte') {
      expect(layout.header).toMatchObject({ length: 32, programSize: 1040, segmentBaseOffset: 1152, segmentDataSize: 4 });
      expect(layout.constantOffsets).toEqual([0, 0]);
    }
  });
});
