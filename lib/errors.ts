/** Stable error codes carried by every EtnaError. */
export type EtnaErrorCode =
  | 'INVALID_PROGRAM'
  | 'UNSUPPORTED_OPERATOR'
  | 'UNSUPPORTED_BACKEND'
  | 'METHOD_NOT_FOUND'
  | 'INVALID_INPUT'
  | 'MEMORY_PLAN_CONFLICT'
  | 'DISPOSED'
  | 'INTERNAL';

const CODES: ReadonlySet<string> = new Set<EtnaErrorCode>([
  'INVALID_PROGRAM',
  'UNSUPPORTED_OPERATOR',
  'UNSUPPORTED_BACKEND',
  'METHOD_NOT_FOUND',
  'INVALID_INPUT',
  'MEMORY_PLAN_CONFLICT',
  'DISPOSED',
  'INTERNAL',
]);

/** The one error type etna throws. `code` is stable; `message` says what to fix. */
export class EtnaError extends Error {
  readonly code: EtnaErrorCode;

  constructor(code: EtnaErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EtnaError';
    this.code = code;
  }
}

export function isEtnaErrorCode(value: unknown): value is EtnaErrorCode {
  return typeof value === 'string' && CODES.has(value);
}

/**
 * Rewraps an error thrown by the addon (a plain Error with a `code`) as an
 * EtnaError; anything else becomes INTERNAL.
 */
/** Runs `run`, turning whatever it throws into an EtnaError (the addon throws plain Errors with a code). */
export function withEtnaErrors<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    throw toEtnaError(error);
  }
}

export function toEtnaError(error: unknown): EtnaError {
  if (error instanceof EtnaError) return error;
  if (error instanceof Error) {
    const code = (error as Error & { code?: unknown }).code;
    return new EtnaError(isEtnaErrorCode(code) ? code : 'INTERNAL', error.message, { cause: error });
  }
  return new EtnaError('INTERNAL', String(error));
}

/**
 * A short description of a value for error messages: the class name of an
 * object or function, a string in quotes, else its type and value.
 */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object' || typeof value === 'function') return (value as object).constructor?.name ?? 'object';
  if (typeof value === 'string') return `'${value}'`;
  return `${typeof value} ${String(value)}`;
}
