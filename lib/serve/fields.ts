// The request fields that steer generation, by OpenAI's names, and the
// generate() option each becomes: one table per route. Values are checked by
// generate()'s own rules (lib/llm/options.ts), narrowed to OpenAI's ranges
// and to the model. A field without an option is one the server does not
// take yet: it is checked, then refused unless it holds its neutral value
// (the one that asks for nothing); giving it an option turns it on.
import { describeValue } from '../errors.js';
import {
  describeNumberRule,
  GENERATE_NUMBER_RULES,
  logitBiasFault,
  numberFault,
  stopFault,
  type GenerateOptions,
  type NumberRule,
} from '../llm/options.js';
import { invalidField } from './errors.js';

/** Stop strings a request may give, and the length of each. */
export const MAX_STOP_STRINGS = 16;
export const MAX_STOP_LENGTH = 256;

/** What a field's value may be. */
export type FieldValue =
  /** A number by this rule. */
  | { readonly kind: 'number'; readonly rule: NumberRule; readonly bound?: 'context' | 'vocabulary' }
  | { readonly kind: 'boolean' }
  /** A string or an array of strings (OpenAI's `stop`). */
  | { readonly kind: 'strings' }
  /** An object from token ids (as strings) to numbers in [-100, 100] (OpenAI's `logit_bias`). */
  | { readonly kind: 'token-map' };

export interface GenerationField {
  readonly value: FieldValue;
  /** The generate() option the field sets; absent while generate() does not take it. */
  readonly option?: keyof GenerateOptions;
  /** The value that asks for nothing, accepted while the field has no option (the empty object for a token map). */
  readonly neutral?: number | boolean;
  /** Options the field also sets whenever it is given (completions' `logprobs: N` also turns on generate()'s `logprobs`). */
  readonly implies?: Readonly<GenerateOptions>;
}

const number = (rule: NumberRule, bound?: 'context' | 'vocabulary'): FieldValue => ({ kind: 'number', rule, ...(bound && { bound }) });
const { maxNewTokens, temperature, topP, topK, seed, frequencyPenalty, presencePenalty, minP, repetitionPenalty } = GENERATE_NUMBER_RULES;

/** Fields both routes take. */
const SAMPLING: Readonly<Record<string, GenerationField>> = {
  max_tokens: { value: number(maxNewTokens, 'context'), option: 'maxNewTokens' },
  // OpenAI's range; generate() takes any temperature.
  temperature: { value: number({ ...temperature, max: 2 }), option: 'temperature' },
  top_p: { value: number(topP), option: 'topP' },
  // Not OpenAI's: vLLM's and llama.cpp's names for them.
  top_k: { value: number(topK, 'vocabulary'), option: 'topK' },
  min_p: { value: number(minP), option: 'minP' },
  repetition_penalty: { value: number(repetitionPenalty), option: 'repetitionPenalty' },
  seed: { value: number(seed), option: 'seed' },
  stop: { value: { kind: 'strings' }, option: 'stop' },
  frequency_penalty: { value: number(frequencyPenalty), option: 'frequencyPenalty' },
  presence_penalty: { value: number(presencePenalty), option: 'presencePenalty' },
  logit_bias: { value: { kind: 'token-map' }, option: 'logitBias' },
};

/** POST /v1/completions. */
export const COMPLETION_FIELDS: Readonly<Record<string, GenerationField>> = {
  ...SAMPLING,
  echo: { value: { kind: 'boolean' }, option: 'echo' },
  // The chosen token's log-probability at each step, and those of the N most likely (0: the chosen token's alone).
  logprobs: { value: number({ integer: true, min: 0, max: 5 }), option: 'topLogprobs', implies: { logprobs: true } },
};

/** POST /v1/chat/completions. */
export const CHAT_FIELDS: Readonly<Record<string, GenerationField>> = {
  ...SAMPLING,
  max_completion_tokens: { value: number(maxNewTokens, 'context'), option: 'maxNewTokens' },
  logprobs: { value: { kind: 'boolean' }, option: 'logprobs' },
  top_logprobs: { value: number(GENERATE_NUMBER_RULES.topLogprobs), option: 'topLogprobs' },
};

