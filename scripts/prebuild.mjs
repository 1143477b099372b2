#!/usr/bin/env node
// npm run build:prebuild: builds prebuilds/<platform>-<arch>/etna.<libc>.node with
// prebuildify (through scripts/prebuild-cmake-shim.cjs, as prebuildify only
// knows node-gyp) and puts the shared libraries it needs beyond glibc and
// libstdc++ beside it, so installing the package needs no compiler and no
// libxnnpack on the target machine.
//
// `--arch arm64` on an x86-64 machine makes prebuilds/linux-arm64/ instead,
// from the cross build (scripts/build-arm64.sh, which runs first) and the
// arm64 libraries it unpacked: the same files, stripped and given RUNPATH
// $ORIGIN as prebuildify and its build would.
//
// Every bundled library gets RUNPATH $ORIGIN: Debian builds libXNNPACK.so.0
// without one, and it must find the bundled libcpuinfo.so.0 and
// libpthreadpool.so.0, not whatever the system has (or fail without them).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stageFolder = path.join(packageRoot, 'build-prebuild', 'stage');
const shim = path.join(packageRoot, 'scripts', 'prebuild-cmake-shim.cjs');

// What the addon links beyond the C and C++ runtimes; order is irrelevant.
export const BUNDLED_LIBRARIES = ['libXNNPACK.so.0', 'libpthreadpool.so.0', 'libcpuinfo.so.0'];
// prebuildify's name for a Node-API addon built with --name etna --tag-libc.
const ADDON_FILE = 'etna.glibc.node';
const SYSTEM_LIBRARY_FOLDERS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib'];

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: 'inherit', ...options });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.status}`);
  return result;
}

function output(command, args) {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.status}: ${result.stderr}`);
  return result.stdout;
}

function requireTool(tool, debianPackage) {
  if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) {
    throw new Error(`'${tool}' is missing: apt-get install ${debianPackage}`);
  }
}

function findLibrary(name, folders) {
  for (const folder of folders) {
    const candidate = path.join(folder, name);
    if (fs.existsSync(candidate)) return fs.realpathSync(candidate);
  }
  throw new Error(`${name} not found in ${folders.join(', ')}: apt-get install libxnnpack-dev libpthreadpool-dev`);
}

const crossBuild = path.join(packageRoot, 'build-arm64');

/**
 * How to make the addon for `arch`, and where its libraries come from: this
 * machine's own build and libraries, or the arm64 cross build and its sysroot.
 */
function targetFor(arch) {
  if (arch === process.arch) {
    return { arch, strip: 'strip', libraryFolders: SYSTEM_LIBRARY_FOLDERS, build: buildWithPrebuildify };
  }
  if (arch === 'arm64' && process.arch === 'x64') {
    return {
      arch,
      strip: 'aarch64-linux-gnu-strip',
      libraryFolders: [path.join(crossBuild, 'sysroot/usr/lib/aarch64-linux-gnu')],
      build: copyCrossBuild,
    };
  }
  throw new Error(`no prebuild for ${arch} can be made on ${process.arch}`);
}

function buildWithPrebuildify(outRoot) {
  // prebuildify takes its build from <cwd>/build/Release; a stage folder of our
  // own keeps it away from build/, which the development build uses.
  fs.mkdirSync(stageFolder, { recursive: true });
  const prebuildifyBin = path.join(path.dirname(require.resolve('prebuildify/package.json')), 'bin.js');
  run(
    process.execPath,
    [prebuildifyBin, '--napi', '--strip', '--tag-libc', '--name', 'etna', '--node-gyp', shim, '--cwd', stageFolder, '--out', outRoot],
    { cwd: packageRoot },
  );
}

function copyCrossBuild(outRoot, target) {
  run('bash', [path.join(packageRoot, 'scripts/build-arm64.sh')]);
  const addon = path.join(outRoot, 'prebuilds', `linux-${target.arch}`, ADDON_FILE);
  fs.mkdirSync(path.dirname(addon), { recursive: true });
  fs.copyFileSync(path.join(crossBuild, 'Release/etna.node'), addon);
  run(target.strip, ['--strip-all', addon]);
  run('patchelf', ['--set-rpath', '$ORIGIN', addon]);
}

function runpathOf(file) {
  const match = /\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]*)\]/.exec(output('readelf', ['-d', file]));
  return match ? match[1] : '';
}

/** Writes the prebuild into `<outRoot>/prebuilds/linux-<arch>/` (the checkout itself by default; `--out DIR`). */
function main(outRoot, arch) {
  if (process.platform !== 'linux') throw new Error('prebuilds are made on Linux only');
  const target = targetFor(arch);
  const prebuildFolder = path.join(outRoot, 'prebuilds', `${process.platform}-${target.arch}`);
  requireTool('patchelf', 'patchelf');
  requireTool('readelf', 'binutils');
  requireTool(target.strip, target.arch === process.arch ? 'binutils' : 'binutils-aarch64-linux-gnu');

  fs.rmSync(prebuildFolder, { recursive: true, force: true });
  target.build(outRoot, target);

  const addons = fs.readdirSync(prebuildFolder).filter((name) => name.endsWith('.node'));
  if (addons.length !== 1) throw new Error(`expected one addon in ${prebuildFolder}, found: ${addons.join(', ') || 'none'}`);
  const addon = path.join(prebuildFolder, addons[0]);
  if (runpathOf(addon) !== '$ORIGIN') throw new Error(`${addon} has RUNPATH '${runpathOf(addon)}', expected '$ORIGIN'`);

  for (const name of BUNDLED_LIBRARIES) {
    const destination = path.join(prebuildFolder, name);
    fs.copyFileSync(findLibrary(name, target.libraryFolders), destination);
    fs.chmodSync(destination, 0o755);
    // After the copy, never strip again: strip may break a file patchelf grew.
    run('patchelf', ['--set-rpath', '$ORIGIN', destination]);
    if (runpathOf(destination) !== '$ORIGIN') throw new Error(`patchelf left ${destination} without RUNPATH $ORIGIN`);
  }

  for (const name of fs.readdirSync(prebuildFolder).sort()) {
    const size = fs.statSync(path.join(prebuildFolder, name)).size;
    console.log(`prebuild: ${path.relative(outRoot, path.join(prebuildFolder, name))} ${(size / 1024).toFixed(0)} KiB`);
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  try {
    const option = (name) => {
      const at = process.argv.indexOf(name);
      return at === -1 ? undefined : (process.argv[at + 1] ?? '');
    };
    const out = option('--out');
    main(out === undefined ? packageRoot : path.resolve(out), option('--arch') ?? process.arch);
  } catch (error) {
    console.error(`prebuild failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
