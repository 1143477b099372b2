// A conversation kept between turns: its messages, and a session whose KV
// cache holds them. Each turn renders the whole conversation with the chat
// template and generates on it as a whole context (`complete`), so the cache
// keeps what the rendering shares with what it already holds (every earlier
// turn, as a rule) and only the new turn's tokens are prefilled.
import { describeValue, EtnaError } from '../errors.js';
import { asyncDisposeSymbol } from '../program.js';
import type { ChatMessage, ChatTemplateOptions, RenderedChat } from './chat-template.js';
import { Generation } from './generation.js';
import type { GenerateOptions } from './options.js';
import type { LlmSession } from './session.js';

/** How a chat session renders its conversation (the template options but addGenerationPrompt), and its system prompt. */
export interface ChatSessionOptions extends Omit<ChatTemplateOptions, 'addGenerationPrompt'> {
  /** The first message of the conversation, with the role 'system'. */
  systemPrompt?: string;
}

/** What a chat session needs of its `Llm`. */
export interface ChatModel {
  applyChatTemplate(messages: readonly ChatMessage[], options?: ChatTemplateOptions): RenderedChat;
}

/**
 * A conversation with the model: `send(text)` adds a user message, generates
 * the assistant's reply on the conversation so far, and adds the reply to
 * `history` when the generation ends (however it ends; a generation that
 * fails leaves the history as it was). One `send` at a time.
 */
export class ChatSession {
  private messages: ChatMessage[];
  private readonly system: ChatMessage[];

  /** @internal */
  constructor(
    private readonly model: ChatModel,
    /** The session that holds the conversation's cache. */
    readonly session: LlmSession,
    private readonly options: Omit<ChatSessionOptions, 'systemPrompt'>,
    systemPrompt: string | undefined,
  ) {
    this.system = systemPrompt === undefined ? [] : [{ role: 'system', content: systemPrompt }];
    this.messages = [...this.system];
  }

  /** The conversation so far, the system prompt first. */
  get history(): readonly ChatMessage[] {
    return [...this.messages];
  }

  /** Sends a user message; the Generation streams the reply and gives its result. */
  send(text: string, options: GenerateOptions = {}): Generation {
    return new Generation(async (emit, stopped) => {
      if (typeof text !== 'string') throw new EtnaError('INVALID_INPUT', `send: the message must be a string, got ${describeValue(text)}`);
      const user: ChatMessage = { role: 'user', content: text };
      const { tokens } = this.model.applyChatTemplate([...this.messages, user], { ...this.options, addGenerationPrompt: true });
      const result = await this.session.run(tokens, options, emit, stopped, 'whole');
      this.messages.push(user, { role: 'assistant', content: result.text });
      return result;
    });
  }

  /** Back to the system prompt alone, with an empty context; refused while a reply is being generated. */
  reset(): void {
    this.session.reset();
    this.messages = [...this.system];
  }

  async dispose(): Promise<void> {
    await this.session.dispose();
  }

  async [asyncDisposeSymbol](): Promise<void> {
    await this.dispose();
  }
}
