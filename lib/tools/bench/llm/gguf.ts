// Writes the llama-8da4w weights as a GGUF file (version 3) that llama.cpp
// loads as a "llama" model: Q4_0 linears and token embedding, float32 norms,
// and a minimal SentencePiece-style vocabulary (the benchmark feeds token ids,
// so the pieces are placeholders that only need to satisfy the loader).
//
// Layout: "GGUF", version, tensor count, key/value count, the key/values, the
// tensor infos (name, dims innermost first, type, offset into the data
// section), padding to the alignment, then each tensor's bytes at its aligned
// offset. Q4_0 quantizes blocks of 32 consecutive values along a row with one
// float16 scale d = (the value of largest magnitude) / -8 and codes
// min(15, trunc(x / d + 8.5)), value = (code - 8) * d; a block's 16 bytes hold
// element j in the low nibble and element j + 16 in the high nibble.
import { closeSync, openSync, writeSync } from 'node:fs';

import { EtnaError } from '../../../errors.js';
import { headDim, type Llama8da4wWeights } from '../../examples/llama-8da4w.js';

const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian uint32
const GGUF_VERSION = 3;
const ALIGNMENT = 32;

/** GGUF metadata value types. */
const VALUE_TYPE = { uint32: 4, int32: 5, float32: 6, string: 8, array: 9 } as const;
/** ggml tensor types. */
const GGML_TYPE = { f32: 0, q4_0: 2 } as const;
/** llama_ftype of a file whose linears are Q4_0. */
const FILE_TYPE_MOSTLY_Q4_0 = 2;
/** SentencePiece token types as llama.cpp reads them. */
const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, byte: 6 } as const;

export const Q4_0_BLOCK = 32;
const Q4_0_BLOCK_BYTES = 2 + Q4_0_BLOCK / 2;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE binary16 bits of a float32 value, rounded to nearest even (as ggml's conversion). */
export function float16Bits(value: number): number {
  f32[0] = value;
  const bits = u32[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  let mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 : 0);
  const e = exponent - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mantissa & ((1 << shift) - 1);
    let result = mantissa >>> shift;
    if (rest > half || (rest === half && (result & 1) === 1)) result++;
    return sign | result;
  }
  const rest = mantissa & 0x1fff;
  let result = (e << 10) | (mantissa >>> 13);
  if (rest > 0x1000 || (rest === 0x1000 && (result & 1) === 1)) result++;
  return sign | result;
}

/** The float32 value of binary16 bits. */
export function float16Value(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 31) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** Q4_0 blocks of a row-major [rows, columns] matrix (columns a multiple of 32). */
export function quantizeQ4_0(values: Float32Array, columns: number): Uint8Array {
  if (columns % Q4_0_BLOCK !== 0 || values.length % columns !== 0) {
    throw new EtnaError('INVALID_INPUT', `Q4_0: rows of ${columns} values do not split into blocks of ${Q4_0_BLOCK}`);
  }
  const blocks = values.length / Q4_0_BLOCK;
  const out = new Uint8Array(blocks * Q4_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * Q4_0_BLOCK, (b + 1) * Q4_0_BLOCK);
    let largest = 0;
    for (const v of x) if (Math.abs(v) > Math.abs(largest)) largest = v;
    const d = Math.fround(largest / -8);
    const inverse = d === 0 ? 0 : Math.fround(1 / d);
    const at = b * Q4_0_BLOCK_BYTES;
    view.setUint16(at, float16Bits(d), true);
    const code = (v: number): number => Math.min(15, Math.trunc(Math.fround(Math.fround(v * inverse) + 8.5)));
    for (let j = 0; j < Q4_0_BLOCK / 2; j++) out[at + 2 + j] = code(x[j]!) | (code(x[j + Q4_0_BLOCK / 2]!) << 4);
  }
  return out;
}

/** The values Q4_0 blocks stand for: (code - 8) * d. */
export function dequantizeQ4_0(blocks: Uint8Array): Float32Array {
  const count = blocks.length / Q4_0_BLOCK_BYTES;
  const out = new Float32Array(count * Q4_0_BLOCK);
  const view = new DataView(blocks.buffer, blocks.byteOffset, blocks.byteLength);
  for (let b = 0; b < count; b++) {
    const d = float16Value(view.getUint16(b * Q4_0_BLOCK_BYTES, true));
    for (let j = 0; j < Q4_0_BLOCK / 2; j++) {
      const byte = blocks[b * Q4_0_BLOCK_BYTES + 2 + j]!;
      out[b * Q4_0_BLOCK + j] = ((byte & 0xf) - 8) * d;
      out[b * Q4_0_BLOCK + j + Q4_0_BLOCK / 2] = ((byte >> 4) - 8) * d;
    }
  }
  return out;
}

