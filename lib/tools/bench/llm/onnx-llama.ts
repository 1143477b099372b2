// Writes the llama-8da4w weights as an ONNX decoder laid out the way
// onnxruntime-genai builds Llama for the CPU: the KV cache as explicit graph
// inputs and outputs (past_key_values.L.key/value -> present.L.key/value,
// [1, kv_heads, length, head_dim]), an attention_mask input whose length is
// the total sequence, `com.microsoft` MatMulNBits linears (bits 4, block 32,
// accuracy_level 4: int8 activations), GroupQueryAttention with the rotary
// embedding inside (interleaved pairs, as the model rotates them),
// SimplifiedLayerNormalization for RMSNorm and a float32 token embedding.
// Logits come from the last position only: [1, 1, vocab].
//
// The 4-bit weights are the 8da4w program's own (the same codes and bf16
// scales as float32), stored as MatMulNBits' blocks: per output row, 32 input
// channels to a block of 16 bytes, element 2i in the low nibble, code + 8,
// with the default zero point 8.
import { EtnaError } from '../../../errors.js';
import type { DType } from '../../../export/dtype.js';
import { bf16Value, INT4_MIN, quantizeInt4Groups } from '../../../export/quantize.js';
import { ONNX_DTYPE_CODES } from '../../../onnx/dtype.js';
import { headDim, ropeTables, type Llama8da4wWeights } from '../../examples/llama-8da4w.js';
import { ProtoWriter } from '../../onnx-emitter/protobuf.js';

/** The element types the model's tensors have (codes from the one ONNX table). */
type ElementType = Extract<DType, 'float32' | 'uint8' | 'int32' | 'int64'>;
const ATTRIBUTE_TYPE = { float: 1, int: 2 } as const;
const IR_VERSION = 8;
const OPSET = 17;
const MS_DOMAIN = 'com.microsoft';
export const MATMUL_NBITS_BLOCK = 32;
/** MatMulNBits computes with int8 activations (quantized per block of the input). */
const ACCURACY_LEVEL_INT8 = 4;

interface Node {
  readonly op: string;
  readonly domain?: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly attributes?: Readonly<Record<string, { int: number } | { float: number }>>;
}

interface Initializer {
  readonly name: string;
  readonly type: ElementType;
  readonly dims: readonly number[];
  readonly data: ArrayBufferView;
}

interface ValueInfo {
  readonly name: string;
  readonly type: ElementType;
  /** A size or a symbolic dim's name. */
  readonly shape: readonly (number | string)[];
}

/** Graph input and output names, as onnxruntime-genai names them. */
export const ONNX_LLAMA_NAMES = {
  inputIds: 'input_ids',
  attentionMask: 'attention_mask',
  logits: 'logits',
  pastKey: (layer: number): string => `past_key_values.${layer}.key`,
  pastValue: (layer: number): string => `past_key_values.${layer}.value`,
  presentKey: (layer: number): string => `present.${layer}.key`,
  presentValue: (layer: number): string => `present.${layer}.value`,
} as const;

/** MatMulNBits' B [N, blocks, 16] and scales [N * blocks] from the 8da4w quantization of weight [N, K]. */
function matMulNBitsWeights(weight: Float32Array, n: number, k: number): { blocks: Uint8Array; scales: Float32Array } {
  const q = quantizeInt4Groups(weight, n, k, MATMUL_NBITS_BLOCK);
  const blocks = new Uint8Array((n * k) / 2);
  for (let i = 0; i < n * k; i++) {
    const code = q.codes[i]! - INT4_MIN;
    blocks[i >> 1]! |= i % 2 === 0 ? code : code << 4;
  }
  return { blocks, scales: Float32Array.from(q.scalesBf16, bf16Value) };
}

