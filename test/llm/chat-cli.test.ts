// `etna chat` driven through a pipe, and `etna generate --chat --system`: the
// tokenizer_config.json beside the tokenizer gives the template and the end
// of a turn; BOS follows the rule the API follows.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { applyChatTemplate, loadTokenizer } from '../../lib/llm/index.js';
import { runCli } from '../helpers/cli.js';
import { bigramProgram, byteTokenizerJson, bytesOf } from './helpers.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-chat-cli-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const TEMPLATE =
  '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}';
const IM_END = 257;
const [O, K, Z] = bytesOf('OKZ') as [number, number, number];

// A folder as a model ships it: tokenizer.json and tokenizer_config.json side by side.
const tokenizerFile = path.join(dir, 'tokenizer.json');
fs.writeFileSync(tokenizerFile, byteTokenizerJson({ specials: ['<|im_start|>', '<|im_end|>', '<s>'] }));
fs.writeFileSync(
  path.join(dir, 'tokenizer_config.json'),
  JSON.stringify({ chat_template: TEMPLATE, bos_token: '<s>', add_bos_token: true, eos_token: '<|im_end|>' }),
);
const model = path.join(dir, 'chat.pte');
// After a newline the model says "OK", then <|im_end|> (or, past it, Z for ever).
fs.writeFileSync(
  model,
  bigramProgram({
    vocab: 259,
    context: 200,
    chain: [
      [0x0a, O],
      [O, K],
      [K, IM_END],
      [IM_END, Z],
      [Z, Z],
    ],
    metadata: { get_max_seq_len: [200], get_max_context_len: [200] },
  }),
);
const tokenizer = loadTokenizer(tokenizerFile);
const promptTokens = (stats: string): number[] => [...stats.matchAll(/^prompt tokens: (\d+)/gm)].map((match) => Number(match[1]));

describe('etna chat', () => {
  it('reads messages from a pipe, keeps the conversation, and takes /reset and /exit', () => {
    const result = runCli(['chat', model, '--tokenizer', tokenizerFile, '--system', 'Be brief.', '--temperature', '0'], {
      input: 'hi\nagain\n/reset\nhi\n/exit\nnever read\n',
    });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe('OK\nOK\nOK\n');
    const system = { role: 'system', content: 'Be brief.' };
    const first = applyChatTemplate(tokenizer, [system, { role: 'user', content: 'hi' }]).tokens.length;
    const second = applyChatTemplate(tokenizer, [
      system,
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'OK' },
      { role: 'user', content: 'again' },
    ]).tokens.length;
    // Each turn's prompt is the conversation so far; after /reset it starts over.
    expect(promptTokens(result.stderr)).toEqual([first, second, first]);
    expect(result.stderr).toMatch(/stop: eos \| context: \d+\/200\n/);
    expect(result.stderr).toContain('(the conversation starts over)');
  });

  it('ends at the end of stdin, and fails in one line without a chat template', () => {
    expect(runCli(['chat', model, '--tokenizer', tokenizerFile, '--temperature', '0'], { input: 'hi' })).toMatchObject({
      status: 0,
      stdout: 'OK\n',
    });
    const bare = path.join(dir, 'bare.json');
    fs.writeFileSync(bare, '{}');
    const refused = runCli(['chat', model, '--tokenizer', tokenizerFile, '--tokenizer-config', bare], { input: 'hi\n' });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/^etna chat: INVALID_INPUT: chatSession: the tokenizer has no chat template/);
    const help = runCli(['chat', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: etna chat MODEL\.pte --tokenizer FILE/);
  });
});

describe('etna generate --chat and --system', () => {
  it('renders one user turn (after a system message) with the template; plain text gets the BOS the tokenizer adds', () => {
    const chat = runCli(['generate', model, '--tokenizer', tokenizerFile, '--system', 'Be brief.', '--prompt', 'hi', '--temperature', '0']);
    expect(chat.status, chat.stderr).toBe(0);
    expect(chat.stdout).toBe('OK\n');
    const rendered = applyChatTemplate(tokenizer, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
    ]).tokens;
    // The template writes no BOS, and none is added to it.
    expect(promptTokens(chat.stderr)).toEqual([rendered.length]);
    const user = runCli(['generate', model, '--tokenizer', tokenizerFile, '--chat', '--prompt', 'hi', '--temperature', '0']);
    expect(promptTokens(user.stderr)).toEqual([applyChatTemplate(tokenizer, [{ role: 'user', content: 'hi' }]).tokens.length]);
    // A plain prompt: one BOS, then its two bytes, as llm.generate() does.
    const plain = runCli([
      'generate',
      model,
      '--tokenizer',
      tokenizerFile,
      '--prompt',
      'hi',
      '--temperature',
      '0',
      '--max-new-tokens',
      '1',
    ]);
    expect(promptTokens(plain.stderr)).toEqual([3]);
  });
});
