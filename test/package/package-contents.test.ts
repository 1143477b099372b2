// What `npm publish` would ship, and what each entry point exports. A new file
// pattern, a stray export or a tool leaking into an entry point fails here.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

const repoRoot = path.resolve(import.meta.dirname, '../..');
const packageJson = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
  files: string[];
  exports: Record<string, string | { types: string; default: string }>;
};

let shipped: Set<string>;

beforeAll(() => {
  expect(fs.existsSync(path.join(repoRoot, 'dist/index.js')), 'dist/ is missing: run npm run build:ts first').toBe(true);
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repoRoot, encoding: 'utf8' });
  const [pack] = JSON.parse(out) as [{ files: { path: string }[] }];
  shipped = new Set(pack.files.map((file) => file.path));
}, 120_000);

describe('npm pack', () => {
  it('ships every entry point with its types, and the CLI', () => {
    for (const target of Object.values(packageJson.exports)) {
      const files = typeof target === 'string' ? [target] : [target.types, target.default];
      for (const file of files) expect(shipped, file).toContain(path.posix.normalize(file));
    }
    expect(shipped).toContain('dist/cli/etna.js');
  });

  it('ships the native sources, binding.gyp, the install script and the listed docs', () => {
    expect(shipped).toContain('binding.gyp');
    expect(shipped).toContain('native/sources.json');
    expect(shipped).toContain('scripts/install.cjs');
    const sources = JSON.parse(fs.readFileSync(path.join(repoRoot, 'native/sources.json'), 'utf8')) as unknown;
    const listed = (JSON.stringify(sources).match(/native\/[\w/.-]+\.(?:cpp|cc|c)/g) ?? []).filter(
      (file) => !file.startsWith('native/test/'),
    );
    expect(listed.length).toBeGreaterThan(10);
    for (const source of listed) expect(shipped, source).toContain(source);
    for (const header of ['native/core/module.h', 'native/core/program.h', 'native/backends/xnnpack/node_types.h']) {
      expect(shipped).toContain(header);
    }
    const docs = fs.readdirSync(path.join(repoRoot, 'docs')).filter((name) => name.endsWith('.md'));
    expect(docs.length).toBeGreaterThan(0);
    for (const doc of docs) expect(shipped, doc).toContain(`docs/${doc}`);
  });

  it('ships what every relative link in README.md points at', () => {
    const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
    const targets = [...readme.matchAll(/\]\(([^)\s]+)\)/g)]
      .map((match) => match[1]!)
      .filter((target) => !/^[a-z]+:/i.test(target) && !target.startsWith('#'))
      .map((target) => path.posix.normalize(target.replace(/#.*$/, '')));
    expect(targets.length).toBeGreaterThan(5);
    for (const target of targets) {
      const found = target.endsWith('/') ? [...shipped].some((file) => file.startsWith(target)) : shipped.has(target);
      expect(found, `README.md links to ${target}, which the package does not ship`).toBe(true);
    }
    expect(shipped).toContain('README.md');
  });

  it('ships every file the shipped examples import', () => {
    const examples = [...shipped].filter((file) => file.startsWith('examples/') && file.endsWith('.mjs'));
    expect(examples).toContain('examples/llm-server/server.mjs');
    for (const example of examples) {
      const source = fs.readFileSync(path.join(repoRoot, example), 'utf8');
      for (const [, target] of source.matchAll(/^import .* from '(\.{1,2}\/[^']+)';$/gm)) {
        const imported = path.posix.join(path.posix.dirname(example), target!);
        expect(shipped, `${example} imports ${target}`).toContain(imported);
      }
    }
  });

  it('includes prebuilds/ by rule, so binaries placed there by prebuildify ship', () => {
    expect(packageJson.files).toContain('prebuilds/');
    const prebuilds = path.join(repoRoot, 'prebuilds');
    if (fs.existsSync(prebuilds)) {
      const local = fs.readdirSync(prebuilds, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
      for (const entry of local) {
        const file = path.relative(repoRoot, path.join(entry.parentPath, entry.name)).split(path.sep).join('/');
        expect(shipped, file).toContain(file);
      }
    }
  });

  it('ships no tests, sources outside dist, logs, source maps or build folders', () => {
    const unwanted = [...shipped].filter(
      (file) =>
        /(^|\/)test\//.test(file) ||
        /\.test\.[cm]?[jt]s$/.test(file) ||
        file.startsWith('lib/') ||
        file.startsWith('bench/') ||
        file.startsWith('build/') ||
        file.startsWith('node_modules/') ||
        file.endsWith('.log') ||
        file.endsWith('.map') ||
        (file.endsWith('.ts') && !file.endsWith('.d.ts')),
    );
    expect(unwanted).toEqual([]);
  });
});

// The runtime names each entry point exports (types are checked by test/typings).
const ENTRY_EXPORTS: Record<string, string[]> = {
  'dist/index.js': [
    'EtnaError',
    'MAX_NUM_THREADS',
    'Module',
    'Program',
    'Tensor',
    'elementSize',
    'summarizeProfile',
    'toChromeTrace',
    'toTensor',
  ],
  'dist/export/index.js': [
    'ACTIVATION_MEMORY_ID',
    'ConstantTensor',
    'DEFAULT_CONSTANT_ALIGNMENT',
    'DEFAULT_PLANNING_ALIGNMENT',
    'DEFAULT_SEGMENT_ALIGNMENT',
    'DTYPES',
    'EXTENDED_HEADER_LENGTH',
    'EXTENDED_HEADER_MAGIC',
    'INVALID_VALUE_ID',
    'MAX_RANK',
    'MethodBuilder',
    'MethodGraph',
    'PTE_FILE_IDENTIFIER',
    'ProgramBuilder',
    'ProgramGraph',
    'SCALAR_TYPE_BYTES',
    'SCHEMA_FORCE_ALIGN',
    'SHARED_MEMORY_ID',
    'SharedBuffer',
    'TensorValue',
    'XNNPACK_ARENA_PADDING',
    'XNNPACK_BACKEND_ID',
    'XNNPACK_CONSTANT_ALIGNMENT',
    'advancedIndexShape',
    'alignUp',
    'assembleProgram',
    'bmmShape',
    'broadcastShapes',
    'broadcastsTo',
    'buildXnnFlatbuffer',
    'catShape',
    'checkShape',
    'constantKey',
    'conv2dShape',
    'createLoweringContext',
    'dtypeInfo',
    'encodeTensorData',
    'expandShape',
    'formatMemoryReport',
    'formatShape',
    'isDType',
    'layerNormShapes',
    'lifetimesOverlap',
    'lowerMethodToXnnpack',
    'memoryReport',
    'mmShape',
    'normalizeDim',
    'numel',
    'permuteShape',
    'planArena',
    'planMethod',
    'planProgram',
    'planSharedBuffers',
    'runLoweringPasses',
    'sameShape',
    'selectShape',
    'serializePte',
    'serializeXnnPayload',
    'sliceShape',
    'tensorLifetimes',
    'transposeShape',
    'unsqueezeShape',
    'validateMethodGraph',
    'validatePteProgram',
    'viewShape',
    'writePte',
    'xnnpackLowering',
  ],
  'dist/llm/index.js': [
    'CHAT_TEMPLATE_OPTIONS',
    'ChatSession',
    'DEFAULT_PENALTY_LAST_N',
    'GENERATE_NUMBER_RULES',
    'Generation',
    'LOGIT_BIAS_RULE',
    'Llm',
    'LlmSession',
    'METADATA_METHODS',
    'Sampler',
    'TextStream',
    'applyChatTemplate',
    'argmax',
    'describeNumberRule',
    'loadTokenizer',
    'logitBiasFault',
    'numberFault',
    'stopFault',
    'stopTokensFault',
  ],
  'dist/serve/index.js': [
    'CONVERSATION_HEADER',
    'DirectoryStateStore',
    'LlmServer',
    'Pool',
    'PoolBusyError',
    'PoolClosedError',
    'RedisStateStore',
    'createServer',
    'openStateStore',
  ],
  'dist/onnx/index.js': [
    'MIN_ONNX_OPSET',
    'boundConstant',
    'constFromProto',
    'decodeModel',
    'decodeTensor',
    'dtypeFromOnnx',
    'importOnnx',
    'importOnnxGraph',
    'readOnnxModel',
  ],
};

// Tools the CLI and tests use; none of their names may reach an entry point.
const TOOLS = [
  'dist/tools/bench/harness.js',
  'dist/tools/bench/report.js',
  'dist/tools/bench/runner.js',
  'dist/tools/bench/silero.js',
  'dist/tools/examples/index.js',
  'dist/tools/onnx-emitter/index.js',
  'dist/tools/memory-tables.js',
];

async function exportsOf(file: string): Promise<string[]> {
  const module = (await import(pathToFileURL(path.join(repoRoot, file)).href)) as Record<string, unknown>;
  return Object.keys(module).sort();
}

describe('entry point exports', () => {
  for (const [file, expected] of Object.entries(ENTRY_EXPORTS)) {
    it(`${file} exports exactly its users' API`, async () => {
      expect(await exportsOf(file)).toEqual([...expected].sort());
    });
  }

  it('no name is exported by two entry points', async () => {
    const seen = new Map<string, string>();
    for (const file of Object.keys(ENTRY_EXPORTS)) {
      for (const name of await exportsOf(file)) {
        expect(seen.get(name), `${name} is exported by ${seen.get(name)} and ${file}`).toBeUndefined();
        seen.set(name, file);
      }
    }
  });

  it('no tool is reachable from an entry point', async () => {
    const entryNames = new Set<string>();
    for (const file of Object.keys(ENTRY_EXPORTS)) for (const name of await exportsOf(file)) entryNames.add(name);
    for (const tool of TOOLS) {
      const leaked = (await exportsOf(tool)).filter((name) => entryNames.has(name));
      expect(leaked, tool).toEqual([]);
    }
  });
});
