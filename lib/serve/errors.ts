// Refusals in OpenAI's shape: an HTTP status and `{ error: { message, type,
// param, code } }`, which OpenAI's clients turn into their typed errors
// (BadRequestError for 400, NotFoundError for 404, RateLimitError for 429 ...).
import { EtnaError } from '../errors.js';
import { PoolBusyError, PoolClosedError } from './pool.js';

/** OpenAI's error classes: the `type` of the error object. */
export type ApiErrorType = 'invalid_request_error' | 'not_found_error' | 'rate_limit_error' | 'server_error';

/** The body of every answer that is not a success. */
export interface ApiErrorBody {
  error: { message: string; type: ApiErrorType; param: string | null; code: string | null };
}

/** A request the server refuses: the status, OpenAI's error type, a stable code and the field at fault. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: ApiErrorType,
    readonly code: string,
    message: string,
    readonly param: string | null = null,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  get body(): ApiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** A 400 for a request field, named in `param`. */
export function invalidField(code: string, param: string | null, message: string): ApiError {
  return new ApiError(400, 'invalid_request_error', code, message, param);
}

/**
 * Any failure as the ApiError the client gets: overload (429, with
 * Retry-After), shutting down (503), what generate() refuses before its
 * first call (400), and anything else as a 500.
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof PoolBusyError)
    return new ApiError(429, 'rate_limit_error', 'server_busy', error.message, null, { 'retry-after': '1' });
  if (error instanceof PoolClosedError) return new ApiError(503, 'server_error', 'shutting_down', error.message);
  if (error instanceof EtnaError && error.code === 'INVALID_INPUT') return invalidField('invalid_input', null, error.message);
  const message = error instanceof Error ? error.message : String(error);
  const code = error instanceof EtnaError ? error.code.toLowerCase() : 'internal';
  return new ApiError(500, 'server_error', code, message);
}
