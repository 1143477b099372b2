// Runs the compiled CLI (dist/cli/etna.js) as a user would.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { repoRoot } from './testdata.js';

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** `input` is written to the command's stdin, which then ends. */
export function runCli(args: string[], options: { cwd?: string; timeoutMs?: number; input?: string } = {}): CliResult {
  const result = spawnSync(process.execPath, [path.join(repoRoot, 'dist/cli/etna.js'), ...args], {
    cwd: options.cwd ?? repoRoot,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 60_000,
    ...(options.input !== undefined && { input: options.input }),
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}
