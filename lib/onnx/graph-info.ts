// What the import-time rewrites need to know about a graph: its constant
// values by name, which node produces each value, how often each value is
// read, and names no value has yet.
import { constFromProto, type ConstTensor } from './constant.js';
import type { OnnxGraph, OnnxNode, OnnxTensorProto } from './proto.js';

/** What every rewrite of one graph shares: its constants, decoded once, and one source of fresh names. */
export interface GraphTables {
  readonly constant: (name: string | undefined) => ConstTensor | undefined;
  readonly freshName: (base: string) => string;
}

export function graphTables(graph: OnnxGraph): GraphTables {
  return { constant: graphConstants(graph), freshName: nameMaker(graph) };
}

/** The node producing each value name. */
export function producers(nodes: readonly OnnxNode[]): Map<string, OnnxNode> {
  const producer = new Map<string, OnnxNode>();
  for (const node of nodes) for (const out of node.outputs) if (out !== '') producer.set(out, node);
  return producer;
}

/** Constant values of a graph by name: initializers and Constant nodes holding a tensor. */
function graphConstants(graph: OnnxGraph): (name: string | undefined) => ConstTensor | undefined {
  const protos = new Map<string, OnnxTensorProto>(graph.initializers.map((t) => [t.name, t]));
  for (const node of graph.nodes) {
    const value = node.attributes[0];
    if (node.opType === 'Constant' && node.attributes.length === 1 && value?.name === 'value' && value.t !== undefined)
      protos.set(node.outputs[0]!, value.t);
  }
  const decoded = new Map<string, ConstTensor>();
  return (name) => {
    const proto = name === undefined || name === '' ? undefined : protos.get(name);
    if (proto === undefined) return undefined;
    let tensor = decoded.get(name!);
    if (tensor === undefined) decoded.set(name!, (tensor = constFromProto(proto, `constant '${name}'`)));
    return tensor;
  };
}

/** How often each value name is read by `graph` (its nodes, nested graphs and outputs). */
export function readCounts(graph: OnnxGraph, counts = new Map<string, number>()): Map<string, number> {
  const read = (name: string): void => {
    if (name !== '') counts.set(name, (counts.get(name) ?? 0) + 1);
  };
  for (const node of graph.nodes) {
    node.inputs.forEach(read);
    for (const attr of node.attributes) if (attr.g !== undefined) readCounts(attr.g, counts);
  }
  graph.outputs.forEach((o) => read(o.name));
  return counts;
}

/** Makes names no value of `graph` has (nor any name made before), from a base. */
function nameMaker(graph: OnnxGraph): (base: string) => string {
  const taken = new Set<string>([...graph.initializers.map((t) => t.name), ...graph.inputs.map((i) => i.name)]);
  for (const node of graph.nodes) for (const out of node.outputs) taken.add(out);
  return (base) => {
    let name = base;
    for (let k = 1; taken.has(name); k++) name = `${base}_${k}`;
    taken.add(name);
    return name;
  };
}
