// generate()'s options: what each may be, checked once here. The rules are
// exported so that a caller taking options from outside (a server's request
// body, a command line) checks them by the same rules before it calls
// generate(), and may only narrow them.
import { randomInt } from 'node:crypto';

import { describeValue, EtnaError } from '../errors.js';
import { checkOptionKeys } from '../program.js';
import { DEFAULT_PENALTY_LAST_N, type SamplingOptions } from './sampler.js';
import type { TokenLogprob } from './types.js';

/** ExecuTorch's GenerationConfig, in camel case. */
export interface GenerateOptions {
  /** Tokens to generate at most. Default: as many as the context has room for. */
  maxNewTokens?: number;
  /** 0 is greedy. Default 0.8, as ExecuTorch's runner. */
  temperature?: number;
  /** Sample among the k most likely tokens only (0, the default: all). */
  topK?: number;
  /** Sample among the most likely tokens that make up this much probability (1, the default: all). */
  topP?: number;
  /** Seeds sampling; the same seed, prompt and options give the same text. Default: a random seed. */
  seed?: number;
  /** Stop before any of these strings; the text never contains them. */
  stop?: readonly string[];
  /** Keep generating past an end-of-sequence token. */
  ignoreEos?: boolean;
  /** Stream the prompt first and start the text with it. */
  echo?: boolean;
  /**
   * BOS tokens put before the prompt's tokens, EOS tokens after them (default 0). numBos defaults to 1
   * for a text prompt that starts a context when the model has a BOS token its tokenizer adds
   * (`llm.addsBos`), else 0.
   */
  numBos?: number;
  numEos?: number;
  /** Stops the generation between two calls; the result then has stopReason 'aborted'. */
  signal?: AbortSignal;
  /**
   * Divides the positive logits (multiplies the negative ones) of the tokens
   * among the last `penaltyLastN` of the context, as llama.cpp's
   * `repeat_penalty` (1, the default: off).
   */
  repetitionPenalty?: number;
  /** Subtracted from a token's logit once per occurrence in that window, as OpenAI's frequency_penalty (default 0). */
  frequencyPenalty?: number;
  /** Subtracted from the logit of each token in that window, as OpenAI's presence_penalty (default 0). */
  presencePenalty?: number;
  /** How many of the context's last tokens (prompt and generated) the penalties count; -1: the whole context. Default 64. */
  penaltyLastN?: number;
  /** Keep only tokens whose probability is at least minP times the most likely one's, as llama.cpp's min_p (0, the default: all). */
  minP?: number;
  /** Token id to a number added to its logit before sampling (-100 to 100), as OpenAI's logit_bias. */
  logitBias?: Readonly<Record<number | string, number>>;
  /** Give each generated token's log-probability in the result's `logprobs`. */
  logprobs?: boolean;
  /** With `logprobs`, also give the N most likely tokens at each position (0 to 20, default 0). */
  topLogprobs?: number;
  /** Called with each generated token as it is sampled, and its log-probabilities when `logprobs` asks for them. */
  onToken?: (id: number, logprobs: TokenLogprob | undefined) => void;
  /** Token ids that end the generation as an end-of-sequence token does (even with ignoreEos); the last of `tokens`. */
  stopTokens?: readonly number[];
}

export const GENERATE_OPTIONS: readonly (keyof GenerateOptions)[] = [
  'maxNewTokens',
  'temperature',
  'topK',
  'topP',
  'seed',
  'stop',
  'ignoreEos',
  'echo',
  'numBos',
  'numEos',
  'signal',
  'repetitionPenalty',
  'frequencyPenalty',
  'presencePenalty',
  'penaltyLastN',
  'minP',
  'logitBias',
  'logprobs',
  'topLogprobs',
  'onToken',
  'stopTokens',
];

export const DEFAULT_TEMPERATURE = 0.8;

