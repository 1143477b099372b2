// Memory planner. Per method, activations (including planned inputs and
// outputs) go to mem_id 1, placed by a best-fit offset search over tensor
// lifetimes; shared buffers go to mem_id 2 at one program-wide layout so every
// method sees the same state at the same offsets. See docs/memory-planning.md.
import { EtnaError } from '../errors.js';
import { dtypeInfo, type DType } from './dtype.js';
import type { MethodGraph, ProgramGraph } from './graph.js';
import { alignUp, numel, type Shape } from './shape.js';

export const ACTIVATION_MEMORY_ID = 1;
export const SHARED_MEMORY_ID = 2;
export const DEFAULT_PLANNING_ALIGNMENT = 16;

export interface PlannerOptions {
  /** Offsets and footprints are multiples of this (power of two, default 16). */
  alignment?: number;
}

/** One tensor to place: it occupies `nbytes` from step `first` through step `last` (inclusive). */
export interface LifetimeItem {
  readonly id: number;
  readonly nbytes: number;
  readonly first: number;
  readonly last: number;
}

export interface ArenaPlan {
  /** Byte offset of every item, by id. */
  readonly offsets: ReadonlyMap<number, number>;
  /** Arena bytes: the highest end, rounded up to the alignment. */
  readonly size: number;
  /** Bytes a plan with one slot per tensor (no reuse) needs. */
  readonly naiveSize: number;
}

export function lifetimesOverlap(a: LifetimeItem, b: LifetimeItem): boolean {
  return a.first <= b.last && b.first <= a.last;
}

/**
 * Best-fit placement: items are taken largest footprint first (ties: earlier
 * first use, then id); each goes into the smallest gap, among the items already
 * placed whose lifetimes overlap it, that can hold it, or after the highest of
 * them when no gap fits.
 */
export function planArena(items: readonly LifetimeItem[], alignment = DEFAULT_PLANNING_ALIGNMENT): ArenaPlan {
  checkAlignment(alignment);
  const footprint = (item: LifetimeItem): number => alignUp(item.nbytes, alignment);
  const order = [...items].sort((a, b) => footprint(b) - footprint(a) || a.first - b.first || a.id - b.id);
  const placed: { item: LifetimeItem; offset: number; size: number }[] = [];
  const offsets = new Map<number, number>();
  let size = 0;
  let naiveSize = 0;
  for (const item of order) {
    if (item.first > item.last) throw new EtnaError('INTERNAL', `planner: item ${item.id} has lifetime [${item.first}, ${item.last}]`);
    const need = footprint(item);
    naiveSize += need;
    const neighbours = placed.filter((p) => p.size > 0 && lifetimesOverlap(p.item, item)).sort((a, b) => a.offset - b.offset);
    let best: { offset: number; gap: number } | undefined;
    let cursor = 0;
    for (const p of neighbours) {
      const gap = p.offset - cursor;
      if (gap >= need && (best === undefined || gap < best.gap)) best = { offset: cursor, gap };
      cursor = Math.max(cursor, p.offset + p.size);
    }
    const offset = need === 0 ? 0 : (best?.offset ?? cursor);
    placed.push({ item, offset, size: need });
    offsets.set(item.id, offset);
    size = Math.max(size, offset + need);
  }
  return { offsets, size: alignUp(size, alignment), naiveSize };
}

export interface TensorPlacement {
  /** Index into the method's values table. */
  readonly value: number;
  readonly memoryId: number;
  readonly offset: number;
  readonly nbytes: number;
  /** First and last instruction index touching the tensor (inputs start at 0; outputs end at the instruction count). */
  readonly first: number;
  readonly last: number;
  readonly kind: 'activation' | 'input' | 'shared';
}

export interface MethodMemoryPlan {
  readonly method: string;
  readonly placements: readonly TensorPlacement[];
  /** Bytes of mem_id 1 for this method (A_m), including backend padding. */
  readonly activationBytes: number;
  /** Bytes of mem_id 1 with one slot per tensor. */
  readonly naiveActivationBytes: number;
  /** [0, A_m] or, when the program has shared buffers, [0, A_m, S]. */
  readonly nonConstBufferSizes: readonly number[];
}

