// Reads the tensor list of an external data file (.ptd, "FlatTensor") for
// `etna inspect`. The generated FlatBuffers readers do not check offsets, so
// every table, vector and string is bounds-checked against the schema below
// before they read it; damaged bytes give one INVALID_PROGRAM error.
import * as flatbuffers from 'flatbuffers';

import { EtnaError } from '../errors.js';
import { DTYPES, dtypeInfo } from '../export/dtype.js';
import { FlatTensor } from '../generated/flat_tensor/flat_tensor_generated.js';
import { ScalarType } from '../generated/program/program_generated.js';

export const EXTERNAL_DATA_IDENTIFIER = 'FT01';
const HEADER_MAGIC = 'FH01';
const HEADER_OFFSET = 8;
const MIN_HEADER_LENGTH = 40;

export interface ExternalTensor {
  key: string;
  /** null when the file declares no layout for the entry. */
  dtype: string | null;
  shape: number[] | null;
  /** Bytes of the segment the key points at. */
  bytes: number;
}

export interface ExternalDataDescription {
  identifier: string;
  segments: number;
  tensors: ExternalTensor[];
}

/** Whether `bytes` carry the .ptd identifier (bytes 4..7). */
export function isExternalData(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && String.fromCharCode(...bytes.subarray(4, 8)) === EXTERNAL_DATA_IDENTIFIER;
}

function invalid(message: string): EtnaError {
  return new EtnaError('INVALID_PROGRAM', `external data: ${message}`);
}

// The current FlatTensor schema, field by field in declaration order.
type Field =
  | { kind: 'scalar'; bytes: number }
  | { kind: 'string' }
  | { kind: 'vector'; bytes: number }
  | { kind: 'table'; fields: readonly Field[] }
  | { kind: 'tables'; fields: readonly Field[] };

const scalar = (bytes: number): Field => ({ kind: 'scalar', bytes });
const TENSOR_LAYOUT: readonly Field[] = [scalar(1), { kind: 'vector', bytes: 4 }, { kind: 'vector', bytes: 1 }];
const NAMED_DATA: readonly Field[] = [{ kind: 'string' }, scalar(4), { kind: 'table', fields: TENSOR_LAYOUT }];
const DATA_SEGMENT: readonly Field[] = [scalar(8), scalar(8)];
const FLAT_TENSOR: readonly Field[] = [scalar(4), { kind: 'tables', fields: DATA_SEGMENT }, { kind: 'tables', fields: NAMED_DATA }];

/** Bounds checks over the FlatBuffer region [0, end). */
class RegionChecker {
  constructor(
    private readonly view: DataView,
    private readonly end: number,
  ) {}

  private need(position: number, length: number, what: string): void {
    if (!(position >= 0 && length >= 0 && position + length <= this.end)) {
      throw invalid(`${what} at byte ${position} runs past the FlatBuffer region (${this.end} bytes)`);
    }
  }

  /** Follows the unsigned offset stored at `position`. */
  private follow(position: number, what: string): number {
    this.need(position, 4, what);
    return position + this.view.getUint32(position, true);
  }

  /** Checks a vector's length word and its elements; returns the element count. */
  private vector(position: number, elementBytes: number, what: string): number {
    this.need(position, 4, what);
    const length = this.view.getUint32(position, true);
    this.need(position + 4, length * elementBytes, what);
    return length;
  }

  /** Checks the table at `position` and everything it points to; returns its vtable field count. */
  table(position: number, fields: readonly Field[], what: string): number {
    this.need(position, 4, what);
    const vtable = position - this.view.getInt32(position, true);
    this.need(vtable, 4, `${what} vtable`);
    const vtableLength = this.view.getUint16(vtable, true);
    const objectLength = this.view.getUint16(vtable + 2, true);
    if (vtableLength < 4 || vtableLength % 2 !== 0) throw invalid(`${what}: vtable length ${vtableLength} is malformed`);
    this.need(vtable, vtableLength, `${what} vtable`);
    this.need(position, objectLength, what);
    const present = (vtableLength - 4) / 2;
    fields.forEach((field, id) => {
      if (id >= present) return;
      const offset = this.view.getUint16(vtable + 4 + 2 * id, true);
      if (offset === 0) return;
      const at = position + offset;
      const where = `${what} field ${id}`;
      const width = field.kind === 'scalar' ? field.bytes : 4;
      if (offset + width > objectLength) throw invalid(`${where} lies outside its table`);
      if (field.kind === 'scalar') return;
      const target = this.follow(at, where);
      if (field.kind === 'string') {
        this.need(target + 4, this.vector(target, 1, where) + 1, where);
      } else if (field.kind === 'vector') {
        this.vector(target, field.bytes, where);
      } else if (field.kind === 'table') {
        this.table(target, field.fields, where);
      } else {
        const count = this.vector(target, 4, where);
        for (let i = 0; i < count; i++) this.table(this.follow(target + 4 + 4 * i, `${where}[${i}]`), field.fields, `${where}[${i}]`);
      }
    });
    return present;
  }
}

