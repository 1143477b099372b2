// The files a Hugging Face model ships beside its tokenizer.json:
// tokenizer_config.json (the chat template, the names of the BOS and EOS
// tokens, whether a text starts with BOS) and generation_config.json (the
// tokens that end a reply). Each is read from a path, its bytes or an object,
// and checked once here for the keys etna reads.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { describeValue, EtnaError } from '../errors.js';

/** A token as tokenizer_config.json names it: its text, or an AddedToken object with the text in `content`. */
export type TokenSpec = string | { readonly content: string; readonly [key: string]: unknown };

/** A chat template: Jinja source, or named templates (`default`, `tool_use` ...) as a list. */
export type ChatTemplateSpec = string | readonly { readonly name: string; readonly template: string }[];

/** The keys of tokenizer_config.json that etna reads; the others are kept and passed to the tokenizer as they are. */
export interface TokenizerConfig {
  readonly chat_template?: ChatTemplateSpec | null;
  readonly bos_token?: TokenSpec | null;
  readonly eos_token?: TokenSpec | null;
  readonly add_bos_token?: boolean;
  readonly [key: string]: unknown;
}

/** The key of generation_config.json that etna reads: the token (or tokens) that end generation. */
export interface GenerationConfig {
  readonly eos_token_id?: number | readonly number[] | null;
  readonly [key: string]: unknown;
}

/** Where a config comes from: a path to the JSON file, its bytes, or the object itself. */
export type ConfigSource = string | Uint8Array | Readonly<Record<string, unknown>>;

/** The token keys a chat template sees as variables (transformers' SPECIAL_TOKEN_ATTRIBUTES). */
export const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const;

function invalid(what: string, message: string): never {
  throw new EtnaError('INVALID_INPUT', `${what}: ${message}`);
}

/** A JSON object from a path, bytes or an object; `what` names it in messages. */
function readJsonObject(source: ConfigSource, what: string): Record<string, unknown> {
  let text: string;
  let name = what;
  if (typeof source === 'string') {
    name = source;
    try {
      text = readFileSync(source, 'utf8');
    } catch (error) {
      return invalid(what, `cannot read ${source}: ${error instanceof Error ? error.message : String(error)}`);
    }
  } else if (source instanceof Uint8Array) {
    text = Buffer.from(source.buffer, source.byteOffset, source.byteLength).toString('utf8');
  } else if (typeof source === 'object' && source !== null && !Array.isArray(source)) {
    return { ...source };
  } else {
    return invalid(what, `must be a path, the file's bytes or an object, got ${describeValue(source)}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return invalid(name, `not valid JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return invalid(name, 'not a JSON object');
  return parsed as Record<string, unknown>;
}

/** The text of a token key: undefined when the config does not have the key, null when it says there is none. */
export function tokenText(config: TokenizerConfig, key: string, what = 'tokenizer_config'): string | null | undefined {
  if (!Object.hasOwn(config, key)) return undefined;
  const value = config[key];
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string')
    return (value as { content: string }).content;
  return invalid(what, `${key} must be a string, an AddedToken object with a string 'content', or null, got ${describeValue(value)}`);
}

/** tokenizer_config.json checked for the keys etna reads. */
export function readTokenizerConfig(source: ConfigSource, what = 'tokenizerConfig'): TokenizerConfig {
  const config = readJsonObject(source, what);
  const template = config['chat_template'];
  const namedTemplate = (item: unknown): boolean =>
    typeof item === 'object' &&
    item !== null &&
    typeof (item as { name?: unknown }).name === 'string' &&
    typeof (item as { template?: unknown }).template === 'string';
  if (
    template !== undefined &&
    template !== null &&
    typeof template !== 'string' &&
    !(Array.isArray(template) && template.every(namedTemplate))
  ) {
    invalid(what, `chat_template must be a string or a list of {name, template} objects, got ${describeValue(template)}`);
  }
  for (const key of SPECIAL_TOKEN_KEYS) tokenText(config, key, what);
  const addBos = config['add_bos_token'];
  if (addBos !== undefined && addBos !== null && typeof addBos !== 'boolean') {
    invalid(what, `add_bos_token must be a boolean, got ${describeValue(addBos)}`);
  }
  return config;
}

/** generation_config.json checked for the keys etna reads. */
export function readGenerationConfig(source: ConfigSource, what = 'generationConfig'): GenerationConfig {
  const config = readJsonObject(source, what);
  generationEosIds(config, what);
  return config;
}

/** generation_config's eos_token_id as a list (empty when absent or null). */
export function generationEosIds(config: GenerationConfig, what = 'generationConfig'): number[] {
  const value = config.eos_token_id;
  if (value === undefined || value === null) return [];
  const ids = typeof value === 'number' ? [value] : value;
  if (!Array.isArray(ids) || !ids.every((id) => Number.isSafeInteger(id) && id >= 0)) {
    invalid(what, `eos_token_id must be a token id or a list of token ids, got ${describeValue(value)}`);
  }
  return [...ids];
}

/** A file named `name` in the folder of the file at `path`, when there is one. */
export function besideFile(path: string, name: string): string | undefined {
  const beside = join(dirname(path), name);
  return existsSync(beside) ? beside : undefined;
}

// Names tokenizers give their first and end-of-sequence tokens, looked up for a tokenizer that comes without a tokenizer_config.json.
const USUAL_NAMES: Readonly<Record<'bos_token' | 'eos_token', readonly string[]>> = {
  bos_token: ['<|begin_of_text|>', '<s>', '<bos>', '<|startoftext|>'],
  eos_token: ['<|eot_id|>', '<|end_of_text|>', '</s>', '<eos>', '<|im_end|>', '<|endoftext|>'],
};

/**
 * The id of the BOS or EOS token. A tokenizer_config.json decides: the token
 * it names (refused when the vocabulary lacks it), or none when it says null
 * or has no such key. Without a config, the usual names are looked up.
 */
export function namedTokenId(
  config: TokenizerConfig | undefined,
  key: 'bos_token' | 'eos_token',
  idOf: (text: string) => number | undefined,
  source: string,
): number | undefined {
  if (config === undefined) {
    for (const name of USUAL_NAMES[key]) {
      const id = idOf(name);
      if (id !== undefined) return id;
    }
    return undefined;
  }
  const text = tokenText(config, key);
  if (text === undefined || text === null) return undefined;
  const id = idOf(text);
  if (id === undefined)
    throw new EtnaError('INVALID_INPUT', `${source}: tokenizer_config's ${key} '${text}' is not a token of the tokenizer`);
  return id;
}
