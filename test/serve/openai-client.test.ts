// `etna serve` as OpenAI's own client sees it: the models, completions whole
// and streamed, usage, stop strings, max_tokens, refusals as the client's
// typed errors, overload, a client that leaves, and the prefix cache (its
// reuse shows in cached_tokens, and the replies are those of a server
// without it).
import OpenAI from 'openai';
import { beforeAll, describe, expect, it } from 'vitest';

import fs from 'node:fs';
import path from 'node:path';

import { applyChatTemplate, loadTokenizer } from '../../lib/llm/index.js';
import { stopServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { CONTEXT, startServe, TOKENIZER, workDir } from './helpers.js';

const tokenizer = loadTokenizer(TOKENIZER);
/** The prompt's tokens as the server feeds them: one BOS, then the text's. */
const promptTokens = (text: string): number => 1 + tokenizer.encode(text).length;

let cached: ServerProcess;
let plain: ServerProcess;
let client: OpenAI;
let plainClient: OpenAI;

const clientOf = (server: ServerProcess): OpenAI => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });

beforeAll(async () => {
  // One session each, so what a request finds in the session's cache is the last request's.
  [cached, plain] = await Promise.all([
    startServe(['--sessions', '1', '--max-queue', '0']),
    startServe(['--sessions', '1', '--prefix-cache-mib', '0']),
  ]);
  client = clientOf(cached);
  plainClient = clientOf(plain);
}, 120_000);

async function health(server: ServerProcess): Promise<any> {
  return (await fetch(`${server.url}/health`)).json();
}

/** The error a call fails with (fails the test when it succeeds). */
async function failure(call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const error = await call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(OpenAI.APIError);
  return error as InstanceType<typeof OpenAI.APIError>;
}

