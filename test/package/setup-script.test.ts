// scripts/setup.sh names each Debian release's own packages.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { repoRoot } from '../helpers/testdata.js';

const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-setup-'));
afterAll(() => fs.rmSync(workDir, { recursive: true, force: true }));

/** Runs setup.sh with `args` as if on the release an os-release file with `fields` describes. */
function setupOn(fields: string, args: string[]) {
  const osRelease = path.join(workDir, `os-release-${Math.random().toString(36).slice(2)}`);
  fs.writeFileSync(osRelease, fields);
  return spawnSync('bash', [path.join(repoRoot, 'scripts/setup.sh'), ...args], {
    encoding: 'utf8',
    env: { ...process.env, ETNA_OS_RELEASE: osRelease },
  });
}

describe('setup.sh', () => {
  it('lists clang 14 runtimes on Debian 12 and clang 19 runtimes on Debian 13', () => {
    const bookworm = setupOn('ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n', ['--list']);
    expect(bookworm.status, bookworm.stderr).toBe(0);
    expect(bookworm.stdout.split('\n')).toContain('libclang-rt-14-dev');
    expect(bookworm.stdout).not.toContain('libclang-rt-19-dev');
    // npm run lint checks the C++ layout with it.
    expect(bookworm.stdout.split('\n')).toContain('clang-format');

    const trixie = setupOn('ID=debian\nVERSION_ID="13"\nVERSION_CODENAME=trixie\n', ['--list']);
    expect(trixie.status, trixie.stderr).toBe(0);
    expect(trixie.stdout.split('\n')).toContain('libclang-rt-19-dev');
    expect(trixie.stdout).not.toContain('libclang-rt-14-dev');
    // Everything else is named alike on both.
    const others = (list: string) => list.split('\n').filter((name) => !name.startsWith('libclang-rt-'));
    expect(others(trixie.stdout)).toEqual(others(bookworm.stdout));
  });

  it('reads the release number when the codename is missing', () => {
    const trixie = setupOn('ID=debian\nVERSION_ID="13"\n', ['--list']);
    expect(trixie.status, trixie.stderr).toBe(0);
    expect(trixie.stdout.split('\n')).toContain('libclang-rt-19-dev');
  });

  it('refuses a release it does not know, naming it, before installing anything', () => {
    const buster = setupOn('ID=debian\nVERSION_ID="10"\nVERSION_CODENAME=buster\n', ['--system']);
    expect(buster.status).toBe(1);
    expect(buster.stderr).toMatch(/Debian 12 \(bookworm\) or 13 \(trixie\) expected, found 'buster'/);
    expect(buster.stdout).not.toMatch(/installing/);
  });
});
