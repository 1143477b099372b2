// The bounded prefill's varying token count, marked on every tensor the
// llama-8da4w program computes from the tokens.
import { EtnaError } from '../../errors.js';
import type { MethodGraph } from '../../export/graph.js';

/**
 * Marks the prefill's varying length on every tensor computed from the
 * tokens (instructions from `firstInstruction` on, values before `valueEnd`):
 * an out tensor of an instruction that reads a varying tensor varies too, at
 * its dim 0 ([n, ...]) or dim 1 ([1, n, ...]), and a view_copy to it infers
 * that dim (-1). A tensor is an instruction's out when that instruction is the
 * first to name it, as the builder emits them.
 */
export function markPrefillLength(graph: MethodGraph, tokens: number, length: number, valueEnd: number, firstInstruction: number): void {
  const varying = new Set([tokens]);
  const named = new Set([tokens]);
  const tensorArgs = (args: readonly number[]): number[] =>
    args.flatMap((index) => {
      const value = graph.value(index);
      return value.kind === 'tensor' ? [index] : value.kind === 'tensorList' ? [...value.items] : [];
    });
  graph.instructions.forEach((instruction, at) => {
    const tensors = tensorArgs(instruction.args);
    const outs = new Set(tensors.filter((t) => !named.has(t) && graph.tensorNode(t).origin.kind === 'activation'));
    tensors.forEach((t) => named.add(t));
    if (at < firstInstruction || !tensors.some((t) => !outs.has(t) && varying.has(t))) return;
    for (const out of outs) {
      const { shape } = graph.tensorNode(out);
      const dim = shape.length >= 2 && shape[0] === 1 && shape[1] === length ? 1 : shape[0] === length ? 0 : -1;
      if (out >= valueEnd || dim < 0) continue;
      graph.markDynamic(out, [dim]);
      varying.add(out);
      if (instruction.kind === 'kernel' && instruction.name === 'aten::view_copy') {
        const sizes = graph.value(instruction.args[1]!);
        if (sizes.kind !== 'intList') throw new EtnaError('INTERNAL', 'view_copy sizes are not an int list');
        const items = [...sizes.items];
        items[dim] = graph.addValue({ kind: 'int', value: -1n });
        graph.values[instruction.args[1]!] = { kind: 'intList', items };
      }
    }
  });
}
