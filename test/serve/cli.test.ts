// `etna serve` as a command: its usage, its refusals in one line, the line
// that says where it listens, and SIGTERM, which drains it and exits 0.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { runCli } from '../helpers/cli.js';
import { modelPath, startServe, TOKENIZER, workDir } from './helpers.js';

describe('etna serve', () => {
  it('prints its usage, one line per option', () => {
    const help = runCli(['serve', '--help']);
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^usage: etna serve MODEL\.pte --tokenizer FILE \[options\]/);
    for (const option of ['--port', '--sessions', '--max-queue', '--prefix-cache-mib', '--prefix-block', '--state-store', '--state-ttl']) {
      expect(help.stdout).toContain(`  ${option} `);
    }
    expect(runCli(['--help']).stdout).toMatch(
      /^ {2}serve MODEL\.pte --tokenizer FILE +serve an LLM program over an OpenAI-compatible HTTP API$/m,
    );
  });

  it('refuses bad settings in one line, exit 1', () => {
    const file = path.join(workDir, 'not-a-folder');
    fs.writeFileSync(file, 'x');
    const cases: [string[], RegExp][] = [
      [[], /^etna serve: INVALID_INPUT: --tokenizer FILE is required/],
      [['--tokenizer', TOKENIZER, '--port', '70000'], /^etna serve: INVALID_INPUT: --port takes an integer from 0 to 65535, got '70000'/],
      [['--tokenizer', TOKENIZER, '--sessions', '0'], /^etna serve: INVALID_INPUT: --sessions takes an integer >= 1, got '0'/],
      [
        ['--tokenizer', TOKENIZER, '--state-store', path.join(file, 'states')],
        /^etna serve: INVALID_INPUT: state store: cannot use the folder /,
      ],
      [['--tokenizer', TOKENIZER, '--state-store', 'redis://'], /^etna serve: INVALID_INPUT: state store: 'redis:\/\/' names no host/],
    ];
    for (const [args, message] of cases) {
      const result = runCli(['serve', modelPath(), ...args]);
      expect(result.status, result.stderr).toBe(1);
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(result.stderr).toMatch(message);
    }
  });

  it('says where it listens, and stops on SIGTERM with exit 0', async () => {
    const server = await startServe(['--model-name', 'stories', '--sessions', '3']);
    expect(server.stdout()).toMatch(
      /^listening on http:\/\/127\.0\.0\.1:\d+ \(model 'stories': forward layout, vocabulary 32000, context 256; 3 sessions, queue limit 16; prefix cache 256 MiB; state store none\)\n$/,
    );
    const models = await (await fetch(`${server.url}/v1/models`)).json();
    expect(models.data.map((model: { id: string }) => model.id)).toEqual(['stories']);
    server.child.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.stdout()).toMatch(/\nSIGTERM: finishing running generations \(cutting them after 10000 ms\), then stopping\nstopped\n$/);
    expect(server.stderr()).toBe('');
  });
});
