// The sharing option has one vocabulary: the values users pass, the words the
// addon parses and the CLI's --share choices are the same set (lib/memory.ts).
import { describe, expect, it } from 'vitest';

import { SHARE_WORDS, shareOption, shareWord, type ShareMemoryArenas } from '../../lib/memory.js';
import { EtnaError } from '../../lib/errors.js';
import { runCli } from '../helpers/cli.js';

const OPTIONS: ShareMemoryArenas[] = [true, false, 'state', 'auto'];

describe('sharing option words', () => {
  it('maps every option to its own word and back', () => {
    expect(OPTIONS.map((option) => shareWord(option))).toEqual([...SHARE_WORDS]);
    for (const option of OPTIONS) expect(shareOption(shareWord(option))).toBe(option);
    expect(shareWord(undefined)).toBe('auto');
  });

  it('rejects any other value with INVALID_INPUT naming the option', () => {
    for (const bad of ['on', 'off', 'true', 1, null]) {
      const call = () => shareWord(bad as unknown as ShareMemoryArenas);
      expect(call).toThrow(EtnaError);
      expect(call).toThrow(/shareMemoryArenas must be true, false, 'state' or 'auto'/);
    }
  });

  it('etna run --share takes exactly those words', () => {
    const help = runCli(['run', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain(`--share ${SHARE_WORDS.join('|')}`);
    const bad = runCli(['run', 'missing.pte', '--share', 'on']);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain(`--share takes one of ${SHARE_WORDS.join(', ')}, got 'on'`);
  });
});
