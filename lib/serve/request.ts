// A request's body, read and checked before it takes a session: the JSON,
// the fields each route takes (anything else is refused, so a misspelt
// option never silently means its default), the prompt or the messages, and
// the generation fields of fields.ts.
import type { IncomingMessage } from 'node:http';

import type { GenerateOptions } from '../llm/options.js';
import { ApiError, invalidField } from './errors.js';
import { CHAT_FIELDS, COMPLETION_FIELDS, describeJson, generationOptions, type ModelBounds } from './fields.js';

/** Tokens a completion generates when the request does not say (OpenAI's default for /v1/completions). */
export const DEFAULT_COMPLETION_TOKENS = 16;

/** What the server knows of its model when it checks a request. */
export interface ModelInfo extends ModelBounds {
  /** The name requests give as `model`. */
  readonly name: string;
}

interface ParsedRequest {
  readonly model: string;
  readonly options: GenerateOptions;
  readonly stream: boolean;
  /** stream_options.include_usage: a last chunk with the usage. */
  readonly includeUsage: boolean;
}

export interface CompletionRequest extends ParsedRequest {
  /** A text, or token ids taken as they are. */
  readonly prompt: string | readonly number[];
}

export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant'] as const;
export type ChatRole = (typeof CHAT_ROLES)[number];

/** A chat message with its content as one text. */
export interface ChatMessage {
  readonly role: ChatRole;
  readonly content: string;
  readonly name?: string;
}

export interface ChatRequest extends ParsedRequest {
  readonly messages: readonly ChatMessage[];
}

/** Fields a route takes besides its generation fields. */
const COMPLETION_REQUEST = ['model', 'prompt', 'stream', 'stream_options', 'n', 'best_of', 'suffix', 'user'];
const CHAT_REQUEST = ['model', 'messages', 'stream', 'stream_options', 'n', 'user'];

/** The body as text, or 413 past `limit` bytes (the rest is read and dropped, so the answer can still be sent). */
export function readBody(request: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
    });
    request.on('end', () => {
      if (size > limit)
        reject(new ApiError(413, 'invalid_request_error', 'request_too_large', `the request body is larger than ${limit} bytes`));
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
    request.on('error', reject);
  });
}

/** The body parsed as a JSON object. */
export function parseBody(text: string): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw invalidField('invalid_json', null, `the request body is not JSON: ${(error as Error).message}`);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidField('invalid_json', null, `the request body must be a JSON object, got ${describeJson(body)}`);
  }
  return body as Record<string, unknown>;
}

const present = (value: unknown): boolean => value !== undefined && value !== null;

/** The fields every route checks the same way. */
function parseCommon(
  body: Readonly<Record<string, unknown>>,
  known: readonly string[],
  fields: typeof COMPLETION_FIELDS,
  model: ModelInfo,
): ParsedRequest {
  for (const key of Object.keys(body)) {
    if (!known.includes(key) && !Object.hasOwn(fields, key)) {
      throw invalidField('unknown_parameter', key, `unrecognized request argument supplied: ${key}`);
    }
  }
  if (!present(body['model'])) throw invalidField('missing_required_parameter', 'model', 'model is required');
  if (typeof body['model'] !== 'string')
    throw invalidField('invalid_type', 'model', `model must be a string, got ${describeJson(body['model'])}`);
  if (body['model'] !== model.name) {
    throw new ApiError(
      404,
      'invalid_request_error',
      'model_not_found',
      `the model '${body['model']}' does not exist; this server has '${model.name}'`,
      'model',
    );
  }
  for (const param of ['n', 'best_of']) {
    const value = body[param];
    if (present(value) && value !== 1) {
      throw invalidField('unsupported_value', param, `${param} must be 1 (one choice per request), got ${describeJson(value)}`);
    }
  }
  if (present(body['user']) && typeof body['user'] !== 'string') {
    throw invalidField('invalid_type', 'user', `user must be a string, got ${describeJson(body['user'])}`);
  }
  const stream = body['stream'];
  if (present(stream) && typeof stream !== 'boolean')
    throw invalidField('invalid_type', 'stream', `stream must be a boolean, got ${describeJson(stream)}`);
  let includeUsage = false;
  const streamOptions = body['stream_options'];
  if (present(streamOptions)) {
    if (stream !== true) throw invalidField('invalid_value', 'stream_options', 'stream_options is only allowed when stream is true');
    if (typeof streamOptions !== 'object' || Array.isArray(streamOptions)) {
      throw invalidField('invalid_type', 'stream_options', `stream_options must be an object, got ${describeJson(streamOptions)}`);
    }
    for (const [key, value] of Object.entries(streamOptions as object)) {
      if (key !== 'include_usage') throw invalidField('unknown_parameter', `stream_options.${key}`, `unrecognized stream option: ${key}`);
      if (present(value) && typeof value !== 'boolean') {
        throw invalidField(
          'invalid_type',
          'stream_options.include_usage',
          `stream_options.include_usage must be a boolean, got ${describeJson(value)}`,
        );
      }
      includeUsage = value === true;
    }
  }
  return { model: body['model'], options: generationOptions(body, fields, model), stream: stream === true, includeUsage };
}