export interface SharedBufferPlacement {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: Shape;
  readonly offset: number;
  readonly nbytes: number;
  readonly hasInit: boolean;
}

export interface ProgramMemoryPlan {
  readonly alignment: number;
  readonly methods: readonly MethodMemoryPlan[];
  readonly shared: readonly SharedBufferPlacement[];
  /** Bytes of mem_id 2 (S), the same for every method. */
  readonly sharedBytes: number;
}

function checkAlignment(alignment: number): void {
  if (!Number.isInteger(alignment) || alignment < 1 || (alignment & (alignment - 1)) !== 0) {
    throw new EtnaError('INVALID_INPUT', `planning alignment must be a power of two, got ${String(alignment)}`);
  }
}

function tensorBytes(dtype: DType, shape: Shape): number {
  return numel(shape) * dtypeInfo(dtype).byteSize;
}

/** Shared buffers packed back to back in declaration order, each at an aligned offset. */
export function planSharedBuffers(
  program: ProgramGraph,
  alignment = DEFAULT_PLANNING_ALIGNMENT,
): { placements: SharedBufferPlacement[]; size: number } {
  checkAlignment(alignment);
  let cursor = 0;
  const placements = program.sharedBuffers.map((buffer) => {
    const placement: SharedBufferPlacement = {
      name: buffer.name,
      dtype: buffer.dtype,
      shape: buffer.shape,
      offset: cursor,
      nbytes: buffer.nbytes,
      hasInit: buffer.init !== undefined,
    };
    cursor += alignUp(buffer.nbytes, alignment);
    return placement;
  });
  return { placements, size: cursor };
}

/** Lifetimes of the method's tensors that need planned memory (inputs, and activations something references), by value index. */
export function tensorLifetimes(method: MethodGraph): Map<number, { first: number; last: number }> {
  const lifetimes = new Map<number, { first: number; last: number }>();
  const touch = (index: number, step: number): void => {
    const node = method.values[index];
    if (node?.kind !== 'tensor' || (node.origin.kind !== 'activation' && node.origin.kind !== 'input')) return;
    const span = lifetimes.get(index);
    if (span === undefined) lifetimes.set(index, { first: step, last: step });
    else {
      span.first = Math.min(span.first, step);
      span.last = Math.max(span.last, step);
    }
  };
  // Inputs are copied in before the first instruction runs.
  for (const input of method.inputs) touch(input, 0);
  method.instructions.forEach((instruction, step) => {
    for (const operand of method.instructionOperands(instruction)) touch(operand, step);
  });
  // Outputs must survive the last instruction.
  for (const output of method.outputs) touch(output, method.instructions.length);
  // Activations nothing references (e.g. left behind by a lowering pass) get no memory.
  return lifetimes;
}

export function planMethod(
  method: MethodGraph,
  shared: readonly SharedBufferPlacement[],
  sharedBytes: number,
  hasSharedArena: boolean,
  alignment = DEFAULT_PLANNING_ALIGNMENT,
): MethodMemoryPlan {
  const lifetimes = tensorLifetimes(method);
  const items: LifetimeItem[] = [];
  for (const [value, span] of lifetimes) {
    const node = method.tensorNode(value);
    items.push({ id: value, nbytes: tensorBytes(node.dtype, node.shape), first: span.first, last: span.last });
  }
  const arena = planArena(items, alignment);
  const placements: TensorPlacement[] = items.map((item) => ({
    value: item.id,
    memoryId: ACTIVATION_MEMORY_ID,
    offset: arena.offsets.get(item.id)!,
    nbytes: item.nbytes,
    first: item.first,
    last: item.last,
    kind: method.tensorNode(item.id).origin.kind === 'input' ? 'input' : 'activation',
  }));
  const byName = new Map(shared.map((s) => [s.name, s]));
  method.values.forEach((node, value) => {
    if (node.kind !== 'tensor' || node.origin.kind !== 'shared') return;
    const slot = byName.get(node.origin.buffer.name);
    if (slot === undefined) throw new EtnaError('INTERNAL', `planner: shared buffer '${node.origin.buffer.name}' has no placement`);
    placements.push({
      value,
      memoryId: SHARED_MEMORY_ID,
      offset: slot.offset,
      nbytes: slot.nbytes,
      first: 0,
      last: method.instructions.length,
      kind: 'shared',
    });
  });
  placements.sort((a, b) => a.value - b.value);
  const padding = method.arenaPaddingBytes;
  const activationBytes = arena.size + padding;
  return {
    method: method.name,
    placements,
    activationBytes,
    naiveActivationBytes: arena.naiveSize + padding,
    nonConstBufferSizes: hasSharedArena ? [0, activationBytes, sharedBytes + padding] : [0, activationBytes],
  };
}

