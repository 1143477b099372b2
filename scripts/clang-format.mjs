// Formats or checks the C++ sources with clang-format and the repository's
// .clang-format: every tracked .cpp/.cc/.h file except the flatc-generated
// headers (native/**/generated/).
//
//   node scripts/clang-format.mjs --check   report unformatted files, exit 1 if any (npm run lint)
//   node scripts/clang-format.mjs --write   reformat them in place (npm run format)
//   node scripts/clang-format.mjs --list    print the files
//
// $CLANG_FORMAT names another binary (e.g. clang-format-14). The layout is
// Debian 12's clang-format 14 (scripts/setup.sh installs it); other major
// versions break some lines differently.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const EXPECTED_MAJOR = 14;

function cppFiles() {
  const listed = spawnSync('git', ['ls-files', '-z', '--', '*.cpp', '*.cc', '*.h', '*.hpp'], { cwd: repoRoot, encoding: 'utf8' });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr || listed.error?.message}`);
  return listed.stdout
    .split('\0')
    .filter((file) => file !== '' && !file.split('/').includes('generated'))
    .sort();
}

function main(argv) {
  const mode = argv[0];
  if (!['--check', '--write', '--list'].includes(mode) || argv.length !== 1) {
    console.error('usage: node scripts/clang-format.mjs --check | --write | --list');
    return 2;
  }
  const files = cppFiles();
  if (mode === '--list') {
    for (const file of files) console.log(file);
    return 0;
  }
  const binary = process.env.CLANG_FORMAT || 'clang-format';
  const version = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  if (version.error || version.status !== 0) {
    console.error(
      `${binary} not found: install it with 'apt-get install clang-format' (scripts/setup.sh does), or name it in $CLANG_FORMAT`,
    );
    return 1;
  }
  const major = Number(/version (\d+)\./.exec(version.stdout)?.[1]);
  if (major !== EXPECTED_MAJOR) {
    console.warn(`note: ${version.stdout.trim()}; the checked-in layout is clang-format ${EXPECTED_MAJOR}'s, another version may differ`);
  }
  const args = mode === '--write' ? ['-i'] : ['--dry-run', '--Werror'];
  let failed = false;
  // In batches, to stay well under the command line's length limit.
  for (let start = 0; start < files.length; start += 100) {
    const run = spawnSync(binary, [...args, '--', ...files.slice(start, start + 100)], { cwd: repoRoot, stdio: 'inherit' });
    if (run.status !== 0) failed = true;
  }
  if (failed && mode === '--check') console.error("C++ files are not formatted: run 'npm run format'");
  return failed ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
