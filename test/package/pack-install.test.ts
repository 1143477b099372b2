// The package as a user gets it: `npm pack`, the prebuilt addon added as the
// release build adds it (scripts/prebuild.mjs), then `npm install` of the
// tarball into an empty folder with nothing else in it. There, every
// documented entry point imports, `npx etna --help` runs, and so does the
// README's first code example, printing what its comment says.
//
// The prebuild is written into an unpacked copy of the tarball, never into
// this checkout, so the tests that list the checkout's own files are not
// disturbed while this one runs.
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { repoRoot } from '../helpers/testdata.js';

const packageJson = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, unknown>;
};
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-pack-install-'));
const app = path.join(work, 'app');
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

function mustRun(command: string, args: string[], options: SpawnSyncOptions = {}): string {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options });
  if (result.error) throw result.error;
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status}\n${result.stdout}\n${result.stderr}`);
  }
  return String(result.stdout);
}

/** Packs `folder` into `destination` and returns the tarball's path. */
function pack(folder: string, destination: string): string {
  const [packed] = JSON.parse(
    mustRun('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', destination], { cwd: folder }),
  ) as [{ filename: string }];
  return path.join(destination, packed.filename);
}

/** The import specifiers users write: the package name and each of its subpaths but package.json. */
const ENTRY_POINTS = Object.keys(packageJson.exports)
  .filter((key) => key !== './package.json')
  .map((key) => (key === '.' ? packageJson.name : `${packageJson.name}/${key.slice(2)}`));

let tarball: string;
let installOutput: string;

beforeAll(() => {
  expect(fs.existsSync(path.join(repoRoot, 'dist/index.js')), 'dist/ is missing: run npm run build:ts first').toBe(true);
  const plain = pack(repoRoot, work);
  const staged = path.join(work, 'staged');
  fs.mkdirSync(staged);
  mustRun('tar', ['-xzf', plain, '-C', staged]);
  mustRun(process.execPath, [path.join(repoRoot, 'scripts/prebuild.mjs'), '--out', path.join(staged, 'package')]);
  fs.mkdirSync(path.join(work, 'release'));
  tarball = pack(path.join(staged, 'package'), path.join(work, 'release'));

  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  // The dependencies come from npm's cache when it has them (`npm ci` filled it).
  installOutput = mustRun('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], { cwd: app });
}, 900_000);

describe(`npm install of the packed ${packageJson.name}`, () => {
  it('installs under its own name with the prebuild, building nothing', () => {
    expect(path.basename(tarball)).toMatch(new RegExp(`^${packageJson.name}-\\d+\\.\\d+\\.\\d+\\.tgz$`));
    const installed = path.join(app, 'node_modules', packageJson.name);
    expect(JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8')).name).toBe(packageJson.name);
    expect(fs.readdirSync(path.join(installed, 'prebuilds', `${process.platform}-${process.arch}`))).toContain('etna.glibc.node');
    expect(fs.existsSync(path.join(installed, 'build')), installOutput).toBe(false);
    expect(installOutput).not.toMatch(/building from source/);
    const installedNames = fs.readdirSync(path.join(app, 'node_modules')).filter((name) => !name.startsWith('.'));
    expect(installedNames).toContain(packageJson.name);
    expect(installedNames).not.toContain('vitest');
  });

  it('imports every documented entry point', () => {
    expect(ENTRY_POINTS).toEqual(['etna-runtime', 'etna-runtime/export', 'etna-runtime/onnx', 'etna-runtime/llm', 'etna-runtime/serve']);
    const script = ENTRY_POINTS.map(
      (specifier, i) => `import * as m${i} from '${specifier}'; console.log('${specifier}', Object.keys(m${i}).sort().join(','));`,
    ).join('\n');
    const out = mustRun(process.execPath, ['--input-type=module', '-e', script], { cwd: app });
    const exported = new Map(
      out
        .trim()
        .split('\n')
        .map((line) => line.split(' ') as [string, string]),
    );
    expect(exported.get('etna-runtime')?.split(',')).toEqual(expect.arrayContaining(['Module', 'Program', 'Tensor', 'EtnaError']));
    expect(exported.get('etna-runtime/export')?.split(',')).toContain('ProgramBuilder');
    expect(exported.get('etna-runtime/onnx')?.split(',')).toContain('importOnnx');
    expect(exported.get('etna-runtime/llm')?.split(',')).toContain('Llm');
    expect(exported.get('etna-runtime/serve')?.split(',')).toEqual(expect.arrayContaining(['createServer', 'openStateStore']));
  });

  it('runs npx etna --help', () => {
    const help = spawnSync('npx', ['--no-install', 'etna', '--help'], { cwd: app, encoding: 'utf8' });
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^usage: etna /m);
    expect(help.stdout).toMatch(/\bdemo\b/);
  });

  it("runs the README's first code example as written", () => {
    const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
    const example = [...readme.matchAll(/^```(?:ts|js|mjs)\n([\s\S]*?)^```$/gm)]
      .map((match) => match[1]!)
      .find((code) => code.includes(`from '${packageJson.name}'`));
    expect(example, `a README code block that imports from '${packageJson.name}'`).toBeDefined();
    const program = /Module\.load\('([\w-]+)\.pte'/.exec(example!)?.[1];
    expect(program, 'the example loads a program etna export-example writes').toBeDefined();
    mustRun('npx', ['--no-install', 'etna', 'export-example', program!, `${program}.pte`], { cwd: app });
    fs.writeFileSync(path.join(app, 'readme-example.mjs'), example!);
    const run = spawnSync(process.execPath, ['readme-example.mjs'], { cwd: app, encoding: 'utf8', timeout: 60_000 });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const expected = /console\.log\(error\.code, error\.message\);\n\s*\/\/ (.*)$/m.exec(example!)?.[1];
    expect(expected).toBeDefined();
    expect(run.stdout.trim()).toBe(expected);
  });
});
