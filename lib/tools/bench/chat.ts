// `etna bench chat` (the command is lib/cli/bench-chat.ts): what the
// server's caches save at a real model's shape, through HTTP on loopback.
// Time to first token of requests that share a system prompt, each after an
// unrelated request that takes the one session, with the prefix cache and
// without it; and of a conversation's second turn on another replica, its
// state restored from Redis, against a full re-prefill.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

import { EtnaError } from '../../errors.js';
import { cacheRanges } from '../../llm/snapshot.js';
import { Lcg } from '../../random.js';
import { openStateStore } from '../../serve/redis-store.js';
import type { Usage } from '../../serve/responses.js';
import { createServer, DEFAULT_PREFIX_CACHE_BYTES, type LlmServer } from '../../serve/server.js';
import type { StateStore } from '../../serve/state-store.js';
import { llama8da4wPreset, type Llama8da4wConfig } from '../examples/llama-8da4w.js';
import { RedisProcess } from '../redis-server.js';
import { loadWordLlama, wordIds } from './word-llama.js';

export interface ChatBenchOptions {
  readonly preset: string;
  readonly threads: number;
  /** Requests that share the system prompt. */
  readonly requests: number;
  readonly systemTokens: number;
  /** Tokens of each request's own question, and of a conversation's second turn. */
  readonly questionTokens: number;
  /** Tokens each reply generates. */
  readonly replyTokens: number;
  /** Conversations handed from one replica to another. */
  readonly conversations: number;
  /** Int8 KV caches with per-token scales (`--quantize_kv_cache`): a quarter of the state to hand over. */
  readonly quantizeKvCache?: boolean;
  /** A Redis server to use; default: one of the bench's own (redis-server must be installed). */
  readonly redis?: string;
  readonly log?: (line: string) => void;
}

export interface TimedReply {
  /** From sending the request to the first chunk of its stream. */
  readonly firstTokenMs: number;
  readonly promptTokens: number;
  readonly cachedTokens: number;
  readonly text: string;
}

export interface ChatBenchReport {
  readonly preset: string;
  readonly config: Llama8da4wConfig;
  readonly threads: number;
  readonly loadAverage: number;
  readonly options: Omit<ChatBenchOptions, 'log' | 'redis'>;
  /** Bytes a session snapshot holds per cached token (the KV cache rows of one position). */
  readonly snapshotBytesPerToken: number;
  readonly prefix: { readonly without: readonly TimedReply[]; readonly with: readonly TimedReply[] };
  readonly handOff: { readonly fullPrefill: readonly TimedReply[]; readonly restored: readonly TimedReply[] };
}

const median = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

/** One streamed completion, timed from the request to its first chunk. */
async function timedCompletion(url: string, prompt: readonly number[], maxTokens: number, conversation?: string): Promise<TimedReply> {
  const started = performance.now();
  const response = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(conversation !== undefined && { 'x-conversation-id': conversation }) },
    body: JSON.stringify({
      model: 'bench',
      prompt,
      max_tokens: maxTokens,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (response.body === null || response.status !== 200) {
    throw new EtnaError('INTERNAL', `bench chat: the server answered ${response.status}: ${await response.text()}`);
  }
  let firstTokenMs = 0;
  let text = '';
  const decoder = new TextDecoder();
  for await (const chunk of response.body) {
    if (firstTokenMs === 0) firstTokenMs = performance.now() - started;
    text += decoder.decode(chunk, { stream: true });
  }
  const chunks = text
    .split('\n\n')
    .filter((event) => event.startsWith('data: {'))
    .map((event) => JSON.parse(event.slice('data: '.length)) as { choices: { text: string }[]; usage?: Usage });
  const usage = chunks.at(-1)?.usage;
  if (usage === undefined) throw new EtnaError('INTERNAL', `bench chat: the stream ended without its usage: ${text.slice(-200)}`);
  return {
    firstTokenMs,
    promptTokens: usage.prompt_tokens,
    cachedTokens: usage.prompt_tokens_details.cached_tokens,
    text: chunks.map((chunk) => chunk.choices[0]?.text ?? '').join(''),
  };
}

async function listening(server: LlmServer): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
}

