// A small reader for the parts of the ONNX protobuf schema the importer uses
// (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto,
// ValueInfoProto). Field numbers follow onnx.proto; unknown fields are skipped
// so newer IR versions still read.
import { EtnaError } from '../errors.js';

export interface OnnxTensorProto {
  name: string;
  dims: number[];
  dataType: number;
  rawData?: Uint8Array;
  floatData: number[];
  int32Data: number[];
  int64Data: bigint[];
  doubleData: number[];
  uint64Data: bigint[];
  external: boolean;
}

export interface OnnxAttribute {
  name: string;
  type: number;
  f?: number;
  i?: bigint;
  s?: Uint8Array;
  t?: OnnxTensorProto;
  g?: OnnxGraph;
  floats: number[];
  ints: bigint[];
  strings: Uint8Array[];
}

export interface OnnxNode {
  name: string;
  opType: string;
  domain: string;
  inputs: string[];
  outputs: string[];
  attributes: OnnxAttribute[];
}

export interface OnnxValueInfo {
  name: string;
  elemType: number;
  /** A number for a fixed dim, a string for a named one, null for unknown; undefined shape when absent. */
  shape?: (number | string | null)[];
}

export interface OnnxGraph {
  name: string;
  nodes: OnnxNode[];
  initializers: OnnxTensorProto[];
  inputs: OnnxValueInfo[];
  outputs: OnnxValueInfo[];
}

export interface OnnxModel {
  irVersion: number;
  opsets: Map<string, number>;
  graph: OnnxGraph;
}

function malformed(message: string): never {
  throw new EtnaError('INVALID_INPUT', `ONNX model is malformed: ${message}`);
}

/** Protobuf wire-format cursor over one message's bytes. */
class WireReader {
  private pos: number;

  constructor(
    private readonly bytes: Uint8Array,
    start = 0,
    private readonly end = bytes.length,
  ) {
    this.pos = start;
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.end) malformed('truncated varint');
      const byte = this.bytes[this.pos++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
      if (shift > 70n) malformed('varint too long');
    }
  }

  /** A varint read as a JS number (tags, lengths, small enums). */
  small(): number {
    return Number(this.varint());
  }

  tag(): { field: number; wire: number } {
    const key = this.small();
    return { field: Math.floor(key / 8), wire: key & 7 };
  }

  bytesField(): Uint8Array {
    const length = this.small();
    if (this.pos + length > this.end) malformed('length-delimited field runs past its message');
    const slice = this.bytes.subarray(this.pos, this.pos + length);
    this.pos += length;
    return slice;
  }

  fixed32(): DataView {
    if (this.pos + 4 > this.end) malformed('truncated fixed32');
    const view = new DataView(this.bytes.buffer, this.bytes.byteOffset + this.pos, 4);
    this.pos += 4;
    return view;
  }

  fixed64(): DataView {
    if (this.pos + 8 > this.end) malformed('truncated fixed64');
    const view = new DataView(this.bytes.buffer, this.bytes.byteOffset + this.pos, 8);
    this.pos += 8;
    return view;
  }

  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.fixed64();
    else if (wire === 2) this.bytesField();
    else if (wire === 5) this.fixed32();
    else malformed(`unsupported wire type ${wire}`);
  }
}

const text = new TextDecoder();

function toSigned64(value: bigint): bigint {
  return BigInt.asIntN(64, value);
}

// Repeated scalar fields may come packed (wire 2) or one per tag.
function readVarints(reader: WireReader, wire: number, into: bigint[]): void {
  if (wire === 2) {
    const packed = reader.bytesField();
    const inner = new WireReader(packed);
    while (!inner.done) into.push(inner.varint());
  } else {
    into.push(reader.varint());
  }
}

