// The docs run as written: every fenced sh, js, mjs and ts block of README.md,
// docs/*.md and examples/*/README.md runs, in the order of its page, in a
// fresh folder per page that holds what the page's earlier blocks made. The
// folder is a project that installed the package (node_modules/etna-runtime is
// this checkout, `npx etna` and `etna` run its CLI), or, for the examples'
// READMEs, which speak of the repository, a view of the checkout (its entries
// linked into the folder, so what the blocks write stays in the folder).
//
// A block that cannot run here carries a marker on the line before its fence,
//   <!-- doc-test: skip — REASON -->
// and each page's number of markers is fixed below, so a new one is a
// conscious change. An `npm install NAME...` line in a marked block is what
// the folder then holds: NAME linked from this checkout's node_modules.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { repoRoot } from '../helpers/testdata.js';

/** The markers each page has: blocks that cannot run here, each with its reason. */
const MARKERS: Record<string, number> = {
  'README.md': 2,
  'docs/README.md': 0,
  'docs/architecture.md': 0,
  'docs/authoring.md': 2,
  'docs/benchmarks.md': 1,
  'docs/cli.md': 7,
  'docs/electron.md': 3,
  'docs/errors.md': 0,
  'docs/install.md': 6,
  'docs/kernels.md': 0,
  'docs/llm.md': 3,
  'docs/memory-planning.md': 0,
  'docs/onnx.md': 2,
  'docs/performance.md': 0,
  'docs/profiling.md': 0,
  'docs/serving.md': 1,
  'docs/serving-llms.md': 3,
  'docs/xnnpack.md': 0,
  'examples/electron/README.md': 3,
  'examples/llm-server/README.md': 0,
  'examples/server/README.md': 0,
};

/** Pages whose blocks run in a checkout of the repository rather than in a project that installed the package. */
const CHECKOUT_PAGES = new Set(['examples/electron/README.md', 'examples/llm-server/README.md', 'examples/server/README.md']);

const RUNNABLE = new Set(['sh', 'js', 'mjs', 'ts']);
/** Other names of the runnable languages: a block fenced with one of them would escape the test. */
const ALIASES = new Set(['bash', 'shell', 'zsh', 'javascript', 'typescript', 'mts', 'cjs', 'node']);
/** A block may take this long; a page's blocks together take seconds. */
const BLOCK_TIMEOUT_MS = 60_000;
/** How long a block's helper processes may outlive it. */
const LINGER_MS = 2_000;
const MARKER = /^<!-- doc-test: skip — (\S.*?) -->$/;

interface Block {
  readonly lang: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly code: string;
  /** The marker's reason, for a block that does not run. */
  readonly skip?: string;
}

interface ParsedPage {
  readonly blocks: Block[];
  /** What is wrong with the page's fences and markers, one line each. */
  readonly problems: string[];
}

