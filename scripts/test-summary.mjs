// Prints the vitest totals of the last `npm run test:js` as one closing line.
import fs from 'node:fs';

const file = new URL('../build/vitest-results.json', import.meta.url);
const results = JSON.parse(fs.readFileSync(file, 'utf8'));
const skipped = results.numPendingTests + results.numTodoTests;
console.log(`vitest: ${results.numPassedTests} passed, ${results.numFailedTests} failed${skipped ? `, ${skipped} skipped` : ''}`);
