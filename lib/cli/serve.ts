// `etna serve MODEL.pte --tokenizer FILE`: the OpenAI-compatible server of
// etna-runtime/serve on a port, until SIGTERM or SIGINT drains it.
import type { AddressInfo } from 'node:net';
import path from 'node:path';

import { EtnaError } from '../errors.js';
import type { Llm } from '../llm/index.js';
import { openStateStore } from '../serve/redis-store.js';
import { createServer, DEFAULT_PREFIX_BLOCK_TOKENS, DEFAULT_PREFIX_CACHE_BYTES } from '../serve/server.js';
import { DEFAULT_STATE_TIMEOUT_MS, DEFAULT_STATE_TTL_SECONDS, type StateStore } from '../serve/state-store.js';
import { type Command, type ParsedArgs, THREADS_OPTION } from './command.js';
import { loadLlm, MODEL_OPTIONS } from './generate.js';

const MIB = 2 ** 20;

function listen(server: import('node:http').Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const failed = (error: Error): void => reject(new EtnaError('INVALID_INPUT', `cannot listen on ${host}:${port}: ${error.message}`));
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve(server.address() as AddressInfo);
    });
  });
}

async function runServe(args: ParsedArgs): Promise<number> {
  const program = args.positionals[0]!;
  if (args.string('tokenizer') === undefined)
    throw new EtnaError('INVALID_INPUT', '--tokenizer FILE is required (a tokenizer.json or a tiktoken tokenizer.model)');
  const host = args.string('host') ?? '127.0.0.1';
  const port = args.integer('port', 8080, 0, 65535);
  const settings = {
    modelName: args.string('model-name') ?? path.basename(program, '.pte'),
    sessions: args.integer('sessions', 2, 1),
    maxQueue: args.integer('max-queue', 16, 0),
    prefixCacheBytes: args.integer('prefix-cache-mib', DEFAULT_PREFIX_CACHE_BYTES / MIB, 0) * MIB,
    prefixBlockTokens: args.integer('prefix-block', DEFAULT_PREFIX_BLOCK_TOKENS, 1),
    stateTimeoutMs: args.integer('state-timeout-ms', DEFAULT_STATE_TIMEOUT_MS, 1),
    maxBodyBytes: args.integer('max-body-bytes', MIB, 1),
    ...(args.string('num-bos') !== undefined && { numBos: args.integer('num-bos', 0, 0) }),
  };
  const ttlSeconds = args.integer('state-ttl', DEFAULT_STATE_TTL_SECONDS, 1);
  const drainTimeoutMs = args.integer('drain-timeout-ms', 10_000, 0);
  const storeSpec = args.string('state-store');
  const warn = (message: string): void => void process.stderr.write(`etna serve: warning: ${message}\n`);

  // The store first: a wrong one is refused before the model takes its time to load.
  const store: StateStore | undefined = storeSpec === undefined ? undefined : await openStateStore(storeSpec, { ttlSeconds });
  let llm: Llm | undefined;
  try {
    llm = await loadLlm(args);
    const server = await createServer({ llm, ...settings, ...(store !== undefined && { stateStore: store }), warn });
    const address = await listen(server, port, host);
    const shown = address.address.includes(':') ? `[${address.address}]` : address.address;
    const { layout, vocabSize, maxContextLen } = llm.metadata;
    console.log(
      `listening on http://${shown}:${address.port} (model '${settings.modelName}': ${layout} layout, vocabulary ${vocabSize}, ` +
        `context ${maxContextLen}; ${settings.sessions} sessions, queue limit ${settings.maxQueue}; ` +
        `prefix cache ${settings.prefixCacheBytes / MIB} MiB; state store ${store?.location ?? 'none'})`,
    );
    const signal = await new Promise<NodeJS.Signals>((resolve) => {
      for (const name of ['SIGTERM', 'SIGINT'] as const) process.once(name, () => resolve(name));
    });
    console.log(`${signal}: finishing running generations (cutting them after ${drainTimeoutMs} ms), then stopping`);
    await server.shutdown({ drainTimeoutMs });
    console.log('stopped');
    return 0;
  } finally {
    await store?.close();
    await llm?.dispose();
  }
}

export const SERVE: Command = {
  spec: {
    name: 'serve',
    synopsis: 'MODEL.pte --tokenizer FILE',
    brief: 'serve an LLM program over an OpenAI-compatible HTTP API',
    summary:
      'Serves an ExecuTorch LLM program over HTTP with the routes of OpenAI’s API (GET /v1/models, POST /v1/completions,\n' +
      'POST /v1/chat/completions), a prefix cache, and conversation states kept in a folder or Redis between turns so\n' +
      'that any replica continues them. SIGTERM or SIGINT drains it and exits 0.',
    options: [
      ...MODEL_OPTIONS,
      { name: 'host', value: 'HOST', help: 'address to listen on (default 127.0.0.1)' },
      { name: 'port', value: 'N', help: 'port to listen on; 0 takes a free one, which the first line prints (default 8080)' },
      { name: 'model-name', value: 'NAME', help: "the model's name in requests and /v1/models (default: the file's name without .pte)" },
      { name: 'sessions', value: 'N', help: 'sessions over the model: requests that generate at once (default 2)' },
      { name: 'max-queue', value: 'N', help: 'requests that may wait for a session; beyond them 429 (default 16)' },
      THREADS_OPTION,
      {
        name: 'num-bos',
        value: 'N',
        help: "BOS tokens before a text prompt (default generate()'s: 1 if the model has one and the tokenizer adds it)",
      },
      {
        name: 'prefix-cache-mib',
        value: 'N',
        help: `MiB of cached prompt prefixes; 0 turns the cache off (default ${DEFAULT_PREFIX_CACHE_BYTES / MIB})`,
      },
      {
        name: 'prefix-block',
        value: 'N',
        help: `prefixes are cached in whole blocks of N tokens (default ${DEFAULT_PREFIX_BLOCK_TOKENS})`,
      },
      { name: 'state-store', value: 'DIR|URL', help: 'keep conversation states in a folder, or in Redis at redis://HOST:PORT' },
      {
        name: 'state-ttl',
        value: 'S',
        help: `seconds a conversation state is kept after its last turn (default ${DEFAULT_STATE_TTL_SECONDS})`,
      },
      {
        name: 'state-timeout-ms',
        value: 'MS',
        help: `how long a state store call may take before the request goes on without it (default ${DEFAULT_STATE_TIMEOUT_MS})`,
      },
      {
        name: 'drain-timeout-ms',
        value: 'MS',
        help: 'on SIGTERM, how long running generations may go on before they are cut (default 10000)',
      },
      { name: 'max-body-bytes', value: 'N', help: 'larger request bodies get 413 (default 1048576)' },
    ],
    notes: 'docs/serving-llms.md describes the routes, the fields, the errors, the prefix cache and the state store.',
  },
  run: runServe,
};
