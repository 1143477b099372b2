// The body of POST /generate, checked field by field before the request
// takes a session: every way it can be wrong has its own error code, and the
// message names the field and what it must be.

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
  const integer = (field, min, max) => {
    const value = body[field];
    if (value === undefined) return;
    if (typeof value !== 'number' || !Number.isInteger(value)) throw wrongType(field, 'an integer', value);
    if (value < min || value > max) throw outOfRange(field, `from ${min} to ${max}`, value);
    options[field] = value;
  };
  const number = (field, ok, rule) => {
    const value = body[field];
    if (value === undefined) return;
    if (typeof value !== 'number') throw wrongType(field, 'a number', value);
    if (!ok(value)) throw outOfRange(field, rule, value);
    options[field] = value;
  };
  // A context of C positions has room for at most C new tokens (an empty prompt after one BOS).
  integer('maxNewTokens', 1, model.maxContextLen);
  // JSON has no infinities, but 1e999 parses to one.
  number('temperature', (v) => Number.isFinite(v) && v >= 0 && v <= MAX_TEMPERATURE, `from 0 (greedy) to ${MAX_TEMPERATURE}`);
  integer('topK', 0, model.vocabSize);
  number('topP', (v) => v > 0 && v <= 1, 'greater than 0 and at most 1');
  integer('seed', 0, 2 ** 32 - 1);
  if (body.stop !== undefined) {
    const { stop } = body;
    if (!Array.isArray(stop)) throw wrongType('stop', 'an array of strings', stop);
    if (stop.length > MAX_STOP_STRINGS) throw outOfRange('stop', `at most ${MAX_STOP_STRINGS} strings`, `${stop.length} strings`);
    stop.forEach((item, i) => {
      if (typeof item !== 'string') throw wrongType(`stop[${i}]`, 'a string', item);
      if (item.length === 0 || item.length > MAX_STOP_LENGTH)
        throw outOfRange(`stop[${i}]`, `1 to ${MAX_STOP_LENGTH} characters long`, `${item.length} characters`);
    });
    options.stop = stop;
  }
  return { prompt: body.prompt, options };
}
