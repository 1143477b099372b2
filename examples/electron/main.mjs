// Main process: owns the model. The renderer only sends numbers and gets
// numbers back over IPC, through the one function preload.cjs exposes.
import { app, BrowserWindow, ipcMain } from 'electron';
import { Module, Tensor } from 'etna-runtime';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

// The app ships its .pte file beside this one. Here it is etna's small
// tied-weight autoencoder, written by `npm run model` (which `npm start` and
// `npm run dist` run first): `etna export-example encoder-decoder model.pte`.
const modelPromise = Module.load(path.join(here, 'model.pte'), { numThreads: 2 });

ipcMain.handle('etna:encode-decode', async (_event, values) => {
  if (!Array.isArray(values) || values.length !== 32 || !values.every(Number.isFinite)) {
    throw new Error('expected 32 finite numbers');
  }
  const model = await modelPromise;
  const started = performance.now();
  const [code] = await model.execute('encode', [Tensor.float32([1, 32], values)]);
  const [reconstruction] = await model.execute('decode', [code]);
  // Plain arrays cross IPC; the output tensors live in ordinary V8 buffers.
  return {
    code: code.toArray(),
    reconstruction: reconstruction.toArray(),
    milliseconds: performance.now() - started,
  };
});

function createWindow() {
  const window = new BrowserWindow({
    width: 720,
    height: 480,
    webPreferences: {
      preload: path.join(here, 'preload.cjs'),
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
    },
  });
  window.loadFile(path.join(here, 'index.html'));
}

app.whenReady().then(async () => {
  await modelPromise; // fail early, with the loader's message, if the addon cannot load
  createWindow();
});

app.on('window-all-closed', async () => {
  await (await modelPromise).dispose();
  app.quit();
});
