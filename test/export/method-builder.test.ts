import { describe, expect, it } from 'vitest';

import { EtnaError } from '../../lib/errors.js';
import {
  advancedIndexShape,
  MethodBuilder,
  ProgramBuilder,
  type LoweringPass,
  type MethodGraph,
  type TensorValue,
} from '../../lib/export/index.js';

/** Builds one method and returns its graph. */
function build(body: (m: MethodBuilder, p: ProgramBuilder) => void): MethodGraph {
  const program = new ProgramBuilder();
  program.method('m', (m) => body(m, program));
  return program.programGraph.method('m');
}

/** Renders one argument the way spec section 7 writes it. */
function render(graph: MethodGraph, index: number): string {
  const value = graph.value(index);
  switch (value.kind) {
    case 'tensor':
      return `${value.dtype}[${value.shape.join(',')}]`;
    case 'int':
      return `Int(${value.value})`;
    case 'double':
      return `Double(${value.value})`;
    case 'bool':
      return `Bool(${value.value})`;
    case 'string':
      return `String(${value.value})`;
    case 'null':
      return 'Null';
    case 'intList':
      return `IntList[${value.items
        .map((item) => {
          const element = graph.value(item);
          if (element.kind !== 'int') throw new Error(`IntList item ${item} is a ${element.kind}`);
          return String(element.value);
        })
        .join(',')}]`;
    case 'tensorList':
      return `TensorList[${value.items.map((item) => render(graph, item)).join(' ')}]`;
    case 'optionalTensorList':
      return `OptionalTensorList[${value.items.map((item) => render(graph, item)).join(' ')}]`;
    default:
      return value.kind;
  }
}

interface Call {
  op: string;
  args: string[];
  indices: readonly number[];
}

function calls(graph: MethodGraph): Call[] {
  return graph.instructions.map((instruction) => {
    if (instruction.kind !== 'kernel') throw new Error('expected kernel calls only');
    return {
      op: instruction.overload ? `${instruction.name}.${instruction.overload}` : instruction.name,
      args: instruction.args.map((a) => render(graph, a)),
      indices: instruction.args,
    };
  });
}

/** The single call of a one-op method, checking the return slot repeats the out argument. */
function single(body: (m: MethodBuilder, p: ProgramBuilder) => TensorValue | void): Call {
  let result: TensorValue | void = undefined;
  const graph = build((m, p) => {
    result = body(m, p);
  });
  const all = calls(graph);
  expect(all).toHaveLength(1);
  const call = all[0]!;
  if (result !== undefined) {
    const out = (result as TensorValue).index;
    expect(call.indices[call.indices.length - 1], 'the extra return slot is the out tensor').toBe(out);
  }
  return call;
}

const f32 = 'float32';

