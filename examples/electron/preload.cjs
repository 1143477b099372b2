// Runs in the sandboxed renderer's isolated world: exposes one narrow call.
const { contextBridge, ipcRenderer } = require('electron');

contextBridge.exposeInMainWorld('etna', {
  encodeDecode: (values) => ipcRenderer.invoke('etna:encode-decode', values),
});
