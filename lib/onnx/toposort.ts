// Nodes in an order where every value is produced before it is read, as
// onnxruntime orders them when it loads a model: converters sometimes append
// nodes (Casts of the graph inputs, for one) after the nodes that read them.
// A graph already in order keeps its order; a cycle is refused.
import { EtnaError } from '../errors.js';
import type { OnnxGraph, OnnxNode } from './proto.js';

function nodeLabel(node: OnnxNode): string {
  return `'${node.name || node.outputs[0] || '?'}' (${node.opType})`;
}

/**
 * Names a subgraph reads from the scopes around it: its nodes' inputs (and
 * those of subgraphs inside it) that it does not define itself.
 */
function outerReads(graph: OnnxGraph, into: Set<string>): void {
  const defined = new Set<string>([...graph.inputs.map((i) => i.name), ...graph.initializers.map((t) => t.name)]);
  for (const node of graph.nodes) for (const out of node.outputs) defined.add(out);
  const reads = new Set<string>();
  for (const node of graph.nodes) {
    for (const input of node.inputs) reads.add(input);
    for (const attr of node.attributes) if (attr.g !== undefined) outerReads(attr.g, reads);
  }
  for (const name of reads) if (name !== '' && !defined.has(name)) into.add(name);
}

/** Every value `node` reads: its inputs and what its subgraphs read from outside them. */
function nodeReads(node: OnnxNode): string[] {
  const reads = new Set(node.inputs.filter((name) => name !== ''));
  for (const attr of node.attributes) if (attr.g !== undefined) outerReads(attr.g, reads);
  return [...reads];
}

/**
 * `graph.nodes` ordered so that each node comes after the producers of the
 * values it reads (values read from graph inputs, initializers or an outer
 * scope need no producer). Depth-first from each node in file order, so a
 * sorted graph comes back unchanged. Throws INVALID_INPUT naming a node on a
 * cycle and the cycle's path.
 */
export function sortNodes(graph: OnnxGraph): OnnxNode[] {
  const nodes = graph.nodes;
  const producer = new Map<string, number>();
  nodes.forEach((node, at) => {
    for (const out of node.outputs) if (out !== '' && !producer.has(out)) producer.set(out, at);
  });
  const dependencies = nodes.map((node) =>
    nodeReads(node).flatMap((name) => {
      const at = producer.get(name);
      return at === undefined ? [] : [at];
    }),
  );

  const UNSEEN = 0;
  const ON_PATH = 1;
  const PLACED = 2;
  const state = new Uint8Array(nodes.length);
  const order: OnnxNode[] = [];
  // An explicit stack: real graphs have chains of thousands of nodes.
  const stack: { node: number; next: number }[] = [];
  for (let start = 0; start < nodes.length; start++) {
    if (state[start] !== UNSEEN) continue;
    state[start] = ON_PATH;
    stack.push({ node: start, next: 0 });
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      const deps = dependencies[frame.node]!;
      if (frame.next < deps.length) {
        const dep = deps[frame.next++]!;
        if (state[dep] === ON_PATH) {
          const from = stack.findIndex((f) => f.node === dep);
          const path = [...stack.slice(from).map((f) => nodes[f.node]!), nodes[dep]!].reverse().map(nodeLabel).join(' -> ');
          throw new EtnaError('INVALID_INPUT', `node ${nodeLabel(nodes[dep]!)} is on a cycle: ${path}; an ONNX graph must be acyclic`);
        }
        if (state[dep] === UNSEEN) {
          state[dep] = ON_PATH;
          stack.push({ node: dep, next: 0 });
        }
      } else {
        stack.pop();
        state[frame.node] = PLACED;
        order.push(nodes[frame.node]!);
      }
    }
  }
  return order;
}
