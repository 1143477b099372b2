// What an LLM program says about itself, read the way ExecuTorch's text
// runner reads it: constant methods written by export_llama, the runner's
// defaults where one is absent, and the shapes of the methods that step the
// model. Everything the loop relies on is checked here, once, at load.
import { EtnaError } from '../errors.js';
import type { Module, Value } from '../module.js';
import type { Program } from '../program.js';
import type { MethodDescription, ValueDescription } from '../program-types.js';
import { Tensor } from '../tensor.js';
import type { LlmTokenizer } from './tokenizer.js';

/**
 * The constant methods export_llama and optimum-executorch write, by the
 * names ExecuTorch's runner reads (optimum-executorch also writes
 * `get_eos_id` and `get_max_batch_size`). Others they write (`get_n_layers`,
 * `get_head_dim`, `get_dtype`, ...) describe the model and are not read.
 */
export const METADATA_METHODS = [
  'get_max_seq_len',
  'get_max_context_len',
  'get_vocab_size',
  'get_bos_id',
  'get_eos_ids',
  'get_eos_id',
  'get_max_batch_size',
  'use_kv_cache',
  'enable_dynamic_shape',
  'use_sdpa_with_kv_cache',
] as const;

// ExecuTorch's runner defaults (extension/llm/runner: get_llm_metadata).
const DEFAULT_MAX_SEQ_LEN = 128;
const DEFAULT_USE_KV_CACHE = true;
const DEFAULT_ENABLE_DYNAMIC_SHAPE = false;
const DEFAULT_USE_SDPA_WITH_KV_CACHE = false;

/**
 * One method that takes (tokens int64[1, n], position) and returns logits.
 * The position is the first token's (export_llama's `input_pos` int64[1]),
 * or every token's (optimum-executorch's `cache_position` int64[n], filled
 * start, start + 1, ... as ExecuTorch's runner fills it).
 */
export interface StepMethod {
  readonly name: string;
  /** Tokens per call: at most this many, or exactly this many when `exact`. */
  readonly tokens: number;
  readonly exact: boolean;
  readonly tokensInput: ValueDescription;
  readonly positionInput: ValueDescription;
  /** 'start': one position, the first token's; 'each': one per token. */
  readonly positions: 'start' | 'each';
  /** Bytes of the logits output at its upper-bound shape. */
  readonly logitsBytes: number;
  /** The logits' dtype: float32, or the 16-bit float export_llama's `-d bf16` / `-d fp16` leaves them in (widened to float32 for sampling). */
  readonly logitsDtype: LogitsDtype;
}

export type LogitsDtype = 'float32' | 'bfloat16' | 'float16';
const LOGITS_DTYPES: readonly string[] = ['float32', 'bfloat16', 'float16'] satisfies LogitsDtype[];
const isLogitsDtype = (dtype: string | undefined): dtype is LogitsDtype => dtype !== undefined && LOGITS_DTYPES.includes(dtype);

export interface LlmMetadata {
  /** 'forward': export_llama's single method; 'prefill-decode': two methods sharing the cache at mem_id 2. */
  readonly layout: 'forward' | 'prefill-decode';
  /** Most tokens one call takes (`get_max_seq_len`). */
  readonly maxSeqLen: number;
  /** Positions the KV cache holds (`get_max_context_len`). */
  readonly maxContextLen: number;
  /** Logits per token (`get_vocab_size`, which must equal the logits' last dimension). */
  readonly vocabSize: number;
  /** The BOS token: `get_bos_id`, else the tokenizer's. */
  readonly bosId: number | undefined;
  /** Tokens that end generation: `get_eos_ids`, the tokenizer's EOS and generation_config's eos_token_id, in that order. */
  readonly eosIds: readonly number[];
  readonly useKvCache: boolean;
  readonly enableDynamicShape: boolean;
  readonly useSdpaWithKvCache: boolean;
  /** The method that takes the prompt, and the one that takes each generated token. */
  readonly prefill: StepMethod;
  readonly decode: StepMethod;
  /** Where each figure came from: the program's constant method, the method shapes, the tokenizer or the runner's default. */
  readonly sources: Readonly<Record<string, 'program' | 'shape' | 'tokenizer' | 'default'>>;
}

function refuse(message: string): never {
  throw new EtnaError('INVALID_PROGRAM', message);
}

