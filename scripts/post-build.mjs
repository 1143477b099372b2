// Makes the compiled CLI executable (tsc keeps the shebang but not the mode).
import fs from 'node:fs';

fs.chmodSync(new URL('../dist/cli/etna.js', import.meta.url), 0o755);
