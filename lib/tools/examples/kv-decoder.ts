// A small transformer decoder with a KV cache shared by its methods:
//   prefill(tokens int64[1,8], start_pos int64[1]) -> logits float32[1,8,512]
//   decode(token int64[1,1], pos int64[1])         -> logits float32[1,1,512]
//   reset()                                         (zeroes the caches)
// Prefill takes a fixed chunk of 8 tokens at positions start_pos..start_pos+7;
// longer prompts are fed chunk by chunk, and a short last chunk may be padded
// (the padded positions are overwritten before any query can see them).
// Attention masks come from a constant table indexed by position with
// `embedding`, so the whole program runs on plain portable kernels.
import { EtnaError } from '../../errors.js';
import { ProgramBuilder } from '../../export/program-builder.js';
import type { MethodBuilder } from '../../export/method-builder.js';
import type { ConstantTensor, SharedBuffer, TensorValue } from '../../export/graph.js';
import {
  addInto,
  gelu,
  int64Tensor,
  layerNormRows,
  linearRows,
  map,
  randomLinear,
  randomNorm,
  DecoderReference,
  SeededRandom,
  softmaxInPlace,
  type ExampleCall,
  type LinearWeights,
  type NormWeights,
} from './reference.js';

export interface KvDecoderConfig {
  readonly layers: number;
  readonly modelDim: number;
  readonly heads: number;
  readonly feedForwardDim: number;
  readonly context: number;
  readonly vocab: number;
  readonly prefillLength: number;
  readonly normEps: number;
  /** Added to attention scores of positions a query must not see. */
  readonly maskValue: number;
  readonly seed: number;
}

export const KV_DECODER_CONFIG: KvDecoderConfig = {
  layers: 2,
  modelDim: 128,
  heads: 4,
  feedForwardDim: 512,
  context: 1024,
  vocab: 512,
  prefillLength: 8,
  normEps: 1e-5,
  maskValue: -1e9,
  seed: 0x6b76_6463,
};

/**
 * The same architecture at the size of a small real decoder: 12 MiB of
 * weights and 4 MiB of KV cache, for benchmarks.
 */
export const KV_DECODER_LARGE_CONFIG: KvDecoderConfig = {
  ...KV_DECODER_CONFIG,
  modelDim: 256,
  feedForwardDim: 1024,
  context: 1024,
  vocab: 1024,
  seed: 0x6c61_7267,
};

/** Each head attends over its own modelDim / heads slice of the model width. */
function headDim(config: KvDecoderConfig): number {
  return config.modelDim / config.heads;
}

export interface KvDecoderLayerWeights {
  readonly norm1: NormWeights;
  readonly query: LinearWeights;
  readonly key: LinearWeights;
  readonly value: LinearWeights;
  readonly attentionOut: LinearWeights;
  readonly norm2: NormWeights;
  readonly feedForwardIn: LinearWeights;
  readonly feedForwardOut: LinearWeights;
}

export interface KvDecoderWeights {
  readonly config: KvDecoderConfig;
  readonly tokenEmbedding: Float32Array;
  readonly positionEmbedding: Float32Array;
  readonly layers: readonly KvDecoderLayerWeights[];
  readonly finalNorm: NormWeights;
  readonly head: LinearWeights;
}

export function createKvDecoderWeights(config: KvDecoderConfig = KV_DECODER_CONFIG, seed: number = config.seed): KvDecoderWeights {
  const C = config;
  const random = new SeededRandom(seed);
  const d = C.modelDim;
  return {
    config,
    tokenEmbedding: random.uniform(C.vocab * d, 1),
    positionEmbedding: random.uniform(C.context * d, 0.5),
    layers: Array.from({ length: C.layers }, () => ({
      norm1: randomNorm(random, d),
      query: randomLinear(random, d, d),
      key: randomLinear(random, d, d),
      value: randomLinear(random, d, d),
      attentionOut: randomLinear(random, d, d),
      norm2: randomNorm(random, d),
      feedForwardIn: randomLinear(random, d, C.feedForwardDim),
      feedForwardOut: randomLinear(random, C.feedForwardDim, d),
    })),
    finalNorm: randomNorm(random, d),
    head: randomLinear(random, d, C.vocab),
  };
}

