// Programs shared by the export tests.
import { ProgramBuilder, type LoweringPass } from '../../lib/export/index.js';

// Replaces every relu by a call to a made-up backend, registering a payload and
// weights under named keys: exercises the lowering seam, delegate segments and named data.
export const reluToBackend: LoweringPass = {
  name: 'relu-to-test-backend',
  run(method, context) {
    method.instructions.forEach((instruction, i) => {
      if (instruction.kind !== 'kernel' || instruction.name !== 'aten::relu') return;
      const payload = context.addDelegatePayload(new TextEncoder().encode(`relu payload for ${instruction.args.length} args`));
      method.delegates.push({ backendId: 'TestBackend', payload, compileSpecs: [{ key: 'mode', value: new Uint8Array([7]) }] });
      const [input, output] = instruction.args as [number, number];
      method.instructions[i] = { kind: 'delegate', delegate: method.delegates.length - 1, args: [input, output] };
    });
    context.addNamedData('weights-a', new Uint8Array([1, 2, 3, 4, 5]), 256);
    context.addNamedData('weights-b', new Uint8Array([1, 2, 3, 4, 5]));
    context.addNamedData('weights-c', new Uint8Array(300).fill(9));
  },
};

/** Odd-sized constants, initialized and zero-started shared buffers, two methods. */
export function syntheticProgram(): ProgramBuilder {
  const program = new ProgramBuilder();
  const odd = program.constant('odd', 'float32', [3], [1, 2, 3]); // 12 bytes: the next constant must move to 16
  const bytes5 = program.constant('bytes5', 'int8', [5], [1, -2, 3, -4, 5]);
  const wide = program.constant('wide', 'float32', [2, 3], [1, 2, 3, 4, 5, 6]);
  const counter = program.sharedBuffer('counter', 'int8', [3], [7, 8, 9]); // 3 bytes, no padding after it
  const level = program.sharedBuffer('level', 'float32', [2], [0.5, -0.5]);
  const scratch = program.sharedBuffer('scratch', 'float32', [4]);
  program.method('forward', (m) => {
    const x = m.input('x', 'float32', [2, 3]);
    const y = m.relu(m.add(m.mul(x, wide), odd));
    m.copyInto(level, m.slice(m.reshape(y, [6]), 0, 0, 2));
    m.copyInto(counter, m.add(counter, m.slice(bytes5, 0, 0, 3)));
    m.output(y);
  });
  program.method('read_level', (m) => {
    m.output(m.add(level, m.slice(scratch, 0, 0, 2)));
  });
  return program;
}
