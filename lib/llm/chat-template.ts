// Chat templates: the Jinja template of tokenizer_config.json, rendered with
// @huggingface/jinja and the variables transformers' apply_chat_template
// gives it, then tokenized. The template's own control tokens come out as
// control tokens; text inside the messages is always text, so a message that
// writes `<|im_start|>` cannot open a turn of its own. To tell the two apart,
// the template is rendered with each special token's text replaced by a mark
// (private-use characters no input contains), and the tokenizer matches the
// marks where it would have matched the special tokens: everything else is
// split, normalized and merged as the whole text would be, so ordinary
// messages get exactly the ids transformers gives.
import { Template } from '@huggingface/jinja';

import { describeValue, EtnaError } from '../errors.js';
import { checkOptionKeys } from '../program.js';
import { SPECIAL_TOKEN_KEYS, tokenText, type TokenizerConfig } from './config.js';
import { replaceMarked } from './marks.js';
import type { LlmTokenizer } from './tokenizer.js';

/** One part of a message's content, as OpenAI's API and multimodal templates write it. */
export interface ChatContentPart {
  readonly type: string;
  readonly text?: string;
  readonly [key: string]: unknown;
}

/** A message: a role ('system', 'user', 'assistant', 'tool' ...) and its content, with whatever else the template reads (tool_calls ...). */
export interface ChatMessage {
  readonly role: string;
  readonly content?: string | readonly ChatContentPart[] | null;
  readonly [key: string]: unknown;
}

export interface ChatTemplateOptions {
  /** End with the start of the assistant's turn, for the model to write it (default true). */
  addGenerationPrompt?: boolean;
  /** Tools the model may call, as JSON schemas; the template writes them if it can. */
  tools?: readonly unknown[];
  /** Documents for retrieval-augmented generation, for templates that take them. */
  documents?: readonly unknown[];
  /** A template's source, or the name of one of the config's named templates (default: the config's). */
  template?: string;
  /** More variables for the template, such as Qwen3's `enable_thinking` or Llama 3's `date_string`. */
  templateVariables?: Readonly<Record<string, unknown>>;
  /** Tokenize control-token text inside messages as control tokens, as transformers does (default false: as text). */
  parseSpecialTokensInContent?: boolean;
}

export const CHAT_TEMPLATE_OPTIONS: readonly (keyof ChatTemplateOptions)[] = [
  'addGenerationPrompt',
  'tools',
  'documents',
  'template',
  'templateVariables',
  'parseSpecialTokensInContent',
];

/** A rendered conversation: the template's text and its token ids. */
export interface RenderedChat {
  readonly text: string;
  readonly tokens: number[];
}

// Marks are written with a character of the private-use area that appears in no input.
const FIRST_MARKER = 0xe000;
const LAST_MARKER = 0xf8ff;

/** Every string inside `value` (objects and arrays followed, each once). */
function* stringsIn(value: unknown, seen = new WeakSet<object>()): Generator<string> {
  if (typeof value === 'string') yield value;
  else if (typeof value === 'object' && value !== null && !seen.has(value)) {
    seen.add(value);
    for (const item of Array.isArray(value) ? value : Object.values(value)) yield* stringsIn(item, seen);
  }
}

/** One marker's marks: the special tokens' text written with it, both ways. */
interface Marking {
  readonly marker: string;
  /** A special token's text to its mark. */
  readonly markOf: ReadonlyMap<string, string>;
  /** A mark to the special token's text. */
  readonly textOf: ReadonlyMap<string, string>;
  /** A mark to the token id. */
  readonly ids: ReadonlyMap<string, number>;
}

function invalid(message: string): never {
  throw new EtnaError('INVALID_INPUT', message);
}

/** A tokenizer's chat templates, compiled once each. */
export class ChatTemplates {
  private readonly compiled = new Map<string, Template>();
  private readonly markings = new Map<string, Marking>();
  private readonly specials: ReadonlyMap<string, number>;

  constructor(private readonly tokenizer: LlmTokenizer) {
    this.specials = tokenizer.specialTokens ?? new Map();
  }

  private get config(): TokenizerConfig {
    return this.tokenizer.config ?? {};
  }

  /** Checks template options, and that there is a template to render (INVALID_INPUT naming what is wrong); gives its source. */
  check(options: ChatTemplateOptions, caller: string): string {
    const checked = checkOptionKeys(options, CHAT_TEMPLATE_OPTIONS, caller);
    for (const key of ['addGenerationPrompt', 'parseSpecialTokensInContent'] as const) {
      if (checked[key] !== undefined && typeof checked[key] !== 'boolean')
        invalid(`${caller}: ${key} must be a boolean, got ${describeValue(checked[key])}`);
    }
    for (const key of ['tools', 'documents'] as const) {
      if (checked[key] !== undefined && checked[key] !== null && !Array.isArray(checked[key])) {
        invalid(`${caller}: ${key} must be an array, got ${describeValue(checked[key])}`);
      }
    }
    const variables = checked['templateVariables'];
    if (variables !== undefined && (typeof variables !== 'object' || variables === null || Array.isArray(variables))) {
      invalid(`${caller}: templateVariables must be an object, got ${describeValue(variables)}`);
    }
    const source = this.source(options.template, options.tools !== undefined && options.tools !== null, caller);
    this.compile(source);
    return source;
  }