describe('etna serve with the openai client', () => {
  it('lists its one model and retrieves it by name', async () => {
    const models = await client.models.list();
    expect(models.data).toEqual([{ id: 'llama', object: 'model', created: expect.any(Number), owned_by: 'etna', max_model_len: CONTEXT }]);
    expect((await client.models.retrieve('llama')).id).toBe('llama');
    const missing = await failure(client.models.retrieve('gpt-4o'));
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing.code).toBe('model_not_found');
  });

  it('completes a prompt whole and streamed, with the same text, usage and finish reason', async () => {
    const prompt = 'Once upon a time';
    const whole = await client.completions.create({ model: 'llama', prompt, max_tokens: 12, temperature: 0 });
    expect(whole).toMatchObject({ object: 'text_completion', model: 'llama', created: expect.any(Number) });
    expect(whole.id).toMatch(/^cmpl-[0-9a-f]{32}$/);
    expect(whole.choices).toHaveLength(1);
    expect(whole.choices[0]).toMatchObject({ index: 0, logprobs: null, finish_reason: 'length' });
    expect(whole.choices[0]!.text.length).toBeGreaterThan(0);
    const tokens = promptTokens(prompt);
    expect(whole.usage).toEqual({
      prompt_tokens: tokens,
      completion_tokens: 12,
      total_tokens: tokens + 12,
      prompt_tokens_details: { cached_tokens: 0 },
    });

    const stream = await client.completions.create({
      model: 'llama',
      prompt,
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    // The session kept the same prompt's cache: all of it but the last token, whose logits start the reply.
    expect(usage.usage).toEqual({ ...whole.usage, prompt_tokens_details: { cached_tokens: tokens - 1 } });
    const pieces = chunks.slice(0, -1);
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
    expect(pieces.map((chunk) => chunk.choices[0]!.text).join('')).toBe(whole.choices[0]!.text);
    expect(pieces.at(-1)!.choices[0]).toMatchObject({ text: '', finish_reason: 'length' });
    expect(pieces.slice(0, -1).every((chunk) => chunk.choices[0]!.finish_reason === null && chunk.usage == null)).toBe(true);

    // Without include_usage no chunk carries the usage.
    const quiet = await client.completions.create({ model: 'llama', prompt, max_tokens: 3, temperature: 0, stream: true });
    for await (const chunk of quiet) expect(chunk.choices).toHaveLength(1);

    // max_tokens is 16 unless the request says, as OpenAI's; echo puts the prompt first.
    const plainDefault = await client.completions.create({ model: 'llama', prompt, temperature: 0, echo: true });
    expect(plainDefault.usage!.completion_tokens).toBeLessThanOrEqual(16);
    expect(plainDefault.choices[0]!.finish_reason === 'length').toBe(plainDefault.usage!.completion_tokens === 16);
    expect(plainDefault.choices[0]!.text.startsWith(`${prompt}${whole.choices[0]!.text}`)).toBe(true);
  });

  it('stops before a stop string, with finish_reason stop; token ids are a prompt too', async () => {
    const prompt = 'The quick brown fox';
    const free = await client.completions.create({ model: 'llama', prompt, max_tokens: 24, temperature: 0 });
    const text = free.choices[0]!.text;
    const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 2);
    for (const given of [stop, [stop, '\u0000never']]) {
      const stopped = await client.completions.create({ model: 'llama', prompt, max_tokens: 24, temperature: 0, stop: given });
      expect(stopped.choices[0]!.text).toBe(text.slice(0, text.indexOf(stop)));
      expect(stopped.choices[0]!.finish_reason).toBe('stop');
    }
    const ids = [1, ...tokenizer.encode(prompt)];
    const fromIds = await client.completions.create({ model: 'llama', prompt: ids, max_tokens: 24, temperature: 0 });
    expect(fromIds.choices[0]!.text).toBe(text);
    expect(fromIds.usage!.prompt_tokens).toBe(ids.length);
  });

  it('refuses bad requests with OpenAI error objects, which the client throws as its typed errors', async () => {
    const base = { model: 'llama', prompt: 'a', max_tokens: 2 };
    const cases: [Record<string, unknown>, string, string | null][] = [
      [{ temperature: 3 }, 'invalid_value', 'temperature'],
      [{ temperature: 'hot' }, 'invalid_type', 'temperature'],
      [{ top_p: 0 }, 'invalid_value', 'top_p'],
      [{ max_tokens: 0 }, 'invalid_value', 'max_tokens'],
      [{ max_tokens: CONTEXT + 1 }, 'invalid_value', 'max_tokens'],
      [{ seed: -1 }, 'invalid_value', 'seed'],
      [{ stop: ['x', 1] }, 'invalid_type', 'stop[1]'],
      [{ n: 2 }, 'unsupported_value', 'n'],
      [{ frequency_penalty: 2.5 }, 'invalid_value', 'frequency_penalty'],
      [{ presence_penalty: 'a lot' }, 'invalid_type', 'presence_penalty'],
      [{ min_p: 1.5 }, 'invalid_value', 'min_p'],
      [{ repetition_penalty: 0 }, 'invalid_value', 'repetition_penalty'],
      [{ logit_bias: { 99999: 10 } }, 'invalid_value', 'logit_bias'],
      [{ logit_bias: { 5: 101 } }, 'invalid_value', 'logit_bias'],
      [{ logit_bias: { five: 1 } }, 'invalid_type', 'logit_bias'],
      [{ logprobs: 2, echo: true }, 'unsupported_value', 'logprobs'],
      [{ logprobs: 6 }, 'invalid_value', 'logprobs'],
      [{ suffix: 'end' }, 'unsupported_parameter', 'suffix'],
      [{ stream_options: { include_usage: true } }, 'invalid_value', 'stream_options'],
      [{ temprature: 0 }, 'unknown_parameter', 'temprature'],
      [{ prompt: [[1, 2], [3]] }, 'unsupported_value', 'prompt'],
      [{ prompt: [1, 99999] }, 'invalid_value', 'prompt'],
      [{ prompt: 'word '.repeat(300) }, 'context_length_exceeded', 'prompt'],
      [{ max_tokens: CONTEXT }, 'context_length_exceeded', 'max_tokens'],
    ];
    for (const [fields, code, param] of cases) {
      const error = await failure(client.completions.create({ ...base, ...fields } as any));
      const what = JSON.stringify(fields).slice(0, 80);
      expect(error, what).toBeInstanceOf(OpenAI.BadRequestError);
      expect([error.status, error.type, error.code, error.param], what).toEqual([400, 'invalid_request_error', code, param]);
      expect(error.message, what).toMatch(param === null ? /\S/ : new RegExp(param.replace(/[[\]]/g, '\\$&')));
    }
    const model = await failure(client.completions.create({ ...base, model: 'gpt-4o' }));
    expect(model).toBeInstanceOf(OpenAI.NotFoundError);
    expect([model.code, model.param]).toEqual(['model_not_found', 'model']);
    // null counts as absent, as OpenAI takes it.
    const neutral = await client.completions.create({ ...base, logprobs: null });
    expect(neutral.choices[0]).toMatchObject({ logprobs: null, finish_reason: 'length' });
  });

  it('takes the sampling controls generate() takes: a logit bias of 100 makes greedy pick its token every time', async () => {
    const token = tokenizer.encode(' treasure')[0]!;
    const biased = await client.completions.create({
      model: 'llama',
      prompt: 'Once upon a time',
      max_tokens: 3,
      temperature: 0,
      logit_bias: { [token]: 100 },
    });
    const spelled = new TextDecoder().decode(tokenizer.tokenBytes(token));
    expect(biased.choices[0]!.text).toBe(spelled.repeat(3));
    // Penalties, min_p, top_k and repetition_penalty are generate()'s own; seeded, they repeat.
    const body = {
      model: 'llama',
      prompt: 'The answer is',
      max_tokens: 12,
      temperature: 0.9,
      seed: 5,
      frequency_penalty: 1.5,
      presence_penalty: 0.5,
      min_p: 0.05,
      top_k: 40,
      repetition_penalty: 1.3,
    };
    const first = await client.completions.create(body as any);
    expect((await client.completions.create(body as any)).choices[0]!.text).toBe(first.choices[0]!.text);
    expect(first.usage!.completion_tokens).toBe(12);
  });

  it('checks chat requests, and refuses them when the tokenizer has no chat template', async () => {
    const base = { model: 'llama', messages: [{ role: 'user', content: 'Hello' }] };
    const cases: [Record<string, unknown>, string, string][] = [
      [{ messages: [] }, 'invalid_value', 'messages'],
      [{ messages: [{ role: 'robot', content: 'x' }] }, 'invalid_value', 'messages[0].role'],
      [
        { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] },
        'unsupported_value',
        'messages[0].content[0]',
      ],
      [{ messages: [{ role: 'user', content: 5 }] }, 'invalid_type', 'messages[0].content'],
      [{ max_tokens: 4, max_completion_tokens: 5 }, 'invalid_value', 'max_completion_tokens'],
      [{ logprobs: 'yes' }, 'invalid_type', 'logprobs'],
      [{ top_logprobs: 2 }, 'invalid_value', 'top_logprobs'],
      [{ top_logprobs: 21 }, 'invalid_value', 'top_logprobs'],
      [{ frequency_penalty: -3 }, 'invalid_value', 'frequency_penalty'],
      [{ tools: [] }, 'unknown_parameter', 'tools'],
      [{}, 'chat_template_unavailable', 'messages'],
    ];
    for (const [fields, code, param] of cases) {
      const error = await failure(client.chat.completions.create({ ...base, ...fields } as any));
      const what = JSON.stringify(fields).slice(0, 80);
      expect(error, what).toBeInstanceOf(OpenAI.BadRequestError);
      expect([error.code, error.param], what).toEqual([code, param]);
    }
  });

  it("answers chat requests through the tokenizer config's template, whole and streamed, as a completion of the rendered ids", async () => {
    const template =
      "{% for m in messages %}{{ '[' + m.role + '] ' + m.content + ' ' }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";
    const config = path.join(workDir, 'chat_tokenizer_config.json');
    fs.writeFileSync(config, JSON.stringify({ chat_template: template, bos_token: '<s>', eos_token: '</s>' }));
    const chatServer = await startServe(['--sessions', '1', '--tokenizer-config', config]);
    try {
      const chatClient = clientOf(chatServer);
      const messages = [
        { role: 'system' as const, content: 'You tell short stories.' },
        { role: 'user' as const, content: 'Once upon a time <|im_start|>' },
      ];
      const rendered = applyChatTemplate(tokenizer, messages, { template, addGenerationPrompt: true });
      const whole = await chatClient.chat.completions.create({ model: 'llama', messages, max_tokens: 10, temperature: 0 });
      expect(whole.object).toBe('chat.completion');
      expect(whole.choices[0]!.message.role).toBe('assistant');
      expect(whole.choices[0]!.finish_reason).toBe('length');
      expect(whole.usage!.prompt_tokens).toBe(rendered.tokens.length);
      const asCompletion = await chatClient.completions.create({
        model: 'llama',
        prompt: [...rendered.tokens],
        max_tokens: 10,
        temperature: 0,
      });
      expect(whole.choices[0]!.message.content).toBe(asCompletion.choices[0]!.text);

      const stream = await chatClient.chat.completions.create({
        model: 'llama',
        messages,
        max_tokens: 10,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      const finishes: (string | null)[] = [];
      let usage: unknown;
      for await (const chunk of stream) {
        if (chunk.usage) usage = chunk.usage;
        for (const choice of chunk.choices) {
          text += choice.delta.content ?? '';
          finishes.push(choice.finish_reason);
        }
      }
      expect(text).toBe(whole.choices[0]!.message.content);
      expect(finishes.at(-1)).toBe('length');
      expect(usage).toMatchObject({ prompt_tokens: rendered.tokens.length, completion_tokens: 10 });
    } finally {
      await stopServerProcess(chatServer);
    }
  });

  it('answers 429 when its session is busy and its line is full; a client that leaves aborts its generation', async () => {
    const prompt = 'A long story';
    const controller = new AbortController();
    const long = await client.completions.create(
      { model: 'llama', prompt, max_tokens: CONTEXT - promptTokens(prompt), temperature: 1, seed: 1, stream: true },
      { signal: controller.signal },
    );
    const iterator = long[Symbol.asyncIterator]();
    await iterator.next();
    const busy = await failure(client.completions.create({ model: 'llama', prompt: 'One too many', max_tokens: 2 }));
    expect(busy).toBeInstanceOf(OpenAI.RateLimitError);
    expect([busy.status, busy.type, busy.code]).toEqual([429, 'rate_limit_error', 'server_busy']);
    expect(busy.headers?.get('retry-after')).toBe('1');
    const before = (await health(cached)).generations.aborted;
    controller.abort();
    const deadline = Date.now() + 15_000;
    for (;;) {
      const state = await health(cached);
      if (state.generations.aborted === before + 1 && state.pool.busy === 0) break;
      if (Date.now() > deadline) throw new Error(`the generation was not aborted: ${JSON.stringify(state)}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // The session is free again.
    expect((await client.completions.create({ model: 'llama', prompt: 'After', max_tokens: 2 })).choices).toHaveLength(1);
  });

  it('reuses a cached prompt prefix (cached_tokens says how much), and replies as a server without the cache does', async () => {
    const system = Array(3)
      .fill('You are a pirate who has sailed every sea and fought every storm; answer each question in a pirate voice.')
      .join(' ');
    const requests = [
      { prompt: `${system} Where is the treasure?`, temperature: 0 },
      { prompt: `${system} Who sank your ship?`, temperature: 0 },
      // Another prompt takes the one session, so what follows can only come from the prefix cache.
      { prompt: 'Something else entirely', temperature: 0 },
      { prompt: `${system} Why do parrots talk?`, temperature: 0 },
      { prompt: 'And something else again', temperature: 0 },
      { prompt: `${system} Which way is north?`, temperature: 0.9, seed: 11, top_p: 0.95 },
    ];
    const withCache = [];
    const without = [];
    for (const request of requests) {
      const body = { model: 'llama', max_tokens: 10, ...request };
      withCache.push(await client.completions.create(body));
      without.push(await plainClient.completions.create(body));
    }
    requests.forEach((request, i) => {
      expect(withCache[i]!.choices[0]!.text, request.prompt).toBe(without[i]!.choices[0]!.text);
      expect(withCache[i]!.usage!.prompt_tokens).toBe(without[i]!.usage!.prompt_tokens);
    });
    const cachedTokens = (list: typeof withCache, i: number) => list[i]!.usage!.prompt_tokens_details!.cached_tokens!;
    // The second request found the first one's cache in the session, and its shared part was saved as whole blocks of 32.
    expect(cachedTokens(withCache, 1)).toBeGreaterThanOrEqual(promptTokens(system));
    const blocks = Math.floor(promptTokens(system) / 32) * 32;
    for (const i of [3, 5]) {
      expect(cachedTokens(withCache, i)).toBe(blocks);
      // Without the cache, only the BOS token is shared with the prompt before.
      expect(cachedTokens(without, i)).toBe(1);
    }
    const state = await health(cached);
    expect(state.prefixCache).toMatchObject({ entries: 1, hits: 2, hitTokens: 2 * blocks, blockTokens: 32 });
    expect(state.prefixCache.bytes).toBeGreaterThan(0);
    expect(state.cacheSources['prefix-cache']).toBe(2);
    expect((await health(plain)).prefixCache).toMatchObject({ entries: 0, hits: 0, maxBytes: 0 });
  });
});
