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

  it("takes the sampling controls: a logit bias steers greedy decoding, --logprobs prints each token's on stderr", () => {
    const model = path.join(dir, 'bigram-controls.pte');
    fs.writeFileSync(model, bigramProgram({ chain: chainOf('aé🌍z') }));
    const base = ['generate', model, '--tokenizer', tokenizer, '--prompt', 'a', '--temperature', '0', '--max-new-tokens', '3'];
    const result = runCli([...base, '--logit-bias', '122=100', '--logit-bias', '195=-5', '--logprobs', '2', '--presence-penalty', '0.5']);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe('zzz\n');
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(4);
    const entry = '(\\d+) (".*?") (-?\\d+\\.\\d{4})';
    const line = new RegExp(`^logprob: ${entry} \\| top: ${entry}, ${entry}$`);
    for (const text of lines.slice(0, 3)) expect(text).toMatch(line);
    expect(`${lines[3]}\n`).toMatch(STATS);
    // After 'a' the model puts 10 on the first byte of 'é' and 0 elsewhere: the log-probabilities are the model's, bias aside.
    const [, id, text, logprob, topId, , topLogprob] = line.exec(lines[0]!)!;
    expect([id, text, topId]).toEqual(['122', '"z"', '195']);
    expect(Number(logprob)).toBeCloseTo(-Math.log(Math.exp(10) + 255), 4);
    expect(Number(topLogprob)).toBeCloseTo(10 - Math.log(Math.exp(10) + 255), 4);
  });

  it('refuses sampling control values outside their rules, in one line', () => {
    const base = ['generate', path.join(dir, 'absent.pte'), '--tokenizer', tokenizer, '--prompt', 'a'];
    const cases: [string[], RegExp][] = [
      [['--logit-bias', '5'], /--logit-bias takes ID=VALUE, a token id and a number in \[-100, 100\], got '5'/],
      [['--logit-bias', '5=200'], /--logit-bias takes ID=VALUE.*got '5=200'/],
      [['--logit-bias', 'x=1'], /--logit-bias takes ID=VALUE.*got 'x=1'/],
      [['--logit-bias', '5='], /--logit-bias takes ID=VALUE.*got '5='/],
      [['--frequency-penalty', '3'], /--frequency-penalty takes a number in \[-2, 2\], got '3'/],
      [['--presence-penalty', '-2.5'], /--presence-penalty takes a number in \[-2, 2\], got '-2.5'/],
      [['--repetition-penalty', '0'], /--repetition-penalty takes a number > 0, got '0'/],
      [['--penalty-last-n', '-2'], /--penalty-last-n takes an integer >= -1, got '-2'/],
      [['--min-p', '-0.1'], /--min-p takes a number in \[0, 1\], got '-0.1'/],
      [['--logprobs', '21'], /--logprobs takes an integer from 0 to 20, got '21'/],
    ];
    for (const [args, message] of cases) {
      const result = runCli([...base, ...args]);
      expect(result.status, result.stderr).toBe(1);
      expect(result.stderr).toMatch(/^etna generate: INVALID_INPUT: /);
      expect(result.stderr).toMatch(message);
    }
    const model = path.join(dir, 'bigram-vocab.pte');
    fs.writeFileSync(model, bigramProgram({ chain: chainOf('ab') }));
    const outside = runCli(['generate', model, '--tokenizer', tokenizer, '--prompt', 'a', '--logit-bias', '300=1']);
    expect(outside.status).toBe(1);
    expect(outside.stderr).toMatch(
      /INVALID_INPUT: generate: logitBias must be keyed by token ids in the model's vocabulary 0..255, got token 300/,
    );
  });
});
