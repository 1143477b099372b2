// Chat messages into a prompt: the one place POST /v1/chat/completions
// depends on the model's chat template. Everything else of the route (the
// messages checked, the answers and their stream) is the same whatever the
// template makes.
import type { Llm } from '../llm/llm.js';
import type { GenerateOptions } from '../llm/options.js';
import { ApiError } from './errors.js';
import type { ChatMessage } from './request.js';

/** A conversation as the model reads it: its tokens, and the generate() options its template implies (its end-of-turn tokens). */
export interface ChatPrompt {
  readonly tokens: readonly number[];
  readonly options: GenerateOptions;
}

/**
 * The prompt of a chat request: the messages through the model's chat
 * template (tokenizer_config.json's, as `llm.applyChatTemplate` renders it),
 * ending where the assistant's turn begins. Message text stays text, never
 * control tokens. The end of the assistant's turn needs no option: generate()
 * stops on the model's and the configs' end-of-turn ids. A tokenizer without
 * a template is refused (400 chat_template_unavailable).
 */
export function chatPrompt(llm: Llm, messages: readonly ChatMessage[]): ChatPrompt {
  if (llm.tokenizer.config?.chat_template === undefined || llm.tokenizer.config.chat_template === null) {
    throw new ApiError(
      400,
      'invalid_request_error',
      'chat_template_unavailable',
      "chat completions need the model's chat template, and its tokenizer has none (tokenizer_config.json's chat_template: " +
        'etna serve --tokenizer-config FILE, or the file beside the tokenizer); send the conversation as a prompt to /v1/completions',
      'messages',
    );
  }
  // The route's checked messages, as the template's (which may carry fields of any name).
  const templated = messages.map((message) => ({ ...message }));
  return { tokens: llm.applyChatTemplate(templated, { addGenerationPrompt: true }).tokens, options: {} };
}