/** What the model bounds: the context (max_tokens) and the vocabulary (top_k, logit_bias). */
export interface ModelBounds {
  readonly vocabSize: number;
  readonly maxContextLen: number;
}

const wrongType = (param: string, rule: string, value: unknown): never => {
  throw invalidField('invalid_type', param, `${param} must be ${rule}, got ${describeJson(value)}`);
};
const outOfRange = (param: string, rule: string, got: string): never => {
  throw invalidField('invalid_value', param, `${param} must be ${rule}, got ${got}`);
};

/** A JSON value in a message: its type, and the value for a number or a boolean. */
export function describeJson(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return 'a string';
  if (typeof value === 'object' && value !== null) return 'an object';
  return describeValue(value);
}

/** A field's value checked by its rule: what the option takes (a stop string becomes a list of one). */
function checkValue(param: string, value: unknown, field: FieldValue, model: ModelBounds): unknown {
  switch (field.kind) {
    case 'number': {
      const max = field.bound === 'context' ? model.maxContextLen : field.bound === 'vocabulary' ? model.vocabSize : field.rule.max;
      const rule = { ...field.rule, max: Math.min(field.rule.max, max) };
      const fault = numberFault(value, rule);
      if (fault === 'type') wrongType(param, rule.integer ? 'an integer' : 'a number', value);
      if (fault === 'range') outOfRange(param, describeNumberRule(rule), String(value));
      return value;
    }
    case 'boolean':
      if (typeof value !== 'boolean') wrongType(param, 'a boolean', value);
      return value;
    case 'strings': {
      const list = typeof value === 'string' ? [value] : value;
      const fault = stopFault(list, { maxStrings: MAX_STOP_STRINGS, maxLength: MAX_STOP_LENGTH });
      if (fault?.fault === 'type') wrongType(fault.field, fault.field === 'stop' ? `a string or ${fault.rule}` : fault.rule, fault.value);
      if (fault?.fault === 'range') outOfRange(fault.field, fault.rule, fault.got);
      return list;
    }
    case 'token-map': {
      const fault = logitBiasFault(value, { vocabSize: model.vocabSize });
      if (fault?.fault === 'type') wrongType(param, fault.rule, fault.value);
      if (fault?.fault === 'range') outOfRange(param, fault.rule, fault.got);
      return value;
    }
  }
}

/** Whether a value asks for nothing: a field's neutral value, or an empty token map. */
function isNeutral(value: unknown, field: GenerationField): boolean {
  if (field.value.kind === 'token-map') return Object.keys(value as object).length === 0;
  return field.neutral !== undefined && value === field.neutral;
}

/**
 * The generate() options that a body's generation fields ask for: each
 * field of `fields` present (null counts as absent, as OpenAI takes it)
 * checked and set. Other keys of the body are the caller's.
 */
export function generationOptions(
  body: Readonly<Record<string, unknown>>,
  fields: Readonly<Record<string, GenerationField>>,
  model: ModelBounds,
): GenerateOptions {
  const options: Record<string, unknown> = {};
  const setBy = new Map<string, string>();
  for (const [param, field] of Object.entries(fields)) {
    const value = body[param];
    if (value === undefined || value === null) continue;
    const checked = checkValue(param, value, field.value, model);
    if (field.option === undefined) {
      if (isNeutral(checked, field)) continue;
      const neutral = field.value.kind === 'token-map' ? '{}' : JSON.stringify(field.neutral);
      throw invalidField(
        'unsupported_parameter',
        param,
        `${param} is not supported yet${neutral === undefined ? '' : ` (only its neutral value, ${neutral}, is accepted)`}`,
      );
    }
    const other = setBy.get(field.option);
    if (other !== undefined && options[field.option] !== checked) {
      throw invalidField(
        'invalid_value',
        param,
        `${other} and ${param} mean the same and differ (${options[field.option]} and ${checked}); give one`,
      );
    }
    setBy.set(field.option, param);
    options[field.option] = checked;
    Object.assign(options, field.implies);
  }
  return options as GenerateOptions;
}
