import { describe, expect, it } from 'vitest';

import { readProgram, tensorAt } from './pte-reader.js';
import {
  memoryReport,
  planArena,
  ProgramBuilder,
  tensorLifetimes,
  type LifetimeItem,
  type LoweringPass,
  type MethodMemoryPlan,
  type ProgramMemoryPlan,
} from '../../lib/export/index.js';
import { buildExample, EXAMPLE_NAMES, SeededRandom } from '../../lib/tools/examples/index.js';

const overlaps = (a: { first: number; last: number }, b: { first: number; last: number }): boolean =>
  a.first <= b.last && b.first <= a.last;

/** Every pair of planned tensors in one arena that is alive at the same step must use disjoint bytes. */
function expectNoConflicts(items: readonly LifetimeItem[], offsets: ReadonlyMap<number, number>, size: number, alignment = 16): void {
  for (const item of items) {
    const offset = offsets.get(item.id)!;
    expect(offset % alignment, `item ${item.id} offset ${offset}`).toBe(0);
    expect(offset + item.nbytes).toBeLessThanOrEqual(size);
  }
  for (let i = 0; i < items.length; i++) {
    for (let j = i + 1; j < items.length; j++) {
      const a = items[i]!;
      const b = items[j]!;
      if (a.nbytes === 0 || b.nbytes === 0 || !overlaps(a, b)) continue;
      const [oa, ob] = [offsets.get(a.id)!, offsets.get(b.id)!];
      const disjoint = oa + a.nbytes <= ob || ob + b.nbytes <= oa;
      expect(disjoint, `items ${a.id} [${oa}, +${a.nbytes}) and ${b.id} [${ob}, +${b.nbytes}) overlap while both alive`).toBe(true);
    }
  }
}

/** Bytes alive at the busiest step: no plan can be smaller. */
function peakLiveBytes(items: readonly LifetimeItem[], alignment = 16): number {
  const steps = new Set(items.flatMap((i) => [i.first, i.last]));
  let peak = 0;
  for (const step of steps) {
    const live = items
      .filter((i) => i.first <= step && step <= i.last)
      .reduce((sum, i) => sum + Math.ceil(i.nbytes / alignment) * alignment, 0);
    peak = Math.max(peak, live);
  }
  return peak;
}

describe('planArena (best-fit)', () => {
  it('never overlaps live tensors, stays between the live peak and the naive size (random lifetimes)', () => {
    const random = new SeededRandom(1234);
    for (let trial = 0; trial < 40; trial++) {
      const count = 2 + random.integer(40);
      const items: LifetimeItem[] = Array.from({ length: count }, (_, id) => {
        const first = random.integer(30);
        return {
          id,
          nbytes: random.integer(4) === 0 ? random.integer(5000) : 1 + random.integer(300),
          first,
          last: first + random.integer(12),
        };
      });
      const plan = planArena(items);
      expectNoConflicts(items, plan.offsets, plan.size);
      expect(plan.size % 16).toBe(0);
      expect(plan.size).toBeLessThanOrEqual(plan.naiveSize);
      expect(plan.size).toBeGreaterThanOrEqual(peakLiveBytes(items));
      expect(plan.naiveSize).toBe(items.reduce((sum, i) => sum + Math.ceil(i.nbytes / 16) * 16, 0));
    }
  });

  it('reuses the memory of tensors that are dead', () => {
    const chain: LifetimeItem[] = [0, 1, 2, 3].map((id) => ({ id, nbytes: 100, first: id, last: id + 1 }));
    const plan = planArena(chain);
    // Only two neighbours are ever alive together: two 112-byte slots suffice.
    expect(plan.size).toBe(224);
    expect(plan.naiveSize).toBe(448);
    expect(plan.offsets.get(0)).toBe(plan.offsets.get(2));
  });

  it('puts a tensor into the smallest gap that holds it', () => {
    // Placed largest first: 0, 1, 2, 3, 4 stack up; when 5 comes, 1 and 3 are dead and
    // leave gaps of 128 and 64 bytes. First-fit would take the 128-byte gap; best-fit takes 64.
    const items: LifetimeItem[] = [
      { id: 0, nbytes: 256, first: 0, last: 10 },
      { id: 1, nbytes: 128, first: 0, last: 1 },
      { id: 2, nbytes: 96, first: 0, last: 10 },
      { id: 3, nbytes: 64, first: 0, last: 3 },
      { id: 4, nbytes: 48, first: 0, last: 10 },
      { id: 5, nbytes: 40, first: 5, last: 6 },
    ];
    const plan = planArena(items);
    expectNoConflicts(items, plan.offsets, plan.size);
    expect(plan.offsets.get(3)).toBe(480);
    expect(plan.offsets.get(5)).toBe(480);
    expect(plan.size).toBe(592);
  });

  it('rejects alignments that are not powers of two', () => {
    expect(() => planArena([], 24)).toThrow(/power of two/);
  });
});

function placementsOf(plan: MethodMemoryPlan, memoryId: number) {
  return plan.placements.filter((p) => p.memoryId === memoryId);
}