function dtypeName(scalarType: number): string {
  const known = DTYPES.find((dtype) => dtypeInfo(dtype).scalarType === scalarType);
  if (known !== undefined) return known;
  const name = ScalarType[scalarType];
  return name === undefined ? `scalar type ${scalarType}` : name.toLowerCase();
}

/** The tensors a .ptd file holds. Throws INVALID_PROGRAM naming what is damaged. */
export function readExternalData(bytes: Uint8Array): ExternalDataDescription {
  const size = bytes.length;
  if (size < HEADER_OFFSET + MIN_HEADER_LENGTH) throw invalid(`file is ${size} bytes, too short for a FlatTensor header`);
  if (!isExternalData(bytes)) throw invalid(`identifier at byte 4 is not '${EXTERNAL_DATA_IDENTIFIER}' (not a .ptd file)`);
  if (String.fromCharCode(...bytes.subarray(HEADER_OFFSET, HEADER_OFFSET + 4)) !== HEADER_MAGIC) {
    throw invalid(`header magic at byte ${HEADER_OFFSET} is not '${HEADER_MAGIC}'`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = view.getUint32(12, true);
  if (headerLength < MIN_HEADER_LENGTH) throw invalid(`header_length ${headerLength} is below the minimum ${MIN_HEADER_LENGTH}`);
  // 64-bit header fields; anything beyond the file size is rejected below, so Number() is exact where it matters.
  const [flatbufferOffset, flatbufferSize, segmentBase, segmentDataSize] = [16, 24, 32, 40].map((at) => Number(view.getBigUint64(at, true))) as [number, number, number, number];
  const region = flatbufferOffset + flatbufferSize;
  if (flatbufferOffset > size || flatbufferSize > size - flatbufferOffset) {
    throw invalid(`FlatBuffer region [${flatbufferOffset}, +${flatbufferSize}) runs past the end of the ${size}-byte file`);
  }
  if (segmentBase < region || segmentBase > size || segmentDataSize > size - segmentBase) {
    throw invalid(`segment region [${segmentBase}, +${segmentDataSize}) is outside the file or overlaps the FlatBuffer`);
  }
  const root = view.getUint32(0, true);
  if (root < HEADER_OFFSET || root + 4 > region) throw invalid(`root table offset ${root} is out of range`);
  const rootFields = new RegionChecker(view, region).table(root, FLAT_TENSOR, 'FlatTensor');
  if (rootFields > FLAT_TENSOR.length) {
    throw invalid('this .ptd uses the FlatTensor layout written before mid-2025, which etna does not read; re-export it with a current ExecuTorch');
  }

  const table = FlatTensor.getRootAsFlatTensor(new flatbuffers.ByteBuffer(bytes.subarray(0, region)));
  const segmentBytes: number[] = [];
  for (let i = 0; i < table.segmentsLength(); i++) {
    const segment = table.segments(i)!;
    const offset = Number(segment.offset());
    const length = Number(segment.size());
    if (offset > segmentDataSize || length > segmentDataSize - offset) {
      throw invalid(`segments[${i}] [${offset}, +${length}) runs past the segment data (${segmentDataSize} bytes)`);
    }
    segmentBytes.push(length);
  }
  const tensors: ExternalTensor[] = [];
  for (let i = 0; i < table.namedDataLength(); i++) {
    const entry = table.namedData(i)!;
    const key = entry.key();
    if (key === null) throw invalid(`named_data[${i}] has no key`);
    const segment = entry.segmentIndex();
    if (segment >= segmentBytes.length) throw invalid(`named_data[${i}] ('${key}'): segment_index ${segment} is out of range`);
    const layout = entry.tensorLayout();
    tensors.push({
      key,
      dtype: layout === null ? null : dtypeName(layout.scalarType()),
      shape: layout === null ? null : Array.from({ length: layout.sizesLength() }, (_, d) => layout.sizes(d)!),
      bytes: segmentBytes[segment]!,
    });
  }
  return { identifier: EXTERNAL_DATA_IDENTIFIER, segments: segmentBytes.length, tensors };
}