/** A repeated float (4 bytes) or double (8 bytes) field, packed (wire type 2) or one element at a time. */
function readReals(reader: WireReader, wire: number, into: number[], bytes: 4 | 8): void {
  const read = (view: DataView, at: number): number => (bytes === 4 ? view.getFloat32(at, true) : view.getFloat64(at, true));
  if (wire === 2) {
    const packed = reader.bytesField();
    const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
    for (let i = 0; i + bytes <= packed.byteLength; i += bytes) into.push(read(view, i));
  } else {
    into.push(read(bytes === 4 ? reader.fixed32() : reader.fixed64(), 0));
  }
}

export function decodeTensor(bytes: Uint8Array): OnnxTensorProto {
  const reader = new WireReader(bytes);
  const tensor: OnnxTensorProto = {
    name: '',
    dims: [],
    dataType: 0,
    floatData: [],
    int32Data: [],
    int64Data: [],
    doubleData: [],
    uint64Data: [],
    external: false,
  };
  const dims: bigint[] = [];
  const int32: bigint[] = [];
  while (!reader.done) {
    const { field, wire } = reader.tag();
    switch (field) {
      case 1:
        readVarints(reader, wire, dims);
        break;
      case 2:
        tensor.dataType = reader.small();
        break;
      case 4:
        readReals(reader, wire, tensor.floatData, 4);
        break;
      case 5:
        readVarints(reader, wire, int32);
        break;
      case 7:
        readVarints(reader, wire, tensor.int64Data);
        break;
      case 8:
        tensor.name = text.decode(reader.bytesField());
        break;
      case 9:
        tensor.rawData = reader.bytesField();
        break;
      case 10:
        readReals(reader, wire, tensor.doubleData, 8);
        break;
      case 11:
        readVarints(reader, wire, tensor.uint64Data);
        break;
      case 14:
        tensor.external = reader.small() === 1;
        break;
      default:
        reader.skip(wire);
    }
  }
  tensor.dims = dims.map((d) => Number(toSigned64(d)));
  tensor.int32Data = int32.map((v) => Number(BigInt.asIntN(32, v)));
  tensor.int64Data = tensor.int64Data.map(toSigned64);
  return tensor;
}

function decodeAttribute(bytes: Uint8Array): OnnxAttribute {
  const reader = new WireReader(bytes);
  const attribute: OnnxAttribute = { name: '', type: 0, floats: [], ints: [], strings: [] };
  while (!reader.done) {
    const { field, wire } = reader.tag();
    switch (field) {
      case 1:
        attribute.name = text.decode(reader.bytesField());
        break;
      case 2:
        attribute.f = reader.fixed32().getFloat32(0, true);
        break;
      case 3:
        attribute.i = toSigned64(reader.varint());
        break;
      case 4:
        attribute.s = reader.bytesField();
        break;
      case 5:
        attribute.t = decodeTensor(reader.bytesField());
        break;
      case 6:
        attribute.g = decodeGraph(reader.bytesField());
        break;
      case 7:
        readReals(reader, wire, attribute.floats, 4);
        break;
      case 8:
        readVarints(reader, wire, attribute.ints);
        break;
      case 9:
        attribute.strings.push(reader.bytesField());
        break;
      case 20:
        attribute.type = reader.small();
        break;
      default:
        reader.skip(wire);
    }
  }
  attribute.ints = attribute.ints.map(toSigned64);
  return attribute;
}

function decodeNode(bytes: Uint8Array): OnnxNode {
  const reader = new WireReader(bytes);
  const node: OnnxNode = { name: '', opType: '', domain: '', inputs: [], outputs: [], attributes: [] };
  while (!reader.done) {
    const { field, wire } = reader.tag();
    switch (field) {
      case 1:
        node.inputs.push(text.decode(reader.bytesField()));
        break;
      case 2:
        node.outputs.push(text.decode(reader.bytesField()));
        break;
      case 3:
        node.name = text.decode(reader.bytesField());
        break;
      case 4:
        node.opType = text.decode(reader.bytesField());
        break;
      case 5:
        node.attributes.push(decodeAttribute(reader.bytesField()));
        break;
      case 7:
        node.domain = text.decode(reader.bytesField());
        break;
      default:
        reader.skip(wire);
    }
  }
  return node;
}