  /** Renders `messages` and tokenizes the text; INVALID_INPUT for bad messages or options, or a template that raises. */
  apply(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}, caller = 'applyChatTemplate'): RenderedChat {
    const source = this.check(options, caller);
    checkMessages(messages, caller);
    const { addGenerationPrompt = true, tools, documents, templateVariables = {}, parseSpecialTokensInContent = false } = options;
    const marking = this.marking(this.marker([source, messages, tools, documents, templateVariables, [...this.specials.keys()]]));
    const template = this.compile(replaceMarked(source, marking.markOf));
    const tokens: Record<string, string> = {};
    for (const key of SPECIAL_TOKEN_KEYS) {
      const text = tokenText(this.config, key);
      if (text) tokens[key] = marking.markOf.get(text) ?? text;
    }
    let rendered: string;
    try {
      // The variables transformers' apply_chat_template gives, in its order; raise_exception and strftime_now are the engine's own.
      rendered = template.render({
        messages,
        add_generation_prompt: addGenerationPrompt,
        tools: tools ?? null,
        documents: documents ?? null,
        ...tokens,
        ...templateVariables,
      });
    } catch (error) {
      return invalid(`${caller}: the chat template failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    const text = replaceMarked(rendered, marking.textOf);
    if (text.includes(marking.marker)) invalid(`${caller}: the chat template took a special token's text apart`);
    const { encodeMarked } = this.tokenizer;
    let ids: number[];
    if (encodeMarked === undefined || this.specials.size === 0) ids = this.tokenizer.encode(text);
    else if (parseSpecialTokensInContent) ids = encodeMarked.call(this.tokenizer, text, this.specials);
    else ids = encodeMarked.call(this.tokenizer, rendered, marking.ids);
    return { text, tokens: ids };
  }

  /** The template to render: the option (a name or a source), else the config's, as transformers picks it. */
  private source(choice: string | undefined, hasTools: boolean, caller: string): string {
    if (choice !== undefined && typeof choice !== 'string') invalid(`${caller}: template must be a string, got ${describeValue(choice)}`);
    const configured = this.config.chat_template;
    if (Array.isArray(configured)) {
      const named = new Map(configured.map(({ name, template }) => [name, template]));
      if (choice !== undefined) return named.get(choice) ?? choice;
      const fallback = (hasTools ? named.get('tool_use') : undefined) ?? named.get('default');
      if (fallback !== undefined) return fallback;
      return invalid(
        `${caller}: the tokenizer has several chat templates and none named 'default'; pass options.template, one of ${[...named.keys()].map((name) => `'${name}'`).join(', ')}`,
      );
    }
    const template = choice ?? (typeof configured === 'string' ? configured : undefined);
    if (template === undefined) {
      return invalid(
        `${caller}: the tokenizer has no chat template (tokenizer_config.json's chat_template); pass options.template, or Llm.load's tokenizerConfig`,
      );
    }
    return template;
  }

  /** The first private-use character no input contains. */
  private marker(inputs: readonly unknown[]): string {
    const used = new Set<number>();
    for (const text of stringsIn(inputs)) {
      for (let i = 0; i < text.length; i++) {
        const code = text.charCodeAt(i);
        if (code >= FIRST_MARKER && code <= LAST_MARKER) used.add(code);
      }
    }
    for (let code = FIRST_MARKER; code <= LAST_MARKER; code++) if (!used.has(code)) return String.fromCharCode(code);
    return invalid('applyChatTemplate: the messages use every private-use character, so the template cannot mark its own tokens');
  }

  private marking(marker: string): Marking {
    let marking = this.markings.get(marker);
    if (marking === undefined) {
      const markOf = new Map<string, string>();
      const textOf = new Map<string, string>();
      const ids = new Map<string, number>();
      let n = 0;
      for (const [text, id] of this.specials) {
        const mark = `${marker}${n++}${marker}`;
        markOf.set(text, mark);
        textOf.set(mark, text);
        ids.set(mark, id);
      }
      marking = { marker, markOf, textOf, ids };
      this.markings.set(marker, marking);
    }
    return marking;
  }

  private compile(source: string): Template {
    let template = this.compiled.get(source);
    if (template === undefined) {
      try {
        template = new Template(source);
      } catch (error) {
        return invalid(`the chat template does not parse: ${error instanceof Error ? error.message : String(error)}`);
      }
      this.compiled.set(source, template);
    }
    return template;
  }
}

const templatesOf = new WeakMap<LlmTokenizer, ChatTemplates>();

/** The chat templates of a tokenizer, compiled once for every caller. */
export function chatTemplates(tokenizer: LlmTokenizer): ChatTemplates {
  let templates = templatesOf.get(tokenizer);
  if (templates === undefined) {
    templates = new ChatTemplates(tokenizer);
    templatesOf.set(tokenizer, templates);
  }
  return templates;
}

/**
 * Renders a conversation with a tokenizer's chat template and tokenizes it,
 * as transformers' `tokenizer.apply_chat_template(messages, { tokenize: true })`
 * does, except that the messages' text is never taken for control tokens
 * (unless `parseSpecialTokensInContent`). `llm.applyChatTemplate` is this
 * with the model's tokenizer.
 */
export function applyChatTemplate(
  tokenizer: LlmTokenizer,
  messages: readonly ChatMessage[],
  options: ChatTemplateOptions = {},
): RenderedChat {
  return chatTemplates(tokenizer).apply(messages, options);
}

/** Messages are an array of objects, each with a string role. */
function checkMessages(messages: unknown, caller: string): void {
  if (!Array.isArray(messages)) invalid(`${caller}: messages must be an array of {role, content} objects, got ${describeValue(messages)}`);
  messages.forEach((message: unknown, i) => {
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      invalid(`${caller}: messages[${i}] must be an object with a role, got ${describeValue(message)}`);
    }
    const { role } = message as { role?: unknown };
    if (typeof role !== 'string') invalid(`${caller}: messages[${i}].role must be a string, got ${describeValue(role)}`);
  });
}
