#!/usr/bin/env node
// Stands in for node-gyp when prebuildify builds the addon: prebuildify calls
// `<shim> rebuild --target=V --devdir=D --arch=A --release` in its working
// folder and then takes the first .node file from build/Release there. The
// addon builds with CMake, so this runs cmake-js with the same meaning.
//
// --target is ignored on purpose: the addon uses only Node-API, so one build
// against the running Node's headers serves every Node version from 20 on,
// and no headers have to be downloaded.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const packageRoot = path.resolve(__dirname, '..');
const args = process.argv.slice(2);
if (args[0] !== 'rebuild') {
  console.error(`prebuild-cmake-shim: expected 'rebuild', got '${args.join(' ')}'`);
  process.exit(2);
}
const release = !args.includes('--debug');
const archArgument = args.find((arg) => arg.startsWith('--arch='));
const arch = archArgument ? archArgument.slice('--arch='.length) : process.arch;
if (arch !== process.arch) {
  console.error(`prebuild-cmake-shim: cross builds are not supported (asked for ${arch} on ${process.arch})`);
  process.exit(2);
}

const cmakeJs = path.join(path.dirname(require.resolve('cmake-js/package.json', { paths: [packageRoot] })), 'bin', 'cmake-js');
const outputFolder = path.join(process.cwd(), 'build');
const cmakeArgs = [
  cmakeJs,
  // 'build', not 'rebuild': the folder is ours alone, so an incremental build is safe.
  'build',
  '--directory',
  packageRoot,
  '--out',
  outputFolder,
  '--parallel',
  String(Number(process.env.ETNA_BUILD_JOBS ?? 2)),
  '--config',
  release ? 'Release' : 'Debug',
  // The bundled libXNNPACK.so.0 and friends sit beside the addon: look there first.
  '--CDCMAKE_BUILD_RPATH=$ORIGIN',
];
// Use the running Node's own headers when it ships them (Debian's and most
// distributions' packages do) rather than downloading a header tarball.
const env = { ...process.env };
const nodePrefix = path.resolve(path.dirname(process.execPath), '..');
if (!env.npm_config_nodedir && fs.existsSync(path.join(nodePrefix, 'include', 'node', 'node_api.h'))) {
  env.npm_config_nodedir = nodePrefix;
}
const result = spawnSync(process.execPath, cmakeArgs, { stdio: 'inherit', cwd: packageRoot, env });
process.exit(result.status ?? 1);
