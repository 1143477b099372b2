// Log-probabilities in the server's answers, as OpenAI's clients read them:
// completions' `logprobs: N` (parallel lists with text offsets) and chat's
// `logprobs` / `top_logprobs` (per-token entries with bytes), whole and
// streamed. The values are those generate() gives in this process for the
// same prompt ids, carried through JSON exactly.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import fs from 'node:fs';
import path from 'node:path';

import { applyChatTemplate, Llm, loadTokenizer, type TokenLogprob } from '../../lib/llm/index.js';
import { stopServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { modelPath, startServe, TOKENIZER, workDir } from './helpers.js';

const tokenizer = loadTokenizer(TOKENIZER);
const template =
  "{% for m in messages %}{{ '[' + m.role + '] ' + m.content + ' ' }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";

let server: ServerProcess;
let client: OpenAI;
let llm: Llm;

beforeAll(async () => {
  const config = path.join(workDir, 'tokenizer_config.json');
  fs.writeFileSync(config, JSON.stringify({ chat_template: template, bos_token: '<s>', eos_token: '</s>' }));
  server = await startServe(['--sessions', '1', '--tokenizer-config', config]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  llm = await Llm.load(modelPath(), { tokenizer });
}, 120_000);

afterAll(async () => {
  await stopServerProcess(server);
  await llm.dispose();
});

/** What generate() gives for the ids, greedy. */
async function expected(ids: readonly number[], maxNewTokens: number, topLogprobs: number): Promise<TokenLogprob[]> {
  const result = await llm.generate(ids, { temperature: 0, maxNewTokens, logprobs: true, topLogprobs });
  expect(result.logprobs).toHaveLength(maxNewTokens);
  return result.logprobs!;
}

const codePoints = (text: string): number => [...text].length;

describe("the server's log-probabilities", () => {
  it("answer completions' logprobs: N with the chosen tokens, their log-probabilities, the N most likely and text offsets", async () => {
    const ids = [1, ...tokenizer.encode('Once upon a time')];
    const want = await expected(ids, 8, 3);
    const whole = await client.completions.create({ model: 'llama', prompt: ids, max_tokens: 8, temperature: 0, logprobs: 3 });
    const logprobs = whole.choices[0]!.logprobs!;
    expect(logprobs.tokens).toEqual(want.map((entry) => entry.text));
    expect(logprobs.token_logprobs).toEqual(want.map((entry) => entry.logprob));
    expect(logprobs.top_logprobs).toEqual(want.map((entry) => Object.fromEntries(entry.topLogprobs.map((top) => [top.text, top.logprob]))));
    // Greedy: each chosen token is its position's most likely one.
    for (const [i, entry] of want.entries()) expect(entry.topLogprobs[0]!.id, `token ${i}`).toBe(entry.id);
    expect(logprobs.tokens!.join('')).toBe(whole.choices[0]!.text);
    let offset = 0;
    expect(logprobs.text_offset).toEqual(
      want.map((entry) => {
        const start = offset;
        offset += codePoints(entry.text);
        return start;
      }),
    );

    // Streamed, the chunks' lists joined are the whole answer's, offsets counted across chunks.
    const stream = await client.completions.create({
      model: 'llama',
      prompt: ids,
      max_tokens: 8,
      temperature: 0,
      logprobs: 3,
      stream: true,
    });
    const joined = { tokens: [] as string[], token_logprobs: [] as number[], top_logprobs: [] as unknown[], text_offset: [] as number[] };
    for await (const chunk of stream) {
      const part = chunk.choices[0]?.logprobs;
      if (part == null) continue;
      for (const key of Object.keys(joined) as (keyof typeof joined)[]) (joined[key] as unknown[]).push(...(part[key] as unknown[]));
    }
    expect(joined).toEqual(logprobs);

    // logprobs: 0 gives the chosen tokens' alone; without logprobs there are none.
    const chosenOnly = await client.completions.create({ model: 'llama', prompt: ids, max_tokens: 3, temperature: 0, logprobs: 0 });
    expect(chosenOnly.choices[0]!.logprobs!.top_logprobs).toEqual([null, null, null]);
    expect(chosenOnly.choices[0]!.logprobs!.token_logprobs).toEqual(want.slice(0, 3).map((entry) => entry.logprob));
    const none = await client.completions.create({ model: 'llama', prompt: ids, max_tokens: 3, temperature: 0 });
    expect(none.choices[0]!.logprobs).toBeNull();
  });

  it('answer chat logprobs with each token, its bytes and top_logprobs, whole and streamed', async () => {
    const messages = [{ role: 'user' as const, content: 'Tell me a story.' }];
    const rendered = applyChatTemplate(tokenizer, messages, { template, addGenerationPrompt: true });
    const want = await expected(rendered.tokens, 6, 2);
    const wire = (entry: TokenLogprob) => ({
      token: entry.text,
      logprob: entry.logprob,
      bytes: entry.bytes,
      top_logprobs: entry.topLogprobs.map((top) => ({ token: top.text, logprob: top.logprob, bytes: top.bytes })),
    });
    const request = { model: 'llama', messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2 };
    const whole = await client.chat.completions.create(request);
    expect(whole.choices[0]!.logprobs).toEqual({ content: want.map(wire), refusal: null });
    expect(new TextDecoder().decode(new Uint8Array(want.flatMap((entry) => entry.bytes)))).toBe(whole.choices[0]!.message.content);

    const stream = await client.chat.completions.create({ ...request, stream: true });
    const content: unknown[] = [];
    for await (const chunk of stream) content.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    expect(content).toEqual(want.map(wire));

    // logprobs alone: the chosen tokens with no others.
    const alone = await client.chat.completions.create({ model: 'llama', messages, max_tokens: 2, temperature: 0, logprobs: true });
    expect(alone.choices[0]!.logprobs!.content!.map((entry) => entry.top_logprobs)).toEqual([[], []]);
  });

  it('refuse what they cannot give: prompt tokens with echo, top_logprobs without logprobs', async () => {
    const echo = await client.completions
      .create({ model: 'llama', prompt: 'a', max_tokens: 2, logprobs: 1, echo: true })
      .catch((error: unknown) => error);
    expect(echo).toBeInstanceOf(OpenAI.BadRequestError);
    expect([(echo as InstanceType<typeof OpenAI.APIError>).code, (echo as InstanceType<typeof OpenAI.APIError>).param]).toEqual([
      'unsupported_value',
      'logprobs',
    ]);
    const messages = [{ role: 'user' as const, content: 'Hi' }];
    const top = await client.chat.completions
      .create({ model: 'llama', messages, max_tokens: 2, top_logprobs: 2 })
      .catch((error: unknown) => error);
    expect(top).toBeInstanceOf(OpenAI.BadRequestError);
    expect((top as InstanceType<typeof OpenAI.APIError>).param).toBe('top_logprobs');
    // top_logprobs 0 asks for nothing, so it needs no logprobs.
    const zero = await client.chat.completions.create({ model: 'llama', messages, max_tokens: 2, top_logprobs: 0 });
    expect(zero.choices[0]!.logprobs).toBeNull();
  });
});
