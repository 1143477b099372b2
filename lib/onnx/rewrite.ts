// Graph rewrites run before lowering, on the ONNX nodes themselves: per-channel
// affines folded into convolutions (lib/onnx/batchnorm.ts) and decomposed
// activations paddle2onnx writes for old opsets recognised as one op, so the
// delegate sees one node instead of a chain of elementwise passes.
import { toNumbers } from './constant.js';
import { foldAffinesIntoConvs, foldInputAffinesIntoConvs, type FoldedConvAffines } from './batchnorm.js';
import { graphTables, producers, readCounts, type GraphTables } from './graph-info.js';
import type { OnnxGraph, OnnxNode } from './proto.js';

/**
 * x * Clip(x + 3, 0, 6) / 6, as paddle2onnx writes hardswish before opset 14,
 * becomes one HardSwish node. Each intermediate must have no other reader.
 */
export function fuseHardSwish(
  nodes: readonly OnnxNode[],
  graph: OnnxGraph,
  opset: number,
  { constant }: GraphTables,
): { nodes: OnnxNode[]; fused: number } {
  const reads = readCounts({ ...graph, nodes: [...nodes] });
  const producer = producers(nodes);
  const scalar = (name: string | undefined): number | undefined => {
    const tensor = constant(name);
    const values = tensor === undefined || tensor.dtype !== 'float32' ? undefined : toNumbers(tensor);
    return values?.length === 1 ? values[0] : undefined;
  };
  // The node producing `name` when it is `op` and `name` has exactly one reader.
  const singleUse = (name: string | undefined, op: string): OnnxNode | undefined => {
    const node = name === undefined ? undefined : producer.get(name);
    return node?.opType === op && reads.get(name!) === 1 && graph.outputs.every((o) => o.name !== name) ? node : undefined;
  };
  const clipBounds = (clip: OnnxNode): [number | undefined, number | undefined] => {
    if (opset < 11) {
      const attribute = (key: string): number | undefined => clip.attributes.find((a) => a.name === key)?.f;
      return [attribute('min'), attribute('max')];
    }
    return [scalar(clip.inputs[1]), scalar(clip.inputs[2])];
  };

  const removed = new Set<OnnxNode>();
  const replaced = new Map<OnnxNode, OnnxNode>();
  for (const div of nodes) {
    if (div.opType !== 'Div' || scalar(div.inputs[1]) !== 6) continue;
    const mul = singleUse(div.inputs[0], 'Mul');
    if (mul === undefined) continue;
    for (const side of [0, 1]) {
      const x = mul.inputs[1 - side]!;
      const clip = singleUse(mul.inputs[side], 'Clip');
      const [low, high] = clip === undefined ? [] : clipBounds(clip);
      if (clip === undefined || low !== 0 || high !== 6) continue;
      const add = singleUse(clip.inputs[0], 'Add');
      if (add === undefined) continue;
      const shifted = add.inputs[0] === x ? scalar(add.inputs[1]) : add.inputs[1] === x ? scalar(add.inputs[0]) : undefined;
      if (shifted !== 3) continue;
      for (const node of [add, clip, mul]) removed.add(node);
      replaced.set(div, { ...div, opType: 'HardSwish', inputs: [x], attributes: [] });
      break;
    }
  }
  return { nodes: nodes.filter((n) => !removed.has(n)).map((n) => replaced.get(n) ?? n), fused: replaced.size };
}

/** Every rewrite, in order: affines into the convs before and after them, then activation patterns. `folded` counts the nodes that disappeared. */
export function rewriteGraph(graph: OnnxGraph, opset: number): FoldedConvAffines {
  const tables = graphTables(graph);
  const affines = foldAffinesIntoConvs(graph, tables);
  const inputAffines = foldInputAffinesIntoConvs(affines.nodes, affines.constants, graph, tables);
  const hardSwish = fuseHardSwish(inputAffines.nodes, graph, opset, tables);
  return { nodes: hardSwish.nodes, constants: inputAffines.constants, folded: affines.folded + inputAffines.folded + 3 * hardSwish.fused };
}
