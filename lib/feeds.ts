// Values keyed by input/output name <-> values by position, for Module.run.
import { EtnaError } from './errors.js';
import type { MethodDescription } from './program-types.js';

function quoted(names: readonly string[]): string {
  return names.map((name) => `'${name}'`).join(', ');
}

/**
 * `named` laid out in the order of the method's inputs or outputs. Names the
 * method does not have are INVALID_INPUT; so are missing ones when `required`.
 */
export function positionsOf<T>(
  method: MethodDescription,
  side: 'inputs' | 'outputs',
  named: Readonly<Record<string, T>>,
  required: true,
): T[];
export function positionsOf<T>(
  method: MethodDescription,
  side: 'inputs' | 'outputs',
  named: Readonly<Record<string, T>>,
  required: false,
): (T | undefined)[];
export function positionsOf<T>(
  method: MethodDescription,
  side: 'inputs' | 'outputs',
  named: Readonly<Record<string, T>>,
  required: boolean,
): (T | undefined)[] {
  const noun = side === 'inputs' ? 'input' : 'output';
  if (typeof named !== 'object' || named === null || Array.isArray(named)) {
    throw new EtnaError(
      'INVALID_INPUT',
      `method '${method.name}': ${noun}s by name must be an object keyed by ${noun} name, got ${Array.isArray(named) ? 'an array' : named === null ? 'null' : typeof named}`,
    );
  }
  const names = method[side].map((value) => value.name);
  const known = new Set(names);
  const unknown = Object.keys(named).filter((name) => !known.has(name));
  const missing = required ? names.filter((name) => !Object.hasOwn(named, name)) : [];
  if (unknown.length > 0 || missing.length > 0) {
    const problems = [
      ...(missing.length > 0 ? [`missing ${noun}${missing.length === 1 ? '' : 's'} ${quoted(missing)}`] : []),
      ...(unknown.length > 0 ? [`no ${noun}${unknown.length === 1 ? '' : 's'} named ${quoted(unknown)}`] : []),
    ];
    throw new EtnaError('INVALID_INPUT', `method '${method.name}': ${problems.join('; ')} (${noun}s: ${quoted(names) || 'none'})`);
  }
  // Own properties only: a name such as 'constructor' must not find Object.prototype's.
  return names.map((name) => (Object.hasOwn(named, name) ? named[name] : undefined));
}

/** `values` (in the method's output order) keyed by output name. */
export function keyByName<T>(method: MethodDescription, values: readonly T[]): Record<string, T> {
  const named: Record<string, T> = {};
  method.outputs.forEach((output, i) => {
    Object.defineProperty(named, output.name, { value: values[i], enumerable: true, writable: true, configurable: true });
  });
  return named;
}
