// Sharing semantics on a two-method program: write(x) stores x into a mem_id 2
// state tensor, read() returns it. With shared state read() sees x; without,
// each method has its own zeroed copy.
import { describe, expect, it } from 'vitest';

import { ProgramBuilder, assembleProgram, writePte, type PteProgram, type PteTensor } from '../../lib/export/index.js';
import { EtnaError, Module, Program, Tensor, type ShareMemoryArenas } from '../../lib/index.js';

function writeReadProgram(): ProgramBuilder {
  const builder = new ProgramBuilder();
  const state = builder.sharedBuffer('state', 'float32', [4]);
  builder.method('write', (m) => {
    const x = m.input('x', 'float32', [4]);
    m.copyInto(state, x);
  });
  builder.method('read', (m) => {
    m.output(m.add(state, 0));
  });
  return builder;
}

async function readAfterWrite(share: ShareMemoryArenas): Promise<number[]> {
  const m = await Module.load(writeReadProgram().toPte(), { shareMemoryArenas: share });
  await m.execute('write', [Tensor.float32([4], [1, 2, 3, 4])]);
  const [y] = await m.execute('read', []);
  await m.dispose();
  return (y as Tensor).toArray();
}

// The same program with one method's state tensor moved so that it overlaps
// the other method's without matching it.
function conflictingProgram(shift: number): Uint8Array {
  const builder = writeReadProgram();
  const wire = assembleProgram(builder.programGraph, builder.plan()) as PteProgram;
  const [write, read] = wire.methods;
  const moved = read!.values.map((value) =>
    value.kind === 'tensor' && value.allocation?.memoryId === 2
      ? ({ ...value, allocation: { memoryId: 2, offset: value.allocation.offset + shift } } satisfies PteTensor)
      : value,
  );
  const sizes = [...read!.nonConstBufferSizes];
  sizes[2] = (sizes[2] ?? 0) + shift;
  const writeSizes = [...write!.nonConstBufferSizes];
  writeSizes[2] = sizes[2]!;
  return writePte({
    ...wire,
    methods: [
      { ...write!, nonConstBufferSizes: writeSizes },
      { ...read!, values: moved, nonConstBufferSizes: sizes },
    ],
  });
}

describe('shared state across methods', () => {
  it('plans the state at mem_id 2 in both methods', () => {
    const description = Program.load(writeReadProgram().toPte()).describe();
    for (const method of description.methods) expect(method.memoryPlan.length).toBe(3);
    expect(description.methods[0]!.memoryPlan[2]).toBe(description.methods[1]!.memoryPlan[2]);
  });

  it('read() returns what write(x) stored with shareMemoryArenas true, "state" and auto', async () => {
    expect(await readAfterWrite(true)).toEqual([1, 2, 3, 4]);
    expect(await readAfterWrite('state')).toEqual([1, 2, 3, 4]);
    expect(await readAfterWrite('auto')).toEqual([1, 2, 3, 4]);
  });

  it('read() returns zeros with shareMemoryArenas false', async () => {
    expect(await readAfterWrite(false)).toEqual([0, 0, 0, 0]);
  });

  it('reports why it shared', async () => {
    const m = await Module.load(writeReadProgram().toPte());
    const report = m.memoryReport();
    expect(report.mode).toBe('shared');
    expect(report.reason).toMatch(/2 methods plan a mem_id 2 state arena/);
    const state = report.arenas.find((arena) => arena.memoryId === 2);
    expect(state?.shared).toBe(true);
    expect(state?.methods).toEqual(['write', 'read']);
    await m.dispose();
  });

  it('refuses plans whose state tensors overlap without matching', async () => {
    const bytes = conflictingProgram(8);
    const error = await Module.load(bytes, { shareMemoryArenas: true }).then(
      () => null,
      (e: unknown) => e as EtnaError,
    );
    expect(error).toBeInstanceOf(EtnaError);
    expect(error!.code).toBe('MEMORY_PLAN_CONFLICT');
    expect(error!.message).toMatch(/'write' values\[\d+\] \('state'\) float32 at \[0, 16\)/);
    expect(error!.message).toMatch(/'read' values\[\d+\] \('state'\) float32 at \[8, 24\)/);
    // Without sharing the same file loads: each method keeps its own bytes.
    const unshared = await Module.load(bytes, { shareMemoryArenas: false });
    await unshared.dispose();
  });

  it('refuses state arenas of different sizes', async () => {
    const builder = writeReadProgram();
    const wire = assembleProgram(builder.programGraph, builder.plan()) as PteProgram;
    const [write, read] = wire.methods;
    const bigger = [...read!.nonConstBufferSizes];
    bigger[2] = bigger[2]! + 16;
    const bytes = writePte({ ...wire, methods: [write!, { ...read!, nonConstBufferSizes: bigger }] });
    await expect(Module.load(bytes, { shareMemoryArenas: 'state' })).rejects.toMatchObject({
      code: 'MEMORY_PLAN_CONFLICT',
      message: expect.stringMatching(/'write' and 'read' plan different state arenas \(mem_id 2: 16 vs 32 bytes\)/),
    });
  });

  it('leaves state untouched when a call is refused', async () => {
    const m = await Module.load(writeReadProgram().toPte());
    await m.execute('write', [Tensor.float32([4], [5, 6, 7, 8])]);
    await expect(m.execute('write', [Tensor.float32([3], [0, 0, 0])])).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(m.execute('write', [Tensor.int64([4], [0, 0, 0, 0])])).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    const [y] = await m.execute('read', []);
    expect((y as Tensor).toArray()).toEqual([5, 6, 7, 8]);
    await m.dispose();
  });
});
