// `etna bench chat` at the small preset: its report holds what the caches
// did (cached tokens, replies restored as a full prefill gives them), and
// the command prints it. Its timings are figures to read, not to test.
import { describe, expect, it } from 'vitest';

import { formatChatReport, runChatBench } from '../../lib/tools/bench/chat.js';
import { runCli } from '../helpers/cli.js';

describe('etna bench chat', () => {
  it('reports the first tokens of requests sharing a system prompt, and of conversations handed over through Redis', async () => {
    const report = await runChatBench({
      preset: 'small',
      threads: 1,
      requests: 4,
      systemTokens: 64,
      questionTokens: 8,
      replyTokens: 2,
      conversations: 2,
    });
    expect(report.snapshotBytesPerToken).toBe(2 * 2 * 2 * 32 * 4);
    expect(report.prefix.without.map((reply) => reply.cachedTokens)).toEqual([0, 0, 0, 0]);
    // The second request shows the shared prompt to the cache; from the third on, it is restored from there.
    expect(report.prefix.with.map((reply) => reply.cachedTokens)).toEqual([0, 0, 64, 64]);
    report.prefix.with.forEach((reply, i) => expect(reply.text).toBe(report.prefix.without[i]!.text));
    for (const [i, restored] of report.handOff.restored.entries()) {
      // Turn 1 (64 + 8 tokens) and its reply but the last token, which is fed with turn 2.
      expect(restored.cachedTokens).toBe(64 + 8 + 1);
      expect(report.handOff.fullPrefill[i]!.cachedTokens).toBe(0);
      expect(restored.promptTokens).toBe(64 + 8 + 2 + 8);
    }
    const text = formatChatReport(report);
    expect(text).toMatch(/^etna bench chat: llama-8da4w small, 1 thread\(s\)/);
    expect(text).toMatch(/with \/ without +\d+\.\d{3}\n/);
    expect(text).toMatch(/restored \/ full +\d+\.\d{3}$/);
  }, 120_000);

  it('hands over int8 KV caches, their scales and zero points, in under a third of the fp32 bytes', async () => {
    const report = await runChatBench({
      preset: 'small',
      threads: 1,
      requests: 1,
      systemTokens: 64,
      questionTokens: 8,
      replyTokens: 2,
      conversations: 1,
      quantizeKvCache: true,
    });
    // The bench itself throws when a restored conversation replies otherwise than a full prefill.
    expect(report.handOff.restored[0]!.cachedTokens).toBe(64 + 8 + 1);
    expect(report.snapshotBytesPerToken).toBeGreaterThan(0);
    expect(report.snapshotBytesPerToken).toBeLessThan((2 * 2 * 2 * 32 * 4) / 3);
    expect(formatChatReport(report)).toMatch(/^etna bench chat: llama-8da4w small \(int8 KV caches\), 1 thread\(s\)/);
  }, 120_000);

  it('refuses a conversation the preset cannot hold, in one line', () => {
    const result = runCli(['bench', 'chat', '--preset', 'small', '--system-tokens', '300']);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/^etna bench chat: INVALID_INPUT: a conversation of 300 \+ 32 tokens/);
  });
});