/** What a numeric option may be: a finite number (or a safe integer) from `min` to `max`. */
export interface NumberRule {
  readonly integer: boolean;
  readonly min: number;
  /** `min` itself is refused (topP must be above 0). */
  readonly minExcluded?: boolean;
  /** Infinity when only finiteness bounds it. */
  readonly max: number;
}

export type NumericGenerateOption =
  | 'maxNewTokens'
  | 'temperature'
  | 'topK'
  | 'topP'
  | 'seed'
  | 'numBos'
  | 'numEos'
  | 'repetitionPenalty'
  | 'frequencyPenalty'
  | 'presencePenalty'
  | 'penaltyLastN'
  | 'minP'
  | 'topLogprobs';

export const GENERATE_NUMBER_RULES: Readonly<Record<NumericGenerateOption, NumberRule>> = {
  maxNewTokens: { integer: true, min: 1, max: Infinity },
  temperature: { integer: false, min: 0, max: Infinity },
  topK: { integer: true, min: 0, max: Infinity },
  topP: { integer: false, min: 0, minExcluded: true, max: 1 },
  seed: { integer: true, min: 0, max: 2 ** 32 - 1 },
  numBos: { integer: true, min: 0, max: Infinity },
  numEos: { integer: true, min: 0, max: Infinity },
  repetitionPenalty: { integer: false, min: 0, minExcluded: true, max: Infinity },
  // OpenAI's ranges.
  frequencyPenalty: { integer: false, min: -2, max: 2 },
  presencePenalty: { integer: false, min: -2, max: 2 },
  penaltyLastN: { integer: true, min: -1, max: Infinity },
  minP: { integer: false, min: 0, max: 1 },
  topLogprobs: { integer: true, min: 0, max: 20 },
};

/** What each value of `logitBias` may be: OpenAI's range. */
export const LOGIT_BIAS_RULE: NumberRule = { integer: false, min: -100, max: 100 };

/** How a value breaks its rule: the wrong kind of value ('type') or one out of its range ('range'). */
export type OptionFault = 'type' | 'range';

/** 'type' for a non-number (or a fraction, NaN or an infinity where an integer goes), 'range' outside the rule, else undefined. */
export function numberFault(value: unknown, rule: NumberRule): OptionFault | undefined {
  if (typeof value !== 'number' || (rule.integer && !Number.isInteger(value))) return 'type';
  const aboveMin = rule.minExcluded ? value > rule.min : value >= rule.min;
  if (!Number.isFinite(value) || !aboveMin || value > rule.max || (rule.integer && !Number.isSafeInteger(value))) return 'range';
  return undefined;
}

/** The rule in words, as messages give it: 'an integer >= 1', 'a number in (0, 1]', 'an integer from 0 to 4294967295'. */
export function describeNumberRule(rule: NumberRule): string {
  if (rule.max === Infinity) return `${rule.integer ? 'an integer' : 'a number'} ${rule.minExcluded ? '>' : '>='} ${rule.min}`;
  if (rule.integer && !rule.minExcluded) return `an integer from ${rule.min} to ${rule.max}`;
  return `${rule.integer ? 'an integer' : 'a number'} in ${rule.minExcluded ? '(' : '['}${rule.min}, ${rule.max}]`;
}

/** Bounds a caller may add to the stop strings (generate() itself takes any number, of any length). */
export interface StopLimits {
  readonly maxStrings?: number;
  readonly maxLength?: number;
}

/** How an option breaks its rule: which fault, where ('stop', 'stop[i]', 'logitBias[id]') and what it must be there. */
export interface FieldFault {
  readonly fault: OptionFault;
  readonly field: string;
  readonly rule: string;
  /** The value that breaks it: the list, or one of its items. */
  readonly value: unknown;
  /** What a message says it got: the value described, or what was counted ('20 strings'). */
  readonly got: string;
}

export type StopFault = FieldFault;

