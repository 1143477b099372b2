// Snapshots of prompt prefixes that several requests share (a system prompt,
// a few-shot preamble), so that a request starting with one restores it and
// prefills only the rest. What is saved: when a prompt shares at least one
// block of tokens with a recent prompt, the shared part (cut to whole
// blocks), unless an entry holds it already; one-off prompts cost nothing
// but their token ids. Lookups take the entry sharing the longest prefix
// with the prompt. Entries are bounded in bytes, least recently used out.
import { commonPrefix } from '../llm/session.js';

export interface PrefixCacheOptions {
  /** Bytes of snapshots kept at most (0: no cache). */
  maxBytes: number;
  /** Prefixes are saved in whole blocks of this many tokens, and used only when they save at least one. */
  blockTokens: number;
  /** Recent prompts (their token ids) that a new prompt is compared with (default 64). */
  recentPrompts?: number;
}

export interface PrefixCacheStats {
  entries: number;
  bytes: number;
  maxBytes: number;
  blockTokens: number;
  /** Lookups that found a prefix, and the prompt tokens those did not prefill. */
  hits: number;
  hitTokens: number;
}

export interface PrefixEntry {
  readonly tokens: readonly number[];
  readonly snapshot: Uint8Array;
}

export class PrefixCache {
  // A Map iterates in insertion order: the first entry is the least recently used.
  private readonly entries = new Map<string, PrefixEntry>();
  private readonly recent: (readonly number[])[] = [];
  private bytes = 0;
  private hits = 0;
  private hitTokens = 0;

  constructor(private readonly options: PrefixCacheOptions) {}

  get enabled(): boolean {
    return this.options.maxBytes > 0;
  }

  get blockTokens(): number {
    return this.options.blockTokens;
  }

  get stats(): PrefixCacheStats {
    const { maxBytes, blockTokens } = this.options;
    return { entries: this.entries.size, bytes: this.bytes, maxBytes, blockTokens, hits: this.hits, hitTokens: this.hitTokens };
  }

  /**
   * The entry that shares the most tokens with `prompt` and how many of them
   * a session restored from it keeps (all but the prompt's last token at
   * most: its logits give the first new token), or undefined when none
   * shares a whole block. A hit marks the entry as used.
   */
  lookup(prompt: readonly number[]): { entry: PrefixEntry; shared: number } | undefined {
    let best: { key: string; entry: PrefixEntry; shared: number } | undefined;
    for (const [key, entry] of this.entries) {
      const shared = Math.min(commonPrefix(entry.tokens, prompt), prompt.length - 1);
      if (shared >= this.options.blockTokens && shared > (best?.shared ?? 0)) best = { key, entry, shared };
    }
    if (best === undefined) return undefined;
    this.entries.delete(best.key);
    this.entries.set(best.key, best.entry);
    return { entry: best.entry, shared: best.shared };
  }

  /** Counts a prompt that a cached prefix spared `tokens` of prefill (a lookup may lose to a session's own cache). */
  counted(tokens: number): void {
    this.hits++;
    this.hitTokens += tokens;
  }

  /**
   * The prefix of `prompt` worth saving now: the longest run of whole blocks
   * it shares with a recent prompt, when no entry holds that much of it (0:
   * nothing to save). The prompt joins the recent ones either way.
   */
  wanted(prompt: readonly number[]): number {
    if (!this.enabled) return 0;
    const { blockTokens, recentPrompts = 64 } = this.options;
    let shared = 0;
    for (const other of this.recent) shared = Math.max(shared, commonPrefix(other, prompt));
    this.recent.push(prompt);
    if (this.recent.length > recentPrompts) this.recent.shift();
    const blocks = Math.floor(shared / blockTokens) * blockTokens;
    if (blocks === 0) return 0;
    for (const entry of this.entries.values()) if (commonPrefix(entry.tokens, prompt) >= blocks) return 0;
    return blocks;
  }

  /** Keeps a snapshot of `tokens`, dropping the least recently used entries past the byte budget; one larger than the budget is not kept. */
  add(tokens: readonly number[], snapshot: Uint8Array): void {
    if (snapshot.byteLength > this.options.maxBytes) return;
    const key = tokens.join(',');
    const old = this.entries.get(key);
    if (old !== undefined) this.bytes -= old.snapshot.byteLength;
    this.entries.delete(key);
    this.entries.set(key, { tokens: [...tokens], snapshot });
    this.bytes += snapshot.byteLength;
    for (const [oldest, entry] of this.entries) {
      if (this.bytes <= this.options.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= entry.snapshot.byteLength;
    }
  }
}
