// Conversations handed between replicas: two `etna serve` processes over one
// Redis (a redis-server of the test's own, keeping nothing on disk) or one
// folder. Turn 1 goes to one replica and turn 2 to the other, which restores
// the conversation's state and prefills only the new turn; the reply is what
// one process serving both turns gives. A store that is slow or down costs a
// full prefill and one warning per outage, never the request.
import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';

import { loadTokenizer } from '../../lib/llm/index.js';
import type { ServerProcess } from '../helpers/server-process.js';
import type { RedisProcess } from '../../lib/tools/redis-server.js';
import { redisServer, startServe, TOKENIZER, workDir } from './helpers.js';

const tokenizer = loadTokenizer(TOKENIZER);

interface Completion {
  status: number;
  text: string;
  promptTokens: number;
  cachedTokens: number;
  body: any;
}

/** POST /v1/completions, greedy, under a conversation id when one is given. */
async function complete(server: ServerProcess, prompt: string, conversation?: string, extra: object = {}): Promise<Completion> {
  const response = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(conversation !== undefined && { 'x-conversation-id': conversation }) },
    body: JSON.stringify({ model: 'llama', prompt, max_tokens: 12, temperature: 0, ...extra }),
  });
  const body = await response.json();
  return {
    status: response.status,
    text: body.choices?.[0]?.text,
    promptTokens: body.usage?.prompt_tokens,
    cachedTokens: body.usage?.prompt_tokens_details?.cached_tokens,
    body,
  };
}

/** The same, streamed: the text of the chunks, and the usage chunk's figures. */
async function streamed(server: ServerProcess, prompt: string, conversation: string): Promise<Completion> {
  const response = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-conversation-id': conversation },
    body: JSON.stringify({ model: 'llama', prompt, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  });
  const events = (await response.text()).split('\n\n').filter((event) => event.startsWith('data: '));
  expect(events.at(-1)).toBe('data: [DONE]');
  const chunks = events.slice(0, -1).map((event) => JSON.parse(event.slice('data: '.length)));
  const usage = chunks.at(-1).usage;
  const text = chunks.map((chunk) => chunk.choices[0]?.text ?? '').join('');
  return {
    status: response.status,
    text,
    promptTokens: usage.prompt_tokens,
    cachedTokens: usage.prompt_tokens_details.cached_tokens,
    body: chunks,
  };
}

async function health(server: ServerProcess): Promise<any> {
  return (await fetch(`${server.url}/health`)).json();
}

/** Fills a replica's one session with another prompt, so that what a request keeps comes from elsewhere. */
const clear = (server: ServerProcess) => complete(server, 'Something else entirely');

const TURN1 = 'Once upon a time';
const TURN2 = ' The end came soon, and then';
const TURN3 = ' What happened next?';
/** The conversation served by one process, turn after turn in its one session: what every hand-off must give. */
let reference: { turn1: Completion; turn2: Completion; turn3: Completion };
const conversation = (turn1: Completion, turn2?: Completion) => ({
  prompt2: TURN1 + turn1.text + TURN2,
  prompt3: turn2 === undefined ? '' : TURN1 + turn1.text + TURN2 + turn2.text + TURN3,
});

beforeAll(async () => {
  const one = await startServe(['--sessions', '1', '--prefix-cache-mib', '0']);
  const turn1 = await complete(one, TURN1, 'reference');
  const turn2 = await complete(one, conversation(turn1).prompt2, 'reference');
  const turn3 = await complete(one, conversation(turn1, turn2).prompt3, 'reference');
  reference = { turn1, turn2, turn3 };
  // One process keeps the conversation in its session: each turn prefills little more than its own text.
  expect(turn2.cachedTokens).toBeGreaterThanOrEqual(turn1.promptTokens);
  expect(turn3.cachedTokens).toBeGreaterThanOrEqual(turn2.promptTokens);
  one.child.kill('SIGTERM');
  await one.exited;
}, 120_000);

/** Turn 1 on `a`, turn 2 on `b`, turn 3 (streamed) on `a` again: each equal to the reference, with as much kept. */
async function handOff(a: ServerProcess, b: ServerProcess, id: string): Promise<void> {
  const restored = async () => [(await health(a)).cacheSources.conversation, (await health(b)).cacheSources.conversation];
  const [fromStoreA, fromStoreB] = await restored();
  const turn1 = await complete(a, TURN1, id);
  expect(turn1.text).toBe(reference.turn1.text);
  const { prompt2, prompt3 } = conversation(turn1, reference.turn2);
  await clear(b);
  const turn2 = await complete(b, prompt2, id);
  expect(turn2.text).toBe(reference.turn2.text);
  expect(turn2.cachedTokens).toBe(reference.turn2.cachedTokens);
  // Turn 1's prompt and reply were not prefilled again: only turn 2's text (and a token or two where the texts join).
  expect(turn2.promptTokens - turn2.cachedTokens).toBeLessThanOrEqual(tokenizer.encode(TURN2).length + 2);
  await clear(a);
  const turn3 = await streamed(a, prompt3, id);
  expect(turn3.text).toBe(reference.turn3.text);
  expect(turn3.cachedTokens).toBe(reference.turn3.cachedTokens);
  expect(await restored()).toEqual([fromStoreA + 1, fromStoreB + 1]);
}

