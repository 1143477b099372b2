// Child processes of the benchmarks: each measurement runs in a fresh node
// process (`script --worker SPEC_JSON`) so that resident-memory figures do not
// mix, and reports one JSON line. The parent side starts it and reads the
// reply; the child side serves it and reads its own memory.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { EtnaError, toEtnaError, type EtnaErrorCode } from '../../errors.js';

// Children run from the package root (lib/tools/bench or dist/tools/bench, three levels down).
const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** What a child prints as its last line when its measurement fails. */
interface ChildFailure {
  error: { code: EtnaErrorCode; message: string };
}

/** This process's resident memory now (VmRSS) or at its peak (VmHWM), from /proc. */
export function procStatusBytes(field: 'VmHWM' | 'VmRSS'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
  return match === null ? process.memoryUsage().rss : Number(match[1]) * 1024;
}

/** Runs `use` with a temporary folder that is removed afterwards. */
export async function withTemporaryDirectory<T>(use: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'etna-bench-'));
  try {
    return await use(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Runs `script --worker SPEC_JSON` in a fresh node process (TypeScript sources
 * through tsx) and resolves with the JSON object it prints last; a failure
 * comes back as an EtnaError whose message starts with `label`.
 */
export function runWorkerChild<T>(script: string, spec: object, label: string): Promise<T> {
  const loader = script.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const args = [...loader, '--expose-gc', script, '--worker', JSON.stringify(spec)];
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, args, { cwd: PACKAGE_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = stdout.trim().split('\n').pop() ?? '';
      const reply: unknown = line.startsWith('{') ? JSON.parse(line) : undefined;
      const failed = typeof reply === 'object' && reply !== null && 'error' in reply;
      if (code === 0 && reply !== undefined && !failed) {
        resolvePromise(reply as T);
        return;
      }
      const failure = failed
        ? (reply as ChildFailure).error
        : {
            code: 'INTERNAL' as const,
            message: `child exited with ${code}: ${crashLine(stderr)}`,
          };
      reject(new EtnaError(failure.code, `${label}: ${failure.message}`));
    });
  });
}

/** The line of a crashed child's stderr that says what went wrong: its error, not Node's version trailer. */
function crashLine(stderr: string): string {
  const lines = stderr
    .trim()
    .split('\n')
    .filter((line) => line.trim() !== '' && !/^Node\.js v\d/.test(line));
  return lines.find((line) => /^\w*Error\b|^FATAL ERROR|^\S+Error: /.test(line.trim())) ?? lines.pop() ?? '';
}

/** When this process is `script --worker SPEC_JSON`: measures the spec and prints the result, or the failure, as its last line. */
export function serveWorker<S, R>(script: string, measure: (spec: S) => Promise<R>): void {
  if (process.argv[2] !== '--worker' || process.argv[1] === undefined || resolve(process.argv[1]) !== script) return;
  measure(JSON.parse(process.argv[3] ?? '{}') as S).then(
    (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
    (error: unknown) => {
      const { code, message } = toEtnaError(error);
      const failure: ChildFailure = { error: { code, message } };
      process.stdout.write(`${JSON.stringify(failure)}\n`);
      process.exitCode = 1;
    },
  );
}