describe('elementwise ops', () => {
  it('add: Tensor form with materialized alpha, broadcasting', () => {
    const call = single((m) => m.add(m.input('a', f32, [2, 3]), m.input('b', f32, [3])));
    expect(call).toMatchObject({ op: 'aten::add.out', args: ['float32[2,3]', 'float32[3]', 'Int(1)', 'float32[2,3]', 'float32[2,3]'] });
  });

  it('add/sub/mul/div: Scalar forms carry Double for float tensors and Int for integer ones', () => {
    expect(single((m) => m.add(m.input('a', f32, [4]), 2.5)).args).toEqual([
      'float32[4]',
      'Double(2.5)',
      'Int(1)',
      'float32[4]',
      'float32[4]',
    ]);
    expect(single((m) => m.add(3, m.input('a', 'int64', [4])))).toMatchObject({
      op: 'aten::add.Scalar_out',
      args: ['int64[4]', 'Int(3)', 'Int(1)', 'int64[4]', 'int64[4]'],
    });
    expect(single((m) => m.sub(m.input('a', f32, [4]), 1))).toMatchObject({
      op: 'aten::sub.Scalar_out',
      args: ['float32[4]', 'Double(1)', 'Int(1)', 'float32[4]', 'float32[4]'],
    });
    expect(single((m) => m.sub(1, m.input('a', f32, [4])))).toMatchObject({
      op: 'aten::rsub.Scalar_out',
      args: ['float32[4]', 'Double(1)', 'Int(1)', 'float32[4]', 'float32[4]'],
    });
    expect(single((m) => m.mul(m.input('a', f32, [4]), 2))).toMatchObject({
      op: 'aten::mul.Scalar_out',
      args: ['float32[4]', 'Double(2)', 'float32[4]', 'float32[4]'],
    });
    expect(single((m) => m.div(m.input('a', f32, [4]), 4))).toMatchObject({
      op: 'aten::div.Scalar_out',
      args: ['float32[4]', 'Double(4)', 'float32[4]', 'float32[4]'],
    });
  });

  it('sub/mul/div: Tensor forms', () => {
    expect(single((m) => m.sub(m.input('a', f32, [2, 1]), m.input('b', f32, [1, 5])))).toMatchObject({
      op: 'aten::sub.out',
      args: ['float32[2,1]', 'float32[1,5]', 'Int(1)', 'float32[2,5]', 'float32[2,5]'],
    });
    expect(single((m) => m.mul(m.input('a', f32, [3]), m.input('b', f32, [3]))).args).toEqual([
      'float32[3]',
      'float32[3]',
      'float32[3]',
      'float32[3]',
    ]);
    expect(single((m) => m.div(m.input('a', f32, [3]), m.input('b', f32, [1]))).op).toBe('aten::div.out');
  });

  it('activations', () => {
    for (const [name, op] of [
      ['relu', 'aten::relu.out'],
      ['tanh', 'aten::tanh.out'],
      ['sigmoid', 'aten::sigmoid.out'],
      ['silu', 'aten::silu.out'],
    ] as const) {
      expect(single((m) => m[name](m.input('x', f32, [2, 2])))).toEqual(
        expect.objectContaining({ op, args: ['float32[2,2]', 'float32[2,2]', 'float32[2,2]'] }),
      );
    }
    expect(single((m) => m.gelu(m.input('x', f32, [2])))).toMatchObject({
      op: 'aten::gelu.out',
      args: ['float32[2]', 'String(none)', 'float32[2]', 'float32[2]'],
    });
    expect(single((m) => m.gelu(m.input('x', f32, [2]), 'tanh')).args[1]).toBe('String(tanh)');
  });

  it('softmax: dim normalized, half_to_float false', () => {
    expect(single((m) => m.softmax(m.input('x', f32, [2, 3, 4]), -1))).toMatchObject({
      op: 'aten::_softmax.out',
      args: ['float32[2,3,4]', 'Int(2)', 'Bool(false)', 'float32[2,3,4]', 'float32[2,3,4]'],
    });
  });

  it('layer norm: three outputs and a TensorList return slot', () => {
    const graph = build((m, p) => {
      const w = p.constant('w', f32, [8], new Float32Array(8));
      const b = p.constant('b', f32, [8], new Float32Array(8));
      m.output(m.layerNorm(m.input('x', f32, [2, 4, 8]), [8], w, b, 1e-6));
    });
    const [call] = calls(graph);
    expect(call).toMatchObject({
      op: 'aten::native_layer_norm.out',
      args: [
        'float32[2,4,8]',
        'IntList[8]',
        'float32[8]',
        'float32[8]',
        'Double(0.000001)',
        'float32[2,4,8]',
        'float32[2,4,1]',
        'float32[2,4,1]',
        'TensorList[float32[2,4,8] float32[2,4,1] float32[2,4,1]]',
      ],
    });
    const list = graph.value(call!.indices[8]!);
    expect(list.kind === 'tensorList' && list.items).toEqual(call!.indices.slice(5, 8));
    expect(graph.outputs).toEqual([call!.indices[5]]);
    const [plain] = calls(build((m) => m.output(m.layerNorm(m.input('x', f32, [3, 6]), [3, 6]))));
    expect(plain!.args.slice(1, 5)).toEqual(['IntList[3,6]', 'Null', 'Null', 'Double(0.00001)']);
    expect(plain!.args[6]).toBe('float32[1,1]');
  });
});

