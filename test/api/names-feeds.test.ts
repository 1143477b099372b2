// Input and output names (stored as pytree specs in container_meta_type) and
// Module.run with inputs and outputs keyed by name.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { Module, Program, Tensor } from '../../lib/index.js';
import { ProgramBuilder } from '../../lib/export/index.js';
import { exampleInfo, EXAMPLE_NAMES } from '../../lib/tools/examples/index.js';
import { readProgram } from '../export/pte-reader.js';
import { testdataFiles, testdataPath } from '../helpers/testdata.js';
import { rejection } from '../helpers/errors.js';

/** sum = a + b, diff = a - b over float32[1, 3]. */
function sumAndDifference(): Uint8Array {
  const program = new ProgramBuilder();
  program.method('forward', (m) => {
    const a = m.input('a', 'float32', [1, 3]);
    const b = m.input('b', 'float32', [1, 3]);
    m.output({ sum: m.add(a, b), diff: m.sub(a, b) });
  });
  return program.toPte();
}

describe('names in ExecuTorch exports', () => {
  it('are input_<i> and output_<i> for every method of every real file (no keyword arguments there)', () => {
    for (const file of testdataFiles().filter((f) => f !== 'djl_corrupt.pte')) {
      for (const method of Program.load(testdataPath(file)).describe().methods) {
        expect(
          method.inputs.map((v) => v.name),
          `${file} ${method.name}`,
        ).toEqual(method.inputs.map((_, i) => `input_${i}`));
        expect(
          method.outputs.map((v) => v.name),
          `${file} ${method.name}`,
        ).toEqual(method.outputs.map((_, i) => `output_${i}`));
      }
    }
  });

  it('run feeds an ExecuTorch export by its default names, with etna, plain and onnxruntime tensors', async () => {
    const module = await Module.load(testdataPath('et_add.pte'));
    expect(module.methodMeta('forward').inputs.map((v) => v.name)).toEqual(['input_0', 'input_1']);
    const outputs = await module.run('forward', {
      input_0: Tensor.float32([1], [2]),
      input_1: new ort.Tensor('float32', Float32Array.from([0.25]), [1]),
    });
    expect(Object.keys(outputs)).toEqual(['output_0']);
    expect((outputs.output_0 as Tensor).toArray()).toEqual([2.25]);
    const plain = await module.run('forward', {
      input_1: { dtype: 'float32', shape: [1], data: Float32Array.from([1]) },
      input_0: Tensor.float32([1], [-3]),
    });
    expect((plain.output_0 as Tensor).toArray()).toEqual([-2]);
    await module.dispose();
  });

  it('execute takes onnxruntime tensors too', async () => {
    const module = await Module.load(testdataPath('et_add.pte'));
    const [sum] = await module.execute('forward', [
      new ort.Tensor('float32', Float32Array.from([4]), [1]),
      new ort.Tensor('float32', Float32Array.from([5]), [1]),
    ]);
    expect((sum as Tensor).toArray()).toEqual([9]);
    const error = await rejection(
      module.execute('forward', [new ort.Tensor('int32', Int32Array.from([4]), [1]), Tensor.float32([1], [1])]),
    );
    expect(error.message).toMatch(/input 0: expected float32\[1\], got int32\[1\] \(dtype differs\)/);
    await module.dispose();
  });
});

