// A redis-server of our own for the state store's tests and `etna bench
// chat`: on a free loopback port, keeping nothing on disk, stopped and
// started again on the same port at will. Without Debian's redis-server
// package it fails, naming the package.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import net from 'node:net';

import { EtnaError } from '../errors.js';

/** A port nobody listens on now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

export class RedisProcess {
  private child: ChildProcessWithoutNullStreams | undefined;

  private constructor(
    readonly port: number,
    private readonly cwd: string,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts redis-server on a free port; `cwd` is where it would write, were it to write anything. */
  static async start(cwd: string): Promise<RedisProcess> {
    const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
    if (probe.error !== undefined || probe.status !== 0) {
      throw new EtnaError(
        'INVALID_INPUT',
        `redis-server is not installed (${probe.error?.message ?? probe.stderr.trim()}): install Debian's redis-server package ` +
          '(apt-get install redis-server, or bash scripts/setup.sh)',
      );
    }
    const redis = new RedisProcess(await freePort(), cwd);
    await redis.start();
    return redis;
  }

  /** Starts it again, on the same port, once stopped. */
  async start(): Promise<void> {
    if (this.child !== undefined) return;
    // No snapshots, no append-only file; DEBUG from loopback, so a test can make the server sleep.
    const args = [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--enable-debug-command',
      'local',
    ];
    const child = spawn('redis-server', args, { cwd: this.cwd });
    this.child = child;
    let output = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) resolve();
      });
      child.once('exit', (code) => {
        this.child = undefined;
        reject(new EtnaError('INTERNAL', `redis-server exited with ${code}: ${output.trim()}`));
      });
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    this.child = undefined;
  }
}