describe('matrix products', () => {
  it('linear: permute_copy of the weight, then addmm; other ranks are viewed as a matrix', () => {
    let result: TensorValue | undefined;
    const graph = build((m, p) => {
      const w = p.constant('w', f32, [4, 8], new Float32Array(32));
      const b = p.constant('b', f32, [4], new Float32Array(4));
      result = m.linear(m.input('x', f32, [2, 3, 8]), w, b);
    });
    expect(result!.shape).toEqual([2, 3, 4]);
    const all = calls(graph);
    expect(all.map((c) => c.op)).toEqual(['aten::view_copy.out', 'aten::permute_copy.out', 'aten::addmm.out', 'aten::view_copy.out']);
    expect(all[0]!.args).toEqual(['float32[2,3,8]', 'IntList[6,8]', 'float32[6,8]', 'float32[6,8]']);
    expect(all[1]!.args).toEqual(['float32[4,8]', 'IntList[1,0]', 'float32[8,4]', 'float32[8,4]']);
    expect(all[2]!.args).toEqual(['float32[4]', 'float32[6,8]', 'float32[8,4]', 'Int(1)', 'Int(1)', 'float32[6,4]', 'float32[6,4]']);
    expect(all[3]!.args).toEqual(['float32[6,4]', 'IntList[2,3,4]', 'float32[2,3,4]', 'float32[2,3,4]']);
    const noBias = calls(
      build((m, p) => m.output(m.linear(m.input('x', f32, [5, 8]), p.constant('w', f32, [4, 8], new Float32Array(32))))),
    );
    expect(noBias.map((c) => c.op)).toEqual(['aten::permute_copy.out', 'aten::mm.out']);
    expect(noBias[1]!.args).toEqual(['float32[5,8]', 'float32[8,4]', 'float32[5,4]', 'float32[5,4]']);
  });

  it('matmul: mm, bmm, and batch dims viewed as rank 3', () => {
    expect(single((m) => m.matmul(m.input('a', f32, [2, 3]), m.input('b', f32, [3, 5])))).toMatchObject({
      op: 'aten::mm.out',
      args: ['float32[2,3]', 'float32[3,5]', 'float32[2,5]', 'float32[2,5]'],
    });
    expect(single((m) => m.matmul(m.input('a', f32, [4, 2, 3]), m.input('b', f32, [4, 3, 5]))).op).toBe('aten::bmm.out');
    let out: TensorValue | undefined;
    const graph = build((m) => {
      out = m.matmul(m.input('a', f32, [2, 4, 6, 3]), m.input('b', f32, [2, 4, 3, 5]));
    });
    expect(out!.shape).toEqual([2, 4, 6, 5]);
    expect(calls(graph).map((c) => c.op)).toEqual(['aten::view_copy.out', 'aten::view_copy.out', 'aten::bmm.out', 'aten::view_copy.out']);
    expect(calls(graph)[2]!.args.slice(0, 3)).toEqual(['float32[8,6,3]', 'float32[8,3,5]', 'float32[8,6,5]']);
    const batched = build((m, p) => m.output(m.matmul(m.input('a', f32, [2, 6, 3]), p.constant('w', f32, [3, 5], new Float32Array(15)))));
    expect(calls(batched).map((c) => c.op)).toEqual(['aten::view_copy.out', 'aten::mm.out', 'aten::view_copy.out']);
  });

  it('conv2d: convolution.out with every schema argument', () => {
    const call = single((m, p) =>
      m.conv2d(
        m.input('x', f32, [1, 3, 16, 16]),
        p.constant('w', f32, [8, 3, 3, 3], new Float32Array(216)),
        p.constant('b', f32, [8], new Float32Array(8)),
        { padding: 1 },
      ),
    );
    expect(call).toMatchObject({
      op: 'aten::convolution.out',
      args: [
        'float32[1,3,16,16]',
        'float32[8,3,3,3]',
        'float32[8]',
        'IntList[1,1]',
        'IntList[1,1]',
        'IntList[1,1]',
        'Bool(false)',
        'IntList[0,0]',
        'Int(1)',
        'float32[1,8,16,16]',
        'float32[1,8,16,16]',
      ],
    });
    expect(
      single((m, p) =>
        m.conv2d(m.input('x', f32, [2, 4, 9, 9]), p.constant('w', f32, [6, 2, 3, 3], new Float32Array(108)), null, {
          stride: 2,
          groups: 2,
        }),
      ).args.slice(2, 11),
    ).toEqual([
      'Null',
      'IntList[2,2]',
      'IntList[0,0]',
      'IntList[1,1]',
      'Bool(false)',
      'IntList[0,0]',
      'Int(2)',
      'float32[2,6,4,4]',
      'float32[2,6,4,4]',
    ]);
  });
});

