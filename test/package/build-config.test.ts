// The build has one source list and generated code that matches the schema.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect, it, describe } from 'vitest';

import { repoRoot } from '../helpers/testdata.js';

function listCpp(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(path.join(repoRoot, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory() && entry.name !== 'generated') out.push(...listCpp(rel));
    else if (entry.name.endsWith('.cpp')) out.push(rel);
  }
  return out;
}

describe('build configuration', () => {
  it('lists every native source exactly once in native/sources.json', () => {
    const lists = JSON.parse(fs.readFileSync(path.join(repoRoot, 'native/sources.json'), 'utf8')) as Record<string, unknown>;
    const listed = Object.entries(lists)
      .filter(([key]) => key !== '//')
      .flatMap(([, files]) => files as string[]);
    expect(new Set(listed).size).toBe(listed.length);
    const onDisk = ['native/core', 'native/kernels', 'native/backends', 'native/addon', 'native/test']
      .filter((dir) => fs.existsSync(path.join(repoRoot, dir)))
      .flatMap(listCpp)
      .filter((file) => !file.startsWith('native/test/fuzz'));
    expect(listed.sort()).toEqual(onDisk.sort());
  });

  it('builds the addon from the same list in CMake and node-gyp', () => {
    const gyp = fs.readFileSync(path.join(repoRoot, 'binding.gyp'), 'utf8');
    expect(gyp).toContain('node scripts/native-sources.cjs core kernels backends addon');
    const cmake = fs.readFileSync(path.join(repoRoot, 'CMakeLists.txt'), 'utf8');
    for (const group of ['core', 'kernels', 'backends', 'addon']) expect(cmake).toContain(`etna_sources("\${ETNA_ROOT}" ${group} `);
    const printed = execFileSync(process.execPath, ['scripts/native-sources.cjs', 'core', 'addon'], {
      cwd: repoRoot,
      encoding: 'utf8',
    });
    expect(printed.split(' ')).toContain('native/core/program.cpp');
  });

  it('has generated code that matches schema/ (flatc)', () => {
    const out = execFileSync(process.execPath, ['scripts/codegen.mjs', '--check'], { cwd: repoRoot, encoding: 'utf8' });
    expect(out).toMatch(/matches/);
  });
});