/** Row p holds 0 for the positions a query at position p may attend to (<= p) and maskValue elsewhere. */
export function causalMaskTable(C: KvDecoderConfig = KV_DECODER_CONFIG): Float32Array {
  const table = new Float32Array(C.context * C.context);
  for (let p = 0; p < C.context; p++) {
    for (let c = 0; c < C.context; c++) table[p * C.context + c] = c <= p ? 0 : C.maskValue;
  }
  return table;
}

// ------------------------------------------------------------------ program

interface LinearConstants {
  weight: ConstantTensor;
  bias: ConstantTensor;
}

interface LayerConstants {
  norm1: LinearConstants;
  query: LinearConstants;
  key: LinearConstants;
  value: LinearConstants;
  attentionOut: LinearConstants;
  norm2: LinearConstants;
  feedForwardIn: LinearConstants;
  feedForwardOut: LinearConstants;
  keyCache: SharedBuffer;
  valueCache: SharedBuffer;
}

export function buildKvDecoder(weights: KvDecoderWeights = createKvDecoderWeights()): ProgramBuilder {
  const C = weights.config;
  const program = new ProgramBuilder();
  const d = C.modelDim;
  const linear = (name: string, w: LinearWeights): LinearConstants => ({
    weight: program.constant(`${name}.weight`, 'float32', [w.outFeatures, w.inFeatures], w.weight),
    bias: program.constant(`${name}.bias`, 'float32', [w.outFeatures], w.bias),
  });
  const norm = (name: string, w: NormWeights): LinearConstants => ({
    weight: program.constant(`${name}.weight`, 'float32', [d], w.weight),
    bias: program.constant(`${name}.bias`, 'float32', [d], w.bias),
  });
  const tokenEmbedding = program.constant('token_embedding', 'float32', [C.vocab, d], weights.tokenEmbedding);
  const positionEmbedding = program.constant('position_embedding', 'float32', [C.context, d], weights.positionEmbedding);
  const maskTable = program.constant('causal_mask', 'float32', [C.context, C.context], causalMaskTable(C));
  const chunkOffsets = program.constant(
    'prefill_offsets',
    'int64',
    [C.prefillLength],
    Array.from({ length: C.prefillLength }, (_, i) => i),
  );
  const emptyCache = program.constant('empty_cache', 'float32', [C.context, d], new Float32Array(C.context * d));
  const layers: LayerConstants[] = weights.layers.map((w, l) => ({
    norm1: norm(`layers.${l}.norm1`, w.norm1),
    query: linear(`layers.${l}.attention.query`, w.query),
    key: linear(`layers.${l}.attention.key`, w.key),
    value: linear(`layers.${l}.attention.value`, w.value),
    attentionOut: linear(`layers.${l}.attention.out`, w.attentionOut),
    norm2: norm(`layers.${l}.norm2`, w.norm2),
    feedForwardIn: linear(`layers.${l}.feed_forward.in`, w.feedForwardIn),
    feedForwardOut: linear(`layers.${l}.feed_forward.out`, w.feedForwardOut),
    keyCache: program.sharedBuffer(`layers.${l}.key_cache`, 'float32', [C.context, d]),
    valueCache: program.sharedBuffer(`layers.${l}.value_cache`, 'float32', [C.context, d]),
  }));
  const finalNorm = norm('final_norm', weights.finalNorm);
  const head = linear('head', weights.head);

  // One decoder pass over `length` tokens at `positions` (int64[length]), writing their keys and values into the caches.
  const decoderPass = (m: MethodBuilder, tokens: TensorValue, positions: TensorValue, length: number): TensorValue => {
    let x = m.embedding(tokenEmbedding, m.reshape(tokens, [length]));
    x = m.add(x, m.embedding(positionEmbedding, positions));
    const mask = m.embedding(maskTable, positions); // [length, context]
    for (const layer of layers) {
      const h = m.layerNorm(x, [d], layer.norm1.weight, layer.norm1.bias, C.normEps);
      const q = m.linear(h, layer.query.weight, layer.query.bias);
      const k = m.linear(h, layer.key.weight, layer.key.bias);
      const v = m.linear(h, layer.value.weight, layer.value.bias);
      m.indexPutInPlace(layer.keyCache, [positions], k);
      m.indexPutInPlace(layer.valueCache, [positions], v);
      const scaled = m.mul(q, 1 / Math.sqrt(headDim(C)));
      const queries = m.permute(m.reshape(scaled, [length, C.heads, headDim(C)]), [1, 0, 2]); // [H, T, Dh]
      const keys = m.permute(m.reshape(layer.keyCache, [C.context, C.heads, headDim(C)]), [1, 2, 0]); // [H, Dh, context]
      const scores = m.add(m.matmul(queries, keys), mask); // [H, T, context]
      const probabilities = m.softmax(scores, -1);
      const values = m.permute(m.reshape(layer.valueCache, [C.context, C.heads, headDim(C)]), [1, 0, 2]); // [H, context, Dh]
      const context = m.reshape(m.permute(m.matmul(probabilities, values), [1, 0, 2]), [length, d]);
      x = m.add(x, m.linear(context, layer.attentionOut.weight, layer.attentionOut.bias));
      const h2 = m.layerNorm(x, [d], layer.norm2.weight, layer.norm2.bias, C.normEps);
      const hidden = m.gelu(m.linear(h2, layer.feedForwardIn.weight, layer.feedForwardIn.bias));
      x = m.add(x, m.linear(hidden, layer.feedForwardOut.weight, layer.feedForwardOut.bias));
    }
    const normalized = m.layerNorm(x, [d], finalNorm.weight, finalNorm.bias, C.normEps);
    return m.reshape(m.linear(normalized, head.weight, head.bias), [1, length, C.vocab]);
  };

  program.method('prefill', (m) => {
    const tokens = m.input('tokens', 'int64', [1, C.prefillLength]);
    const start = m.input('start_pos', 'int64', [1]);
    m.output({ logits: decoderPass(m, tokens, m.add(start, chunkOffsets), C.prefillLength) });
  });
  program.method('decode', (m) => {
    const token = m.input('token', 'int64', [1, 1]);
    const pos = m.input('pos', 'int64', [1]);
    m.output({ logits: decoderPass(m, token, pos, 1) });
  });
  program.method('reset', (m) => {
    for (const layer of layers) {
      m.copyInto(layer.keyCache, emptyCache);
      m.copyInto(layer.valueCache, emptyCache);
    }
  });
  return program;
}

