#!/usr/bin/env node
// Regenerates the flatc output that the repository commits:
//   native/core/generated/<schema>_generated.h   (C++, the program and data formats)
//   native/backends/xnnpack/generated/xnnpack_generated.h   (C++, the XNNPACK
//     delegate's payload: only that backend reads it)
//   lib/generated/<schema>/...                    (TypeScript, ESM)
// `node scripts/codegen.mjs --check` writes into a temporary folder and fails
// when the committed files differ, so the schema and the code cannot drift.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const schemas = ['program', 'xnnpack', 'flat_tensor'].filter((name) => fs.existsSync(path.join(root, 'schema', `${name}.fbs`)));
// Each schema's C++ lives beside the code that reads it.
const cppDirs = { program: 'native/core/generated', flat_tensor: 'native/core/generated', xnnpack: 'native/backends/xnnpack/generated' };
const generatedDirs = [...new Set(Object.values(cppDirs)), 'lib/generated'];

function listFiles(dir) {
  if (!fs.existsSync(dir)) return [];
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listFiles(full));
    else out.push(full);
  }
  return out.sort();
}

// flatc's TypeScript imports carry no extension; Node's ESM resolver needs `.js`.
function addJsExtensions(file) {
  const text = fs.readFileSync(file, 'utf8');
  const fixed = text.replace(/(from '\.{1,2}\/[^']+?)(?<!\.js)';/g, "$1.js';");
  fs.writeFileSync(file, fixed);
}

function generate(outRoot) {
  for (const name of schemas) {
    const schema = path.join(root, 'schema', `${name}.fbs`);
    const cppDir = path.join(outRoot, cppDirs[name]);
    fs.mkdirSync(cppDir, { recursive: true });
    execFileSync('flatc', ['--cpp', '--scoped-enums', '-o', cppDir, schema]);
    const tsDir = path.join(outRoot, 'lib/generated', name);
    fs.mkdirSync(tsDir, { recursive: true });
    execFileSync('flatc', ['--ts', '-o', tsDir, schema]);
    for (const file of listFiles(tsDir)) addJsExtensions(file);
  }
}

const check = process.argv.includes('--check');
if (!check) {
  for (const sub of generatedDirs) fs.rmSync(path.join(root, sub), { recursive: true, force: true });
  generate(root);
  process.exit(0);
}

const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-codegen-'));
try {
  generate(temp);
  const stale = [];
  for (const sub of generatedDirs) {
    const want = listFiles(path.join(temp, sub)).map((f) => path.relative(temp, f));
    const have = listFiles(path.join(root, sub)).map((f) => path.relative(root, f));
    for (const rel of new Set([...want, ...have])) {
      const a = path.join(temp, rel);
      const b = path.join(root, rel);
      if (!fs.existsSync(a) || !fs.existsSync(b) || !fs.readFileSync(a).equals(fs.readFileSync(b))) stale.push(rel);
    }
  }
  if (stale.length > 0) {
    console.error(`generated code is out of date with schema/ (run npm run codegen):\n  ${stale.join('\n  ')}`);
    process.exit(1);
  }
  console.log('generated code matches schema/');
} finally {
  fs.rmSync(temp, { recursive: true, force: true });
}