describe('lookups and shape ops', () => {
  it('embedding', () => {
    expect(
      single((m, p) => m.embedding(p.constant('table', f32, [10, 4], new Float32Array(40)), m.input('i', 'int64', [2, 3]))),
    ).toMatchObject({
      op: 'aten::embedding.out',
      args: ['float32[10,4]', 'int64[2,3]', 'Int(-1)', 'Bool(false)', 'Bool(false)', 'float32[2,3,4]', 'float32[2,3,4]'],
    });
  });

  it('reshape, permute, transpose', () => {
    expect(single((m) => m.reshape(m.input('x', f32, [2, 3, 4]), [2, -1]))).toMatchObject({
      op: 'aten::view_copy.out',
      args: ['float32[2,3,4]', 'IntList[2,12]', 'float32[2,12]', 'float32[2,12]'],
    });
    expect(single((m) => m.permute(m.input('x', f32, [2, 3, 4]), [-1, 0, 1]))).toMatchObject({
      op: 'aten::permute_copy.out',
      args: ['float32[2,3,4]', 'IntList[2,0,1]', 'float32[4,2,3]', 'float32[4,2,3]'],
    });
    expect(single((m) => m.transpose(m.input('x', f32, [2, 3, 4]), 0, -1))).toMatchObject({
      op: 'aten::transpose_copy.int_out',
      args: ['float32[2,3,4]', 'Int(0)', 'Int(2)', 'float32[4,3,2]', 'float32[4,3,2]'],
    });
  });

  it('slice clamps like Python, select drops the dim', () => {
    expect(single((m) => m.slice(m.input('x', f32, [5, 6]), 1, -4, 100, 3))).toMatchObject({
      op: 'aten::slice_copy.Tensor_out',
      args: ['float32[5,6]', 'Int(1)', 'Int(2)', 'Int(6)', 'Int(3)', 'float32[5,2]', 'float32[5,2]'],
    });
    expect(single((m) => m.slice(m.input('x', f32, [5]), 0, 4, 2)).args[5]).toBe('float32[0]');
    expect(single((m) => m.select(m.input('x', f32, [5, 6]), 0, -1))).toMatchObject({
      op: 'aten::select_copy.int_out',
      args: ['float32[5,6]', 'Int(0)', 'Int(4)', 'float32[6]', 'float32[6]'],
    });
  });

  it('cat, unsqueeze, expand, cast', () => {
    expect(single((m) => m.cat([m.input('a', f32, [2, 3]), m.input('b', f32, [4, 3])], 0))).toMatchObject({
      op: 'aten::cat.out',
      args: ['TensorList[float32[2,3] float32[4,3]]', 'Int(0)', 'float32[6,3]', 'float32[6,3]'],
    });
    expect(single((m) => m.unsqueeze(m.input('x', f32, [2, 3]), -1))).toMatchObject({
      op: 'aten::unsqueeze_copy.out',
      args: ['float32[2,3]', 'Int(2)', 'float32[2,3,1]', 'float32[2,3,1]'],
    });
    expect(single((m) => m.expand(m.input('x', f32, [1, 3]), [2, 4, -1]))).toMatchObject({
      op: 'aten::expand_copy.out',
      args: ['float32[1,3]', 'IntList[2,4,3]', 'Bool(false)', 'float32[2,4,3]', 'float32[2,4,3]'],
    });
    expect(single((m) => m.cast(m.input('x', f32, [2, 3]), 'int32'))).toMatchObject({
      op: 'dim_order_ops::_to_dim_order_copy.out',
      args: ['float32[2,3]', 'Bool(false)', 'IntList[0,1]', 'int32[2,3]', 'int32[2,3]'],
    });
  });
});