// ------------------------------------------------------------------ reference

function embedRows(weights: KvDecoderWeights, tokens: readonly number[], positions: readonly number[]): Float32Array {
  const d = weights.config.modelDim;
  const x = new Float32Array(tokens.length * d);
  tokens.forEach((token, t) => {
    for (let i = 0; i < d; i++) x[t * d + i] = weights.tokenEmbedding[token * d + i]! + weights.positionEmbedding[positions[t]! * d + i]!;
  });
  return x;
}

function feedForward(C: KvDecoderConfig, layer: KvDecoderLayerWeights, x: Float32Array, rows: number): void {
  const h2 = layerNormRows(x, rows, C.modelDim, layer.norm2, C.normEps);
  const hidden = map(linearRows(h2, rows, layer.feedForwardIn), gelu);
  addInto(x, linearRows(hidden, rows, layer.feedForwardOut));
}

function headLogits(weights: KvDecoderWeights, x: Float32Array, rows: number): Float32Array {
  const C = weights.config;
  return linearRows(layerNormRows(x, rows, C.modelDim, weights.finalNorm, C.normEps), rows, weights.head);
}

/**
 * The incremental model, step for step what the program does: keys and
 * values go into fixed-size caches, and every query attends over the whole
 * context with the additive mask row of its position.
 */
export class KvDecoderReference extends DecoderReference {
  private readonly mask: Float32Array;

  constructor(readonly weights: KvDecoderWeights = createKvDecoderWeights()) {
    const C = weights.config;
    const caches = (): Float32Array[] => weights.layers.map(() => new Float32Array(C.context * C.modelDim));
    super('kv-decoder', C, caches(), caches());
    this.mask = causalMaskTable(C);
  }

