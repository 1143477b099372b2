// What every `etna` command shares: its options described once (parsing and
// `--help` both read the description), bad usage (usage text, exit 2) and
// failures (one line `etna COMMAND: CODE: message`, exit 1).
import fs from 'node:fs';
import { parseArgs } from 'node:util';

import { EtnaError, toEtnaError } from '../errors.js';
import { MAX_NUM_THREADS } from '../module.js';

export interface OptionSpec {
  readonly name: string;
  readonly short?: string;
  /** Placeholder for the option's value (`N`, `OUT`); absent for a flag. */
  readonly value?: string;
  /** The option may be given several times. */
  readonly multiple?: boolean;
  /** One line: what the option does and its default. */
  readonly help: string;
}

export interface CommandSpec {
  readonly name: string;
  /**
   * The command's arguments as usage shows them, e.g. `FILE`, `[FILES.pte...]`
   * or `MODEL.onnx -o OUT.pte`; absent for none. The words before the first
   * option are the positionals the command takes (`positionalCounts`).
   */
  readonly synopsis?: string;
  /** One line for the command list of `etna --help`. */
  readonly brief: string;
  /** What the command does, a few lines. */
  readonly summary: string;
  readonly options: readonly OptionSpec[];
  /** Text printed after the options (lists of names, notes). */
  readonly notes?: string;
}

const HELP_OPTION: OptionSpec = { name: 'help', short: 'h', help: 'print this help and exit' };

/** The report files every bench command can write besides its table. */
export const JSON_REPORT_OPTION: OptionSpec = { name: 'json', value: 'OUT', help: 'also write the report as JSON to OUT' };
/** --threads of the commands that run one model: XNNPACK's threads for each of its calls. */
export const THREADS_OPTION: OptionSpec = {
  name: 'threads',
  value: 'N',
  help: `XNNPACK threads per call, 1 to ${MAX_NUM_THREADS} (default 1)`,
};
export const MARKDOWN_REPORT_OPTION: OptionSpec = { name: 'md', value: 'OUT', help: 'also write the report as a Markdown table to OUT' };

/** A subcommand: its description and what it does with parsed arguments (returns the exit status). */
export interface Command {
  readonly spec: CommandSpec;
  run(args: ParsedArgs): number | Promise<number>;
}

/** Wrong arguments: the command prints its usage and exits 2. */
export class UsageError extends Error {}

export const USAGE_EXIT = 2;
export const FAILURE_EXIT = 1;

/** `name synopsis`, as the usage line and the command list show a command. */
export function commandLine(spec: CommandSpec): string {
  return spec.synopsis ? `${spec.name} ${spec.synopsis}` : spec.name;
}

/**
 * How many positionals a synopsis takes: each word before the first option is
 * one, `[WORD]` is optional and `...` repeats it (`[FILES.pte...]`: any number).
 */
export function positionalCounts(synopsis = ''): { min: number; max: number } {
  let min = 0;
  let max = 0;
  for (const word of synopsis.split(' ')) {
    if (word === '') continue;
    if (word.startsWith('-')) break;
    const optional = word.startsWith('[');
    if (!optional) min += 1;
    max = word.endsWith('...') || word.endsWith('...]') ? Number.POSITIVE_INFINITY : max + 1;
  }
  return { min, max };
}

function optionLabel(option: OptionSpec): string {
  const short = option.short === undefined ? '' : `-${option.short}, `;
  const value = option.value === undefined ? '' : ` ${option.value}`;
  return `${short}--${option.name}${value}${option.multiple ? '...' : ''}`;
}

export function usage(spec: CommandSpec): string {
  const options = [...spec.options, HELP_OPTION];
  const width = Math.max(...options.map((option) => optionLabel(option).length));
  const lines = [`usage: etna ${commandLine(spec)} [options]`, '', spec.summary, '', 'options:'];
  for (const option of options) lines.push(`  ${optionLabel(option).padEnd(width)}  ${option.help}`);
  if (spec.notes !== undefined) lines.push('', spec.notes);
  return lines.join('\n');
}

/** Arguments as parsed against a CommandSpec; typed readers check values. */
export class ParsedArgs {
  constructor(
    readonly positionals: readonly string[],
    private readonly values: Readonly<Record<string, string | boolean | (string | boolean)[] | undefined>>,
  ) {}

  string(name: string): string | undefined {
    const value = this.values[name];
    return typeof value === 'string' ? value : undefined;
  }

  flag(name: string): boolean {
    return this.values[name] === true;
  }

  list(name: string): string[] {
    const value = this.values[name];
    return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
  }

