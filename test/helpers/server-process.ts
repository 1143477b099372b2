// A server started as a user starts one: a child process that prints
// `listening on http://HOST:PORT` once it takes requests. Every process a
// test file starts is killed when the file ends, whatever happened.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { afterAll } from 'vitest';

import { repoRoot } from './testdata.js';

export interface ServerProcess {
  url: string;
  child: ChildProcessWithoutNullStreams;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const running = new Set<ChildProcessWithoutNullStreams>();
afterAll(() => {
  for (const child of running) child.kill('SIGKILL');
});

/** Runs `node ARGS...` from the repository's root and resolves once it listens (rejects if it exits first). */
export async function startServerProcess(args: readonly string[], env: Record<string, string> = {}): Promise<ServerProcess> {
  const child = spawn(process.execPath, args, { cwd: repoRoot, env: { ...process.env, ...env } });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    }),
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(stdout);
      if (match !== null) resolve(match[1]!);
    });
    void exited.then(({ code }) => reject(new Error(`${args.join(' ')} exited with ${code} before listening: ${stderr}`)));
  });
  return { url, child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** Stops a server with SIGTERM and resolves with how it exited. */
export async function stopServerProcess(server: ServerProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  server.child.kill('SIGTERM');
  return server.exited;
}
