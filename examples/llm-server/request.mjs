// The body of POST /generate, checked field by field before the request
// takes a session: every way it can be wrong has its own error code, and the
// message names the field and what it must be. The rules are generate()'s
// own (etna-runtime/llm exports them); the server only narrows them to the
// model (its context, its vocabulary) and to what a request may ask.
import { describeNumberRule, GENERATE_NUMBER_RULES, numberFault, stopFault } from 'etna-runtime/llm';

/** A request the server refuses, with the HTTP status and the code the JSON answer carries. */
export class RequestError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.name = 'RequestError';
    this.status = status;
    this.code = code;
    if (field !== undefined) this.field = field;
  }
}

/** Stop strings a request may give, and the length of each. */
export const MAX_STOP_STRINGS = 16;
export const MAX_STOP_LENGTH = 256;
/** Temperatures above this flatten the distribution to noise; refusing them catches a misplaced value. */
export const MAX_TEMPERATURE = 100;

/** The fields a body may have; anything else is UNKNOWN_FIELD, so a misspelt option never silently means its default. */
export const FIELDS = ['prompt', 'maxNewTokens', 'temperature', 'topK', 'topP', 'seed', 'stop'];

const describe = (value) =>
  value === null
    ? 'null'
    : Array.isArray(value)
      ? 'an array'
      : typeof value === 'string'
        ? 'a string'
        : typeof value === 'object'
          ? 'an object'
          : `${typeof value} ${JSON.stringify(value)}`;

const wrongType = (field, rule, value) => new RequestError(400, 'WRONG_TYPE', `${field} must be ${rule}, got ${describe(value)}`, field);
/** `got` is the number, or what was counted ('20 strings'). */
const outOfRange = (field, rule, got) => new RequestError(400, 'OUT_OF_RANGE', `${field} must be ${rule}, got ${got}`, field);

/**
 * The prompt and generate() options of a request body (text), or a
 * RequestError. `model` gives the bounds that depend on the program: its
 * context (maxNewTokens) and its vocabulary (topK).
 */
export function parseGenerateRequest(text, model) {
  let body;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new RequestError(400, 'BAD_JSON', `the request body is not JSON: ${error.message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new RequestError(
      400,
      'INVALID_BODY',
      `the request body must be a JSON object such as {"prompt": "Once upon a time"}, got ${describe(body)}`,
    );
  }
  for (const key of Object.keys(body)) {
    if (!FIELDS.includes(key)) throw new RequestError(400, 'UNKNOWN_FIELD', `unknown field '${key}' (fields: ${FIELDS.join(', ')})`, key);
  }
  if (!Object.hasOwn(body, 'prompt')) throw new RequestError(400, 'MISSING_FIELD', 'prompt is required: the text to continue', 'prompt');
  if (typeof body.prompt !== 'string') throw wrongType('prompt', 'a string', body.prompt);

  const options = {};
  const number = (field, narrowed = {}) => {
    const value = body[field];
    if (value === undefined) return;
    const rule = { ...GENERATE_NUMBER_RULES[field], ...narrowed };
    const fault = numberFault(value, rule);
    if (fault === 'type') throw wrongType(field, rule.integer ? 'an integer' : 'a number', value);
    if (fault === 'range') throw outOfRange(field, describeNumberRule(rule), value);
    options[field] = value;
  };
  // A context of C positions has room for at most C new tokens (an empty prompt after one BOS).
  number('maxNewTokens', { max: model.maxContextLen });
  // JSON has no infinities, but 1e999 parses to one.
  number('temperature', { max: MAX_TEMPERATURE });
  number('topK', { max: model.vocabSize });
  number('topP');
  number('seed');
  if (body.stop !== undefined) {
    const fault = stopFault(body.stop, { maxStrings: MAX_STOP_STRINGS, maxLength: MAX_STOP_LENGTH });
    if (fault?.fault === 'type') throw wrongType(fault.field, fault.rule, fault.value);
    if (fault?.fault === 'range') throw outOfRange(fault.field, fault.rule, fault.got);
    options.stop = body.stop;
  }
  return { prompt: body.prompt, options };
}