function decodeShape(bytes: Uint8Array): (number | string | null)[] {
  const reader = new WireReader(bytes);
  const dims: (number | string | null)[] = [];
  while (!reader.done) {
    const { field, wire } = reader.tag();
    if (field !== 1) {
      reader.skip(wire);
      continue;
    }
    const dimReader = new WireReader(reader.bytesField());
    let dim: number | string | null = null;
    while (!dimReader.done) {
      const inner = dimReader.tag();
      if (inner.field === 1) dim = Number(toSigned64(dimReader.varint()));
      else if (inner.field === 2) dim = text.decode(dimReader.bytesField());
      else dimReader.skip(inner.wire);
    }
    dims.push(dim);
  }
  return dims;
}

function decodeValueInfo(bytes: Uint8Array): OnnxValueInfo {
  const reader = new WireReader(bytes);
  const info: OnnxValueInfo = { name: '', elemType: 0 };
  while (!reader.done) {
    const { field, wire } = reader.tag();
    if (field === 1) {
      info.name = text.decode(reader.bytesField());
    } else if (field === 2) {
      // TypeProto: only tensor_type (field 1) is read; sequences and maps stay elemType 0.
      const typeReader = new WireReader(reader.bytesField());
      while (!typeReader.done) {
        const t = typeReader.tag();
        if (t.field !== 1) {
          typeReader.skip(t.wire);
          continue;
        }
        const tensorReader = new WireReader(typeReader.bytesField());
        while (!tensorReader.done) {
          const inner = tensorReader.tag();
          if (inner.field === 1) info.elemType = tensorReader.small();
          else if (inner.field === 2) info.shape = decodeShape(tensorReader.bytesField());
          else tensorReader.skip(inner.wire);
        }
      }
    } else {
      reader.skip(wire);
    }
  }
  return info;
}

export function decodeGraph(bytes: Uint8Array): OnnxGraph {
  const reader = new WireReader(bytes);
  const graph: OnnxGraph = { name: '', nodes: [], initializers: [], inputs: [], outputs: [] };
  while (!reader.done) {
    const { field, wire } = reader.tag();
    switch (field) {
      case 1:
        graph.nodes.push(decodeNode(reader.bytesField()));
        break;
      case 2:
        graph.name = text.decode(reader.bytesField());
        break;
      case 5:
        graph.initializers.push(decodeTensor(reader.bytesField()));
        break;
      case 11:
        graph.inputs.push(decodeValueInfo(reader.bytesField()));
        break;
      case 12:
        graph.outputs.push(decodeValueInfo(reader.bytesField()));
        break;
      default:
        reader.skip(wire);
    }
  }
  return graph;
}

export function decodeModel(bytes: Uint8Array): OnnxModel {
  if (!(bytes instanceof Uint8Array) || bytes.length === 0) throw new EtnaError('INVALID_INPUT', 'ONNX model bytes are empty');
  const reader = new WireReader(bytes);
  let irVersion = 0;
  const opsets = new Map<string, number>();
  let graph: OnnxGraph | undefined;
  while (!reader.done) {
    const { field, wire } = reader.tag();
    if (field === 1) {
      irVersion = reader.small();
    } else if (field === 7) {
      graph = decodeGraph(reader.bytesField());
    } else if (field === 8) {
      const opsetReader = new WireReader(reader.bytesField());
      let domain = '';
      let version = 0;
      while (!opsetReader.done) {
        const inner = opsetReader.tag();
        if (inner.field === 1) domain = text.decode(opsetReader.bytesField());
        else if (inner.field === 2) version = opsetReader.small();
        else opsetReader.skip(inner.wire);
      }
      opsets.set(domain === 'ai.onnx' ? '' : domain, version);
    } else {
      reader.skip(wire);
    }
  }
  if (graph === undefined) malformed('no graph');
  return { irVersion, opsets, graph };
}