/** An integer from a constant method's output: an int, a bool, or a one-element tensor. */
function integerOf(value: Value | undefined, method: string): number {
  let result: number | bigint | boolean | undefined;
  if (typeof value === 'bigint' || typeof value === 'number' || typeof value === 'boolean') result = value;
  else if (value instanceof Tensor && value.data.length === 1) {
    const element = value.data[0];
    if (typeof element === 'bigint' || typeof element === 'number') result = element;
  }
  const number = typeof result === 'boolean' ? Number(result) : Number(result);
  if (result === undefined || !Number.isSafeInteger(number)) {
    return refuse(
      `metadata method '${method}' returned ${value instanceof Tensor ? `a tensor of ${value.data.length} elements` : String(value)}; expected an integer`,
    );
  }
  return number;
}

async function readConstants(module: Module, names: readonly string[]): Promise<Map<string, Value[]>> {
  const values = new Map<string, Value[]>();
  for (const name of METADATA_METHODS) {
    if (!names.includes(name)) continue;
    const method = module.methodMeta(name);
    if (method.inputs.length > 0) refuse(`metadata method '${name}' takes ${method.inputs.length} input(s); constant methods take none`);
    values.set(name, await module.execute(name));
  }
  return values;
}

function describeShape(value: ValueDescription): string {
  return value.kind === 'tensor'
    ? `${value.dtype}[${(value.shape ?? []).join(', ')}]${value.dynamism === 'static' || value.dynamism === undefined ? '' : ` (${value.dynamism})`}`
    : value.kind;
}

/** Checks a method that steps the model and says how many tokens a call takes. */
function stepMethod(method: MethodDescription, vocab: number | undefined): StepMethod & { vocab: number } {
  const at = `method '${method.name}'`;
  const expected =
    'expected (tokens int64[1, n], start_pos int64[1] or cache_position int64[n]) -> logits float32 (or bfloat16, float16)[1, n, vocab] or [1, vocab]';
  if (method.inputs.length !== 2) refuse(`${at} takes ${method.inputs.length} input(s); ${expected}`);
  const [tokens, position] = method.inputs as [ValueDescription, ValueDescription];
  if (tokens.kind !== 'tensor' || tokens.dtype !== 'int64' || tokens.shape?.length !== 2 || tokens.shape[0] !== 1) {
    refuse(`${at} input '${tokens.name}' is ${describeShape(tokens)}; ${expected}`);
  }
  const positionShape = position.kind === 'tensor' ? (position.shape ?? []) : [];
  // One position per token: as long as the tokens, and as dynamic (a fixed [1] is a start position either way).
  const each =
    positionShape.length === 1 &&
    positionShape[0] === tokens.shape[1] &&
    (position.dynamism ?? 'static') === (tokens.dynamism ?? 'static') &&
    !(positionShape[0] === 1 && (position.dynamism ?? 'static') === 'static');
  if (position.kind !== 'tensor' || position.dtype !== 'int64' || (!each && positionShape.reduce((a, b) => a * b, 1) !== 1)) {
    refuse(`${at} input '${position.name}' is ${describeShape(position)}; ${expected}`);
  }
  const logits = method.outputs[0];
  const shape = logits?.shape ?? [];
  if (
    logits === undefined ||
    logits.kind !== 'tensor' ||
    !isLogitsDtype(logits.dtype) ||
    shape.length < 2 ||
    shape.length > 3 ||
    shape[0] !== 1
  ) {
    refuse(`${at} output ${logits === undefined ? '0 is missing' : `'${logits.name}' is ${describeShape(logits)}`}; ${expected}`);
  }
  const logitsVocab = shape[shape.length - 1]!;
  if (vocab !== undefined && logitsVocab !== vocab)
    refuse(`${at} returns ${logitsVocab} logits per token, but get_vocab_size says ${vocab}`);
  const n = tokens.shape[1]!;
  if (n < 1) refuse(`${at} input '${tokens.name}' takes no tokens`);
  return {
    name: method.name,
    tokens: n,
    exact: tokens.dynamism === 'static' || tokens.dynamism === undefined,
    tokensInput: tokens,
    positionInput: position,
    positions: each ? 'each' : 'start',
    logitsBytes: logits.nbytes ?? 0,
    logitsDtype: logits.dtype,
    vocab: logitsVocab,
  };
}

