// `etna generate` end to end: text on stdout as it streams, one stats line on stderr.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { runCli } from '../helpers/cli.js';
import { bigramProgram, byteTokenizerJson, chainOf, llamaProgram } from './helpers.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-generate-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const tokenizer = path.join(dir, 'tokenizer.json');
fs.writeFileSync(tokenizer, byteTokenizerJson());

const STATS =
  /^prompt tokens: (\d+) \| generated tokens: (\d+) \| load: [\d.]+ s \| prompt eval: [\d.]+ s \([\d.]+ tok\/s\) \| first token: [\d.]+ s \| generation: [\d.]+ s \([\d.]+ tok\/s\) \| sampling: [\d.]+ s \| stop: (\w+)\n$/;

describe('etna generate', () => {
  it('streams a forward program greedily and reports its stats', () => {
    const model = path.join(dir, 'bigram.pte');
    fs.writeFileSync(model, bigramProgram({ chain: chainOf('aé🌍z') }));
    const result = runCli(['generate', model, '--tokenizer', tokenizer, '--prompt', 'a', '--temperature', '0']);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe('é🌍z\n');
    expect(result.stderr).toMatch(STATS);
    expect(STATS.exec(result.stderr)!.slice(1)).toEqual(['1', '8', 'eos']);
    const echoed = runCli([
      'generate',
      model,
      '--tokenizer',
      tokenizer,
      '--prompt',
      'a',
      '--temperature',
      '0',
      '--echo',
      '--stop',
      'z',
      '--max-new-tokens',
      '7',
    ]);
    expect(echoed.stdout).toBe('aé🌍\n');
    expect(STATS.exec(echoed.stderr)!.slice(1)).toEqual(['1', '7', 'stop']);
  });

  it('runs the prefill/decode layout with sampling options and threads, the same text for the same seed', () => {
    const model = path.join(dir, 'llama.pte');
    fs.writeFileSync(model, llamaProgram());
    const args = [
      'generate',
      model,
      '--tokenizer',
      tokenizer,
      '--prompt',
      'Once upon a time',
      '--max-new-tokens',
      '12',
      '--temperature',
      '0.9',
      '--top-k',
      '50',
      '--top-p',
      '0.95',
      '--seed',
      '7',
      '--threads',
      '2',
    ];
    const first = runCli(args);
    expect(first.status, first.stderr).toBe(0);
    expect(STATS.exec(first.stderr)!.slice(1)).toEqual(['16', '12', 'length']);
    expect(runCli(args).stdout).toBe(first.stdout);
  });
});
