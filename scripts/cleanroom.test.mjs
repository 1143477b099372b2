// Clean-room install test (npm run test:cleanroom; needs root).
//
// Builds the prebuilds for linux-x64 and linux-arm64, packs the package, and
// installs the tarball with npm, offline, in a minimal Debian root per
// architecture that has Node.js and npm but no compiler and none of the
// libraries the addon links (scripts/cleanroom.sh; the arm64 room runs under
// QEMU). Then the installed package must work there: the CLI, the demo, the
// public API, an XNNPACK program. A last check hides the system's copies of
// those libraries in a mount namespace on this machine and loads the prebuild
// from the repository.
//
// The dependencies come from an npm cache filled beforehand (`npm cache add`),
// which is what `npm install --offline` reads: the same install a user runs,
// without the network inside the room.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cleanroomScript = path.join(repoRoot, 'scripts', 'cleanroom.sh');
const cacheDir = process.env.ETNA_CLEANROOM_CACHE ?? '/var/tmp/etna-cleanroom';
const testdataDir = process.env.ETNA_TESTDATA ?? path.resolve(repoRoot, 'test/fixtures/pte');
const packageJson = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));

const BUNDLED_LIBRARIES = ['libXNNPACK.so.0', 'libpthreadpool.so.0', 'libcpuinfo.so.0'];
const XNNPACK_PROGRAM = 'npr_add_xnnpack.pte';
const PROGRAMS = [XNNPACK_PROGRAM, 'djl_conv_xnnpack.pte', 'et_add.pte'];
const ADD_INPUTS = [
  { dtype: 'float32', shape: [3], data: [1, 2, 3] },
  { dtype: 'float32', shape: [3], data: [10, 20, 30] },
];
const addonName = 'etna.glibc.node';
/** What each architecture's room calls its system library folder and dynamic loader; the package carries a prebuild for each. */
const ARCHES = {
  x64: { systemLibraryDir: '/usr/lib/x86_64-linux-gnu', dynamicLoader: '/lib64/ld-linux-x86-64.so.2' },
  arm64: { systemLibraryDir: '/usr/lib/aarch64-linux-gnu', dynamicLoader: '/lib/ld-linux-aarch64.so.1' },
};
const prebuildDir = (arch) => `prebuilds/linux-${arch}`;
// Inside a room.
const appDir = '/root/app';
const installedPackage = `${appDir}/node_modules/etna-runtime`;
// The installed CLI, run directly: npx starts npm first, which takes most of a minute under QEMU. `etna demo` goes through npx, as the README has it.
const etna = './node_modules/.bin/etna';

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options });
  if (result.error) throw result.error;
  return result;
}

