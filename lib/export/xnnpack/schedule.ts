// The order the XNNPACK lowering reads a method's instructions in: once a
// delegate run has begun, the instructions it can take that are ready (what
// they read is computed) come before kernel calls it cannot take, so a kernel
// whose result only something later reads (the condition of a final Where, a
// minimum beside a maximum of the same tensor) no longer splits the delegate
// call around it. Until a run has begun, and whenever nothing it can take is
// ready, instructions keep their order: moving instructions ahead of a kernel
// that starts the method would split the first run instead.
import type { MethodGraph } from '../graph.js';
import { isComputeOp, type MatchedOp } from './partition.js';

/** Smallest-first queue of instruction positions. */
class PositionQueue {
  private readonly items: number[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): number | undefined {
    return this.items[0];
  }

  push(position: number): void {
    const items = this.items;
    items.push(position);
    for (let i = items.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (items[parent]! <= position) break;
      items[i] = items[parent]!;
      items[parent] = position;
      i = parent;
    }
  }

  pop(): number {
    const items = this.items;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length > 0) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= items.length) break;
        const child = left + 1 < items.length && items[left + 1]! < items[left]! ? left + 1 : left;
        if (items[child]! >= last) break;
        items[i] = items[child]!;
        i = child;
      }
      items[i] = last;
    }
    return top;
  }
}

/**
 * What each instruction must follow. An instruction writes the activations
 * it names first (out variants); one that may write anything else (a kernel
 * whose result is not a fresh activation, such as a state update, or a
 * delegate call) stays between everything before and after it.
 */
function predecessors(method: MethodGraph, matches: readonly (MatchedOp | undefined)[]): number[][] {
  const firstNamedBy = new Map<number, number>();
  let lastFence = -1;
  return method.instructions.map((instruction, step) => {
    const operands = new Set(method.instructionOperands(instruction));
    const fresh = new Set<number>();
    for (const value of operands) {
      const node = method.values[value];
      if (node?.kind === 'tensor' && node.origin.kind === 'activation' && !firstNamedBy.has(value)) fresh.add(value);
    }
    const op = matches[step];
    const result = op?.out ?? instruction.args.at(-1);
    const fence = instruction.kind !== 'kernel' || result === undefined || !fresh.has(result);
    const before = new Set<number>();
    if (fence) for (let earlier = lastFence + 1; earlier < step; earlier++) before.add(earlier);
    if (lastFence >= 0) before.add(lastFence);
    for (const value of operands) {
      const writer = firstNamedBy.get(value);
      if (writer !== undefined) before.add(writer);
    }
    for (const value of fresh) firstNamedBy.set(value, step);
    if (fence) lastFence = step;
    return [...before];
  });
}

/** Reorders `method.instructions` and `matches` (one entry per instruction) alike, as the file's comment says. */
export function scheduleForDelegateRuns(method: MethodGraph, matches: (MatchedOp | undefined)[]): void {
  const count = method.instructions.length;
  const waitingOn = new Array<number>(count).fill(0);
  const followers: number[][] = Array.from({ length: count }, () => []);
  predecessors(method, matches).forEach((before, step) => {
    waitingOn[step] = before.length;
    for (const earlier of before) followers[earlier]!.push(step);
  });
  const readyMatched = new PositionQueue();
  const readyOther = new PositionQueue();
  const ready = (step: number): void => (matches[step] === undefined ? readyOther : readyMatched).push(step);
  for (let step = 0; step < count; step++) if (waitingOn[step] === 0) ready(step);
  const order: number[] = [];
  let runBegun = false;
  while (order.length < count) {
    const matched = readyMatched.peek();
    const other = readyOther.peek();
    const takeMatched: boolean = matched !== undefined && (runBegun || other === undefined || matched < other);
    const step: number = takeMatched ? readyMatched.pop() : readyOther.pop();
    order.push(step);
    const op: MatchedOp | undefined = matches[step];
    runBegun = op !== undefined && (runBegun || isComputeOp(op));
    for (const next of followers[step]!) if (--waitingOn[next]! === 0) ready(next);
  }
  const instructions = order.map((step) => method.instructions[step]!);
  const reordered = order.map((step) => matches[step]);
  method.instructions.splice(0, count, ...instructions);
  matches.splice(0, count, ...reordered);
}