  /** An integer option within [min, max]; `fallback` when absent. */
  integer(name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
    const text = this.string(name);
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!/^-?\d+$/.test(text) || value < min || value > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer from ${min} to ${max}`;
      throw new EtnaError('INVALID_INPUT', `--${name} takes ${range}, got '${text}'`);
    }
    return value;
  }

  /**
   * A comma-separated list of distinct integers within [min, max], in the
   * order given (`--threads 1,2`); `fallback` when absent. Empty items,
   * repeats and anything but digits are refused.
   */
  integerList(name: string, fallback: readonly number[], min: number, max = Number.MAX_SAFE_INTEGER): number[] {
    const text = this.string(name);
    if (text === undefined) return [...fallback];
    const items = text.split(',').map((item) => item.trim());
    const values = items.map(Number);
    const wrong = items.some((item, i) => !/^\d+$/.test(item) || values[i]! < min || values[i]! > max);
    if (wrong || new Set(values).size !== values.length) {
      const range = max === Number.MAX_SAFE_INTEGER ? `integers >= ${min}` : `integers from ${min} to ${max}`;
      throw new EtnaError('INVALID_INPUT', `--${name} takes distinct ${range} separated by commas (like 1,2), got '${text}'`);
    }
    return values;
  }

  /** A decimal number `ok` accepts (`rule` says which); undefined when absent. */
  number(name: string, ok: (value: number) => boolean, rule: string): number | undefined {
    const text = this.string(name);
    if (text === undefined) return undefined;
    const value = Number(text);
    if (!/^-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(text) || !Number.isFinite(value) || !ok(value)) {
      throw new EtnaError('INVALID_INPUT', `--${name} takes ${rule}, got '${text}'`);
    }
    return value;
  }

  /** One of `choices`; `fallback` when absent. */
  choice<T extends string>(name: string, choices: readonly T[], fallback: T): T {
    const text = this.string(name);
    if (text === undefined) return fallback;
    if (!(choices as readonly string[]).includes(text)) {
      throw new EtnaError('INVALID_INPUT', `--${name} takes one of ${choices.join(', ')}, got '${text}'`);
    }
    return text as T;
  }
}

/** What reads as a negative number: `-1`, `-0.5`, `-.5`, `-1e3`, `-1,2`. */
const NEGATIVE_NUMBER = /^-\.?\d/;

/**
 * parseArgs takes `--temperature -1` for an option followed by another one,
 * and refuses it as ambiguous. An option that takes a value and is followed
 * by a negative number takes it (`--temperature=-1`), so the command's own
 * check of the value reports a range error, as it does for any other number.
 */
function joinNegativeValues(spec: CommandSpec, args: readonly string[]): string[] {
  const takesValue = new Map<string, string>();
  for (const option of spec.options) {
    if (option.value === undefined) continue;
    takesValue.set(`--${option.name}`, option.name);
    if (option.short !== undefined) takesValue.set(`-${option.short}`, option.name);
  }
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') {
      joined.push(...args.slice(i));
      break;
    }
    const name = takesValue.get(arg);
    const next = args[i + 1];
    if (name !== undefined && next !== undefined && NEGATIVE_NUMBER.test(next)) {
      joined.push(`--${name}=${next}`);
      i++;
    } else joined.push(arg);
  }
  return joined;
}

/** Parses `args` against `spec`; null when `--help` was asked. Throws UsageError on bad usage. */
export function parseCommand(spec: CommandSpec, args: readonly string[]): ParsedArgs | null {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = {};
  for (const option of [...spec.options, HELP_OPTION]) {
    options[option.name] = {
      type: option.value === undefined ? 'boolean' : 'string',
      ...(option.short !== undefined && { short: option.short }),
      ...(option.multiple === true && { multiple: true }),
    };
  }
  let parsed;
  try {
    parsed = parseArgs({ args: joinNegativeValues(spec, args), options, allowPositionals: true, strict: true });
  } catch (error) {
    // Node's message goes on to explain `--`; its first sentence names the problem.
    throw new UsageError(((error as Error).message.split('. ')[0] ?? '').replace(/^Unknown/, 'unknown'));
  }
  if (parsed.values.help === true) return null;
  const count = parsed.positionals.length;
  const { min, max } = positionalCounts(spec.synopsis);
  if (count < min || count > max) {
    const expected = min === max ? `${min}` : `${min} to ${max}`;
    throw new UsageError(`expected ${expected} argument${max === 1 ? '' : 's'} (${spec.synopsis || 'none'}), got ${count}`);
  }
  return new ParsedArgs(parsed.positionals, parsed.values);
}

/** Prints a usage error the one way every command does; returns the exit status. */
export function reportUsageError(spec: CommandSpec | undefined, message: string): number {
  const prefix = spec === undefined ? 'etna' : `etna ${spec.name}`;
  console.error(`${prefix}: ${message}\n\n${spec === undefined ? '' : usage(spec)}`.trimEnd());
  return USAGE_EXIT;
}

/**
 * Prints a failure as one line (`etna COMMAND: CODE: message` on stderr, or
 * `{"error": {"code", "message"}}` on stdout for `--json`); returns the exit status.
 * Anything that is not an EtnaError is reported as INTERNAL.
 */
export function reportFailure(command: string, error: unknown, json: boolean): number {
  const etnaError = toEtnaError(error);
  const message = etnaError.message.replace(/\s*\n\s*/g, ' ').trim();
  if (json) console.log(JSON.stringify({ error: { code: etnaError.code, message } }));
  else console.error(`etna${command ? ` ${command}` : ''}: ${etnaError.code}: ${message}`);
  return FAILURE_EXIT;
}

/** A file the user named as input; a read failure is INVALID_INPUT naming it. */
export function readInputFile(path: string, what: string): Buffer {
  try {
    return fs.readFileSync(path);
  } catch (error) {
    throw new EtnaError('INVALID_INPUT', `cannot read ${what} '${path}': ${(error as Error).message}`);
  }
}
