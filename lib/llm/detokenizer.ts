// Streamed text from token bytes. A token may end inside a UTF-8 character
// (byte-fallback and byte-level vocabularies split emoji and CJK across
// tokens): those bytes wait for the rest of their character and are never
// shown as U+FFFD. Text that could be the start of a stop string waits too,
// so a stop string never reaches the stream.

export class TextStream {
  private readonly decoder = new TextDecoder('utf-8');
  private held = '';

  constructor(private readonly stops: readonly string[] = []) {}

  /**
   * Adds one token's bytes. Returns the text that can be shown now and, when
   * a stop string is complete, `stopped` with the text before it.
   */
  push(bytes: Uint8Array): { text: string; stopped: boolean } {
    this.held += this.decoder.decode(bytes, { stream: true });
    let stopAt = -1;
    for (const stop of this.stops) {
      const at = this.held.indexOf(stop);
      if (at >= 0 && (stopAt < 0 || at < stopAt)) stopAt = at;
    }
    if (stopAt >= 0) {
      const text = this.held.slice(0, stopAt);
      this.held = '';
      return { text, stopped: true };
    }
    const keep = this.heldBack();
    const text = this.held.slice(0, this.held.length - keep);
    this.held = this.held.slice(this.held.length - keep);
    return { text, stopped: false };
  }

  /**
   * The text still held at the end of a generation: a possible stop-string
   * start that did not complete. Bytes of a character the generation never
   * finished are dropped (the token ids still carry them).
   */
  finish(): string {
    const text = this.held;
    this.held = '';
    return text;
  }

  // Length of the longest end of the held text that begins some stop string.
  private heldBack(): number {
    let keep = 0;
    for (const stop of this.stops) {
      for (let n = Math.min(stop.length - 1, this.held.length); n > keep; n--) {
        if (this.held.endsWith(stop.slice(0, n))) {
          keep = n;
          break;
        }
      }
    }
    return keep;
  }
}