describe('conversations handed between replicas', () => {
  let redis: RedisProcess;
  let a: ServerProcess;
  let b: ServerProcess;

  beforeAll(async () => {
    redis = await redisServer();
    const args = ['--sessions', '1', '--prefix-cache-mib', '0', '--state-store', redis.url, '--state-timeout-ms', '300'];
    [a, b] = await Promise.all([startServe(args), startServe(args)]);
  }, 120_000);

  it('through Redis: the second replica restores turn 1 and prefills only turn 2, and replies as one process does', async () => {
    await handOff(a, b, 'conversation-1');
    // A full prefill of the same prompt, with no conversation, gives the same reply.
    await clear(b);
    const full = await complete(b, conversation(reference.turn1).prompt2);
    expect(full.cachedTokens).toBe(1);
    expect(full.text).toBe(reference.turn2.text);
    expect((await health(a)).stateStore).toMatchObject({ location: redis.url, available: true, failures: 0 });
  });

  it('while Redis is slow or down, a turn is prefilled in full and answered, with one warning per outage', async () => {
    const { prompt2 } = conversation(reference.turn1);
    const outages = () => b.stderr().match(/warning: state store .* failed/g)?.length ?? 0;
    const recoveries = () => b.stderr().match(/warning: state store .* answers again/g)?.length ?? 0;
    /** Turn 2 of conversation-1 on `b` with nothing of it in the session: whatever the store does, the reply of a full prefill. */
    const turnWithoutStore = async () => {
      await clear(b);
      const turn = await complete(b, prompt2, 'conversation-1');
      expect(turn.status).toBe(200);
      expect(turn.cachedTokens).toBe(1);
      expect(turn.text).toBe(reference.turn2.text);
    };
    // Slow: Redis answers nothing for 2 s, past the 300 ms the replicas wait.
    const sleeper = new Redis(redis.url);
    const sleeping = sleeper.call('DEBUG', 'SLEEP', '2');
    await new Promise((resolve) => setTimeout(resolve, 100));
    await turnWithoutStore();
    await turnWithoutStore();
    expect(b.stderr()).toMatch(
      /warning: state store redis:\/\/127\.0\.0\.1:\d+: a read failed \(.*\); conversations are prefilled in full/,
    );
    expect([outages(), recoveries()], b.stderr()).toEqual([1, 0]);
    await sleeping;
    sleeper.disconnect();
    expect((await complete(b, 'ping', 'conversation-2')).status).toBe(200);
    expect([outages(), recoveries()]).toEqual([1, 1]);

    // Down: the server is gone.
    await redis.stop();
    for (let i = 0; i < 3; i++) await turnWithoutStore();
    expect((await health(b)).stateStore.available).toBe(false);
    expect([outages(), recoveries()]).toEqual([2, 1]);

    // Back: the replicas reconnect on their own and store again.
    await redis.start();
    const deadline = Date.now() + 20_000;
    while (!(await health(b)).stateStore.available) {
      if (Date.now() > deadline) throw new Error(`the replica did not reconnect: ${b.stderr()}`);
      await complete(b, 'ping', 'conversation-2');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect([outages(), recoveries()]).toEqual([2, 2]);
    await handOff(b, a, 'conversation-3');
  }, 60_000);

  it('refuses a conversation id that is not 1 to 256 printable characters', async () => {
    for (const id of ['has space', 'x'.repeat(257)]) {
      const answer = await complete(a, TURN1, id);
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: 'X-Conversation-Id' });
    }
  });
});

describe('conversations in a shared folder', () => {
  it('hand off as through Redis, one file per conversation', async () => {
    const folder = path.join(workDir, 'states');
    const args = ['--sessions', '1', '--prefix-cache-mib', '0', '--state-store', folder];
    const [a, b] = await Promise.all([startServe(args), startServe(args)]);
    await handOff(a, b, 'conversation-dir');
    const files = fs.readdirSync(folder);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^[0-9a-f]{64}\.etls$/);
    expect(fs.statSync(path.join(folder, files[0]!)).size).toBeGreaterThan(1000);
    expect((await health(a)).stateStore).toMatchObject({ location: folder, available: true, stored: 2 });
  }, 60_000);
});
