// Example programs and their reference implementations, by name.
import { EtnaError } from '../../errors.js';
import type { ExportOptions, ProgramBuilder } from '../../export/program-builder.js';
import { buildEncoderDecoder, EncoderDecoderReference } from './encoder-decoder.js';
import { buildGruStream, GruStreamReference } from './gru-stream.js';
import { buildKvDecoder, KV_DECODER_CONFIG as KV, KvDecoderReference } from './kv-decoder.js';
import type { ExampleReference } from './reference.js';

export interface ExampleInfo {
  readonly name: string;
  readonly summary: string;
  /** Signatures, for help text. */
  readonly methods: readonly string[];
  build(): ProgramBuilder;
  reference(): ExampleReference;
}

export const EXAMPLES = {
  'kv-decoder': {
    name: 'kv-decoder',
    summary: `transformer decoder (${KV.layers} layers, d=${KV.modelDim}, ${KV.heads} heads, context ${KV.context}, vocab ${KV.vocab}) with a KV cache shared by its methods`,
    methods: [
      `prefill(tokens int64[1,${KV.prefillLength}], start_pos int64[1]) -> logits float32[1,${KV.prefillLength},${KV.vocab}]`,
      `decode(token int64[1,1], pos int64[1]) -> logits float32[1,1,${KV.vocab}]`,
      'reset()',
    ],
    build: () => buildKvDecoder(),
    reference: () => new KvDecoderReference(),
  },
  'gru-stream': {
    name: 'gru-stream',
    summary: 'streaming GRU (16 -> 32 hidden -> 8) whose hidden state is shared by its methods',
    methods: ['step(frame float32[1,16]) -> output float32[1,8]', 'reset()'],
    build: () => buildGruStream(),
    reference: () => new GruStreamReference(),
  },
  'encoder-decoder': {
    name: 'encoder-decoder',
    summary: 'tied-weight autoencoder: two stateless methods reading the same weights',
    methods: ['encode(x float32[1,32]) -> code float32[1,8]', 'decode(code float32[1,8]) -> reconstruction float32[1,32]'],
    build: () => buildEncoderDecoder(),
    reference: () => new EncoderDecoderReference(),
  },
} as const satisfies Record<string, ExampleInfo>;

export type ExampleName = keyof typeof EXAMPLES;

export const EXAMPLE_NAMES = Object.keys(EXAMPLES) as ExampleName[];

export function isExampleName(name: string): name is ExampleName {
  return Object.prototype.hasOwnProperty.call(EXAMPLES, name);
}

export function exampleInfo(name: string): ExampleInfo {
  if (!isExampleName(name)) throw new EtnaError('INVALID_INPUT', `unknown example '${name}' (available: ${EXAMPLE_NAMES.join(', ')})`);
  return EXAMPLES[name];
}

/** A fresh builder holding the example program (not yet exported). */
export function buildExample(name: string): ProgramBuilder {
  return exampleInfo(name).build();
}

/** The example as .pte bytes. */
export function exportExample(name: string, options?: ExportOptions): Uint8Array {
  return buildExample(name).toPte(options);
}

/** A fresh reference implementation (its own state) of the example. */
export function exampleReference(name: string): ExampleReference {
  return exampleInfo(name).reference();
}

export { buildEncoderDecoder, createEncoderDecoderWeights, ENCODER_DECODER_CONFIG, EncoderDecoderReference, encoderDecoderSession } from './encoder-decoder.js';
export type { EncoderDecoderWeights } from './encoder-decoder.js';
export { buildGruStream, createGruStreamWeights, GRU_STREAM_CONFIG, GruStreamReference, gruStreamSession } from './gru-stream.js';
export type { GruStreamWeights } from './gru-stream.js';
export {
  buildKvDecoder,
  causalMaskTable,
  createKvDecoderWeights,
  KV_DECODER_CONFIG,
  KV_DECODER_LARGE_CONFIG,
  KvDecoderReference,
  kvDecoderFullSequence,
  kvDecoderSession,
} from './kv-decoder.js';
export type { KvDecoderConfig, KvDecoderLayerWeights, KvDecoderWeights } from './kv-decoder.js';
export { erf, float32Tensor, gelu, int64Tensor, SeededRandom } from './reference.js';
export type { ExampleCall, ExampleReference, LinearWeights, NormWeights, ReferenceTensor } from './reference.js';
