// Writes small ONNX models for tests: protobuf wire format for the handful of
// ModelProto fields the importer reads.
import { numberToFloat16 } from '../../lib/dtypes.js';

const encoder = new TextEncoder();

function varint(value: number | bigint): number[] {
  let v = BigInt.asUintN(64, BigInt(value));
  const out: number[] = [];
  while (v > 127n) {
    out.push(Number(v & 127n) | 128);
    v >>= 7n;
  }
  out.push(Number(v));
  return out;
}

function bytesField(field: number, payload: ArrayLike<number>): number[] {
  return [...varint(field * 8 + 2), ...varint(payload.length), ...Array.from(payload)];
}

function intField(field: number, value: number | bigint): number[] {
  return [...varint(field * 8), ...varint(value)];
}

function text(field: number, value: string): number[] {
  return bytesField(field, encoder.encode(value));
}

export interface TestNode {
  op: string;
  inputs: string[];
  outputs: string[];
  name?: string;
  ints?: Record<string, number[]>;
  int?: Record<string, number>;
  float?: Record<string, number>;
  strings?: Record<string, string>;
  graphs?: Record<string, TestGraph>;
  /** float32 tensor attributes (a Constant node's `value`). */
  tensors?: Record<string, TestInitializer>;
}

export interface TestValue {
  name: string;
  /** ONNX element type: 1 float, 2 uint8, 3 int8, 6 int32, 7 int64, 9 bool. */
  type: number;
  /** A number for a fixed dim, a name for a symbolic one; omitted, the shape is left unstated (allowed for graph outputs). */
  shape?: (number | string)[];
}

/** A float32 initializer (a weight), or an int64 one when `int64s` is given (shapes, axes, pads). */
export interface TestInitializer {
  name: string;
  dims: number[];
  floats: number[];
  int64s?: number[];
  /** Stores `floats` as float16 (data type 10), rounded to nearest even. */
  float16?: boolean;
  /** Stores `floats` as 8-bit integers (data type 2, uint8, or 3, int8): quantized weights and zero points. */
  int8?: 'uint8' | 'int8';
  /** Stores `floats` as int32 (data type 6): quantized biases. */
  int32?: boolean;
  /** Stores `floats` one byte each under this ONNX element type (float8 and 4-bit types, for refusals). */
  byteType?: number;
}

export interface TestGraph {
  nodes: TestNode[];
  inputs: TestValue[];
  outputs: TestValue[];
  initializers?: TestInitializer[];
}

// TensorProto: dims (1), data_type (2, 1 = float, 2 = uint8, 3 = int8, 7 = int64, 10 = float16), name (8), raw_data (9, little-endian).
function initializer(t: TestInitializer): number[] {
  const raw = new Uint8Array(
    t.int64s !== undefined
      ? BigInt64Array.from(t.int64s, (v) => BigInt(v)).buffer
      : t.float16
        ? Uint16Array.from(t.floats, numberToFloat16).buffer
        : t.int8 === 'uint8'
          ? Uint8Array.from(t.floats).buffer
          : t.int8 === 'int8'
            ? Int8Array.from(t.floats).buffer
            : t.int32
              ? Int32Array.from(t.floats).buffer
              : t.byteType !== undefined
                ? Uint8Array.from(t.floats).buffer
                : Float32Array.from(t.floats).buffer,
  );
  const type =
    t.int64s !== undefined ? 7 : t.float16 ? 10 : t.int8 === 'uint8' ? 2 : t.int8 === 'int8' ? 3 : t.int32 ? 6 : (t.byteType ?? 1);
  return [...t.dims.flatMap((d) => intField(1, d)), ...intField(2, type), ...text(8, t.name), ...bytesField(9, raw)];
}

function valueInfo(value: TestValue): number[] {
  const shape =
    value.shape === undefined
      ? []
      : bytesField(
          2,
          value.shape.flatMap((d) => bytesField(1, typeof d === 'string' ? text(2, d) : intField(1, d))),
        );
  const tensorType = [...intField(1, value.type), ...shape];
  return [...text(1, value.name), ...bytesField(2, bytesField(1, tensorType))];
}

function node(n: TestNode): number[] {
  const out: number[] = [];
  for (const i of n.inputs) out.push(...text(1, i));
  for (const o of n.outputs) out.push(...text(2, o));
  out.push(...text(3, n.name ?? n.outputs[0] ?? n.op), ...text(4, n.op));
  for (const [name, values] of Object.entries(n.ints ?? {})) {
    out.push(...bytesField(5, [...text(1, name), ...values.flatMap((v) => intField(8, v)), ...intField(20, 7)]));
  }
  for (const [name, value] of Object.entries(n.int ?? {})) {
    out.push(...bytesField(5, [...text(1, name), ...intField(3, value), ...intField(20, 2)]));
  }
  for (const [name, value] of Object.entries(n.float ?? {})) {
    const f = new Uint8Array(Float32Array.of(value).buffer);
    out.push(...bytesField(5, [...text(1, name), ...varint(2 * 8 + 5), ...Array.from(f), ...intField(20, 1)]));
  }
  for (const [name, value] of Object.entries(n.strings ?? {})) {
    out.push(...bytesField(5, [...text(1, name), ...text(4, value), ...intField(20, 3)]));
  }
  for (const [name, g] of Object.entries(n.graphs ?? {})) {
    out.push(...bytesField(5, [...text(1, name), ...bytesField(6, graph(g)), ...intField(20, 5)]));
  }
  for (const [name, t] of Object.entries(n.tensors ?? {})) {
    out.push(...bytesField(5, [...text(1, name), ...bytesField(5, initializer(t)), ...intField(20, 4)]));
  }
  return out;
}

function graph(g: TestGraph): number[] {
  return [
    ...g.nodes.flatMap((n) => bytesField(1, node(n))),
    ...text(2, 'test'),
    ...(g.initializers ?? []).flatMap((t) => bytesField(5, initializer(t))),
    ...g.inputs.flatMap((v) => bytesField(11, valueInfo(v))),
    ...g.outputs.flatMap((v) => bytesField(12, valueInfo(v))),
  ];
}

export function onnxModel(g: TestGraph, opset = 17): Uint8Array {
  return Uint8Array.from([...intField(1, 8), ...bytesField(7, graph(g)), ...bytesField(8, intField(2, opset))]);
}
