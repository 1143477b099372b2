// Answers in OpenAI's shapes: a completion or a chat completion as one JSON
// object, or as a stream of chunks (Server-Sent Events `data: {chunk}`, a
// last chunk with the finish reason, one with the usage when asked, then
// `data: [DONE]`).
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';

import type { GenerationResult, StopReason, TokenLogprob, TopLogprob } from '../llm/types.js';

export type FinishReason = 'stop' | 'length';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** Prompt tokens the server did not prefill: kept in a session's cache, or restored from a snapshot. */
  prompt_tokens_details: { cached_tokens: number };
}

/** OpenAI's finish reason: an end token or a stop string is 'stop'; running out of tokens or context is 'length'. */
export function finishReason(stopReason: Exclude<StopReason, 'aborted'>): FinishReason {
  return stopReason === 'eos' || stopReason === 'stop' ? 'stop' : 'length';
}

export function usageOf({ stats }: GenerationResult): Usage {
  return {
    prompt_tokens: stats.promptTokens,
    completion_tokens: stats.generatedTokens,
    total_tokens: stats.promptTokens + stats.generatedTokens,
    prompt_tokens_details: { cached_tokens: stats.cachedTokens },
  };
}

/** What every answer to one request shares. */
export interface ReplyHeader {
  readonly id: string;
  readonly created: number;
  readonly model: string;
}

/** A choice's `logprobs` for some of its tokens, in a route's shape; null when the request did not ask for them. */
export type WireLogprobs = object | null;

/** Turns one answer's tokens, a run at a time, into its route's `logprobs` (a completion counts text offsets across runs). */
export type LogprobsWriter = (tokens: readonly TokenLogprob[]) => object;

/**
 * A log-probability as JSON carries it: -Infinity (a token the model rules
 * out) as OpenAI's floor of -9999, NaN (a row without a distribution) as null.
 */
export function wireLogprob(logprob: number): number | null {
  if (Number.isNaN(logprob)) return null;
  return logprob === -Infinity ? -9999 : logprob;
}

/** How one route's answers look: the whole reply, and the chunks of its stream. */
export interface ReplyShape {
  readonly route: 'completions' | 'chat';
  /** The whole reply. */
  reply(header: ReplyHeader, text: string, finish: FinishReason, usage: Usage, logprobs: WireLogprobs): object;
  /** The chunk before the first piece, if the route has one (chat's, which names the role). */
  opening(header: ReplyHeader): object | undefined;
  /** A chunk with a piece of text (`finish` null), or the last one (no text, the finish reason). */
  chunk(header: ReplyHeader, piece: string, finish: FinishReason | null, logprobs: WireLogprobs): object;
  /** A writer for one answer's log-probabilities. */
  logprobsWriter(): LogprobsWriter;
  /** The chunk after the last, with the usage and no choices. */
  usage(header: ReplyHeader, usage: Usage): object;
}

const base = (header: ReplyHeader, object: string) => ({ id: header.id, object, created: header.created, model: header.model });

/**
 * The legacy completions' shape: parallel lists of token texts, their
 * log-probabilities and where each starts in the completion's text (in
 * characters, from 0: without echo the text is the completion alone), and
 * per token a map of the most likely tokens' texts, or null when none were
 * asked for.
 */
function completionLogprobs(): LogprobsWriter {
  let offset = 0;
  return (tokens) => {
    const textOffset = tokens.map((token) => {
      const start = offset;
      offset += [...token.text].length;
      return start;
    });
    const top = (token: TokenLogprob) => Object.fromEntries(token.topLogprobs.map((entry) => [entry.text, wireLogprob(entry.logprob)]));
    return {
      tokens: tokens.map((token) => token.text),
      token_logprobs: tokens.map((token) => wireLogprob(token.logprob)),
      top_logprobs: tokens.map((token) => (token.topLogprobs.length === 0 ? null : top(token))),
      text_offset: textOffset,
    };
  };
}

export const COMPLETION_SHAPE: ReplyShape = {
  route: 'completions',
  reply: (header, text, finish, usage, logprobs) => ({
    ...base(header, 'text_completion'),
    choices: [{ text, index: 0, logprobs, finish_reason: finish }],
    usage,
  }),
  opening: () => undefined,
  chunk: (header, piece, finish, logprobs) => ({
    ...base(header, 'text_completion'),
    choices: [{ text: piece, index: 0, logprobs, finish_reason: finish }],
  }),
  logprobsWriter: completionLogprobs,
  usage: (header, usage) => ({ ...base(header, 'text_completion'), choices: [], usage }),
};

/** Chat's shape: per token its text, log-probability and UTF-8 bytes, and the most likely tokens likewise. */
const chatToken = (token: TopLogprob) => ({ token: token.text, logprob: wireLogprob(token.logprob), bytes: token.bytes });
const chatLogprobs = (): LogprobsWriter => (tokens) => ({
  content: tokens.map((token) => ({ ...chatToken(token), top_logprobs: token.topLogprobs.map(chatToken) })),
  refusal: null,
});

export const CHAT_SHAPE: ReplyShape = {
  route: 'chat',
  reply: (header, text, finish, usage, logprobs) => ({
    ...base(header, 'chat.completion'),
    choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs, finish_reason: finish }],
    usage,
  }),
  opening: (header) => ({
    ...base(header, 'chat.completion.chunk'),
    choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
  }),
  chunk: (header, piece, finish, logprobs) => ({
    ...base(header, 'chat.completion.chunk'),
    choices: [{ index: 0, delta: finish === null ? { content: piece } : {}, logprobs, finish_reason: finish }],
  }),
  logprobsWriter: chatLogprobs,
  usage: (header, usage) => ({ ...base(header, 'chat.completion.chunk'), choices: [], usage }),
};

export function replyHeader(shape: ReplyShape, model: string): ReplyHeader {
  const prefix = shape.route === 'chat' ? 'chatcmpl-' : 'cmpl-';
  return { id: `${prefix}${randomUUID().replaceAll('-', '')}`, created: Math.floor(Date.now() / 1000), model };
}

/** Writes one event; waits while the client is slower than the model (the generation goes on meanwhile). */
export function writeEvent(response: ServerResponse, data: object | '[DONE]'): Promise<void> {
  if (response.destroyed) return Promise.resolve();
  if (response.write(`data: ${data === '[DONE]' ? data : JSON.stringify(data)}\n\n`)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      response.off('drain', done);
      response.off('close', done);
      resolve();
    };
    response.on('drain', done);
    response.on('close', done);
  });
}
