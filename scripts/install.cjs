#!/usr/bin/env node
// npm's install step for etna (package.json "install" script).
//
// When a prebuilt addon in prebuilds/ loads on this machine, there is nothing
// to do. Otherwise (another architecture or C library, a glibc older than the
// bundled libraries need) the addon is built from source with node-gyp through
// binding.gyp, after checking that the compiler and the Debian packages it
// builds against are present, and naming them when they are not.
//
// Skipped without a word about building:
//  - when ETNA_SKIP_INSTALL_BUILD is set (to anything but '' or '0');
//  - in a development checkout (the package is not inside a node_modules
//    folder): there `npm ci` must stay fast, and the addon is built with
//    cmake-js (`npm run build`) into build/, which node-gyp would overwrite.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const packageRoot = path.resolve(__dirname, '..');
const APT_HINT = 'apt-get install libxnnpack-dev libpthreadpool-dev libflatbuffers-dev build-essential python3';

function say(message) {
  console.error(`etna install: ${message}`);
}

function skipRequested() {
  const value = process.env.ETNA_SKIP_INSTALL_BUILD;
  return value !== undefined && value !== '' && value !== '0';
}

function isDevelopmentCheckout() {
  return path.basename(path.dirname(packageRoot)) !== 'node_modules';
}

// Loads the addon the way the package does at run time, in a child process so
// that a library that fails to load leaves this process clean. Returns null on
// success, else the loader's message.
function loadError() {
  const probe = ['const root = process.argv[1];', "require(require.resolve('node-gyp-build', { paths: [root] }))(root);"].join('\n');
  const result = spawnSync(process.execPath, ['-e', probe, packageRoot], { encoding: 'utf8' });
  if (result.status === 0) return null;
  const lines = (result.stderr || '').split('\n').filter((line) => /Error|cannot open|No native build/.test(line));
  return (lines[0] || `exit status ${result.status}`).trim();
}

function onPath(tool) {
  return spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;
}

function findFile(relative, folders) {
  return folders.some((folder) => fs.existsSync(path.join(folder, relative)));
}

// What binding.gyp needs beyond node-gyp itself, as [what, present] pairs.
function buildPrerequisites() {
  const includeFolders = ['/usr/include', '/usr/local/include'];
  const libraryFolders = [
    '/usr/lib',
    '/usr/local/lib',
    '/usr/lib64',
    `/usr/lib/${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}-linux-gnu`,
  ];
  for (const name of fs.existsSync('/usr/lib') ? fs.readdirSync('/usr/lib') : []) {
    if (name.endsWith('-linux-gnu')) libraryFolders.push(path.join('/usr/lib', name));
  }
  return [
    ['a C++ compiler (c++)', onPath('c++') || onPath('g++') || onPath('clang++')],
    ['make', onPath('make')],
    ['python3 (node-gyp runs on it)', onPath('python3')],
    ['xnnpack.h', findFile('xnnpack.h', includeFolders)],
    ['pthreadpool.h', findFile('pthreadpool.h', includeFolders)],
    ['flatbuffers/flatbuffers.h', findFile('flatbuffers/flatbuffers.h', includeFolders)],
    ['libXNNPACK.so', findFile('libXNNPACK.so', libraryFolders)],
    ['libpthreadpool.so', findFile('libpthreadpool.so', libraryFolders)],
  ];
}

function nodeGypCommand() {
  // npm tells lifecycle scripts where its own node-gyp is.
  const fromNpm = process.env.npm_config_node_gyp;
  if (fromNpm && fs.existsSync(fromNpm)) return [process.execPath, fromNpm];
  try {
    return [process.execPath, require.resolve('node-gyp/bin/node-gyp.js', { paths: [packageRoot] })];
  } catch {
    return onPath('node-gyp') ? ['node-gyp'] : null;
  }
}

function main() {
  if (skipRequested()) {
    say('ETNA_SKIP_INSTALL_BUILD is set: not checking for, or building, the addon');
    return 0;
  }
  if (isDevelopmentCheckout()) return 0;

  const reason = loadError();
  if (reason === null) return 0;

  say(`no prebuilt addon loads on ${process.platform}-${process.arch} (${reason})`);
  say('building from source with node-gyp');
  const missing = buildPrerequisites()
    .filter(([, present]) => !present)
    .map(([what]) => what);
  if (missing.length > 0) {
    say(`cannot build from source, missing: ${missing.join(', ')}`);
    say(`on Debian 12 or Ubuntu 22.04 and later: ${APT_HINT}`);
    say('then run `npm rebuild etna-runtime`; docs/install.md in the package lists the supported platforms');
    return 1;
  }
  const nodeGyp = nodeGypCommand();
  if (nodeGyp === null) {
    say('node-gyp not found: install it (npm i -g node-gyp) and run `npm rebuild etna-runtime`');
    return 1;
  }
  const [command, ...prefix] = nodeGyp;
  const build = spawnSync(command, [...prefix, 'rebuild'], { cwd: packageRoot, stdio: 'inherit' });
  if (build.status !== 0) {
    say(`node-gyp rebuild failed (exit status ${build.status ?? build.signal}); needed packages: ${APT_HINT}`);
    return 1;
  }
  const afterBuild = loadError();
  if (afterBuild !== null) {
    say(`the addon built but does not load: ${afterBuild}`);
    return 1;
  }
  say('built the addon from source');
  return 0;
}

process.exitCode = main();