describe('names in authored programs', () => {
  it('are the builder names, stored as keyword-argument and dict pytree specs', async () => {
    const bytes = sumAndDifference();
    const plan = readProgram(bytes).executionPlan(0)!;
    const specs = plan.containerMetaType()!;
    const leaf = { type: null, context: null, children_spec: [] };
    expect(JSON.parse(specs.encodedInpStr()!)).toEqual([
      1,
      {
        type: 'builtins.tuple',
        context: 'null',
        children_spec: [
          { type: 'builtins.tuple', context: 'null', children_spec: [] },
          { type: 'builtins.dict', context: '["a", "b"]', children_spec: [leaf, leaf] },
        ],
      },
    ]);
    expect(JSON.parse(specs.encodedOutStr()!)).toEqual([
      1,
      { type: 'builtins.dict', context: '["sum", "diff"]', children_spec: [leaf, leaf] },
    ]);
    const module = await Module.load(bytes);
    expect(module.methodMeta('forward').inputs.map((v) => v.name)).toEqual(['a', 'b']);
    expect(module.methodMeta('forward').outputs.map((v) => v.name)).toEqual(['sum', 'diff']);
    await module.dispose();
  });

  it('unnamed outputs are output_<i>, beside named ones', async () => {
    const program = new ProgramBuilder();
    program.method('twice', (m) => {
      const x = m.input('x', 'float32', [2]);
      m.output(m.add(x, x), m.mul(x, 3));
      m.output({ named: m.relu(x) });
    });
    const module = await Module.load(program.toPte());
    expect(module.methodMeta('twice').outputs.map((v) => v.name)).toEqual(['output_0', 'output_1', 'named']);
    const outputs = await module.run('twice', { x: Tensor.float32([2], [1, -2]) });
    expect((outputs.output_0 as Tensor).toArray()).toEqual([2, -4]);
    expect((outputs.output_1 as Tensor).toArray()).toEqual([3, -6]);
    expect((outputs.named as Tensor).toArray()).toEqual([1, 0]);
    await module.dispose();
  });

  it('must be unique non-empty strings within the inputs and within the outputs', () => {
    const build = (body: Parameters<ProgramBuilder['method']>[1]) => () => new ProgramBuilder().method('m', body);
    expect(
      build((m) => {
        m.input('x', 'float32', [1]);
        m.input('x', 'float32', [1]);
      }),
    ).toThrow(/method 'm': input name 'x' is already used/);
    expect(
      build((m) => {
        m.input('', 'float32', [1]);
      }),
    ).toThrow(/input names must be non-empty strings/);
    expect(
      build((m) => {
        const x = m.input('x', 'float32', [1]);
        m.output({ y: x });
        m.output({ y: m.relu(x) });
      }),
    ).toThrow(/output name 'y' is already used/);
    expect(
      build((m) => {
        const x = m.input('x', 'float32', [1]);
        m.output({ output_1: x });
        m.output(m.relu(x));
      }),
    ).toThrow(/output name 'output_1' is already used/);
    // The same name may be an input and an output.
    expect(
      build((m) => {
        const x = m.input('x', 'float32', [1]);
        m.output({ x: m.relu(x) });
      }),
    ).not.toThrow();
  });

  it('every built-in example names its inputs and outputs as its signature says', () => {
    for (const name of EXAMPLE_NAMES) {
      const info = exampleInfo(name);
      const methods = Program.load(info.build().toPte()).describe().methods;
      for (const signature of info.methods) {
        const [, method, args, results] = /^(\w+)\(([^)]*)\)(?: -> (.*))?$/.exec(signature)!;
        const described = methods.find((m) => m.name === method)!;
        const names = (list: string | undefined) => (list ? list.split(', ').map((part) => part.split(' ')[0]) : []);
        expect(
          described.inputs.map((v) => v.name),
          `${name} ${method}`,
        ).toEqual(names(args));
        expect(
          described.outputs.map((v) => v.name),
          `${name} ${method}`,
        ).toEqual(names(results));
      }
    }
  });
});

describe('Module.run', () => {
  it('resolves to outputs keyed by name, in output order', async () => {
    const module = await Module.load(sumAndDifference());
    const outputs = await module.run('forward', { b: Tensor.float32([1, 3], [1, 1, 1]), a: Tensor.float32([1, 3], [5, 6, 7]) });
    expect(Object.keys(outputs)).toEqual(['sum', 'diff']);
    expect((outputs.sum as Tensor).toArray()).toEqual([6, 7, 8]);
    expect((outputs.diff as Tensor).toArray()).toEqual([4, 5, 6]);
    await module.dispose();
  });

  it('names missing and unknown feeds, and does not read inherited properties', async () => {
    const module = await Module.load(sumAndDifference());
    const a = Tensor.float32([1, 3], [1, 2, 3]);
    expect((await rejection(module.run('forward', { a }))).message).toBe("method 'forward': missing input 'b' (inputs: 'a', 'b')");
    const both = await rejection(module.run('forward', { a, c: a, d: a }));
    expect(both.code).toBe('INVALID_INPUT');
    expect(both.message).toBe("method 'forward': missing input 'b'; no inputs named 'c', 'd' (inputs: 'a', 'b')");
    const inherited = Object.create({ b: a }) as Record<string, Tensor>;
    inherited.a = a;
    expect((await rejection(module.run('forward', inherited))).message).toMatch(/missing input 'b'/);
    expect((await rejection(module.run('forward', [a, a] as unknown as Record<string, Tensor>))).message).toMatch(
      /inputs by name must be an object keyed by input name, got an array/,
    );
    expect((await rejection(module.run('nope', { a }))).code).toBe('METHOD_NOT_FOUND');
    await module.dispose();
  });

  it('validates fed values like execute does', async () => {
    const module = await Module.load(sumAndDifference());
    const error = await rejection(module.run('forward', { a: Tensor.float32([1, 3], [1, 2, 3]), b: Tensor.float32([3], [1, 2, 3]) }));
    expect(error.message).toMatch(/input 1: expected float32\[1, 3\], got float32\[3\] \(rank differs\)/);
    await module.dispose();
  });

  it('writes outputs into caller arrays keyed by name (or by index)', async () => {
    const module = await Module.load(sumAndDifference());
    const feeds = { a: Tensor.float32([1, 3], [1, 2, 3]), b: Tensor.float32([1, 3], [1, 1, 1]) };
    const diff = new Float32Array(3);
    const outputs = await module.run('forward', feeds, { outputs: { diff } });
    expect((outputs.diff as Tensor).data.buffer).toBe(diff.buffer);
    expect(Array.from(diff)).toEqual([0, 1, 2]);
    expect((outputs.sum as Tensor).toArray()).toEqual([2, 3, 4]);
    const sum = new Float32Array(3);
    await module.run('forward', feeds, { outputs: [sum] });
    expect(Array.from(sum)).toEqual([2, 3, 4]);
    const error = await rejection(module.run('forward', feeds, { outputs: { total: sum } }));
    expect(error.message).toBe("method 'forward': no output named 'total' (outputs: 'sum', 'diff')");
    await module.dispose();
  });
});