describe('writes into buffers', () => {
  it('index_put_ writes in place into a shared buffer and returns it', () => {
    let cacheValue = -1;
    const graph = build((m, p) => {
      const cache = p.sharedBuffer('cache', f32, [8, 4]);
      const written = m.indexPutInPlace(cache, [m.input('pos', 'int64', [2])], m.input('rows', f32, [2, 4]));
      cacheValue = written.index;
      expect(m.use(cache).index).toBe(written.index);
    });
    const [call] = calls(graph);
    expect(call).toMatchObject({
      op: 'aten::index_put_',
      args: ['float32[8,4]', 'OptionalTensorList[int64[2]]', 'float32[2,4]', 'Bool(false)', 'float32[8,4]'],
    });
    expect(call!.indices[0]).toBe(cacheValue);
    expect(call!.indices[4]).toBe(cacheValue);
    const node = graph.tensorNode(cacheValue);
    expect(node.origin.kind).toBe('shared');
  });

  it('index_put with None entries, and the functional out form', () => {
    expect(
      single((m) => m.indexPutInPlace(m.input('x', f32, [3, 8, 4]), [null, m.input('i', 'int64', [2])], m.input('v', f32, [3, 2, 4])))
        .args[1],
    ).toBe('OptionalTensorList[Null int64[2]]');
    expect(single((m) => m.indexPut(m.input('x', f32, [8]), [m.input('i', 'int64', [3])], m.input('v', f32, [1])))).toMatchObject({
      op: 'aten::index_put.out',
      args: ['float32[8]', 'OptionalTensorList[int64[3]]', 'float32[1]', 'Bool(false)', 'float32[8]', 'float32[8]'],
    });
  });

  it('copy_ writes state back in place', () => {
    let target = -1;
    const graph = build((m, p) => {
      const state = p.sharedBuffer('state', f32, [1, 4]);
      target = m.copyInto(state, m.input('x', f32, [4])).index;
    });
    const [call] = calls(graph);
    expect(call).toMatchObject({ op: 'aten::copy_', args: ['float32[1,4]', 'float32[4]', 'Bool(false)', 'float32[1,4]'] });
    expect([call!.indices[0], call!.indices[3]]).toEqual([target, target]);
  });

  it('kernel() emits any operator, appending the return slot', () => {
    const graph = build((m) => {
      const x = m.input('x', f32, [3]);
      const out = m.graph.addTensor(f32, [3]);
      m.kernel('aten::clamp.out', [x, { double: 0 }, { double: 6 }, out]);
      m.output(out);
    });
    expect(calls(graph)[0]).toMatchObject({
      op: 'aten::clamp.out',
      args: ['float32[3]', 'Double(0)', 'Double(6)', 'float32[3]', 'float32[3]'],
    });
  });
});