/** Stop strings are an array of non-empty strings, within `limits`; undefined when `value` is one. */
export function stopFault(value: unknown, limits: StopLimits = {}): StopFault | undefined {
  const { maxStrings = Infinity, maxLength = Infinity } = limits;
  if (!Array.isArray(value)) return { fault: 'type', field: 'stop', rule: 'an array of strings', value, got: describeValue(value) };
  if (value.length > maxStrings) {
    return { fault: 'range', field: 'stop', rule: `at most ${maxStrings} strings`, value, got: `${value.length} strings` };
  }
  for (const [i, item] of value.entries()) {
    const field = `stop[${i}]`;
    if (typeof item !== 'string') return { fault: 'type', field, rule: 'a string', value: item, got: describeValue(item) };
    if (item.length === 0 || item.length > maxLength) {
      const rule = maxLength === Infinity ? 'a non-empty string' : `1 to ${maxLength} characters long`;
      return { fault: 'range', field, rule, value: item, got: `${item.length} characters` };
    }
  }
  return undefined;
}

/** What a logitBias key must be: a token id written in decimal, as JSON object keys carry OpenAI's. */
const TOKEN_ID_KEY = /^(0|[1-9]\d*)$/;

/**
 * A logit bias is an object of token ids (keys, in decimal) to numbers in
 * LOGIT_BIAS_RULE, and with `vocabSize` every id is in the vocabulary;
 * undefined when `value` is one.
 */
export function logitBiasFault(value: unknown, limits: { readonly vocabSize?: number } = {}): FieldFault | undefined {
  const prototype = typeof value === 'object' && value !== null ? Object.getPrototypeOf(value) : undefined;
  if (prototype !== Object.prototype && prototype !== null) {
    return { fault: 'type', field: 'logitBias', rule: 'an object of token ids to numbers', value, got: describeValue(value) };
  }
  const { vocabSize = Infinity } = limits;
  for (const [key, bias] of Object.entries(value as object)) {
    if (!TOKEN_ID_KEY.test(key) || !Number.isSafeInteger(Number(key))) {
      return { fault: 'type', field: 'logitBias', rule: 'keyed by token ids (integers >= 0)', value, got: `the key '${key}'` };
    }
    if (Number(key) >= vocabSize) {
      const rule = `keyed by token ids in the model's vocabulary 0..${vocabSize - 1}`;
      return { fault: 'range', field: 'logitBias', rule, value, got: `token ${key}` };
    }
    const fault = numberFault(bias, LOGIT_BIAS_RULE);
    if (fault !== undefined) {
      return { fault, field: `logitBias[${key}]`, rule: describeNumberRule(LOGIT_BIAS_RULE), value: bias, got: describeValue(bias) };
    }
  }
  return undefined;
}

/**
 * Stop tokens are an array of token ids, and with `vocabSize` every id is in
 * the vocabulary; undefined when `value` is one.
 */
export function stopTokensFault(value: unknown, limits: { readonly vocabSize?: number } = {}): FieldFault | undefined {
  if (!Array.isArray(value)) return { fault: 'type', field: 'stopTokens', rule: 'an array of token ids', value, got: describeValue(value) };
  const { vocabSize = Infinity } = limits;
  for (const [i, item] of value.entries()) {
    const field = `stopTokens[${i}]`;
    if (!Number.isSafeInteger(item))
      return { fault: 'type', field, rule: 'a token id, an integer >= 0', value: item, got: describeValue(item) };
    if ((item as number) < 0 || (item as number) >= vocabSize) {
      const rule = vocabSize === Infinity ? 'an integer >= 0' : `a token id in the model's vocabulary 0..${vocabSize - 1}`;
      return { fault: 'range', field, rule, value: item, got: describeValue(item) };
    }
  }
  return undefined;
}

/** generate()'s options checked, with their defaults. */
export interface ResolvedOptions {
  maxNewTokens: number | undefined;
  sampling: SamplingOptions;
  stop: readonly string[];
  ignoreEos: boolean;
  echo: boolean;
  /** undefined: the default, which depends on where the turn starts. */
  numBos: number | undefined;
  numEos: number;
  signal: AbortSignal | undefined;
  /** How many top tokens each generated token's log-probabilities list; undefined when `logprobs` is off. */
  topLogprobs: number | undefined;
  onToken: GenerateOptions['onToken'];
  stopTokens: readonly number[];
}