/** The page's fenced blocks in runnable languages, with their markers. */
function parseBlocks(text: string): ParsedPage {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  const problems: string[] = [];
  const markerLines = new Set<number>();
  lines.forEach((line, i) => {
    if (line.includes('doc-test:')) markerLines.add(i);
  });
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/.exec(lines[i]!);
    if (open === null) continue;
    const [, indent, fence, info] = open as unknown as [string, string, string, string];
    const lang = info.toLowerCase();
    const body: string[] = [];
    let end = i + 1;
    for (; end < lines.length; end++) {
      const close = /^\s*(`{3,}|~{3,})\s*$/.exec(lines[end]!);
      if (close !== null && close[1]![0] === fence[0] && close[1]!.length >= fence.length) break;
      body.push(lines[end]!.startsWith(indent) ? lines[end]!.slice(indent.length) : lines[end]!.trimStart());
    }
    if (end === lines.length) problems.push(`line ${i + 1}: the fence is never closed`);
    if (ALIASES.has(lang)) problems.push(`line ${i + 1}: fenced as '${lang}'; write sh, js, mjs or ts so the block runs`);
    const before = i > 0 && markerLines.has(i - 1) ? lines[i - 1]!.trim() : undefined;
    if (RUNNABLE.has(lang)) {
      let skip: string | undefined;
      if (before !== undefined) {
        markerLines.delete(i - 1);
        const marker = MARKER.exec(before);
        if (marker === null) problems.push(`line ${i}: a marker is written '<!-- doc-test: skip — REASON -->', found '${before}'`);
        else skip = marker[1]!;
      }
      blocks.push({ lang, line: i + 1, code: body.join('\n') + '\n', ...(skip !== undefined && { skip }) });
    }
    i = end;
  }
  for (const line of markerLines)
    problems.push(`line ${line + 1}: a doc-test marker that is not on the line before a sh, js, mjs or ts fence`);
  return { blocks, problems };
}

/** README.md, docs/*.md and examples/*\/README.md, as paths from the repository's root. */
function pages(): string[] {
  const docs = fs
    .readdirSync(path.join(repoRoot, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`);
  const examples = fs
    .readdirSync(path.join(repoRoot, 'examples'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && fs.existsSync(path.join(repoRoot, 'examples', entry.name, 'README.md')))
    .map((entry) => `examples/${entry.name}/README.md`);
  return ['README.md', ...docs.sort(), ...examples.sort()];
}

function readPage(page: string): ParsedPage {
  return parseBlocks(fs.readFileSync(path.join(repoRoot, page), 'utf8'));
}

/** Package names that the page's `npm install` lines name (not paths, not options). */
function installedPackages(blocks: readonly Block[]): string[] {
  const names: string[] = [];
  for (const block of blocks) {
    for (const line of block.code.split('\n')) {
      const install = /^npm (?:install|i) ([^#]*)/.exec(line.trim());
      if (install === null) continue;
      for (const arg of install[1]!.trim().split(/\s+/)) if (/^(@[\w.-]+\/)?[\w.-]+$/.test(arg) && !arg.startsWith('.')) names.push(arg);
    }
  }
  return names;
}

const folders: string[] = [];
afterAll(() => {
  for (const folder of folders) fs.rmSync(folder, { recursive: true, force: true });
});

/** A fresh folder for the page: a project that installed the package, or a view of the checkout. */
function pageFolder(page: string, blocks: readonly Block[]): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-docs-'));
  folders.push(dir);
  if (CHECKOUT_PAGES.has(page)) {
    for (const entry of fs.readdirSync(repoRoot)) {
      if (entry !== '.git') fs.symlinkSync(path.join(repoRoot, entry), path.join(dir, entry));
    }
    return dir;
  }
  fs.mkdirSync(path.join(dir, 'node_modules/.bin'), { recursive: true });
  fs.symlinkSync(repoRoot, path.join(dir, 'node_modules/etna-runtime'), 'dir');
  fs.symlinkSync('../etna-runtime/dist/cli/etna.js', path.join(dir, 'node_modules/.bin/etna'));
  for (const name of installedPackages(blocks.filter((block) => block.skip !== undefined))) {
    if (name === 'etna-runtime') continue;
    const source = path.join(repoRoot, 'node_modules', name);
    if (!fs.existsSync(source)) throw new Error(`${page} installs ${name}, which this checkout's node_modules does not hold`);
    fs.mkdirSync(path.dirname(path.join(dir, 'node_modules', name)), { recursive: true });
    fs.symlinkSync(source, path.join(dir, 'node_modules', name), 'dir');
  }
  return dir;
}

function blockEnv(dir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key !== 'NODE_OPTIONS' && !key.startsWith('VITEST') && !key.startsWith('npm_')) env[key] = value;
  }
  return {
    ...env,
    // `etna` as a global install or an npm script finds it.
    PATH: `${path.join(dir, 'node_modules/.bin')}${path.delimiter}${process.env.PATH ?? ''}`,
    // npx never fetches from the registry (`etna` there is another project).
    npm_config_offline: 'true',
    npm_config_update_notifier: 'false',
    NO_COLOR: '1',
  };
}

interface BlockRun {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
  readonly timedOut: boolean;
  /** Processes the block started and left running. */
  readonly leftRunning: boolean;
}

/** Runs one block in `dir` as its language runs, in a process group of its own that is ended with it. */
function runBlock(dir: string, block: Block, index: number): Promise<BlockRun> {
  const scripts = path.join(dir, '.doc-test');
  fs.mkdirSync(scripts, { recursive: true });
  const extension = { sh: 'sh', js: 'mjs', mjs: 'mjs', ts: 'mts' }[block.lang]!;
  const file = path.join(scripts, `block-${index + 1}-line-${block.line}.${extension}`);
  fs.writeFileSync(file, block.code);
  const [command, args] =
    block.lang === 'sh'
      ? ['bash', ['-e', file]]
      : block.lang === 'ts'
        ? [path.join(repoRoot, 'node_modules/.bin/tsx'), [file]]
        : [process.execPath, [file]];
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: dir, env: blockEnv(dir), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const group = -child.pid!;
    const closed = new Promise((done) => child.on('close', done));
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      signalGroup(group, 'SIGKILL');
    }, BLOCK_TIMEOUT_MS);
    child.on('error', reject);
    child.on('exit', async (status, signal) => {
      clearTimeout(timer);
      // Helpers of the block's commands (tsx's esbuild service) end right after
      // them; what is still running after that the block started and left.
      let leftRunning = false;
      for (let waited = 0; signalGroup(group, 0); waited += 50) {
        if (waited >= LINGER_MS) {
          leftRunning = !timedOut;
          signalGroup(group, 'SIGKILL');
          break;
        }
        await new Promise((wake) => setTimeout(wake, 50));
      }
      await closed;
      resolve({ status, signal, output, timedOut, leftRunning });
    });
  });
}