describe('errors name the op and the shapes', () => {
  const cases: [string, (m: MethodBuilder, p: ProgramBuilder) => unknown, RegExp][] = [
    ['broadcast', (m) => m.add(m.input('a', f32, [2, 3]), m.input('b', f32, [4])), /^add: shapes \[2, 3\] and \[4\] cannot be broadcast/],
    ['dtype', (m) => m.add(m.input('a', f32, [2]), m.input('b', 'int64', [2])), /^add: dtypes differ \(float32 vs int64\)/],
    ['matmul', (m) => m.matmul(m.input('a', f32, [2, 3]), m.input('b', f32, [4, 5])), /^mm: inner dimensions differ: \[2, 3\] x \[4, 5\]/],
    ['bmm batch', (m) => m.matmul(m.input('a', f32, [2, 2, 3]), m.input('b', f32, [3, 3, 5])), /^bmm: batch sizes differ/],
    ['reshape', (m) => m.reshape(m.input('a', f32, [2, 3]), [4]), /^reshape: cannot view \[2, 3\] \(6 elements\) as \[4\]/],
    [
      'linear',
      (m, p) => m.linear(m.input('x', f32, [2, 5]), p.constant('w', f32, [3, 4], new Float32Array(12))),
      /^linear: input \[2, 5\] must end in in_features 4/,
    ],
    [
      'layer norm',
      (m) => m.layerNorm(m.input('x', f32, [2, 4]), [8]),
      /^layer_norm: normalized_shape \[8\] must equal the trailing dims of the input \[2, 4\]/,
    ],
    ['softmax int', (m) => m.softmax(m.input('x', 'int64', [2]), 0), /^softmax: needs a floating tensor/],
    ['dim range', (m) => m.softmax(m.input('x', f32, [2, 3]), 2), /^softmax: dim 2 is out of range for rank 2/],
    ['permute', (m) => m.permute(m.input('x', f32, [2, 3]), [0, 0]), /^permute: dims \[0, 0\] are not a permutation/],
    ['slice step', (m) => m.slice(m.input('x', f32, [4]), 0, 0, 4, 0), /^slice: step must be a positive integer/],
    ['select', (m) => m.select(m.input('x', f32, [4]), 0, 4), /^select: index 4 is out of range for dim 0 of \[4\]/],
    ['cat', (m) => m.cat([m.input('a', f32, [2, 3]), m.input('b', f32, [2, 4])], 0), /^cat: tensor 1 has shape \[2, 4\]/],
    ['expand', (m) => m.expand(m.input('x', f32, [2, 3]), [4, 3]), /^expand: dim 0 of \[2, 3\] has size 2/],
    [
      'embedding',
      (m, p) => m.embedding(p.constant('t', f32, [4, 2], new Float32Array(8)), m.input('i', f32, [2])),
      /^embedding: indices must be int64 or int32/,
    ],
    [
      'index_put',
      (m) => m.indexPutInPlace(m.input('x', f32, [8, 4]), [m.input('i', 'int64', [2])], m.input('v', f32, [3, 4])),
      /^index_put_: values \[3, 4\] do not broadcast to the indexed shape \[2, 4\]/,
    ],
    [
      'read-only',
      (m, p) => m.copyInto(p.constant('c', f32, [2], [1, 2]), m.input('x', f32, [2])),
      /^copy_: constant 'c' float32\[2\] is read-only/,
    ],
    [
      'copy shape',
      (m, p) => m.copyInto(p.sharedBuffer('s', f32, [2]), m.input('x', f32, [3])),
      /^copy_: source \[3\] does not broadcast to target \[2\]/,
    ],
    [
      'conv',
      (m, p) => m.conv2d(m.input('x', f32, [1, 4, 8, 8]), p.constant('w', f32, [2, 3, 3, 3], new Float32Array(54))),
      /^conv2d: weight \[2, 3, 3, 3\] expects 3 input channels/,
    ],
    ['int scalar', (m) => m.mul(m.input('x', 'int32', [2]), 0.5), /^mul: scalar 0.5 is not an integer, but the tensor is int32/],
    [
      'kernel mm',
      (m) => m.kernel('aten::mm.out', [m.input('a', f32, [1, 5]), m.input('b', f32, [4, 8]), m.graph.addTensor(f32, [1, 8])]),
      /^mm: inner dimensions differ: \[1, 5\] x \[4, 8\]/,
    ],
    [
      'kernel addmm',
      (m) =>
        m.kernel('aten::addmm.out', [
          m.input('c', f32, [3]),
          m.input('a', f32, [2, 4]),
          m.input('b', f32, [4, 8]),
          { double: 1 },
          { double: 1 },
          m.graph.addTensor(f32, [2, 8]),
        ]),
      /^addmm: bias \[3\] does not broadcast to the product \[2, 8\]/,
    ],
    [
      'kernel bmm',
      (m) => m.kernel('aten::bmm.out', [m.input('a', f32, [2, 2, 3]), m.input('b', f32, [2, 4, 5]), m.graph.addTensor(f32, [2, 2, 5])]),
      /^bmm: inner dimensions differ/,
    ],
    [
      'kernel view',
      (m) => m.kernel('aten::view_copy.out', [m.input('a', f32, [1, 5]), { intList: [4, 8] }, m.graph.addTensor(f32, [4, 8])]),
      /^view_copy: cannot view \[1, 5\] \(5 elements\) as \[4, 8\]/,
    ],
    [
      'kernel cat',
      (m) =>
        m.kernel('aten::cat.out', [
          { tensorList: [m.input('a', f32, [1, 4]), m.input('b', f32, [2, 3])] },
          { int: 0 },
          m.graph.addTensor(f32, [3, 4]),
        ]),
      /^cat: tensor 1 has shape \[2, 3\]/,
    ],
    [
      'kernel add',
      (m) => m.kernel('aten::add.out', [m.input('a', f32, [2, 3]), m.input('b', f32, [4]), { int: 1 }, m.graph.addTensor(f32, [2, 3])]),
      /^add: shapes \[2, 3\] and \[4\] cannot be broadcast/,
    ],
    [
      'kernel convolution',
      (m, p) =>
        m.kernel('aten::convolution.out', [
          m.input('x', f32, [1, 5, 8]),
          p.constant('w', f32, [4, 3, 3], new Float32Array(36)),
          null,
          { intList: [1] },
          { intList: [0] },
          { intList: [1] },
          { bool: false },
          { intList: [0] },
          { int: 1 },
          m.graph.addTensor(f32, [1, 4, 6]),
        ]),
      /^convolution: input \[1, 5, 8\] has 5 channels; weight \[4, 3, 3\] with groups 1 expects 3/,
    ],
  ];
  it.each(cases)('%s', (_, body, message) => {
    let caught: unknown;
    try {
      build(body);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(EtnaError);
    expect((caught as EtnaError).code).toBe('INVALID_INPUT');
    expect((caught as EtnaError).message).toMatch(message);
  });

  it('values cannot cross methods or programs', () => {
    const program = new ProgramBuilder();
    let leaked: TensorValue | undefined;
    program.method('a', (m) => {
      leaked = m.input('x', f32, [2]);
    });
    expect(() => program.method('b', (m) => m.relu(leaked!))).toThrow(/method 'b': v0: float32\[2\] belongs to method 'a'/);
    const other = new ProgramBuilder().constant('w', f32, [2], [1, 2]);
    expect(() => program.method('c', (m) => m.relu(other))).toThrow(/declared by another ProgramBuilder/);
  });
});

describe('ProgramBuilder declarations', () => {
  it('rejects duplicate names, wrong data and reuse after export', () => {
    const program = new ProgramBuilder();
    program.constant('w', f32, [2], [1, 2]);
    expect(() => program.constant('w', f32, [2], [1, 2])).toThrow(/constant 'w' is already declared/);
    expect(() => program.constant('v', f32, [3], [1, 2])).toThrow(/constant 'v': expected 3 elements, got 2/);
    expect(() => program.constant('v', f32, [2], new Float64Array(1))).toThrow(/Float64Array does not hold float32 elements/);
    expect(() => program.sharedBuffer('s', f32, [2], new Float32Array(3))).toThrow(/shared buffer 's' init: expected 8 bytes/);
    expect(() => program.sharedBuffer('bad name', f32, [2])).toThrow(/name 'bad name' must start with/);
    expect(() => program.constant('neg', f32, [-1], [])).toThrow(/invalid size -1/);
    program.method('m', (m) => m.output(m.input('x', f32, [1])));
    expect(() => program.method('m', () => undefined)).toThrow(/method 'm' is already defined/);
    program.export();
    expect(() => program.export()).toThrow(/has been exported/);
  });

  it('encodes plain numbers per dtype and accepts raw bytes', () => {
    const program = new ProgramBuilder();
    const ints = program.constant('ints', 'int64', [3], [1, -2, 2 ** 40]);
    expect(Array.from(new BigInt64Array(ints.bytes.slice().buffer))).toEqual([1n, -2n, 2n ** 40n]);
    const flags = program.constant('flags', 'bool', [3], [1, 0, 5]);
    expect(Array.from(flags.bytes)).toEqual([1, 0, 1]);
    const raw = program.constant('raw', f32, [1], new Uint8Array(new Float32Array([1.5]).buffer));
    expect(new Float32Array(raw.bytes.slice().buffer)[0]).toBe(1.5);
    expect(() => program.constant('frac', 'int32', [1], [0.5])).toThrow(/element 0 \(0.5\) is not an integer/);
    expect(() => program.constant('big', 'int64', [1], [0.5])).toThrow(/element 0 \(0.5\) is not an integer/);
  });
});

describe('advanced indexing and lowering checks', () => {
  it('index shapes follow PyTorch: adjacent index tensors stay in place, separated ones go first', () => {
    expect(advancedIndexShape('t', [2, 3, 4, 5], [null, [6], [1]])).toEqual([2, 6, 5]);
    expect(advancedIndexShape('t', [2, 3, 4, 5], [null, [6], null, [6]])).toEqual([6, 2, 4]);
    expect(advancedIndexShape('t', [8, 4], [[2, 1], [3]])).toEqual([2, 3]);
    expect(() => advancedIndexShape('t', [8, 4], [[2], [3]])).toThrow(/t: shapes \[2\] and \[3\] cannot be broadcast/);
  });

  it('a lowering pass that breaks the graph is named in the error', () => {
    const program = new ProgramBuilder();
    program.method('f', (m) => m.output(m.relu(m.input('x', f32, [2]))));
    const broken: LoweringPass = {
      name: 'broken',
      run(method) {
        method.instructions.push({ kind: 'kernel', name: 'aten::relu', overload: 'out', args: [0, 999, 999] });
      },
    };
    expect(() => program.export({ lowering: [broken] })).toThrow(
      /method 'f' after lowering pass 'broken': instruction 1 argument 999 is not a value index/,
    );
  });
});
