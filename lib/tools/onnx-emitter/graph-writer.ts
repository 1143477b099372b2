// Writes hand-built ONNX graphs (nodes, attributes, float32/int64
// initializers) as ModelProto bytes: the models benches and tests feed to both
// the importer and onnxruntime.
import { ONNX_DTYPE_CODES } from '../../onnx/dtype.js';
import { ProtoWriter } from './protobuf.js';

export type OnnxAttributeValue =
  | { readonly int: number }
  | { readonly ints: readonly number[] }
  | { readonly float: number }
  | { readonly floats: readonly number[] }
  | { readonly string: string };

export interface OnnxGraphNode {
  readonly op: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly attributes?: Readonly<Record<string, OnnxAttributeValue>>;
}

export interface OnnxGraphInitializer {
  readonly name: string;
  readonly dims: readonly number[];
  readonly float32?: Float32Array;
  readonly int64?: readonly number[];
}

export interface OnnxGraphValue {
  readonly name: string;
  /** Omitted: the shape is left for the reader to infer. */
  readonly shape?: readonly number[];
}

export interface OnnxGraphSpec {
  readonly nodes: readonly OnnxGraphNode[];
  /** float32 graph inputs. */
  readonly inputs: readonly OnnxGraphValue[];
  /** float32 graph outputs. */
  readonly outputs: readonly OnnxGraphValue[];
  readonly initializers: readonly OnnxGraphInitializer[];
}

const { float32: FLOAT, int64: INT64 } = ONNX_DTYPE_CODES;
// AttributeProto.type values.
const ATTRIBUTE_TYPE = { float: 1, int: 2, string: 3, floats: 6, ints: 7 } as const;

function writeAttribute(w: ProtoWriter, name: string, value: OnnxAttributeValue): void {
  w.string(1, name);
  if ('int' in value) w.int(3, value.int).int(20, ATTRIBUTE_TYPE.int);
  else if ('ints' in value) {
    for (const v of value.ints) w.int(8, v);
    w.int(20, ATTRIBUTE_TYPE.ints);
  } else if ('float' in value) w.float(2, value.float).int(20, ATTRIBUTE_TYPE.float);
  else if ('floats' in value) {
    for (const v of value.floats) w.float(7, v);
    w.int(20, ATTRIBUTE_TYPE.floats);
  } else w.string(4, value.string).int(20, ATTRIBUTE_TYPE.string);
}

function writeInitializer(w: ProtoWriter, t: OnnxGraphInitializer): void {
  for (const d of t.dims) w.int(1, d);
  if (t.int64 !== undefined) {
    const raw = new BigInt64Array(t.int64.map((v) => BigInt(v)));
    w.int(2, INT64).string(8, t.name).bytes(9, new Uint8Array(raw.buffer));
  } else {
    const data = t.float32 ?? new Float32Array(0);
    w.int(2, FLOAT)
      .string(8, t.name)
      .bytes(9, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  }
}

/** A float32 ValueInfoProto, with its shape when given. */
export function writeValue(w: ProtoWriter, value: OnnxGraphValue): void {
  w.string(1, value.name);
  w.message(2, (type) =>
    type.message(1, (tensor) => {
      tensor.int(1, FLOAT);
      const dims = value.shape;
      if (dims !== undefined)
        tensor.message(2, (shape) => {
          for (const d of dims) shape.message(1, (dim) => dim.int(1, d));
        });
    }),
  );
}

/** ModelProto bytes of `graph` at default-domain `opset`. */
export function writeOnnxModel(graph: OnnxGraphSpec, opset: number): Uint8Array {
  const model = new ProtoWriter();
  model.int(1, 8);
  model.message(7, (g) => {
    graph.nodes.forEach((n, i) =>
      g.message(1, (w) => {
        for (const input of n.inputs) w.string(1, input);
        for (const output of n.outputs) w.string(2, output);
        w.string(3, `${n.op}_${i}`).string(4, n.op);
        for (const [name, value] of Object.entries(n.attributes ?? {})) w.message(5, (a) => writeAttribute(a, name, value));
      }),
    );
    g.string(2, 'graph');
    for (const t of graph.initializers) g.message(5, (w) => writeInitializer(w, t));
    for (const v of graph.inputs) g.message(11, (w) => writeValue(w, v));
    for (const v of graph.outputs) g.message(12, (w) => writeValue(w, v));
  });
  model.message(8, (o) => o.string(1, '').int(2, opset));
  return model.finish();
}
