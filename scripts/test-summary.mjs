// Counts what every suite of `npm run test:all` passed, failed and skipped,
// from the result files the suites write, and prints one line per suite and a
// closing total. Exits 1 when a suite's results are missing, when anything
// failed, or when a test was skipped that test/allowed-skips.json does not
// list with its reason.
//
//   node scripts/test-summary.mjs           summarise (the last step of test:all)
//   node scripts/test-summary.mjs --reset   delete the result files (its first step)
//   node scripts/test-summary.mjs --only vitest,native   summarise just these suites
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Each suite, the file its run leaves behind, and how to read it. */
export const SUITES = [
  { name: 'native', file: 'build-native/ctest-junit.xml', read: readJunit },
  { name: 'vitest', file: 'build/vitest-results.json', read: readVitest },
  { name: 'native-asan', file: 'build-asan/ctest-junit.xml', read: readJunit },
  { name: 'native-tsan', file: 'build-tsan/ctest-junit.xml', read: readJunit },
  { name: 'fuzz-replay', file: 'build-fuzz/replay-results.txt', read: readLines },
  { name: 'fuzz', file: 'build-fuzz/run-results.txt', read: readLines },
  { name: 'cleanroom', file: 'build/test-results/cleanroom.xml', read: readJunit },
  { name: 'debian13', file: 'build-debian13/build-native/ctest-junit.xml', read: readJunit },
  { name: 'arm64-native-max', file: 'build-arm64/native/gtest-results-max', read: readJunit },
  { name: 'arm64-native-cortex-a72', file: 'build-arm64/native/gtest-results-cortex-a72', read: readJunit },
  { name: 'arm64-vitest', file: 'build-arm64/vitest-results.json', read: readVitest },
];

/** One result: a test's name and whether it passed, failed or was skipped. */
function result(name, status) {
  return { name, status };
}

// The text of a result file, or of every .xml file in a result folder (GoogleTest writes one per program).
function readResults(file) {
  if (!fs.statSync(file).isDirectory()) return fs.readFileSync(file, 'utf8');
  const names = fs.readdirSync(file).filter((name) => name.endsWith('.xml'));
  return names.map((name) => fs.readFileSync(path.join(file, name), 'utf8')).join('\n');
}

// ctest's, GoogleTest's and node:test's JUnit files: one <testcase> per test; ctest marks
// status="fail" / "notrun", node:test nests <failure> or <skipped>.
function readJunit(text) {
  const results = [];
  const testcase = /<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g;
  for (const match of text.matchAll(testcase)) {
    const attributes = match[1];
    const body = match[3] ?? '';
    const name = /\bname="([^"]*)"/.exec(attributes)?.[1] ?? '?';
    const status = /\bstatus="([^"]*)"/.exec(attributes)?.[1];
    if (status === 'fail' || /<failure\b/.test(body) || /<error\b/.test(body)) results.push(result(name, 'failed'));
    else if (status === 'notrun' || status === 'disabled' || /<skipped\b/.test(body)) results.push(result(name, 'skipped'));
    else results.push(result(name, 'passed'));
  }
  return results;
}

function readVitest(text) {
  const report = JSON.parse(text);
  const results = [];
  for (const file of report.testResults) {
    const relative = path.relative(repoRoot, file.name);
    // A file that failed to load has no assertions: count it as one failure.
    if (file.status === 'failed' && file.assertionResults.length === 0) results.push(result(relative, 'failed'));
    for (const test of file.assertionResults) {
      const status = test.status === 'passed' ? 'passed' : test.status === 'failed' ? 'failed' : 'skipped';
      results.push(result(`${relative} > ${test.fullName}`, status));
    }
  }
  return results;
}

// "passed NAME" / "failed NAME" lines (scripts/fuzz.sh).
function readLines(text) {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [status, ...name] = line.split(' ');
      return result(name.join(' '), status === 'passed' ? 'passed' : 'failed');
    });
}

function allowedSkips() {
  const file = path.join(repoRoot, 'test/allowed-skips.json');
  const { skips } = JSON.parse(fs.readFileSync(file, 'utf8'));
  for (const skip of skips) {
    if (typeof skip.suite !== 'string' || typeof skip.test !== 'string' || typeof skip.reason !== 'string' || skip.reason.trim() === '') {
      throw new Error(`test/allowed-skips.json: every entry needs a suite, a test and a reason: ${JSON.stringify(skip)}`);
    }
  }
  return skips;
}

function main(argv) {
  if (argv.includes('--reset')) {
    for (const suite of SUITES) fs.rmSync(path.join(repoRoot, suite.file), { recursive: true, force: true });
    return 0;
  }
  const onlyIndex = argv.indexOf('--only');
  const only = onlyIndex >= 0 ? new Set(argv[onlyIndex + 1].split(',')) : undefined;
  const suites = only ? SUITES.filter((suite) => only.has(suite.name)) : SUITES;
  const allowed = allowedSkips();
  const problems = [];
  const totals = { passed: 0, failed: 0, skipped: 0 };
  for (const suite of suites) {
    const file = path.join(repoRoot, suite.file);
    if (!fs.existsSync(file)) {
      problems.push(`${suite.name}: no results at ${suite.file} (did the suite run?)`);
      continue;
    }
    const results = suite.read(readResults(file));
    const count = (status) => results.filter((entry) => entry.status === status).length;
    const counts = { passed: count('passed'), failed: count('failed'), skipped: count('skipped') };
    for (const key of Object.keys(totals)) totals[key] += counts[key];
    console.log(`${suite.name}: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
    if (results.length === 0) problems.push(`${suite.name}: ran no test`);
    for (const entry of results) {
      if (entry.status === 'failed') problems.push(`${suite.name}: failed: ${entry.name}`);
      if (entry.status === 'skipped' && !allowed.some((skip) => skip.suite === suite.name && skip.test === entry.name)) {
        problems.push(`${suite.name}: skipped, and not listed in test/allowed-skips.json: ${entry.name}`);
      }
    }
  }
  for (const problem of problems) console.error(problem);
  console.log(`total: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
  return problems.length === 0 ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = main(process.argv.slice(2));