  protected pass(tokens: readonly number[], start: number): Float32Array {
    const C = this.weights.config;
    const positions = tokens.map((_, t) => start + t);
    const rows = tokens.length;
    const d = C.modelDim;
    const x = embedRows(this.weights, tokens, positions);
    this.weights.layers.forEach((layer, l) => {
      const h = layerNormRows(x, rows, d, layer.norm1, C.normEps);
      const q = map(linearRows(h, rows, layer.query), (v) => v * (1 / Math.sqrt(headDim(C))));
      const k = linearRows(h, rows, layer.key);
      const v = linearRows(h, rows, layer.value);
      const keyCache = this.keyCaches[l]!;
      const valueCache = this.valueCaches[l]!;
      positions.forEach((p, t) => {
        keyCache.set(k.subarray(t * d, (t + 1) * d), p * d);
        valueCache.set(v.subarray(t * d, (t + 1) * d), p * d);
      });
      const context = new Float32Array(rows * d);
      const scores = new Float32Array(C.context);
      for (let t = 0; t < rows; t++) {
        const maskRow = positions[t]! * C.context;
        for (let head = 0; head < C.heads; head++) {
          const offset = head * headDim(C);
          for (let c = 0; c < C.context; c++) {
            let dot = 0;
            for (let i = 0; i < headDim(C); i++) dot += q[t * d + offset + i]! * keyCache[c * d + offset + i]!;
            scores[c] = Math.fround(dot) + this.mask[maskRow + c]!;
          }
          softmaxInPlace(scores);
          for (let i = 0; i < headDim(C); i++) {
            let sum = 0;
            for (let c = 0; c < C.context; c++) sum += scores[c]! * valueCache[c * d + offset + i]!;
            context[t * d + offset + i] = sum;
          }
        }
      }
      addInto(x, linearRows(context, rows, layer.attentionOut));
      feedForward(C, layer, x, rows);
    });
    return headLogits(this.weights, x, rows);
  }

  session(): ExampleCall[] {
    return kvDecoderSession(this.weights.config);
  }
}

/**
 * The same model computed without a cache: the whole sequence at once with
 * ordinary causal attention (each position attends to positions 0..itself).
 * Returns logits [tokens.length x vocab].
 */
export function kvDecoderFullSequence(weights: KvDecoderWeights, tokens: readonly number[]): Float32Array {
  const C = weights.config;
  const n = tokens.length;
  if (n > C.context) throw new EtnaError('INVALID_INPUT', `kvDecoderFullSequence: ${n} tokens exceed the context ${C.context}`);
  const d = C.modelDim;
  const x = embedRows(
    weights,
    tokens,
    tokens.map((_, i) => i),
  );
  for (const layer of weights.layers) {
    const h = layerNormRows(x, n, d, layer.norm1, C.normEps);
    const q = linearRows(h, n, layer.query);
    const k = linearRows(h, n, layer.key);
    const v = linearRows(h, n, layer.value);
    const context = new Float32Array(n * d);
    const scale = 1 / Math.sqrt(headDim(C));
    for (let head = 0; head < C.heads; head++) {
      const offset = head * headDim(C);
      for (let i = 0; i < n; i++) {
        const weightsRow = new Float32Array(i + 1);
        for (let j = 0; j <= i; j++) {
          let dot = 0;
          for (let e = 0; e < headDim(C); e++) dot += Math.fround(q[i * d + offset + e]! * scale) * k[j * d + offset + e]!;
          weightsRow[j] = dot;
        }
        softmaxInPlace(weightsRow);
        for (let e = 0; e < headDim(C); e++) {
          let sum = 0;
          for (let j = 0; j <= i; j++) sum += weightsRow[j]! * v[j * d + offset + e]!;
          context[i * d + offset + e] = sum;
        }
      }
    }
    addInto(x, linearRows(context, n, layer.attentionOut));
    feedForward(C, layer, x, n);
  }
  return headLogits(weights, x, n);
}

/** reset, a 10-token prompt as two padded chunks, three decode steps, then reset and the first chunk again. */
export function kvDecoderSession(C: KvDecoderConfig = KV_DECODER_CONFIG, seed = 7): ExampleCall[] {
  const random = new SeededRandom(seed);
  const prompt = Array.from({ length: 10 }, () => random.integer(C.vocab));
  const padding = Array.from({ length: 6 }, () => 0);
  const chunk = (tokens: number[], start: number): ExampleCall => ({
    method: 'prefill',
    inputs: [int64Tensor([1, C.prefillLength], tokens), int64Tensor([1], [start])],
  });
  const decode = (pos: number): ExampleCall => ({
    method: 'decode',
    inputs: [int64Tensor([1, 1], [random.integer(C.vocab)]), int64Tensor([1], [pos])],
  });
  return [
    { method: 'reset', inputs: [] },
    chunk(prompt.slice(0, 8), 0),
    chunk([...prompt.slice(8), ...padding], 8),
    decode(10),
    decode(11),
    decode(12),
    { method: 'reset', inputs: [] },
    chunk(prompt.slice(0, 8), 0),
  ];
}