function writeTensor(w: ProtoWriter, t: Initializer): void {
  for (const d of t.dims) w.int(1, d);
  w.int(2, ONNX_DTYPE_CODES[t.type])
    .string(8, t.name)
    .bytes(9, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
}

function writeValueInfo(w: ProtoWriter, v: ValueInfo): void {
  w.string(1, v.name);
  w.message(2, (type) =>
    type.message(1, (tensor) => {
      tensor.int(1, ONNX_DTYPE_CODES[v.type]);
      tensor.message(2, (shape) => {
        for (const d of v.shape) shape.message(1, (dim) => (typeof d === 'number' ? dim.int(1, d) : dim.string(2, d)));
      });
    }),
  );
}

/** The decoder as ONNX ModelProto bytes. */
export function onnxLlama(weights: Llama8da4wWeights): Uint8Array {
  const C = weights.config;
  if (C.modelDim % MATMUL_NBITS_BLOCK !== 0 || C.hiddenDim % MATMUL_NBITS_BLOCK !== 0) {
    throw new EtnaError('INVALID_INPUT', `MatMulNBits needs model and hidden dims divisible by ${MATMUL_NBITS_BLOCK}`);
  }
  const d = C.modelDim;
  const hd = headDim(C);
  const kv = C.kvHeads * hd;
  const N = ONNX_LLAMA_NAMES;
  const nodes: Node[] = [];
  const initializers: Initializer[] = [];
  const node = (op: string, inputs: string[], outputs: string[], attributes?: Node['attributes'], domain?: string): void => {
    nodes.push({ op, inputs, outputs, ...(attributes !== undefined && { attributes }), ...(domain !== undefined && { domain }) });
  };
  const linear = (x: string, name: string, weight: Float32Array, out: number, inFeatures: number): string => {
    const { blocks, scales } = matMulNBitsWeights(weight, out, inFeatures);
    initializers.push(
      {
        name: `${name}.MatMul.weight_Q4`,
        type: 'uint8',
        dims: [out, inFeatures / MATMUL_NBITS_BLOCK, MATMUL_NBITS_BLOCK / 2],
        data: blocks,
      },
      { name: `${name}.MatMul.weight_scales`, type: 'float32', dims: [scales.length], data: scales },
    );
    const y = `${name}.MatMul.output`;
    node(
      'MatMulNBits',
      [x, `${name}.MatMul.weight_Q4`, `${name}.MatMul.weight_scales`],
      [y],
      {
        K: { int: inFeatures },
        N: { int: out },
        bits: { int: 4 },
        block_size: { int: MATMUL_NBITS_BLOCK },
        accuracy_level: { int: ACCURACY_LEVEL_INT8 },
      },
      MS_DOMAIN,
    );
    return y;
  };
  const rmsNorm = (x: string, name: string, weight: Float32Array): string => {
    initializers.push({ name: `${name}.weight`, type: 'float32', dims: [weight.length], data: weight });
    node('SimplifiedLayerNormalization', [x, `${name}.weight`], [`${name}.output`], { axis: { int: -1 }, epsilon: { float: C.normEps } });
    return `${name}.output`;
  };

  // What GroupQueryAttention needs from the mask: the index of each sequence's last token and the total length.
  initializers.push(
    { name: 'one', type: 'int64', dims: [1], data: BigInt64Array.of(1n) },
    { name: 'axis_one', type: 'int64', dims: [1], data: BigInt64Array.of(1n) },
    { name: 'last_index', type: 'int64', dims: [], data: BigInt64Array.of(-1n) },
    { name: 'sequence_dim', type: 'int64', dims: [], data: BigInt64Array.of(1n) },
  );
  node('ReduceSum', [N.attentionMask, 'axis_one'], ['mask_sum'], { keepdims: { int: 0 } });
  node('Sub', ['mask_sum', 'one'], ['seqlens_k_int64']);
  node('Cast', ['seqlens_k_int64'], ['seqlens_k'], { to: { int: ONNX_DTYPE_CODES.int32 } });
  node('Shape', [N.attentionMask], ['mask_shape']);
  node('Gather', ['mask_shape', 'sequence_dim'], ['total_length_int64'], { axis: { int: 0 } });
  node('Cast', ['total_length_int64'], ['total_sequence_length'], { to: { int: ONNX_DTYPE_CODES.int32 } });

  const rope = ropeTables(C);
  initializers.push(
    { name: 'cos_cache', type: 'float32', dims: [C.context, hd / 2], data: rope.cos },
    { name: 'sin_cache', type: 'float32', dims: [C.context, hd / 2], data: rope.sin },
    { name: 'embed_tokens.weight', type: 'float32', dims: [C.vocab, d], data: weights.tokenEmbedding },
  );
  node('Gather', ['embed_tokens.weight', N.inputIds], ['embedded'], { axis: { int: 0 } });

  let x = 'embedded';
  weights.layers.forEach((w, l) => {
    const prefix = `layers.${l}`;
    const h = rmsNorm(x, `${prefix}.input_layernorm`, w.attentionNorm);
    const q = linear(h, `${prefix}.attn.q_proj`, w.wq, d, d);
    const k = linear(h, `${prefix}.attn.k_proj`, w.wk, kv, d);
    const v = linear(h, `${prefix}.attn.v_proj`, w.wv, kv, d);
    node(
      'GroupQueryAttention',
      [q, k, v, N.pastKey(l), N.pastValue(l), 'seqlens_k', 'total_sequence_length', 'cos_cache', 'sin_cache'],
      [`${prefix}.attn.output`, N.presentKey(l), N.presentValue(l)],
      {
        num_heads: { int: C.heads },
        kv_num_heads: { int: C.kvHeads },
        do_rotary: { int: 1 },
        rotary_interleaved: { int: 1 },
        scale: { float: 1 / Math.sqrt(hd) },
      },
      MS_DOMAIN,
    );
    const o = linear(`${prefix}.attn.output`, `${prefix}.attn.o_proj`, w.wo, d, d);
    node('Add', [x, o], [`${prefix}.attn_residual`]);
    x = `${prefix}.attn_residual`;
    const h2 = rmsNorm(x, `${prefix}.post_attention_layernorm`, w.ffnNorm);
    const gate = linear(h2, `${prefix}.mlp.gate_proj`, w.w1, C.hiddenDim, d);
    const up = linear(h2, `${prefix}.mlp.up_proj`, w.w3, C.hiddenDim, d);
    node('Sigmoid', [gate], [`${prefix}.mlp.sigmoid`]);
    node('Mul', [gate, `${prefix}.mlp.sigmoid`], [`${prefix}.mlp.silu`]);
    node('Mul', [`${prefix}.mlp.silu`, up], [`${prefix}.mlp.gated`]);
    const down = linear(`${prefix}.mlp.gated`, `${prefix}.mlp.down_proj`, w.w2, d, C.hiddenDim);
    node('Add', [x, down], [`${prefix}.mlp_residual`]);
    x = `${prefix}.mlp_residual`;
  });
  // The last position only: [1, S, d] -> [1, d] -> logits [1, 1, vocab].
  node('Gather', [x, 'last_index'], ['last_hidden'], { axis: { int: 1 } });
  const normed = rmsNorm('last_hidden', 'norm', weights.finalNorm);
  const projected = linear(normed, 'lm_head', weights.output, C.vocab, d);
  node('Unsqueeze', [projected, 'axis_one'], [N.logits]);

  const inputs: ValueInfo[] = [
    { name: N.inputIds, type: 'int64', shape: [1, 'sequence_length'] },
    { name: N.attentionMask, type: 'int64', shape: [1, 'total_sequence_length'] },
  ];
  const outputs: ValueInfo[] = [{ name: N.logits, type: 'float32', shape: [1, 1, C.vocab] }];
  weights.layers.forEach((_, l) => {
    inputs.push(
      { name: N.pastKey(l), type: 'float32', shape: [1, C.kvHeads, 'past_sequence_length', hd] },
      { name: N.pastValue(l), type: 'float32', shape: [1, C.kvHeads, 'past_sequence_length', hd] },
    );
    outputs.push(
      { name: N.presentKey(l), type: 'float32', shape: [1, C.kvHeads, 'total_sequence_length', hd] },
      { name: N.presentValue(l), type: 'float32', shape: [1, C.kvHeads, 'total_sequence_length', hd] },
    );
  });

  const model = new ProtoWriter();
  model.int(1, IR_VERSION).string(2, 'etna');
  model.message(7, (g) => {
    nodes.forEach((n, i) =>
      g.message(1, (w) => {
        for (const input of n.inputs) w.string(1, input);
        for (const output of n.outputs) w.string(2, output);
        w.string(3, `${n.op}_${i}`).string(4, n.op);
        for (const [name, value] of Object.entries(n.attributes ?? {})) {
          w.message(5, (a) => {
            a.string(1, name);
            if ('int' in value) a.int(3, value.int).int(20, ATTRIBUTE_TYPE.int);
            else a.float(2, value.float).int(20, ATTRIBUTE_TYPE.float);
          });
        }
        if (n.domain !== undefined) w.string(7, n.domain);
      }),
    );
    g.string(2, 'llama');
    for (const t of initializers) g.message(5, (w) => writeTensor(w, t));
    for (const v of inputs) g.message(11, (w) => writeValueInfo(w, v));
    for (const v of outputs) g.message(12, (w) => writeValueInfo(w, v));
  });
  model.message(8, (o) => o.string(1, '').int(2, OPSET));
  model.message(8, (o) => o.string(1, MS_DOMAIN).int(2, 1));
  return model.finish();
}