/** Sends `signal` to the process group; false when no process is left in it. */
function signalGroup(group: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(group, signal);
    return true;
  } catch {
    return false;
  }
}

describe('the fences of the docs', () => {
  it('are parsed with their markers, and a stray or malformed marker is named', () => {
    const page = [
      'text',
      '<!-- doc-test: skip — needs the network -->',
      '```sh',
      'npm install left-pad',
      '```',
      '',
      '```js',
      "console.log('run');",
      '```',
      '  ```ts',
      '  const a: number = 1;',
      '  ```',
      '````text',
      '```sh',
      '````',
      '<!-- doc-test: skip -->',
      '```sh',
      'true',
      '```',
      '<!-- doc-test: skip — a reason -->',
      '```text',
      'output',
      '```',
      '```bash',
      'echo',
      '```',
    ].join('\n');
    const { blocks, problems } = parseBlocks(page);
    expect(blocks.map((b) => [b.lang, b.line, b.skip])).toEqual([
      ['sh', 3, 'needs the network'],
      ['js', 7, undefined],
      ['ts', 10, undefined],
      ['sh', 17, undefined],
    ]);
    expect(blocks[2]!.code).toBe('const a: number = 1;\n');
    expect(installedPackages(blocks.slice(0, 1))).toEqual(['left-pad']);
    expect(problems).toEqual([
      "line 16: a marker is written '<!-- doc-test: skip — REASON -->', found '<!-- doc-test: skip -->'",
      "line 24: fenced as 'bash'; write sh, js, mjs or ts so the block runs",
      'line 20: a doc-test marker that is not on the line before a sh, js, mjs or ts fence',
    ]);
  });

  it('are well formed on every page, and each page has the markers it is meant to have', () => {
    const found: Record<string, number> = {};
    for (const page of pages()) {
      const { blocks, problems } = readPage(page);
      expect(problems, page).toEqual([]);
      found[page] = blocks.filter((block) => block.skip !== undefined).length;
    }
    expect(found).toEqual(MARKERS);
  });

  it('are all reached from the index, docs/README.md, whose links all resolve', () => {
    const index = fs.readFileSync(path.join(repoRoot, 'docs/README.md'), 'utf8');
    const links = [...index.matchAll(/\]\(([^)\s#]+)\)/g)].map((match) => path.posix.normalize(`docs/${match[1]!}`));
    for (const link of links) expect(fs.existsSync(path.join(repoRoot, link)), link).toBe(true);
    const docs = pages().filter((page) => page.startsWith('docs/') && page !== 'docs/README.md');
    expect(docs.length).toBeGreaterThan(10);
    for (const page of docs) expect(links, `docs/README.md links to ${page}`).toContain(page);
  });
});

describe('every runnable block of the docs', () => {
  for (const page of pages()) {
    const { blocks } = readPage(page);
    const runnable = blocks.filter((block) => block.skip === undefined);
    if (runnable.length === 0) continue;
    it(`runs on ${page} (${runnable.length} blocks)`, { timeout: BLOCK_TIMEOUT_MS * runnable.length }, async () => {
      const dir = pageFolder(page, blocks);
      const times: string[] = [];
      const pageStart = performance.now();
      for (const [index, block] of blocks.entries()) {
        if (block.skip !== undefined) continue;
        const start = performance.now();
        const run = await runBlock(dir, block, index);
        times.push(`${block.line}: ${((performance.now() - start) / 1000).toFixed(1)} s`);
        const failed = run.timedOut || run.status !== 0 || run.leftRunning;
        if (failed) {
          const how = run.timedOut
            ? `did not finish within ${BLOCK_TIMEOUT_MS / 1000} s`
            : run.status !== 0
              ? `exited with ${run.status ?? run.signal}`
              : 'left processes running';
          throw new Error(`${page}:${block.line}: the ${block.lang} block ${how}\n--- block\n${block.code}--- output\n${run.output}`);
        }
      }
      const seconds = ((performance.now() - pageStart) / 1000).toFixed(1);
      console.log(
        `${page}: ${runnable.length} blocks run, ${blocks.length - runnable.length} marked, ${seconds} s (by line ${times.join(', ')})`,
      );
    });
  }
});