type MetadataValue =
  | { readonly uint32: number }
  | { readonly float32: number }
  | { readonly string: string }
  | { readonly strings: readonly string[] }
  | { readonly float32s: Float32Array }
  | { readonly int32s: Int32Array };

interface GgufTensor {
  readonly name: string;
  /** Dims innermost first, as ggml's ne. */
  readonly dims: readonly number[];
  readonly type: number;
  readonly data: Uint8Array;
}

/** Appends little-endian fields to growing chunks. */
class ByteSink {
  readonly chunks: Uint8Array[] = [];
  length = 0;

  push(bytes: Uint8Array): void {
    this.chunks.push(bytes);
    this.length += bytes.byteLength;
  }

  private fixed(size: number, write: (view: DataView) => void): void {
    const bytes = new Uint8Array(size);
    write(new DataView(bytes.buffer));
    this.push(bytes);
  }

  u32(value: number): void {
    this.fixed(4, (v) => v.setUint32(0, value, true));
  }

  u64(value: number): void {
    this.fixed(8, (v) => v.setBigUint64(0, BigInt(value), true));
  }

  f32(value: number): void {
    this.fixed(4, (v) => v.setFloat32(0, value, true));
  }

  string(text: string): void {
    const bytes = new TextEncoder().encode(text);
    this.u64(bytes.byteLength);
    this.push(bytes);
  }

  padTo(alignment: number): void {
    const pad = (alignment - (this.length % alignment)) % alignment;
    if (pad > 0) this.push(new Uint8Array(pad));
  }
}

function writeValue(sink: ByteSink, value: MetadataValue): void {
  if ('uint32' in value) {
    sink.u32(VALUE_TYPE.uint32);
    sink.u32(value.uint32);
  } else if ('float32' in value) {
    sink.u32(VALUE_TYPE.float32);
    sink.f32(value.float32);
  } else if ('string' in value) {
    sink.u32(VALUE_TYPE.string);
    sink.string(value.string);
  } else if ('strings' in value) {
    sink.u32(VALUE_TYPE.array);
    sink.u32(VALUE_TYPE.string);
    sink.u64(value.strings.length);
    for (const s of value.strings) sink.string(s);
  } else {
    const array = 'float32s' in value ? value.float32s : value.int32s;
    sink.u32(VALUE_TYPE.array);
    sink.u32('float32s' in value ? VALUE_TYPE.float32 : VALUE_TYPE.int32);
    sink.u64(array.length);
    sink.push(new Uint8Array(array.buffer, array.byteOffset, array.byteLength));
  }
}

/** Token ids the vocabulary reserves, as a SentencePiece Llama tokenizer does. */
export const GGUF_SPECIAL_TOKENS = { unknown: 0, bos: 1, eos: 2 } as const;

/** Pieces a SentencePiece vocabulary needs besides its words: the specials and one byte-fallback piece per byte. */
export const GGUF_MIN_VOCAB = 3 + 256;

/**
 * A placeholder SentencePiece vocabulary of `size` pieces: <unk>, <s>, </s>,
 * the byte pieces <0x00>..<0xFF> (llama.cpp's tokenizer falls back to them
 * for any text, and node-llama-cpp tokenizes some at load), then distinct
 * word pieces.
 */
function placeholderVocabulary(size: number): { tokens: string[]; scores: Float32Array; types: Int32Array } {
  if (size < GGUF_MIN_VOCAB) {
    throw new EtnaError(
      'INVALID_INPUT',
      `a GGUF vocabulary needs at least ${GGUF_MIN_VOCAB} tokens (specials and byte pieces), the model has ${size}`,
    );
  }
  const tokens = ['<unk>', '<s>', '</s>'];
  const types = new Int32Array(size).fill(TOKEN_TYPE.normal);
  types[GGUF_SPECIAL_TOKENS.unknown] = TOKEN_TYPE.unknown;
  types[GGUF_SPECIAL_TOKENS.bos] = TOKEN_TYPE.control;
  types[GGUF_SPECIAL_TOKENS.eos] = TOKEN_TYPE.control;
  for (let byte = 0; byte < 256; byte++) {
    types[tokens.length] = TOKEN_TYPE.byte;
    tokens.push(`<0x${byte.toString(16).toUpperCase().padStart(2, '0')}>`);
  }
  for (let id = tokens.length; id < size; id++) tokens.push(`\u2581t${id}`);
  const scores = Float32Array.from({ length: size }, (_, id) => -id);
  return { tokens, scores, types };
}