/**
 * Checks generate()'s options (INVALID_INPUT naming the first one that is
 * wrong) and fills in the defaults; `vocabSize` bounds the logit bias's ids.
 */
export function resolveOptions(options: GenerateOptions, limits: { readonly vocabSize?: number } = {}): ResolvedOptions {
  const checked = checkOptionKeys(options, GENERATE_OPTIONS, 'generate');
  const invalid = (name: string, rule: string): never => {
    throw new EtnaError('INVALID_INPUT', `generate: ${name} must be ${rule}, got ${describeValue(checked[name])}`);
  };
  const number = <T extends number | undefined>(name: NumericGenerateOption, fallback: T): number | T => {
    const value = checked[name];
    if (value === undefined) return fallback;
    const rule = GENERATE_NUMBER_RULES[name];
    if (numberFault(value, rule) !== undefined) invalid(name, describeNumberRule(rule));
    return value as number;
  };
  const flag = (name: 'ignoreEos' | 'echo' | 'logprobs'): boolean => {
    const value = checked[name];
    if (value !== undefined && typeof value !== 'boolean') invalid(name, 'a boolean');
    return value === true;
  };
  const resolved: ResolvedOptions = {
    maxNewTokens: number('maxNewTokens', undefined),
    sampling: {
      temperature: number('temperature', DEFAULT_TEMPERATURE),
      topK: number('topK', 0),
      topP: number('topP', 1),
      seed: checked['seed'] === undefined ? randomInt(2 ** 32) : number('seed', 0),
      minP: number('minP', 0),
      repetitionPenalty: number('repetitionPenalty', 1),
      frequencyPenalty: number('frequencyPenalty', 0),
      presencePenalty: number('presencePenalty', 0),
      penaltyLastN: number('penaltyLastN', DEFAULT_PENALTY_LAST_N),
      logitBias: logitBias(checked['logitBias'], limits),
    },
    stop: (checked['stop'] as string[] | undefined) ?? [],
    ignoreEos: flag('ignoreEos'),
    echo: flag('echo'),
    numBos: number('numBos', undefined),
    numEos: number('numEos', 0),
    signal: checked['signal'] as AbortSignal | undefined,
    topLogprobs: undefined,
    onToken: checked['onToken'] as GenerateOptions['onToken'],
    stopTokens: (checked['stopTokens'] as number[] | undefined) ?? [],
  };
  const topLogprobs = number('topLogprobs', 0);
  if (flag('logprobs')) resolved.topLogprobs = topLogprobs;
  else if (checked['topLogprobs'] !== undefined) invalid('topLogprobs', 'given with logprobs: true');
  if (resolved.onToken !== undefined && typeof resolved.onToken !== 'function') invalid('onToken', 'a function');
  for (const fault of [stopFault(resolved.stop), stopTokensFault(resolved.stopTokens, limits)]) {
    if (fault !== undefined) throw fieldError(fault);
  }
  if (resolved.signal !== undefined && !(resolved.signal instanceof AbortSignal)) invalid('signal', 'an AbortSignal');
  return resolved;
}

/** A checked logit bias as a map of token id to bias; INVALID_INPUT naming the key or value at fault. */
function logitBias(value: unknown, limits: { readonly vocabSize?: number }): ReadonlyMap<number, number> | undefined {
  if (value === undefined) return undefined;
  const fault = logitBiasFault(value, limits);
  if (fault !== undefined) throw fieldError(fault);
  return new Map(Object.entries(value as Record<string, number>).map(([id, bias]) => [Number(id), bias]));
}

function fieldError(fault: FieldFault): EtnaError {
  return new EtnaError('INVALID_INPUT', `generate: ${fault.field} must be ${fault.rule}, got ${fault.got}`);
}