export function planProgram(program: ProgramGraph, options: PlannerOptions = {}): ProgramMemoryPlan {
  const alignment = options.alignment ?? DEFAULT_PLANNING_ALIGNMENT;
  const { placements: shared, size: sharedBytes } = planSharedBuffers(program, alignment);
  const hasSharedArena = program.sharedBuffers.length > 0;
  const paddings = new Set(program.methods.map((m) => m.arenaPaddingBytes));
  if (hasSharedArena && paddings.size > 1) {
    // mem_id 2 must have one size in every method.
    throw new EtnaError(
      'INVALID_PROGRAM',
      `methods ask for different arena padding (${[...paddings].join(', ')} bytes) but share mem_id 2`,
    );
  }
  const methods = program.methods.map((method) => planMethod(method, shared, sharedBytes, hasSharedArena, alignment));
  return { alignment, methods, shared, sharedBytes: hasSharedArena ? (methods[0]?.nonConstBufferSizes[2] ?? sharedBytes) : 0 };
}

export interface MemoryReportRow {
  readonly method: string;
  /** Planned mem_id 1 bytes (A_m). */
  readonly planned: number;
  /** One slot per tensor. */
  readonly naive: number;
  readonly nonConstBufferSizes: readonly number[];
}

export interface PlanMemoryReport {
  readonly rows: readonly MemoryReportRow[];
  /** mem_id 2 bytes (S). */
  readonly state: number;
  /** Arenas with share_memory_arenas: max A_m + S. */
  readonly sharedTotal: number;
  /** Sharing only mem_id 2: sum A_m + S. */
  readonly stateOnlyTotal: number;
  /** Every method with its own arenas: sum (A_m + S). */
  readonly unsharedTotal: number;
  /** Every method with its own arenas and one slot per tensor: sum (naive A_m + S). */
  readonly naiveUnsharedTotal: number;
}

export function memoryReport(plan: ProgramMemoryPlan): PlanMemoryReport {
  const rows = plan.methods.map((m) => ({
    method: m.method,
    planned: m.activationBytes,
    naive: m.naiveActivationBytes,
    nonConstBufferSizes: m.nonConstBufferSizes,
  }));
  const state = plan.sharedBytes;
  const sum = (f: (r: MemoryReportRow) => number): number => rows.reduce((total, r) => total + f(r), 0);
  return {
    rows,
    state,
    sharedTotal: Math.max(0, ...rows.map((r) => r.planned)) + state,
    stateOnlyTotal: sum((r) => r.planned) + state,
    unsharedTotal: sum((r) => r.planned + state),
    naiveUnsharedTotal: sum((r) => r.naive + state),
  };
}

/** A Markdown table of a memory report (used for docs/memory-planning.md). */
export function formatMemoryReport(title: string, report: PlanMemoryReport): string {
  const lines = [
    `#### ${title}`,
    '',
    '| method | planned mem_id 1 (bytes) | naive mem_id 1 (bytes) | non_const_buffer_sizes |',
    '|---|---:|---:|---|',
    ...report.rows.map((r) => `| \`${r.method}\` | ${r.planned} | ${r.naive} | [${r.nonConstBufferSizes.join(', ')}] |`),
    '',
    '| total | bytes |',
    '|---|---:|',
    `| shared state, mem_id 2 (S) | ${report.state} |`,
    `| all arenas shared (max A_m + S) | ${report.sharedTotal} |`,
    `| state shared, activations per method (sum A_m + S) | ${report.stateOnlyTotal} |`,
    `| nothing shared (sum of A_m + S) | ${report.unsharedTotal} |`,
    `| nothing shared, naive plan (sum of naive A_m + S) | ${report.naiveUnsharedTotal} |`,
  ];
  return lines.join('\n');
}
