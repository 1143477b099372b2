// A session as bytes: where its conversation stands (the cache's token ids
// and the token generated but not yet fed) and the state the cache holds,
// cut to the rows those tokens filled.
//
//   offset  size  field
//        0     4  magic "ETLS"
//        4     4  format version (little-endian u32)
//        8     4  J: bytes of the JSON header (little-endian u32)
//       12     J  { "tokens": [ids in the cache], "pending": id | null, "tail": {"text", "tokens"} }, UTF-8
//     12+J     …  the module's partial state snapshot (Module.saveState)
import { elementSize, isDType } from '../dtypes.js';
import { EtnaError } from '../errors.js';
import type { StateTensorDescription } from '../program-types.js';
import type { LlmMetadata } from './metadata.js';

const MAGIC = 'ETLS';
const VERSION = 1;
const PREFIX_BYTES = 12;

/** The text a session's context ends with, and how many of its last tokens (the pending one included) spell it. */
export interface TextTail {
  readonly text: string;
  readonly tokens: number;
}

/** Where a session stands: what a snapshot carries besides the state's bytes. */
export interface SessionPlace {
  /** Token ids in the cache, in position order. */
  readonly tokens: readonly number[];
  /** The last generated token, sampled but not yet in the cache. */
  readonly pending: number | undefined;
  /** Absent in a snapshot that has none: the next text turn is then encoded on its own. */
  readonly tail?: TextTail;
}

/**
 * The byte ranges of the state arena a session at `position` uses: of each
 * tensor with a dimension that holds the context's positions (a KV cache),
 * the first `position` rows along it; of any other state tensor, all of it.
 * Ascending and merged, as Module.saveState takes them.
 */
export function cacheRanges(state: readonly StateTensorDescription[], metadata: LlmMetadata, position: number): [number, number][] {
  const ranges: [number, number][] = [];
  const add = (offset: number, size: number): void => {
    if (size === 0) return;
    const last = ranges[ranges.length - 1];
    if (last !== undefined && last[0] + last[1] >= offset) last[1] = Math.max(last[1], offset + size - last[0]);
    else ranges.push([offset, size]);
  };
  for (const tensor of [...state].sort((a, b) => a.offset - b.offset)) {
    const seqDim = tensor.shape.findIndex((size, d) => d > 0 && size === metadata.maxContextLen);
    if (!isDType(tensor.dtype) || seqDim < 0) {
      add(tensor.offset, tensor.bytes);
      continue;
    }
    const outer = tensor.shape.slice(0, seqDim).reduce((a, b) => a * b, 1);
    const rowBytes = tensor.shape.slice(seqDim + 1).reduce((a, b) => a * b, elementSize(tensor.dtype));
    const blockBytes = rowBytes * tensor.shape[seqDim]!;
    for (let i = 0; i < outer; i++) add(tensor.offset + i * blockBytes, position * rowBytes);
  }
  return ranges;
}

/** The bytes a session snapshot starts with: its prefix and the place as JSON; the module's state snapshot follows. */
export function encodeSessionHeader(place: SessionPlace): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify({ tokens: place.tokens, pending: place.pending ?? null, tail: place.tail ?? null }));
  const out = new Uint8Array(PREFIX_BYTES + json.byteLength);
  const view = new DataView(out.buffer);
  out.set(new TextEncoder().encode(MAGIC), 0);
  view.setUint32(4, VERSION, true);
  view.setUint32(8, json.byteLength, true);
  out.set(json, PREFIX_BYTES);
  return out;
}

/** Reads a session snapshot, checking the place against the model; the state's own checks come when it is restored. */
export function decodeSessionSnapshot(snapshot: Uint8Array, metadata: LlmMetadata): { place: SessionPlace; state: Uint8Array } {
  const refuse = (what: string): never => {
    throw new EtnaError('INVALID_INPUT', `session snapshot: ${what}`);
  };
  if (snapshot.byteLength < PREFIX_BYTES || new TextDecoder().decode(snapshot.subarray(0, 4)) !== MAGIC) {
    refuse(
      snapshot.byteLength < PREFIX_BYTES ? `${snapshot.byteLength} bytes is shorter than its header` : "the bytes do not start with 'ETLS'",
    );
  }
  const view = new DataView(snapshot.buffer, snapshot.byteOffset, snapshot.byteLength);
  const version = view.getUint32(4, true);
  if (version !== VERSION) refuse(`format version ${version}, this etna reads version ${VERSION}`);
  const jsonBytes = view.getUint32(8, true);
  if (PREFIX_BYTES + jsonBytes > snapshot.byteLength) refuse(`truncated: its header needs ${PREFIX_BYTES + jsonBytes} bytes`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(snapshot.subarray(PREFIX_BYTES, PREFIX_BYTES + jsonBytes)));
  } catch {
    refuse('its header is not JSON');
  }
  const { tokens, pending, tail } = (header ?? {}) as { tokens?: unknown; pending?: unknown; tail?: unknown };
  const isToken = (id: unknown): id is number => Number.isInteger(id) && (id as number) >= 0 && (id as number) < metadata.vocabSize;
  if (!Array.isArray(tokens) || !tokens.every(isToken)) refuse(`tokens must be ids from 0 to ${metadata.vocabSize - 1}`);
  if (pending !== null && !isToken(pending)) refuse(`pending must be null or an id from 0 to ${metadata.vocabSize - 1}`);
  const context = (tokens as number[]).length + (pending === null ? 0 : 1);
  const { text, tokens: tailTokens } = (tail ?? {}) as { text?: unknown; tokens?: unknown };
  if (
    tail !== null &&
    tail !== undefined &&
    (typeof text !== 'string' || !Number.isInteger(tailTokens) || (tailTokens as number) < 0 || (tailTokens as number) > context)
  ) {
    refuse(`tail must be null or {text, tokens} with tokens from 0 to ${context}`);
  }
  const place: SessionPlace = {
    tokens: tokens as number[],
    pending: pending === null ? undefined : (pending as number),
    ...(typeof text === 'string' && { tail: { text, tokens: tailTokens as number } }),
  };
  if (place.tokens.length + (place.pending === undefined ? 0 : 1) > metadata.maxContextLen) {
    refuse(`${place.tokens.length} tokens do not fit the model's context of ${metadata.maxContextLen} positions`);
  }
  return { place, state: snapshot.subarray(PREFIX_BYTES + jsonBytes) };
}