export async function runChatBench(options: ChatBenchOptions): Promise<ChatBenchReport> {
  const log = options.log ?? (() => undefined);
  const config = llama8da4wPreset(options.preset);
  const { systemTokens, questionTokens, replyTokens } = options;
  if (systemTokens + 3 * questionTokens + 2 * replyTokens > config.context) {
    throw new EtnaError(
      'INVALID_INPUT',
      `a conversation of ${systemTokens} + ${questionTokens} tokens, a reply of ${replyTokens}, then ${questionTokens} more ` +
        `does not fit the ${options.preset} context of ${config.context}`,
    );
  }
  log(`writing llama-8da4w at ${options.preset} ...`);
  const llm = await loadWordLlama(config, options.threads, { quantizeKvCache: options.quantizeKvCache === true });
  const random = new Lcg(7);
  const ids = (count: number): number[] => Array.from({ length: count }, () => Math.floor(random.next() * config.vocab));
  const servers: LlmServer[] = [];
  const stores: StateStore[] = [];
  let redis: RedisProcess | undefined;
  const folder = mkdtempSync(join(tmpdir(), 'etna-bench-chat-'));
  try {
    const serve = async (extra: { prefixCacheBytes?: number; stateStore?: StateStore }): Promise<string> => {
      // A long store timeout: the bench times the store's transfers, it does not test their timeout.
      const server = await createServer({
        llm,
        modelName: 'bench',
        sessions: 1,
        prefixCacheBytes: 0,
        stateTimeoutMs: 60_000,
        ...extra,
        warn: log,
      });
      servers.push(server);
      return listening(server);
    };

    // Requests sharing a system prompt, each after an unrelated one of the same length on the one session.
    const system = ids(systemTokens);
    const questions = Array.from({ length: options.requests }, () => ids(questionTokens));
    const others = Array.from({ length: options.requests }, () => ids(systemTokens + questionTokens));
    const prefix: { without: TimedReply[]; with: TimedReply[] } = { without: [], with: [] };
    for (const [name, bytes] of [
      ['without', 0],
      ['with', DEFAULT_PREFIX_CACHE_BYTES],
    ] as const) {
      log(`${options.requests} requests sharing a ${systemTokens}-token system prompt, prefix cache ${name === 'with' ? 'on' : 'off'} ...`);
      const url = await serve({ prefixCacheBytes: bytes });
      for (const [i, question] of questions.entries()) {
        await timedCompletion(url, others[i]!, 1);
        prefix[name].push(await timedCompletion(url, [...system, ...question], replyTokens));
      }
    }

    // A conversation's second turn on another replica: restored from Redis, or prefilled in full.
    if (options.redis === undefined) log('starting redis-server ...');
    redis = options.redis === undefined ? await RedisProcess.start(folder) : undefined;
    const redisUrl = options.redis ?? redis!.url;
    const replicaUrls: string[] = [];
    for (let i = 0; i < 2; i++) {
      const store = await openStateStore(redisUrl);
      stores.push(store);
      replicaUrls.push(await serve({ stateStore: store }));
    }
    const [first, second] = replicaUrls as [string, string];
    const plain = await serve({});
    const handOff: { fullPrefill: TimedReply[]; restored: TimedReply[] } = { fullPrefill: [], restored: [] };
    log(`${options.conversations} conversations handed between replicas through ${redisUrl} ...`);
    for (let c = 0; c < options.conversations; c++) {
      const turn1 = [...ids(systemTokens), ...ids(questionTokens)];
      const reply = await timedCompletion(first, turn1, replyTokens, `bench-${c}`);
      const turn2 = [...turn1, ...wordIds(reply.text), ...ids(questionTokens)];
      handOff.restored.push(await timedCompletion(second, turn2, replyTokens, `bench-${c}`));
      if (handOff.restored.at(-1)!.cachedTokens < turn1.length) {
        throw new EtnaError('INTERNAL', `bench chat: the second replica did not restore the conversation from ${redisUrl}`);
      }
      handOff.fullPrefill.push(await timedCompletion(plain, turn2, replyTokens));
      if (handOff.restored.at(-1)!.text !== handOff.fullPrefill.at(-1)!.text) {
        throw new EtnaError('INTERNAL', 'bench chat: the restored conversation replied otherwise than a full prefill');
      }
    }
    const { state } = llm.program.describe().methods.find((method) => method.name === llm.metadata.decode.name)!;
    const snapshotBytesPerToken = cacheRanges(state, llm.metadata, 1).reduce((sum, [, size]) => sum + size, 0);
    const { log: _log, redis: _redis, ...settings } = options;
    return {
      preset: options.preset,
      config,
      threads: options.threads,
      loadAverage: loadavg()[0] ?? 0,
      options: settings,
      snapshotBytesPerToken,
      prefix,
      handOff,
    };
  } finally {
    for (const server of servers) await server.shutdown({ drainTimeoutMs: 0 });
    for (const store of stores) await store.close();
    await redis?.stop();
    await llm.dispose();
    rmSync(folder, { recursive: true, force: true });
  }
}

export function formatChatReport(report: ChatBenchReport): string {
  const { options } = report;
  const ms = (value: number): string => `${value.toFixed(1)} ms`;
  const firstToken = (replies: readonly TimedReply[]): number => median(replies.map((reply) => reply.firstTokenMs));
  const cached = (replies: readonly TimedReply[]): string => `${median(replies.map((reply) => reply.cachedTokens))} cached`;
  const withoutCache = firstToken(report.prefix.without);
  const withCache = firstToken(report.prefix.with);
  const full = firstToken(report.handOff.fullPrefill);
  const restored = firstToken(report.handOff.restored);
  const snapshotTokens = median(report.handOff.restored.map((reply) => reply.cachedTokens));
  return [
    `etna bench chat: llama-8da4w ${report.preset}${options.quantizeKvCache === true ? ' (int8 KV caches)' : ''}, ${report.threads} thread(s), load average ${report.loadAverage.toFixed(1)}; medians`,
    `snapshot: ${(report.snapshotBytesPerToken / 1024).toFixed(1)} KiB per cached token`,
    '',
    `${options.requests} requests sharing a ${options.systemTokens}-token system prompt (+${options.questionTokens} each), ` +
      'each after an unrelated request on the one session:',
    `  time to first token without the prefix cache  ${ms(withoutCache).padStart(10)}  (${cached(report.prefix.without)})`,
    `  time to first token with the prefix cache     ${ms(withCache).padStart(10)}  (${cached(report.prefix.with)})`,
    `  with / without                                ${(withCache / withoutCache).toFixed(3).padStart(10)}`,
    '',
    `${options.conversations} conversations, turn 2 (+${options.questionTokens} tokens) on another replica:`,
    `  full re-prefill                               ${ms(full).padStart(10)}  (${cached(report.handOff.fullPrefill)})`,
    `  state restored from Redis                     ${ms(restored).padStart(10)}  (${cached(report.handOff.restored)}, ` +
      `a ${((snapshotTokens * report.snapshotBytesPerToken) / 2 ** 20).toFixed(1)} MiB snapshot)`,
    `  restored / full                               ${(restored / full).toFixed(3).padStart(10)}`,
  ].join('\n');
}
