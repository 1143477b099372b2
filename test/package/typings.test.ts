// The published typings as a strict TypeScript user meets them: declarations
// emitted fresh from lib/ into a package laid out like the published one,
// imported by name through its `exports`, under moduleResolution node16 and
// bundler (test/typings/).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { repoRoot } from '../helpers/testdata.js';

const tsc = path.join(repoRoot, 'node_modules/typescript/bin/tsc');
let packageDir = '';

function compile(project: string): { ok: boolean; output: string } {
  try {
    const output = execFileSync(process.execPath, [tsc, '-p', project, '--listFiles'], {
      cwd: packageDir,
      encoding: 'utf8',
      stdio: 'pipe',
    });
    return { ok: true, output };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string };
    return { ok: false, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

beforeAll(() => {
  packageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-typings-'));
  fs.copyFileSync(path.join(repoRoot, 'package.json'), path.join(packageDir, 'package.json'));
  fs.symlinkSync(path.join(repoRoot, 'node_modules'), path.join(packageDir, 'node_modules'), 'dir');
  fs.cpSync(path.join(repoRoot, 'test/typings'), path.join(packageDir, 'typings'), { recursive: true });
  execFileSync(
    process.execPath,
    [
      tsc,
      '-p',
      path.join(repoRoot, 'tsconfig.json'),
      '--emitDeclarationOnly',
      '--sourceMap',
      'false',
      '--outDir',
      path.join(packageDir, 'dist'),
    ],
    {
      stdio: 'pipe',
    },
  );
}, 240_000);

afterAll(() => {
  if (packageDir !== '') fs.rmSync(packageDir, { recursive: true, force: true });
});

describe('typings', () => {
  for (const resolution of ['node16', 'bundler']) {
    it(`compile a strict user file without casts (moduleResolution ${resolution}), misuse still rejected`, () => {
      const result = compile(`typings/tsconfig.${resolution}.json`);
      expect(result.output).not.toMatch(/error TS/);
      expect(result.ok).toBe(true);
      // The package was reached through its exports, not through lib/ sources.
      const files = result.output.split('\n').map((line) => path.relative(fs.realpathSync(packageDir), line.trim()));
      expect(files).toContain(path.join('dist', 'index.d.ts'));
      expect(files).toContain(path.join('dist', 'export', 'index.d.ts'));
      expect(files).toContain(path.join('typings', 'user.ts'));
    }, 120_000);
  }

  it('leave out every member marked @internal', () => {
    const declarations = fs
      .readdirSync(path.join(packageDir, 'dist'), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.d.ts'));
    expect(declarations.length).toBeGreaterThan(20);
    const leaked = declarations.filter((file) => fs.readFileSync(path.join(packageDir, 'dist', file), 'utf8').includes('@internal'));
    expect(leaked).toEqual([]);
    // The sources do mark some, so the check above could fail.
    expect(fs.readFileSync(path.join(repoRoot, 'lib/llm/session.ts'), 'utf8')).toContain('@internal');
    const session = fs.readFileSync(path.join(packageDir, 'dist/llm/session.d.ts'), 'utf8');
    expect(session).toContain('generate(');
    expect(session).toContain('restore(snapshot');
    expect(session).not.toMatch(/\brun\(prompt/);
  });

  it('fail to compile a file that reads an int64 tensor as a Float32Array', () => {
    const broken = path.join(packageDir, 'typings', 'user.ts');
    fs.appendFileSync(broken, '\nexport const wrong: Float32Array = Tensor.int64([1], [1]).data;\n');
    const result = compile('typings/tsconfig.bundler.json');
    expect(result.ok).toBe(false);
    expect(result.output).toMatch(/user\.ts\(\d+,\d+\): error TS2322: Type 'BigInt64Array.*' is not assignable to type 'Float32Array/);
  }, 120_000);
});
