// A running generation, as the caller holds it: a stream of text pieces and
// a promise of the result, in one object.
import { EtnaError, toEtnaError } from '../errors.js';
import type { GenerationResult } from './types.js';

/** What a generation's body gets: where its pieces go, and a signal that the caller stopped listening. */
export type GenerationBody = (emit: (piece: string) => void, stopped: AbortSignal) => Promise<GenerationResult>;

/**
 * A running generation: `for await (const piece of generation)` streams its
 * text, and awaiting it (or `.then`, `.catch`, `.finally`, or `.result`)
 * gives the result. The two go together: the generation runs whether or not
 * anyone iterates, pieces wait for the iteration in order, and awaiting gives
 * the result whether the text was iterated, partly iterated or not at all.
 * Breaking out of the loop stops the generation, as an abort does (the result
 * then has stopReason 'aborted'). A generation is iterated once; a failure
 * rejects both the iteration and the result.
 */
export class Generation implements AsyncIterable<string>, PromiseLike<GenerationResult> {
  readonly result: Promise<GenerationResult>;
  private readonly pieces: string[] = [];
  private wake: (() => void) | undefined;
  private finished = false;
  private iterated = false;
  private failure: unknown;
  private readonly stopper = new AbortController();

  /** @internal */
  constructor(body: GenerationBody) {
    this.result = body((piece) => this.push(piece), this.stopper.signal).then(
      (result) => {
        this.end(undefined);
        return result;
      },
      (error: unknown) => {
        this.end(error);
        throw toEtnaError(error);
      },
    );
    // The error reaches whoever iterates or awaits; nobody doing either is not an unhandled rejection.
    this.result.catch(() => undefined);
  }

  // biome-ignore lint/suspicious/noThenProperty: a generation is awaitable, like a promise of its result
  then<A = GenerationResult, B = never>(
    onFulfilled?: ((value: GenerationResult) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.result.then(onFulfilled, onRejected);
  }

  catch<B = never>(onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<GenerationResult | B> {
    return this.result.catch(onRejected);
  }

  finally(onFinally?: (() => void) | null): Promise<GenerationResult> {
    return this.result.finally(onFinally);
  }

  [Symbol.asyncIterator](): AsyncIterator<string> {
    // Two iterators would take pieces from each other, and one would wait for a wake-up the other took.
    if (this.iterated) throw new EtnaError('INVALID_INPUT', 'a Generation can be iterated once; await it for the whole text');
    this.iterated = true;
    return {
      next: async (): Promise<IteratorResult<string>> => {
        for (;;) {
          const piece = this.pieces.shift();
          if (piece !== undefined) return { value: piece, done: false };
          if (this.finished) {
            if (this.failure !== undefined) throw toEtnaError(this.failure);
            return { value: undefined, done: true };
          }
          await new Promise<void>((resolve) => (this.wake = resolve));
        }
      },
      return: async (): Promise<IteratorResult<string>> => {
        this.stopper.abort();
        await this.result.catch(() => undefined);
        return { value: undefined, done: true };
      },
    };
  }

  private push(piece: string): void {
    if (piece.length === 0) return;
    this.pieces.push(piece);
    this.notify();
  }

  private end(error: unknown): void {
    this.finished = true;
    this.failure = error;
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