/** The prompt: a string, or token ids; an array of one of either is that one (one prompt per request). */
function parsePrompt(value: unknown, vocabSize: number): string | number[] {
  if (!present(value)) throw invalidField('missing_required_parameter', 'prompt', 'prompt is required');
  if (typeof value === 'string') return value;
  const rule = `a string, an array of token ids, or an array of one of either`;
  if (!Array.isArray(value)) throw invalidField('invalid_type', 'prompt', `prompt must be ${rule}, got ${describeJson(value)}`);
  if (value.length === 0) throw invalidField('invalid_value', 'prompt', 'prompt must not be an empty array');
  if (value.every((item) => typeof item === 'number')) {
    value.forEach((id: number, i) => {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
        throw invalidField('invalid_value', 'prompt', `prompt[${i}] must be a token id from 0 to ${vocabSize - 1}, got ${id}`);
      }
    });
    return value as number[];
  }
  if (value.length > 1) throw invalidField('unsupported_value', 'prompt', `one prompt per request; got an array of ${value.length}`);
  if (typeof value[0] === 'string' || Array.isArray(value[0])) return parsePrompt(value[0], vocabSize);
  throw invalidField('invalid_type', 'prompt', `prompt must be ${rule}, got an array holding ${describeJson(value[0])}`);
}

export function parseCompletionRequest(body: Readonly<Record<string, unknown>>, model: ModelInfo): CompletionRequest {
  const common = parseCommon(body, COMPLETION_REQUEST, COMPLETION_FIELDS, model);
  if (present(body['suffix']) && body['suffix'] !== '') throw invalidField('unsupported_parameter', 'suffix', 'suffix is not supported');
  // A prompt token's log-probability would need every prompt position's logits; a prefill gives the last one's.
  if (common.options.logprobs === true && common.options.echo === true) {
    throw invalidField(
      'unsupported_value',
      'logprobs',
      "logprobs with echo is not supported: the prompt's tokens have no log-probabilities",
    );
  }
  const prompt = parsePrompt(body['prompt'], model.vocabSize);
  return { ...common, options: { maxNewTokens: DEFAULT_COMPLETION_TOKENS, ...common.options }, prompt };
}

/** A message's content: a string, or text parts joined. */
function messageContent(value: unknown, param: string): string {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value))
    throw invalidField('invalid_type', param, `${param} must be a string or an array of text parts, got ${describeJson(value)}`);
  return value
    .map((part: unknown, i) => {
      const { type, text } = (typeof part === 'object' && part !== null ? part : {}) as { type?: unknown; text?: unknown };
      if (type !== 'text') {
        throw invalidField(
          'unsupported_value',
          `${param}[${i}]`,
          `${param}[${i}] must be a text part ({"type": "text", "text": ...}); ${describeJson(type)} parts are not supported`,
        );
      }
      if (typeof text !== 'string')
        throw invalidField('invalid_type', `${param}[${i}].text`, `${param}[${i}].text must be a string, got ${describeJson(text)}`);
      return text;
    })
    .join('');
}

function parseMessages(value: unknown): ChatMessage[] {
  if (!present(value)) throw invalidField('missing_required_parameter', 'messages', 'messages is required');
  if (!Array.isArray(value)) throw invalidField('invalid_type', 'messages', `messages must be an array, got ${describeJson(value)}`);
  if (value.length === 0) throw invalidField('invalid_value', 'messages', 'messages must hold at least one message');
  return value.map((message: unknown, i) => {
    const param = `messages[${i}]`;
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      throw invalidField('invalid_type', param, `${param} must be an object, got ${describeJson(message)}`);
    }
    const { role, content, name, ...rest } = message as Record<string, unknown>;
    const extra = Object.keys(rest)[0];
    if (extra !== undefined) throw invalidField('unknown_parameter', `${param}.${extra}`, `unrecognized message field: ${extra}`);
    if (!(CHAT_ROLES as readonly unknown[]).includes(role)) {
      throw invalidField(
        'invalid_value',
        `${param}.role`,
        `${param}.role must be one of ${CHAT_ROLES.join(', ')}, got ${describeJson(role)}`,
      );
    }
    if (present(name) && typeof name !== 'string')
      throw invalidField('invalid_type', `${param}.name`, `${param}.name must be a string, got ${describeJson(name)}`);
    return { role: role as ChatRole, content: messageContent(content, `${param}.content`), ...(typeof name === 'string' && { name }) };
  });
}

export function parseChatRequest(body: Readonly<Record<string, unknown>>, model: ModelInfo): ChatRequest {
  const common = parseCommon(body, CHAT_REQUEST, CHAT_FIELDS, model);
  const { topLogprobs, ...options } = common.options;
  if (topLogprobs !== undefined && topLogprobs > 0 && options.logprobs !== true) {
    throw invalidField('invalid_value', 'top_logprobs', `top_logprobs (${topLogprobs}) needs logprobs: true`);
  }
  return {
    ...common,
    options: options.logprobs === true && topLogprobs !== undefined ? { ...options, topLogprobs } : options,
    messages: parseMessages(body['messages']),
  };
}