function checkProgramPlan(builder: ProgramBuilder, plan: ProgramMemoryPlan): void {
  const graph = builder.programGraph;
  const sharedNames = graph.sharedBuffers.map((b) => b.name);
  for (const method of plan.methods) {
    const activations = placementsOf(method, 1);
    const items = activations.map((p) => ({ id: p.value, nbytes: p.nbytes, first: p.first, last: p.last }));
    expectNoConflicts(items, new Map(activations.map((p) => [p.value, p.offset])), method.activationBytes);
    expect(method.activationBytes).toBeLessThanOrEqual(method.naiveActivationBytes);
    expect(method.nonConstBufferSizes).toEqual(
      sharedNames.length > 0 ? [0, method.activationBytes, plan.sharedBytes] : [0, method.activationBytes],
    );
    // Each shared buffer a method touches is at its program-wide offset.
    for (const p of placementsOf(method, 2)) {
      const node = graph.method(method.method).tensorNode(p.value);
      if (node.origin.kind !== 'shared') throw new Error('mem_id 2 holds only shared buffers');
      const slot = plan.shared.find((s) => s.name === (node.origin as { buffer: { name: string } }).buffer.name)!;
      expect(p.offset).toBe(slot.offset);
      expect(p.offset + p.nbytes).toBeLessThanOrEqual(plan.sharedBytes);
    }
  }
  // Shared buffers packed back to back, each 16-aligned, in declaration order.
  let cursor = 0;
  plan.shared.forEach((slot, i) => {
    expect(slot.name).toBe(sharedNames[i]);
    expect(slot.offset).toBe(cursor);
    cursor += Math.ceil(slot.nbytes / 16) * 16;
  });
  expect(plan.sharedBytes).toBe(cursor);
}

describe('planProgram', () => {
  it.each(EXAMPLE_NAMES)('%s: no conflicts, shared buffers at fixed offsets, planned <= naive', (name) => {
    const builder = buildExample(name);
    checkProgramPlan(builder, builder.plan());
  });

  it('inputs live from the start, outputs to the end', () => {
    const program = new ProgramBuilder();
    program.method('f', (m) => {
      const x = m.input('x', 'float32', [4]);
      const unused = m.input('unused', 'float32', [4]);
      const a = m.relu(x); // step 0
      const b = m.tanh(a); // step 1
      m.output(a, m.sigmoid(b)); // step 2
      expect(unused.index).toBe(1);
    });
    const method = program.programGraph.method('f');
    const lifetimes = tensorLifetimes(method);
    expect(lifetimes.get(0)).toEqual({ first: 0, last: 0 }); // x: read at step 0
    expect(lifetimes.get(1)).toEqual({ first: 0, last: 0 }); // unused input still gets memory
    const [a, b, c] = [method.outputs[0]!, method.instructions[1]!.args[1]!, method.outputs[1]!];
    expect(lifetimes.get(a)).toEqual({ first: 0, last: 3 }); // an output survives the last instruction
    expect(lifetimes.get(b)).toEqual({ first: 1, last: 2 });
    expect(lifetimes.get(c)).toEqual({ first: 2, last: 3 });
  });

  it('gives every method [0, A_m, S] with one S, also methods that do not touch the state', () => {
    const program = new ProgramBuilder();
    const first = program.sharedBuffer('first', 'float32', [3]); // 12 -> 16 bytes
    const second = program.sharedBuffer('second', 'int64', [5], [1, 2, 3, 4, 5]); // 40 -> 48 bytes
    program.method('write', (m) => {
      m.copyInto(second, m.add(second, 1));
      m.copyInto(first, m.input('x', 'float32', [3]));
    });
    program.method('read', (m) => m.output(m.add(second, 0)));
    program.method('stateless', (m) => m.output(m.relu(m.input('x', 'float32', [8]))));
    const plan = program.plan();
    expect(plan.shared.map((s) => [s.name, s.offset, s.nbytes, s.hasInit])).toEqual([
      ['first', 0, 12, false],
      ['second', 16, 40, true],
    ]);
    expect(plan.sharedBytes).toBe(64);
    expect(plan.methods.map((m) => m.nonConstBufferSizes)).toEqual([
      [0, 64, 64], // second + 1 (48) and the input x (16) are alive together
      [0, 48, 64], // the output only
      [0, 64, 64], // input and output of relu, 32 each
    ]);
    checkProgramPlan(program, plan);
    const report = memoryReport(plan);
    expect(report.sharedTotal).toBe(64 + 64);
    expect(report.unsharedTotal).toBe(64 + 48 + 64 + 3 * 64);
    expect(report.stateOnlyTotal).toBe(64 + 48 + 64 + 64);
  });

  it('leaves activations that nothing references unplanned (after a lowering pass removed their writer)', () => {
    const program = new ProgramBuilder();
    let orphan = -1;
    program.method('f', (m) => {
      const x = m.input('x', 'float32', [4]);
      orphan = m.tanh(x).index;
      m.output(m.relu(x));
    });
    const dropTanh: LoweringPass = {
      name: 'drop-tanh',
      run(method) {
        const at = method.instructions.findIndex((i) => i.kind === 'kernel' && i.name === 'aten::tanh');
        method.instructions.splice(at, 1);
      },
    };
    const { plan, bytes } = program.export({ lowering: [dropTanh] });
    const method = plan.methods[0]!;
    expect(method.placements.map((p) => p.value)).not.toContain(orphan);
    expect(method.activationBytes).toBe(32);
    const tensor = tensorAt(readProgram(bytes).executionPlan(0)!, orphan)!;
    expect(tensor.allocationInfo()).toBeNull();
    expect(tensor.dataBufferIdx()).toBe(0);
  });
});