/** The GGUF tensors of the model: ggml names, [out, in] weights as ne = [in, out]. */
function ggufTensors(weights: Llama8da4wWeights): GgufTensor[] {
  const C = weights.config;
  const d = C.modelDim;
  const kv = C.kvHeads * headDim(C);
  const q4 = (name: string, data: Float32Array, out: number, inFeatures: number): GgufTensor => ({
    name,
    dims: [inFeatures, out],
    type: GGML_TYPE.q4_0,
    data: quantizeQ4_0(data, inFeatures),
  });
  const f32Vector = (name: string, data: Float32Array): GgufTensor => ({
    name,
    dims: [data.length],
    type: GGML_TYPE.f32,
    data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  });
  const tensors: GgufTensor[] = [q4('token_embd.weight', weights.tokenEmbedding, C.vocab, d)];
  weights.layers.forEach((w, l) => {
    tensors.push(
      f32Vector(`blk.${l}.attn_norm.weight`, w.attentionNorm),
      q4(`blk.${l}.attn_q.weight`, w.wq, d, d),
      q4(`blk.${l}.attn_k.weight`, w.wk, kv, d),
      q4(`blk.${l}.attn_v.weight`, w.wv, kv, d),
      q4(`blk.${l}.attn_output.weight`, w.wo, d, d),
      f32Vector(`blk.${l}.ffn_norm.weight`, w.ffnNorm),
      q4(`blk.${l}.ffn_gate.weight`, w.w1, C.hiddenDim, d),
      q4(`blk.${l}.ffn_up.weight`, w.w3, C.hiddenDim, d),
      q4(`blk.${l}.ffn_down.weight`, w.w2, d, C.hiddenDim),
    );
  });
  tensors.push(f32Vector('output_norm.weight', weights.finalNorm), q4('output.weight', weights.output, C.vocab, d));
  return tensors;
}

/**
 * The model as GGUF bytes' chunks. Rotary embedding: the model rotates
 * adjacent pairs (x[2i], x[2i+1]) as Meta's Llama does, which is llama.cpp's
 * rope for the "llama" architecture, so Q and K are written unpermuted.
 */
export function ggufChunks(weights: Llama8da4wWeights, name = 'llama-8da4w'): Uint8Array[] {
  const C = weights.config;
  const vocabulary = placeholderVocabulary(C.vocab);
  const metadata: [string, MetadataValue][] = [
    ['general.architecture', { string: 'llama' }],
    ['general.name', { string: name }],
    ['general.alignment', { uint32: ALIGNMENT }],
    ['general.file_type', { uint32: FILE_TYPE_MOSTLY_Q4_0 }],
    ['llama.context_length', { uint32: C.context }],
    ['llama.embedding_length', { uint32: C.modelDim }],
    ['llama.block_count', { uint32: C.layers }],
    ['llama.feed_forward_length', { uint32: C.hiddenDim }],
    ['llama.rope.dimension_count', { uint32: headDim(C) }],
    ['llama.rope.freq_base', { float32: C.ropeTheta }],
    ['llama.attention.head_count', { uint32: C.heads }],
    ['llama.attention.head_count_kv', { uint32: C.kvHeads }],
    ['llama.attention.layer_norm_rms_epsilon', { float32: C.normEps }],
    ['llama.vocab_size', { uint32: C.vocab }],
    ['tokenizer.ggml.model', { string: 'llama' }],
    ['tokenizer.ggml.tokens', { strings: vocabulary.tokens }],
    ['tokenizer.ggml.scores', { float32s: vocabulary.scores }],
    ['tokenizer.ggml.token_type', { int32s: vocabulary.types }],
    ['tokenizer.ggml.unknown_token_id', { uint32: GGUF_SPECIAL_TOKENS.unknown }],
    ['tokenizer.ggml.bos_token_id', { uint32: GGUF_SPECIAL_TOKENS.bos }],
    ['tokenizer.ggml.eos_token_id', { uint32: GGUF_SPECIAL_TOKENS.eos }],
  ];
  const tensors = ggufTensors(weights);
  const head = new ByteSink();
  head.u32(GGUF_MAGIC);
  head.u32(GGUF_VERSION);
  head.u64(tensors.length);
  head.u64(metadata.length);
  for (const [key, value] of metadata) {
    head.string(key);
    writeValue(head, value);
  }
  let offset = 0;
  for (const t of tensors) {
    head.string(t.name);
    head.u32(t.dims.length);
    for (const dim of t.dims) head.u64(dim);
    head.u32(t.type);
    head.u64(offset);
    offset += Math.ceil(t.data.byteLength / ALIGNMENT) * ALIGNMENT;
  }
  head.padTo(ALIGNMENT);
  const body = new ByteSink();
  for (const t of tensors) {
    body.push(t.data);
    body.padTo(ALIGNMENT);
  }
  return [...head.chunks, ...body.chunks];
}

/** Writes the model as a GGUF file at `path`; returns its size in bytes. */
export function writeGguf(path: string, weights: Llama8da4wWeights, name?: string): number {
  const fd = openSync(path, 'w');
  let written = 0;
  try {
    for (const chunk of ggufChunks(weights, name)) written += writeSync(fd, chunk);
  } finally {
    closeSync(fd);
  }
  return written;
}
