// The README's EtnaError example, run as written on the program it loads:
// the call in its `try` block fails with exactly the code and message its
// comment shows. And what the docs say about loading from a path matches
// what it does: a copy by default, and with mmap, SIGBUS on truncation
// during a call.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { EtnaError, Module, Tensor } from '../../lib/index.js';
import { exportExample } from '../../lib/tools/examples/index.js';
import { repoRoot } from '../helpers/testdata.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-readme-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('README.md', () => {
  it('prints the EtnaError its example says it prints', async () => {
    const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
    const example =
      /^const m = await Module\.load\('([\w-]+)\.pte', (\{[^}]*\})\);$[\s\S]*?^try \{\n([\s\S]*?)\n\} catch \(error\) \{\n.*console\.log\(error\.code, error\.message\);\n\s*\/\/ (\w+) (.*)$/m.exec(
        readme,
      );
    expect(example, 'the README example with its try block and the comment after it').not.toBeNull();
    const [, name, options, call, code, message] = example!;
    const file = path.join(dir, `${name}.pte`);
    fs.writeFileSync(file, exportExample(name!));
    const m = await Module.load(file, new Function(`return ${options}`)());
    try {
      const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (
        ...args: string[]
      ) => (...values: unknown[]) => Promise<void>;
      const error = await new AsyncFunction('m', 'Tensor', call!)(m, Tensor).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(EtnaError);
      expect(`${(error as EtnaError).code} ${(error as EtnaError).message}`).toBe(`${code} ${message}`);
    } finally {
      await m.dispose();
    }
  });

  it('says a path is copied unless mmap is asked for, and that a mapped file truncated during a call ends the process', () => {
    const docs = ['README.md', ...fs.readdirSync(path.join(repoRoot, 'docs')).map((name) => `docs/${name}`)];
    for (const doc of docs) {
      const text = fs.readFileSync(path.join(repoRoot, doc), 'utf8').replace(/\s+/g, ' ');
      expect(text, doc).not.toMatch(/`Program\.load\(path\)` maps/);
    }
    const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
    const mmapParagraph = readme.split(/\n(?=- )|\n\n/).find((part) => part.includes('{ mmap: true }'));
    expect(mmapParagraph).toBeDefined();
    expect(mmapParagraph!.replace(/\s+/g, ' ')).toMatch(/truncation while a call is reading the mapping .* SIGBUS/);
    expect(fs.readFileSync(path.join(repoRoot, 'docs/architecture.md'), 'utf8')).toMatch(/SIGBUS/);
  });
});
