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
 * template, ending where the assistant's turn begins. This etna applies no
 * chat template yet, so the route is refused (400 chat_template_unavailable)
 * after its messages have been checked.
 */
export function chatPrompt(llm: Llm, messages: readonly ChatMessage[]): ChatPrompt {
  throw new ApiError(
    400,
    'invalid_request_error',
    'chat_template_unavailable',
    `chat completions need the model's chat template, which this server cannot apply yet (${messages.length} message(s) for a ` +
      `${llm.metadata.layout} program); send the conversation as a prompt to /v1/completions`,
    'messages',
  );
}