export interface MetadataContext {
  readonly program: Program;
  readonly module: Module;
  readonly tokenizer: LlmTokenizer;
  /** The module's memory arenas are shared between methods (false only for `shareMemoryArenas: false`). */
  readonly sharesState: boolean;
  /** generation_config.json's eos_token_id, as a list. */
  readonly generationEosIds?: readonly number[];
}

export async function readLlmMetadata({
  program,
  module,
  tokenizer,
  sharesState,
  generationEosIds = [],
}: MetadataContext): Promise<LlmMetadata> {
  const table = program.methodTable('reading the LLM metadata');
  const names = [...table.keys()];
  const constants = await readConstants(module, names);
  const sources: Record<string, 'program' | 'shape' | 'tokenizer' | 'default'> = {};
  const integer = (name: (typeof METADATA_METHODS)[number]): number | undefined => {
    const values = constants.get(name);
    if (values === undefined) return undefined;
    if (values.length !== 1) refuse(`metadata method '${name}' returns ${values.length} values; expected one`);
    sources[name] = 'program';
    return integerOf(values[0], name);
  };
  const flag = (name: (typeof METADATA_METHODS)[number], fallback: boolean): boolean => {
    const value = integer(name);
    if (value === undefined) {
      sources[name] = 'default';
      return fallback;
    }
    if (value !== 0 && value !== 1) refuse(`metadata method '${name}' returned ${value}; expected 0 or 1`);
    return value === 1;
  };

  const useKvCache = flag('use_kv_cache', DEFAULT_USE_KV_CACHE);
  if (!useKvCache)
    refuse("metadata 'use_kv_cache' is 0: etna's runner drives programs that keep a KV cache between calls (export with -kv)");
  const enableDynamicShape = flag('enable_dynamic_shape', DEFAULT_ENABLE_DYNAMIC_SHAPE);
  const useSdpaWithKvCache = flag('use_sdpa_with_kv_cache', DEFAULT_USE_SDPA_WITH_KV_CACHE);
  const declaredVocab = integer('get_vocab_size');
  if (declaredVocab !== undefined && declaredVocab < 1) refuse(`metadata 'get_vocab_size' is ${declaredVocab}`);

  let layout: LlmMetadata['layout'];
  let prefill: ReturnType<typeof stepMethod>;
  let decode: ReturnType<typeof stepMethod>;
  if (table.has('prefill') || table.has('decode')) {
    if (!table.has('prefill') || !table.has('decode')) {
      refuse(
        `the program has '${table.has('prefill') ? 'prefill' : 'decode'}' without '${table.has('prefill') ? 'decode' : 'prefill'}'; the two-method layout needs both`,
      );
    }
    layout = 'prefill-decode';
    prefill = stepMethod(table.get('prefill')!, declaredVocab);
    decode = stepMethod(table.get('decode')!, declaredVocab);
    if (decode.exact && decode.tokens !== 1) refuse(`method 'decode' takes exactly ${decode.tokens} tokens; it must take one at a time`);
    if (prefill.vocab !== decode.vocab) refuse(`method 'prefill' returns ${prefill.vocab} logits per token and 'decode' ${decode.vocab}`);
    for (const method of ['prefill', 'decode']) {
      if (table.get(method)!.state.length === 0)
        refuse(`method '${method}' keeps no state at mem_id 2, so it cannot share a KV cache with the other method`);
    }
    if (!sharesState)
      refuse(
        'the prefill/decode layout shares its KV cache at mem_id 2 between methods; shareMemoryArenas: false would give each method its own',
      );
  } else if (table.has('forward')) {
    layout = 'forward';
    const forward = stepMethod(table.get('forward')!, declaredVocab);
    if (forward.exact && forward.tokens !== 1) {
      refuse(
        `method 'forward' takes exactly ${forward.tokens} tokens, so it cannot take one generated token at a time; export with --enable_dynamic_shape or one token per call`,
      );
    }
    // Like ExecuTorch's prefiller: a whole chunk per call only when the program says its shapes are dynamic.
    prefill = enableDynamicShape ? forward : { ...forward, tokens: 1, exact: false };
    decode = forward;
  } else {
    return refuse(
      `no method to generate with: expected 'forward', or 'prefill' and 'decode' (methods: ${names.map((n) => `'${n}'`).join(', ') || 'none'})`,
    );
  }
  const vocabSize = decode.vocab;
  sources['get_vocab_size'] ??= 'shape';
  // A program may have more logits than the tokenizer has tokens (padded for speed): those are never sampled.
  // Fewer would leave tokens the program cannot take.
  if (tokenizer.vocabSize > vocabSize) {
    throw new EtnaError(
      'INVALID_INPUT',
      `the tokenizer has ${tokenizer.vocabSize} tokens, but the program's vocabulary holds ${vocabSize} (logits per token${
        sources['get_vocab_size'] === 'program' ? ', get_vocab_size' : ''
      }): they are not made for each other`,
    );
  }

  let maxSeqLen = integer('get_max_seq_len');
  if (maxSeqLen === undefined) {
    // ExecuTorch requires this method of a forward program; the two-method layout states it in prefill's shape.
    if (layout === 'forward')
      refuse("metadata method 'get_max_seq_len' is missing: the runner cannot tell how many tokens one call of 'forward' may take");
    maxSeqLen = prefill.tokens;
    sources['get_max_seq_len'] = 'shape';
  }
  if (maxSeqLen < 1) refuse(`metadata 'get_max_seq_len' is ${maxSeqLen}`);
  if (enableDynamicShape && prefill.exact && prefill.tokens === 1 && layout === 'forward') {
    refuse(`metadata 'enable_dynamic_shape' is 1, but method 'forward' takes exactly one token`);
  }
  let maxContextLen = integer('get_max_context_len');
  if (maxContextLen === undefined) {
    maxContextLen = table.has('get_max_seq_len') ? maxSeqLen : DEFAULT_MAX_SEQ_LEN;
    sources['get_max_context_len'] = table.has('get_max_seq_len') ? 'program' : 'default';
  }
  if (maxContextLen < 1) refuse(`metadata 'get_max_context_len' is ${maxContextLen}`);

  let bosId = integer('get_bos_id');
  if (bosId === undefined) {
    bosId = tokenizer.bosId;
    sources['get_bos_id'] = 'tokenizer';
  }
  const maxBatchSize = integer('get_max_batch_size');
  if (maxBatchSize !== undefined && maxBatchSize < 1) refuse(`metadata 'get_max_batch_size' is ${maxBatchSize}`);
  let programEosIds: number[] = [];
  const eosId = integer('get_eos_id');
  const eosValues = constants.get('get_eos_ids');
  if (eosValues !== undefined) {
    programEosIds = eosValues.flatMap((value) =>
      value instanceof Tensor
        ? Array.from(value.data as ArrayLike<number | bigint>, (v) => integerOf(v, 'get_eos_ids'))
        : [integerOf(value, 'get_eos_ids')],
    );
  }
  // optimum-executorch writes the first of get_eos_ids again as get_eos_id; an older program, only get_eos_id.
  if (eosId !== undefined && !programEosIds.includes(eosId)) programEosIds.push(eosId);
  sources['get_eos_ids'] = eosValues === undefined && eosId === undefined ? 'tokenizer' : 'program';
  for (const [what, ids] of [
    ['get_bos_id', bosId === undefined ? [] : [bosId]],
    ['get_eos_ids', programEosIds],
  ] as const) {
    for (const id of ids)
      if (id < 0 || id >= vocabSize) refuse(`metadata '${what}' names token ${id}, outside the model's vocabulary 0..${vocabSize - 1}`);
  }
  for (const id of generationEosIds) {
    if (id >= vocabSize)
      throw new EtnaError(
        'INVALID_INPUT',
        `generation_config's eos_token_id names token ${id}, outside the model's vocabulary 0..${vocabSize - 1}`,
      );
  }
  // Any of them ends a turn: a chat model's end-of-turn token as well as its end of text.
  const eosIds = [...new Set([...programEosIds, ...(tokenizer.eosId === undefined ? [] : [tokenizer.eosId]), ...generationEosIds])];
  // A call never takes more tokens than get_max_seq_len allows.
  const bounded = (step: StepMethod): StepMethod => ({ ...step, tokens: step.exact ? step.tokens : Math.min(step.tokens, maxSeqLen) });
  const strip = ({ vocab: _vocab, ...step }: ReturnType<typeof stepMethod>): StepMethod => bounded(step);
  return {
    layout,
    maxSeqLen,
    maxContextLen,
    vocabSize,
    bosId,
    eosIds,
    useKvCache,
    enableDynamicShape,
    useSdpaWithKvCache,
    prefill: strip(prefill),
    decode: strip(decode),
    sources,
  };
}