function mustRun(command, args, options = {}) {
  const result = run(command, args, options);
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status}\n${result.stdout}\n${result.stderr}`);
  }
  return result.stdout;
}

let workDir;
let tarballPath;
let tarballEntries;
let npmCache;
let registry;

/** A room of one architecture: an overlay over its base root, where the tarball is installed. */
class Room {
  constructor(arch) {
    this.arch = arch;
    this.dir = path.join(workDir, `room-${arch}`);
    this.upperDir = path.join(this.dir, 'upper');
    this.baseDir = mustRun('bash', [cleanroomScript, 'base', arch], { stdio: ['ignore', 'pipe', 'inherit'] }).trim();
    mustRun('bash', [cleanroomScript, 'create', this.dir, arch]);
  }

  /** Runs a shell command inside the room. */
  exec(script) {
    return run('bash', [cleanroomScript, 'exec', this.dir, '/bin/bash', '-c', script]);
  }

  mustExec(script) {
    const result = this.exec(script);
    if (result.status !== 0)
      throw new Error(`in the ${this.arch} room: ${script}\nexit ${result.status}\n${result.stdout}\n${result.stderr}`);
    return result.stdout;
  }

  copyIn(source, roomPath) {
    const destination = path.join(this.upperDir, roomPath);
    fs.mkdirSync(path.dirname(destination), { recursive: true });
    fs.cpSync(source, destination, { recursive: true, verbatimSymlinks: true });
  }

  writeFile(roomPath, text) {
    const destination = path.join(this.upperDir, roomPath);
    fs.mkdirSync(path.dirname(destination), { recursive: true });
    fs.writeFileSync(destination, text);
  }

  /**
   * Node the way a user installs it: on x64 this machine's release build under
   * /usr/local, plus any shared library it needs that the room lacks; the arm64
   * room has Debian's. npm is JavaScript, copied from this machine into both.
   */
  installNode() {
    if (this.arch === process.arch) {
      this.copyIn(process.execPath, '/usr/local/bin/node');
      for (const line of mustRun('ldd', [process.execPath]).split('\n')) {
        const match = /=>\s+(\/\S+)/.exec(line);
        if (match && !fs.existsSync(path.join(this.baseDir, match[1]))) this.copyIn(match[1], match[1]);
      }
    }
    const npmDir = path.join(mustRun('npm', ['root', '-g']).trim(), 'npm');
    this.copyIn(npmDir, '/usr/local/lib/node_modules/npm');
    fs.mkdirSync(path.join(this.upperDir, 'usr/local/bin'), { recursive: true });
    fs.symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', path.join(this.upperDir, 'usr/local/bin/npm'));
    fs.symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', path.join(this.upperDir, 'usr/local/bin/npx'));
  }

  /** Installs the tarball with npm, offline; returns npm's output and the milliseconds it took. */
  install() {
    this.installNode();
    this.copyIn(npmCache, '/root/.npm');
    this.copyIn(tarballPath, '/root/etna.tgz');
    for (const program of PROGRAMS) this.copyIn(path.join(testdataDir, program), `/root/programs/${program}`);
    this.writeFile(`${appDir}/package.json`, JSON.stringify({ name: 'app', private: true, type: 'module' }, null, 2));
    const install = this.exec(
      `cd ${appDir} && start=$(date +%s%N) && npm install --offline --no-audit --no-fund --registry=${registry} /root/etna.tgz 2>&1 && echo "install-ms $(( ($(date +%s%N) - start) / 1000000 ))"`,
    );
    const output = install.stdout + install.stderr;
    assert.equal(install.status, 0, `npm install in the ${this.arch} clean room failed:\n${output}`);
    const milliseconds = Number(/install-ms (\d+)/.exec(output)?.[1]);
    console.log(`clean-room npm install --offline, linux-${this.arch}: ${(milliseconds / 1000).toFixed(1)} s`);
    return { output, milliseconds };
  }
}

/** Fills an npm cache with the package's runtime dependencies (the optional ones too: npm installs them), kept between runs. */
function fillNpmCache() {
  const folder = path.join(cacheDir, 'npm-cache');
  const runtime = { ...packageJson.dependencies, ...packageJson.optionalDependencies };
  const specs = Object.entries(runtime).map(([name, version]) => `${name}@${version}`);
  mustRun('npm', ['cache', 'add', '--prefer-offline', `--cache=${folder}`, `--registry=${registry}`, ...specs]);
  return folder;
}

before(() => {
  assert.equal(process.getuid?.(), 0, 'the clean-room test needs root');
  assert.equal(process.arch, 'x64', 'the clean-room test packs prebuilds for x64 and arm64, so it runs on x64');
  for (const program of PROGRAMS) {
    assert.ok(fs.existsSync(path.join(testdataDir, program)), `${program} not found in ${testdataDir} (set ETNA_TESTDATA)`);
  }
  assert.ok(fs.existsSync(path.join(repoRoot, 'dist/index.js')), 'dist/ is missing: run npm run build:ts first');

  mustRun('bash', [cleanroomScript, 'tools'], { stdio: ['ignore', 'inherit', 'inherit'] });
  for (const arch of Object.keys(ARCHES)) {
    mustRun(process.execPath, [path.join(repoRoot, 'scripts/prebuild.mjs'), '--arch', arch], { stdio: ['ignore', 'inherit', 'inherit'] });
  }

  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-cleanroom-'));
  const packed = JSON.parse(mustRun('npm', ['pack', '--json', '--pack-destination', workDir], { cwd: repoRoot }));
  tarballPath = path.join(workDir, packed[0].filename);
  tarballEntries = mustRun('tar', ['-tzf', tarballPath])
    .split('\n')
    .filter(Boolean)
    .map((entry) => entry.replace(/^package\//, ''));
  console.log(
    `packed ${packed[0].filename}: ${(fs.statSync(tarballPath).size / 1024 / 1024).toFixed(2)} MiB, ${packed[0].entryCount} files, ${(packed[0].unpackedSize / 1024 / 1024).toFixed(2)} MiB unpacked`,
  );
  registry = mustRun('npm', ['config', 'get', 'registry']).trim();
  npmCache = fillNpmCache();
});

after(() => {
  if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
});

describe('the packed tarball', () => {
  test('ships a prebuild with its libraries per architecture, the notices and the from-source fallback', () => {
    for (const arch of Object.keys(ARCHES)) {
      for (const file of [addonName, ...BUNDLED_LIBRARIES].map((name) => `${prebuildDir(arch)}/${name}`)) {
        assert.ok(tarballEntries.includes(file), `${file} missing from the tarball`);
      }
    }
    for (const file of [
      'THIRD_PARTY_NOTICES',
      'README.md',
      'package.json',
      'dist/index.js',
      'dist/cli/etna.js',
      'dist/cli/demo.js',
      'binding.gyp',
      'native/sources.json',
      'scripts/native-sources.cjs',
      'scripts/install.cjs',
      'schema/program.fbs',
    ]) {
      assert.ok(tarballEntries.includes(file), `${file} missing from the tarball`);
    }
    const sources = JSON.parse(fs.readFileSync(path.join(repoRoot, 'native/sources.json'), 'utf8'));
    for (const group of ['core', 'kernels', 'backends', 'addon']) {
      for (const file of sources[group])
        assert.ok(tarballEntries.includes(file), `${file} (needed by binding.gyp) missing from the tarball`);
    }
  });

  test('each prebuild is built for its architecture', () => {
    const machines = { x64: 'Advanced Micro Devices X86-64', arm64: 'AArch64' };
    for (const arch of Object.keys(ARCHES)) {
      for (const file of [addonName, ...BUNDLED_LIBRARIES]) {
        const header = execFileSync('readelf', ['-h', path.join(repoRoot, prebuildDir(arch), file)], { encoding: 'utf8' });
        assert.match(header, new RegExp(`Machine:\\s+${machines[arch]}`), `${prebuildDir(arch)}/${file}:\n${header}`);
      }
    }
  });

  test('leaves out build output, tests, benchmarks and TypeScript sources', () => {
    const unwanted = tarballEntries.filter(
      (entry) => /^(build[^/]*|test|native\/test|bench|fuzz|lib|\.ci)\//.test(entry) || entry.endsWith('.map'),
    );
    assert.deepEqual(unwanted, []);
  });
});

for (const [arch, { systemLibraryDir, dynamicLoader }] of Object.entries(ARCHES)) {
  describe(`the clean room, linux-${arch}`, () => {
    let room;
    let installed;
    before(() => {
      room = new Room(arch);
      installed = room.install();
    });

    test('has no compiler and none of the libraries the addon links', () => {
      const tools = room.mustExec('for tool in cc c++ gcc g++ clang clang++ ld make; do command -v "$tool" || true; done');
      assert.equal(tools.trim(), '', `found build tools in the room: ${tools}`);
      const libraries = room.mustExec(`ls ${systemLibraryDir} /usr/local/lib | grep -E '^lib(XNNPACK|pthreadpool|cpuinfo)' || true`);
      assert.equal(libraries.trim(), '', `found system copies in the room: ${libraries}`);
      // gcc-12-base (docs for libgcc-s1) is in every Debian root; compilers are not.
      const packages = room.mustExec(
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a dpkg-query format, not a template
        "dpkg-query -W -f='${Package}\\n' | grep -E 'xnnpack|pthreadpool|cpuinfo|^(gcc|g\\+\\+|cpp|clang|binutils)(-[0-9]+)?$' || true",
      );
      assert.equal(packages.trim(), '');
      assert.equal(room.mustExec('uname -m').trim(), arch === 'arm64' ? 'aarch64' : 'x86_64');
    });

    test('npm install used the prebuild: nothing was compiled', () => {
      assert.ok(Number.isFinite(installed.milliseconds), installed.output);
      assert.doesNotMatch(installed.output, /building from source|node-gyp rebuild/);
      assert.equal(room.mustExec(`test -e ${installedPackage}/build && echo present || echo absent`).trim(), 'absent');
      for (const dependency of Object.keys(packageJson.dependencies ?? {})) {
        room.mustExec(`test -f ${appDir}/node_modules/${dependency}/package.json`);
      }
    });

    test('the addon finds libXNNPACK, libpthreadpool and libcpuinfo in its own folder', () => {
      // ldd is not in a minimal Debian root; the dynamic loader's --list is what ldd runs.
      const addonDir = `${installedPackage}/${prebuildDir(arch)}`;
      const listing = room.mustExec(`${dynamicLoader} --list ${addonDir}/${addonName}`);
      assert.doesNotMatch(listing, /not found/);
      for (const library of BUNDLED_LIBRARIES) {
        assert.match(
          listing,
          new RegExp(`^\\s*${library.replace(/\./g, '\\.')} => ${addonDir}/${library.replace(/\./g, '\\.')} `, 'm'),
          listing,
        );
      }
    });

    test('etna inspect and etna run work on an XNNPACK program', () => {
      const inspect = room.mustExec(`cd ${appDir} && ${etna} inspect /root/programs/${XNNPACK_PROGRAM}`);
      assert.match(inspect, /method forward/);
      assert.match(inspect, /delegates\s+XnnpackBackend/);
      room.writeFile('/root/programs/add-inputs.json', JSON.stringify(ADD_INPUTS));
      const runOutput = room.mustExec(
        `cd ${appDir} && ${etna} run /root/programs/${XNNPACK_PROGRAM} --inputs /root/programs/add-inputs.json --json`,
      );
      assert.match(runOutput, /"shape":\[3\],"data":\[11,22,33\]/);
      const conv = room.mustExec(`cd ${appDir} && ${etna} run /root/programs/djl_conv_xnnpack.pte`);
      assert.match(conv, /output 0: float32\[1x8x16x16\] 2048 values/);
    });

    test('where no prebuild fits, the install step names the packages to install', () => {
      // A copy of the installed package without prebuilds/ stands for another
      // architecture or C library; the room has no compiler, so it cannot build.
      const copy = `${appDir}/node_modules/etna-without-prebuilds`;
      const result = room.exec(`cp -a ${installedPackage} ${copy} && rm -rf ${copy}/prebuilds && cd ${copy} && node scripts/install.cjs`);
      assert.equal(result.status, 1, result.stdout + result.stderr);
      assert.match(result.stderr, /no prebuilt addon loads on linux-/);
      assert.match(result.stderr, /missing: a C\+\+ compiler \(c\+\+\), make/);
      assert.match(result.stderr, /apt-get install libxnnpack-dev libpthreadpool-dev libflatbuffers-dev build-essential/);
      const skipped = room.exec(`cd ${copy} && ETNA_SKIP_INSTALL_BUILD=1 node scripts/install.cjs`);
      assert.equal(skipped.status, 0, skipped.stderr);
    });

    test('etna demo runs', () => {
      const demo = room.exec(`cd ${appDir} && npx etna demo`);
      assert.equal(demo.status, 0, demo.stdout + demo.stderr);
    });

    test('the public API runs an XNNPACK program on two threads and an exported example', () => {
      const script = `
        import { Module, Tensor } from 'etna-runtime';
        const add = await Module.load('/root/programs/${XNNPACK_PROGRAM}', { numThreads: 2 });
        const [sum] = await add.execute('forward', [Tensor.float32([3], [1, 2, 3]), Tensor.float32([3], [10, 20, 30])]);
        console.log('sum', JSON.stringify(sum.toArray()));
        await add.dispose();
        const gru = await Module.load('gru-stream.pte');
        const [output] = await gru.execute('step', [Tensor.float32([1, 16], new Array(16).fill(0.5))]);
        console.log('gru', output.dtype, JSON.stringify(output.shape), output.toArray().every(Number.isFinite));
        await gru.dispose();
      `;
      room.writeFile(`${appDir}/check.mjs`, script);
      // The example program comes from the installed CLI, as a user would make it.
      const printed = room.mustExec(`cd ${appDir} && ./node_modules/.bin/etna export-example gru-stream gru-stream.pte && node check.mjs`);
      assert.match(printed, /^sum \[11,22,33\]$/m);
      assert.match(printed, /^gru float32 \[1,8\] true$/m);
    });
  });
}

describe('on this machine, with the system libraries hidden', () => {
  test('the prebuild loads from the repository and runs an XNNPACK program', () => {
    const { systemLibraryDir } = ARCHES[process.arch];
    // Bind /dev/null over each system copy in a private mount namespace: any
    // attempt to load one fails with "file too short".
    const hide = BUNDLED_LIBRARIES.map((library) => `mount --bind /dev/null ${systemLibraryDir}/${library}`).join('; ');
    const probe = `try { process.dlopen({ exports: {} }, '${systemLibraryDir}/libXNNPACK.so.0'); } catch (error) { console.log('system copy: ' + error.message); }`;
    const program = path.join(testdataDir, XNNPACK_PROGRAM);
    const script = `
      set -euo pipefail
      ${hide}
      node -e "${probe}"
      PREBUILDS_ONLY=1 node ${path.join(repoRoot, 'dist/cli/etna.js')} run ${program} --inputs ${path.join(workDir, 'add-inputs.json')} --json
    `;
    fs.writeFileSync(path.join(workDir, 'add-inputs.json'), JSON.stringify(ADD_INPUTS));
    const result = run('unshare', ['--mount', '--propagation', 'private', '/bin/bash', '-c', script]);
    assert.equal(result.status, 0, result.stdout + result.stderr);
    // Not loadable: without the bind mount this says "did not self-register" (it is no addon).
    assert.match(result.stdout, /^system copy: .*file too short/m);
    assert.match(result.stdout, /"shape":\[3\],"data":\[11,22,33\]/);
  });

  test('every repository prebuild has RUNPATH $ORIGIN on the addon and every bundled library', () => {
    for (const arch of Object.keys(ARCHES)) {
      for (const file of [addonName, ...BUNDLED_LIBRARIES]) {
        const dynamic = execFileSync('readelf', ['-d', path.join(repoRoot, prebuildDir(arch), file)], { encoding: 'utf8' });
        assert.match(dynamic, /\(RUNPATH\)\s+Library runpath: \[\$ORIGIN\]/, `${prebuildDir(arch)}/${file}:\n${dynamic}`);
      }
    }
  });
});
