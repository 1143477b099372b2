// `etna bench chat`: its options, the run and the report (lib/tools/bench/chat.ts).
import { writeFileSync } from 'node:fs';

import { MAX_NUM_THREADS } from '../module.js';
import { formatChatReport, runChatBench } from '../tools/bench/chat.js';
import { LLAMA_8DA4W_PRESET_NAMES } from '../tools/examples/llama-8da4w.js';
import { JSON_REPORT_OPTION, THREADS_OPTION, type Command } from './command.js';

export const BENCH_CHAT: Command = {
  spec: {
    name: 'bench chat',
    brief: "time what etna serve's prefix cache and state store save at a real model's shape",
    summary:
      'Serves the llama-8da4w example at a preset size (seeded weights) over HTTP on loopback and times the first token of\n' +
      'requests that share a system prompt, with the prefix cache and without it, and of a conversation continued on another\n' +
      'replica, its state restored from Redis, against a full re-prefill.',
    options: [
      { name: 'preset', value: 'NAME', help: `model size: ${LLAMA_8DA4W_PRESET_NAMES.join(', ')} (default stories110m)` },
      THREADS_OPTION,
      { name: 'requests', value: 'N', help: 'requests sharing the system prompt (default 16)' },
      { name: 'system-tokens', value: 'N', help: "the system prompt's tokens (default 512)" },
      { name: 'question-tokens', value: 'N', help: "each request's own tokens, and a second turn's (default 32)" },
      { name: 'reply-tokens', value: 'N', help: 'tokens each reply generates (default 8)' },
      { name: 'conversations', value: 'N', help: 'conversations handed between replicas (default 5)' },
      { name: 'quantize-kv-cache', help: 'int8 KV caches with per-token scales, as --quantize_kv_cache exports them' },
      { name: 'redis', value: 'URL', help: 'a Redis server to use (default: a redis-server of its own, on a free port)' },
      JSON_REPORT_OPTION,
    ],
  },
  run: async (args) => {
    const redis = args.string('redis');
    const report = await runChatBench({
      preset: args.string('preset') ?? 'stories110m',
      threads: args.integer('threads', 1, 1, MAX_NUM_THREADS),
      requests: args.integer('requests', 16, 1),
      systemTokens: args.integer('system-tokens', 512, 1),
      questionTokens: args.integer('question-tokens', 32, 1),
      replyTokens: args.integer('reply-tokens', 8, 1),
      conversations: args.integer('conversations', 5, 1),
      quantizeKvCache: args.flag('quantize-kv-cache'),
      ...(redis !== undefined && { redis }),
      log: (line) => process.stderr.write(`${line}\n`),
    });
    console.log(formatChatReport(report));
    const json = args.string('json');
    if (json !== undefined) writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
    return 0;
  },
};
