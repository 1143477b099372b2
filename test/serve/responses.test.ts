// The answers' shapes, route by route, as OpenAI's API writes them: the chat
// shapes are checked here, since the chat route answers only once a chat
// template can be applied; the completion shapes also go through the client
// in openai-client.test.ts.
import { describe, expect, it } from 'vitest';

import type { TokenLogprob } from '../../lib/llm/index.js';
import { CHAT_SHAPE, COMPLETION_SHAPE, finishReason, replyHeader, type Usage } from '../../lib/serve/responses.js';

const usage: Usage = { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8, prompt_tokens_details: { cached_tokens: 4 } };

describe('answers', () => {
  it('name the reply, its model and when it was made, with ids by route', () => {
    const before = Math.floor(Date.now() / 1000);
    const chat = replyHeader(CHAT_SHAPE, 'llama');
    expect(chat.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    expect(replyHeader(COMPLETION_SHAPE, 'llama').id).toMatch(/^cmpl-[0-9a-f]{32}$/);
    expect(chat.created).toBeGreaterThanOrEqual(before);
    expect(chat.model).toBe('llama');
    expect(replyHeader(CHAT_SHAPE, 'llama').id).not.toBe(chat.id);
  });

  it('are chat completions and their chunks, with the role first and the finish reason last', () => {
    const header = { id: 'chatcmpl-1', created: 1, model: 'llama' };
    const base = { id: 'chatcmpl-1', created: 1, model: 'llama' };
    expect(CHAT_SHAPE.reply(header, 'Hello', 'stop', usage, null)).toEqual({
      ...base,
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello', refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage,
    });
    const chunk = (delta: object, finish: string | null) => ({
      ...base,
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
    expect(CHAT_SHAPE.opening(header)).toEqual(chunk({ role: 'assistant', content: '' }, null));
    expect(CHAT_SHAPE.chunk(header, 'Hel', null, null)).toEqual(chunk({ content: 'Hel' }, null));
    expect(CHAT_SHAPE.chunk(header, '', 'length', null)).toEqual(chunk({}, 'length'));
    expect(CHAT_SHAPE.usage(header, usage)).toEqual({ ...base, object: 'chat.completion.chunk', choices: [], usage });
  });

  it('end as OpenAI says: an end token or a stop string is stop, running out of tokens or context is length', () => {
    expect([finishReason('eos'), finishReason('stop'), finishReason('length'), finishReason('context')]).toEqual([
      'stop',
      'stop',
      'length',
      'length',
    ]);
    expect(COMPLETION_SHAPE.opening({ id: 'cmpl-1', created: 1, model: 'llama' })).toBeUndefined();
  });

  it("give log-probabilities in each route's shape: -Infinity as OpenAI's -9999, NaN as null, offsets across a stream's runs", () => {
    const token = (text: string, logprob: number, top: [string, number][] = []): TokenLogprob => ({
      id: 0,
      text,
      bytes: Array.from(new TextEncoder().encode(text)),
      logprob,
      topLogprobs: top.map(([topText, topLogprob]) => ({
        id: 0,
        text: topText,
        bytes: Array.from(new TextEncoder().encode(topText)),
        logprob: topLogprob,
      })),
    });
    const completion = COMPLETION_SHAPE.logprobsWriter();
    expect(
      completion([
        token('Hé', -0.5, [
          ['Hé', -0.5],
          ['Ha', -Infinity],
        ]),
        token('🙂', Number.NaN),
      ]),
    ).toEqual({
      tokens: ['Hé', '🙂'],
      token_logprobs: [-0.5, null],
      top_logprobs: [{ Hé: -0.5, Ha: -9999 }, null],
      text_offset: [0, 2],
    });
    // The next run of the same answer goes on from the characters (code points) before it.
    expect(completion([token('!', -1)]).text_offset).toEqual([3]);
    expect(COMPLETION_SHAPE.logprobsWriter()([token('!', -1)]).text_offset).toEqual([0]);
    expect(CHAT_SHAPE.logprobsWriter()([token('é', -Infinity, [['e', -0.25]])])).toEqual({
      content: [{ token: 'é', logprob: -9999, bytes: [0xc3, 0xa9], top_logprobs: [{ token: 'e', logprob: -0.25, bytes: [0x65] }] }],
      refusal: null,
    });
  });
});
