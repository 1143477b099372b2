// examples/electron: its main module started under Node as Electron would
// start it, with a stand-in `electron` package that records the window and the
// IPC handler, calls the handler as the renderer would, then closes every
// window. The app's files are copied beside the model `npm run model` writes,
// with `etna-runtime` resolving to this checkout.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { EncoderDecoderReference } from '../../lib/tools/examples/encoder-decoder.js';
import { runCli } from '../helpers/cli.js';
import { repoRoot } from '../helpers/testdata.js';

const EXAMPLE = path.join(repoRoot, 'examples/electron');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-electron-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// The stand-in: what main.mjs uses of Electron's main-process API. Once the
// app has created its window, it plays the renderer (one good call, one bad
// one), prints what it saw as one JSON line, and closes the window.
const FAKE_ELECTRON = `
const handlers = new Map();
const listeners = new Map();
const windows = [];
export const ipcMain = { handle: (channel, handler) => handlers.set(channel, handler) };
export class BrowserWindow {
  constructor(options) { this.options = options; windows.push(this); }
  loadFile(file) { this.file = file; }
}
export const app = {
  whenReady: () => Promise.resolve(),
  on: (event, listener) => listeners.set(event, listener),
  quit: () => console.log(JSON.stringify({ quit: true })),
};
setTimeout(async function driveOnceTheWindowExists() {
  if (windows.length === 0) return setTimeout(driveOnceTheWindowExists, 10);
  const encodeDecode = handlers.get('etna:encode-decode');
  const input = Array.from({ length: 32 }, (_, i) => Math.sin(i));
  const result = await encodeDecode({}, input);
  const refused = await encodeDecode({}, [1, 2, 3]).then(() => 'accepted', (error) => error.message);
  console.log(JSON.stringify({ channels: [...handlers.keys()], input, result, refused, window: windows[0] }));
  await listeners.get('window-all-closed')();
}, 10);
`;

describe('examples/electron', () => {
  it('starts, answers the renderer over IPC with the model, and frees it when the window closes', () => {
    const app = path.join(dir, 'app');
    fs.mkdirSync(app);
    for (const file of fs.readdirSync(EXAMPLE)) fs.copyFileSync(path.join(EXAMPLE, file), path.join(app, file));
    const pkg = JSON.parse(fs.readFileSync(path.join(app, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
      build: { files: string[] };
    };
    // `npm run model`, with this checkout's CLI.
    const [command, ...args] = pkg.scripts.model!.split(' ');
    expect(command).toBe('etna');
    const written = runCli(args, { cwd: app });
    expect(written.status, written.stderr).toBe(0);
    expect(pkg.build.files).toContain('model.pte');

    fs.mkdirSync(path.join(app, 'node_modules/electron'), { recursive: true });
    fs.writeFileSync(
      path.join(app, 'node_modules/electron/package.json'),
      JSON.stringify({ name: 'electron', type: 'module', exports: './index.js' }),
    );
    fs.writeFileSync(path.join(app, 'node_modules/electron/index.js'), FAKE_ELECTRON);
    fs.symlinkSync(repoRoot, path.join(app, 'node_modules/etna-runtime'), 'dir');

    const run = spawnSync(process.execPath, ['main.mjs'], { cwd: app, encoding: 'utf8', timeout: 60_000 });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const [report, quit] = run.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(quit).toEqual({ quit: true });
    expect(report.channels).toEqual(['etna:encode-decode']);
    expect(report.refused).toMatch(/expected 32 finite numbers/);
    expect(report.window.file).toBe(path.join(fs.realpathSync(app), 'index.html'));
    expect(report.window.options.webPreferences).toMatchObject({ contextIsolation: true, sandbox: true, nodeIntegration: false });
    expect(fs.existsSync(report.window.options.webPreferences.preload)).toBe(true);

    const reference = new EncoderDecoderReference();
    const code = reference.encode(Float32Array.from(report.input));
    const reconstruction = reference.decode(code);
    expect(report.result.code).toHaveLength(code.length);
    report.result.code.forEach((v: number, i: number) => expect(v).toBeCloseTo(code[i]!, 5));
    expect(report.result.reconstruction).toHaveLength(32);
    report.result.reconstruction.forEach((v: number, i: number) => expect(v).toBeCloseTo(reconstruction[i]!, 5));
    expect(report.result.milliseconds).toBeGreaterThan(0);
  });
});
