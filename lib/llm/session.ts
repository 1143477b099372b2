// One conversation over a module: the step runner that puts tokens through
// the model (prefill in chunks, decode one token at a time, as ExecuTorch's
// TextPrefiller and TextTokenGenerator split it), and the turn that samples,
// streams text and stops.
import { describeValue, EtnaError, toEtnaError } from '../errors.js';
import { largeBytes, snapshotBytes, type Module } from '../module.js';
import { asyncDisposeSymbol, checkOptionKeys } from '../program.js';
import { float16ToNumber } from '../dtypes.js';
import { Tensor } from '../tensor.js';
import { TextStream } from './detokenizer.js';
import { Generation } from './generation.js';
import { tokenBytes, tokenLogprob } from './logprobs.js';
import type { LlmMetadata, StepMethod } from './metadata.js';
import { numberFault, resolveOptions, type GenerateOptions, type ResolvedOptions } from './options.js';
import { Sampler } from './sampler.js';
import { cacheRanges, decodeSessionSnapshot, encodeSessionHeader, type TextTail } from './snapshot.js';
import type { LlmTokenizer } from './tokenizer.js';
import type { GenerationResult, GenerationStats, StopReason, TokenLogprob } from './types.js';

const now = (): number => performance.now();
const perSecond = (count: number, ms: number): number => (ms > 0 ? (count * 1000) / ms : 0);

/** What `session.save()` takes. */
export interface SaveSessionOptions {
  /** Keep only the cache's first `position` positions (default: all of them, and the pending token). */
  position?: number;
}

/** What a session reads from its `Llm`. */
export interface SessionModel {
  readonly metadata: LlmMetadata;
  readonly tokenizer: LlmTokenizer;
  /** Milliseconds `Llm.load` took. */
  readonly loadMs: number;
  /** Whether a text prompt that starts a context gets one BOS token by default. */
  readonly addsBos: boolean;
  /** Ranges [from, to) of ids the tokenizer lacks: never sampled. */
  readonly unsampled: readonly (readonly [number, number])[];
  /** A new session with an empty cache (`Llm.session`). */
  session(): Promise<LlmSession>;
  /** A new session with an empty cache, that `fill` copies `rows` of a forked session's state into (`Llm.forkSession`). */
  forkSession(rows: readonly (readonly [number, number])[], fill: (session: LlmSession) => Promise<void>): Promise<LlmSession>;
}

// ------------------------------------------------------------------ steps

/**
 * Puts tokens through a module's methods at the cache's position and gives
 * the logits row of the last one. `position` counts the tokens in the cache;
 * a failed call leaves it as far as the calls before it got.
 */
export class StepRunner {
  /** The token ids in the cache, in position order. */
  readonly tokens: number[] = [];
  // One logits array per method, reused by every call: the method's output is copied into it once.
  private readonly logits = new Map<string, Float32Array | Uint16Array>();
  // 16-bit logits widened to float32, one array per method.
  private readonly widened = new Map<string, Float32Array>();

  constructor(
    private readonly module: Module,
    private readonly metadata: LlmMetadata,
  ) {}

  /** Tokens in the cache: the next call's position. */
  get position(): number {
    return this.tokens.length;
  }

  /**
   * Forgets the cache past `position`. Its rows stay, but every call writes
   * its positions before attending over positions up to its own, so none of
   * them is read again.
   */
  rewind(position: number): void {
    this.tokens.length = Math.min(position, this.tokens.length);
  }

  /** Takes `tokens` as the cache's content (a restored session's). */
  adopt(tokens: readonly number[]): void {
    this.tokens.length = 0;
    this.tokens.push(...tokens);
  }

  /** Runs tokens in the chunks the methods take: prefill where a chunk fits, decode for what is left over. */
  async prefill(tokens: readonly number[]): Promise<Float32Array> {
    const { prefill, decode } = this.metadata;
    let at = 0;
    let row: Float32Array | undefined;
    while (at < tokens.length) {
      const left = tokens.length - at;
      // A fixed-length prefill takes whole chunks only; what is left over goes through decode one token at a time.
      const method = left > 1 && (!prefill.exact || left >= prefill.tokens) ? prefill : decode;
      const count = method.exact ? method.tokens : Math.min(left, method.tokens);
      row = await this.step(method, tokens.slice(at, at + count));
      at += count;
    }
    if (row === undefined) throw new EtnaError('INTERNAL', 'prefill: no tokens to run');
    return row;
  }

  /** Runs one generated token through decode. */
  decode(token: number): Promise<Float32Array> {
    return this.step(this.metadata.decode, [token]);
  }

  /** One call: `tokens` at the current position; the logits row of the last one. */
  private async step(method: StepMethod, tokens: readonly number[]): Promise<Float32Array> {
    const { vocabSize } = this.metadata;
    const outputs = await this.module.execute(
      method.name,
      [
        new Tensor('int64', [1, tokens.length], BigInt64Array.from(tokens, BigInt)),
        method.positions === 'each'
          ? new Tensor(
              'int64',
              [tokens.length],
              BigInt64Array.from(tokens, (_, i) => BigInt(this.position + i)),
            )
          : new Tensor('int64', method.positionInput.shape ?? [1], BigInt64Array.of(BigInt(this.position))),
      ],
      { outputs: [this.logitsBuffer(method)] },
    );
    this.tokens.push(...tokens);
    const logits = outputs[0];
    const isLogits = logits instanceof Tensor && logits.dtype === method.logitsDtype;
    if (!isLogits || logits.data.length % vocabSize !== 0 || logits.data.length === 0) {
      throw new EtnaError('INTERNAL', `method '${method.name}' returned ${describeValue(logits)} where logits were expected`);
    }
    // [1, n, vocab] rows for every token, or [1, vocab] / [1, 1, vocab] for the last one only: the last row is the one to sample.
    const row = logits.data.subarray(logits.data.length - vocabSize);
    if (row instanceof Float32Array) return row;
    if (row instanceof Uint16Array) return this.widen(method, row);
    throw new EtnaError('INTERNAL', `method '${method.name}' returned ${describeValue(logits)} where logits were expected`);
  }

  private logitsBuffer(method: StepMethod): Float32Array | Uint16Array {
    let buffer = this.logits.get(method.name);
    if (buffer === undefined) {
      const elements = method.logitsBytes / (method.logitsDtype === 'float32' ? 4 : 2);
      buffer = method.logitsDtype === 'float32' ? new Float32Array(elements) : new Uint16Array(elements);
      this.logits.set(method.name, buffer);
    }
    return buffer;
  }

  /** A row of 16-bit logits as float32 (exact: every bfloat16 and float16 is a float32). */
  private widen(method: StepMethod, row: Uint16Array): Float32Array {
    let out = this.widened.get(method.name);
    if (out?.length !== row.length) {
      out = new Float32Array(row.length);
      this.widened.set(method.name, out);
    }
    if (method.logitsDtype === 'bfloat16') {
      const bits = new Uint32Array(out.buffer, out.byteOffset, out.length);
      for (let i = 0; i < row.length; i++) bits[i] = row[i]! << 16;
    } else {
      for (let i = 0; i < row.length; i++) out[i] = float16ToNumber(row[i]!);
    }
    return out;
  }
}

// ------------------------------------------------------------------ one turn

/** A turn checked and ready to run: what it feeds and how far it may go. */
interface TurnPlan {
  readonly prompt: string | readonly number[];
  /** The prompt's tokens, BOS and EOS included. */
  readonly promptTokens: number[];
  /** What the prefill runs: the last turn's pending token, then the prompt's tokens (or what the cache lacks of them). */
  readonly feed: number[];
  /** Positions of the cache the turn keeps: it rewinds to here before its prefill. */
  readonly cached: number;
  /** The text run the context ends with once the prompt is in. */
  readonly tail: TextTail;
  readonly maxNewTokens: number;
  readonly options: ResolvedOptions;
  /** When the generation started, and when its prompt was encoded. */
  readonly started: number;
  readonly encoded: number;
}

/** Where a turn's text goes, and whether its caller still listens. */
interface TurnIo {
  readonly emit: (piece: string) => void;
  /** The caller stopped listening (left its `for await` loop). */
  readonly stopped: AbortSignal;
}

/** What a turn gathered, read into its result at the end. */
class TurnRecord {
  readonly tokens: number[] = [];
  text = '';
  stopReason: StopReason = 'length';
  /** Each generated token's log-probabilities, when the options ask for them. */
  readonly logprobs: TokenLogprob[] | undefined;
  /** When the prefill ended (until it does, when it began), and when the first token was sampled. */
  prefilled = 0;
  firstToken = 0;
  samplingMs = 0;

  constructor(private readonly plan: TurnPlan) {
    this.logprobs = plan.options.topLogprobs === undefined ? undefined : [];
  }

  result(loadMs: number, sessionLoadMs: number): GenerationResult {
    const { promptTokens, started, encoded } = this.plan;
    const ended = now();
    const prefillMs = this.prefilled - encoded;
    const decodeMs = ended - this.prefilled;
    const stats: GenerationStats = {
      promptTokens: promptTokens.length,
      cachedTokens: this.plan.cached,
      generatedTokens: this.tokens.length,
      loadMs,
      sessionLoadMs,
      encodeMs: encoded - started,
      prefillMs,
      timeToFirstTokenMs: this.tokens.length > 0 ? this.firstToken - started : 0,
      decodeMs,
      samplingMs: this.samplingMs,
      totalMs: ended - started,
      promptTokensPerSecond: perSecond(promptTokens.length, prefillMs),
      tokensPerSecond: perSecond(this.tokens.length, decodeMs),
    };
    const result: GenerationResult = { promptTokens, tokens: this.tokens, text: this.text, stopReason: this.stopReason, stats };
    if (this.logprobs !== undefined) result.logprobs = this.logprobs;
    return result;
  }
}

const NO_TAIL: TextTail = { text: '', tokens: 0 };

/** The text run a turn's generated tokens extend, or start anew after a token without text. */
class TailRecord {
  private text: string;
  private tokens: number;
  private bytes: Uint8Array[] = [];

  constructor(start: TextTail) {
    this.text = start.text;
    this.tokens = start.tokens;
  }

  push(bytes: Uint8Array): void {
    if (bytes.length === 0) {
      [this.text, this.tokens, this.bytes] = ['', 0, []];
      return;
    }
    this.bytes.push(bytes);
    this.tokens++;
  }

  end(): TextTail {
    return { text: this.text + Buffer.concat(this.bytes).toString('utf8'), tokens: this.tokens };
  }
}

/** How many tokens two sequences share from their start. */
export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

// ------------------------------------------------------------------ sessions

/**
 * One conversation: a module over the program with its own KV cache. Each
 * `generate()` continues from where the last one stopped, so a chat turn
 * only feeds its new tokens. One generation at a time.
 */
export class LlmSession {
  private readonly steps: StepRunner;
  // The last generated token: sampled, not yet in the cache; the next turn feeds it first.
  private pending: number | undefined;
  // The text the context ends with since its last token without text (BOS, EOS, a prompt given as ids): a later
  // turn's text is encoded after it, as the whole conversation would be, so that no word boundary is invented there.
  private tail: TextTail = NO_TAIL;
  private busy = false;
  // Forks copying the cache now: nothing may change it until they have.
  private forks = 0;
  private disposed = false;

  /** @internal */
  constructor(
    private readonly model: SessionModel,
    private readonly module: Module,
    private loadMs: number,
  ) {
    this.steps = new StepRunner(module, model.metadata);
  }

  /** Tokens in the cache plus the one generated token not yet fed: where the next turn starts. */
  get position(): number {
    return this.steps.position + (this.pending === undefined ? 0 : 1);
  }

  /** Positions left for the next turn's prompt and generated tokens. */
  get remaining(): number {
    // A turn that fills the context leaves its last token pending, one past the end; it is never fed.
    return Math.max(0, this.model.metadata.maxContextLen - this.position);
  }

  /**
   * The token ids in the cache, in position order (a copy): what `complete()`
   * compares a prompt with, so a caller holding several sessions can give a
   * request the one that shares most of its prompt.
   */
  get tokens(): number[] {
    return [...this.steps.tokens];
  }

  generate(prompt: string | readonly number[], options: GenerateOptions = {}): Generation {
    return new Generation((emit, stopped) => this.run(prompt, options, emit, stopped));
  }

  /**
   * Generates after `prompt` taken as the whole context, not a continuation:
   * the cache's tokens that match the prompt's beginning are kept, and only
   * the rest is prefilled (`stats.cachedTokens` says how many were kept). A
   * server that gets each request's whole conversation calls this on a
   * session that served the conversation's earlier turns, or a shared
   * prompt, and prefills only what is new.
   */
  complete(prompt: string | readonly number[], options: GenerateOptions = {}): Generation {
    return new Generation((emit, stopped) => this.run(prompt, options, emit, stopped, 'whole'));
  }

  /**
   * Starts the next turn from an empty context, as ExecuTorch's runner
   * resets: position 0, nothing pending. The cache keeps its old entries,
   * but every call writes its positions before attending over positions up
   * to its own, so none of them is read again. A pool of sessions reuses a
   * session for another conversation this way.
   */
  reset(): void {
    this.checkIdle('reset');
    this.steps.rewind(0);
    this.pending = undefined;
    this.tail = NO_TAIL;
  }

  /**
   * The session as bytes: the token ids in its cache, the generated token not
   * yet fed, and the cache's rows up to its position (not its whole length),
   * with the rest of the program's state. `llm.restoreSession(bytes)` on the
   * same program, in this process or another, continues from here.
   *
   * `position` keeps only the cache's first positions: a prefix of the
   * conversation, such as a system prompt that later prompts start with. A
   * snapshot cut short has no pending token (the token after the cut is in
   * the cache, not pending); `complete()` on its restored session prefills
   * what a prompt has beyond it.
   */
  async save(options: SaveSessionOptions = {}): Promise<Uint8Array> {
    this.checkReadable('save');
    const checked = checkOptionKeys(options, ['position'], 'save');
    const cached = this.steps.position;
    const position = checked['position'] ?? cached;
    if (numberFault(position, { integer: true, min: 0, max: cached }) !== undefined) {
      throw new EtnaError(
        'INVALID_INPUT',
        `save: position must be an integer from 0 to ${cached} (the tokens in the cache), got ${describeValue(position)}`,
      );
    }
    const kept = position as number;
    const ranges = this.cacheRows(kept);
    // A prefix cut short has no pending token, nor the text its last tokens spelled.
    const place =
      kept === cached
        ? { tokens: this.steps.tokens, pending: this.pending, tail: this.tail }
        : { tokens: this.steps.tokens.slice(0, kept), pending: undefined };
    const header = encodeSessionHeader(place);
    const snapshot = largeBytes(header.byteLength + this.module.stateSnapshotBytes({ ranges }));
    snapshot.set(header, 0);
    await this.module.saveState({ ranges, into: snapshot.subarray(header.byteLength) });
    return snapshot;
  }

  /**
   * A new session that starts where this one stands, with a cache of its
   * own; this one goes on unchanged. The cache rows it has filled go from
   * this session's state straight into the new one's (`Module.copyStateTo`),
   * with no snapshot in between.
   */
  async fork(): Promise<LlmSession> {
    this.checkReadable('fork');
    // Where the copy will stand: nothing changes it while a fork is in flight.
    const place = { tokens: this.steps.tokens, pending: this.pending, tail: this.tail };
    this.forks++;
    try {
      const ranges = this.cacheRows(place.tokens.length);
      const forked = await this.model.forkSession(ranges, async (target) => {
        try {
          await this.module.copyStateTo(target.module, { ranges });
        } catch (error) {
          await target.dispose();
          throw toEtnaError(error);
        }
      });
      forked.steps.adopt(place.tokens);
      forked.pending = place.pending;
      forked.tail = place.tail;
      return forked;
    } finally {
      this.forks--;
    }
  }

  /**
   * Puts this session where a snapshot of `save()` stands, whatever it held
   * before: a server keeps its sessions and moves conversations in and out
   * of them without loading a module each time. Cache rows past the
   * snapshot's position are left as they are; nothing reads them before they
   * are written again. A snapshot cut short or from another program is
   * refused with INVALID_INPUT, and the session is then unchanged.
   */
  async restore(snapshot: ArrayBuffer | ArrayBufferView): Promise<void> {
    this.checkIdle('restore');
    const { place, state } = decodeSessionSnapshot(snapshotBytes(snapshot, 'restore: a session snapshot'), this.model.metadata);
    this.busy = true;
    try {
      await this.module.restoreState(state);
      this.steps.adopt(place.tokens);
      this.pending = place.pending;
      this.tail = place.tail ?? NO_TAIL;
    } finally {
      this.busy = false;
    }
  }

  // The state's bytes a session at `position` holds: what a save carries and a fork copies.
  private cacheRows(position: number): [number, number][] {
    return cacheRanges(this.module.methodMeta(this.model.metadata.decode.name).state, this.model.metadata, position);
  }

  // Saving and forking read the cache: they need a live session that is not generating.
  private checkReadable(what: string): void {
    if (this.disposed) throw new EtnaError('DISPOSED', `${what}: the session has been disposed`);
    if (this.busy) throw new EtnaError('INVALID_INPUT', `${what}: this session is generating; await the generation (or abort it) first`);
  }

  // Restoring and resetting change it: nor may a fork be copying it.
  private checkIdle(what: string): void {
    this.checkReadable(what);
    if (this.forks > 0) throw new EtnaError('INVALID_INPUT', `${what}: this session is being forked; await the fork first`);
  }

  /** Frees the module once a running generation has finished. */
  async dispose(): Promise<void> {
    this.disposed = true;
    await this.module.dispose();
  }

  async [asyncDisposeSymbol](): Promise<void> {
    await this.dispose();
  }

  /** @internal Runs one generation; checks everything before the first call. */
  async run(
    prompt: string | readonly number[],
    options: GenerateOptions,
    emit: (piece: string) => void,
    stopped: AbortSignal,
    context: 'continue' | 'whole' = 'continue',
  ): Promise<GenerationResult> {
    if (this.disposed) throw new EtnaError('DISPOSED', 'generate: the session has been disposed');
    if (this.busy) {
      throw new EtnaError(
        'INVALID_INPUT',
        'generate: this session is already generating; await it, or use another session (llm.session())',
      );
    }
    if (this.forks > 0) throw new EtnaError('INVALID_INPUT', 'generate: this session is being forked; await the fork first');
    const plan = this.plan(prompt, options, context);
    this.busy = true;
    try {
      return await this.turn(plan, { emit, stopped });
    } finally {
      this.busy = false;
      this.loadMs = 0;
    }
  }

  /** Checks the options and the prompt against the vocabulary and the context left. */
  private plan(prompt: string | readonly number[], options: GenerateOptions, context: 'continue' | 'whole'): TurnPlan {
    const started = now();
    const { metadata, tokenizer } = this.model;
    const resolved = resolveOptions(options, { vocabSize: metadata.vocabSize });
    if (typeof prompt !== 'string' && !Array.isArray(prompt)) {
      throw new EtnaError('INVALID_INPUT', `generate: the prompt must be a string or an array of token ids, got ${describeValue(prompt)}`);
    }
    // The context so far: the cache, then the token generated last and not yet fed.
    const contextTokens = this.pending === undefined ? this.steps.tokens : [...this.steps.tokens, this.pending];
    const startsContext = context === 'whole' || contextTokens.length === 0;
    const numBos = resolved.numBos ?? (typeof prompt === 'string' && startsContext && this.model.addsBos ? 1 : 0);
    // A later turn's text is encoded with the text the context ends with, and replaces that text's tokens
    // from where the encodings part (where they agree, which is usual, nothing is fed again).
    const continues = context === 'continue' && typeof prompt === 'string' && numBos === 0 && this.tail.tokens > 0;
    let ids: number[];
    let tail: TextTail;
    let replaced = 0;
    if (continues) {
      const whole = tokenizer.encode(this.tail.text + prompt);
      const kept = commonPrefix(contextTokens.slice(contextTokens.length - this.tail.tokens), whole);
      replaced = this.tail.tokens - kept;
      ids = whole.slice(kept);
      tail = { text: this.tail.text + prompt, tokens: whole.length };
    } else {
      ids = typeof prompt === 'string' ? tokenizer.encode(prompt) : Array.from(prompt);
      tail = typeof prompt === 'string' ? { text: prompt, tokens: ids.length } : NO_TAIL;
    }
    const encoded = now();
    const special = (name: string, id: number | undefined, count: number): number[] => {
      if (count === 0) return [];
      if (id === undefined) {
        throw new EtnaError(
          'INVALID_INPUT',
          `generate: ${name} asks for ${count} token(s), but neither the program nor the tokenizer names one`,
        );
      }
      return new Array<number>(count).fill(id);
    };
    const promptTokens = [...special('numBos', metadata.bosId, numBos), ...ids, ...special('numEos', metadata.eosIds[0], resolved.numEos)];
    if (resolved.numEos > 0) tail = NO_TAIL;
    promptTokens.forEach((id, i) => {
      if (!Number.isInteger(id) || id < 0 || id >= metadata.vocabSize) {
        throw new EtnaError(
          'INVALID_INPUT',
          `generate: prompt token ${i} is ${typeof id === 'number' ? id : describeValue(id)}, outside the model's vocabulary ` +
            `0..${metadata.vocabSize - 1}`,
        );
      }
    });
    let cached = this.steps.position;
    let feed = this.pending === undefined ? promptTokens : [this.pending, ...promptTokens];
    if (replaced > 0) {
      // The context is kept up to where the encodings part; what follows, a generated token among it, is fed anew.
      cached = contextTokens.length - replaced;
      feed = promptTokens;
    }
    if (context === 'whole') {
      // The prompt's last token is always run: its logits give the first new token.
      cached = Math.min(commonPrefix(this.steps.tokens, promptTokens), promptTokens.length - 1);
      feed = promptTokens.slice(cached);
    }
    if (feed.length === 0) {
      throw new EtnaError('INVALID_INPUT', 'generate: the prompt has no tokens, and nothing was generated before it to continue from');
    }
    // The last generated token is never fed, so a turn takes feed + maxNewTokens - 1 positions.
    const room = metadata.maxContextLen - cached - feed.length + 1;
    const maxNewTokens = resolved.maxNewTokens ?? room;
    if (maxNewTokens > room || room < 1) {
      throw new EtnaError(
        'INVALID_INPUT',
        `generate: the context holds ${metadata.maxContextLen} positions; ${cached} are used, the prompt takes ${feed.length}` +
          (resolved.maxNewTokens === undefined
            ? ''
            : ` and maxNewTokens ${resolved.maxNewTokens} would take ${resolved.maxNewTokens - 1} more`) +
          ` (room for ${Math.max(room, 0)} new token(s))`,
      );
    }
    return { prompt, promptTokens, feed, cached, tail, maxNewTokens, options: resolved, started, encoded };
  }

  /** Prefills, then samples and decodes one token at a time until a reason to stop. */
  private async turn(plan: TurnPlan, io: TurnIo): Promise<GenerationResult> {
    const { tokenizer, metadata } = this.model;
    const { options } = plan;
    const sampler = new Sampler(options.sampling);
    const stream = new TextStream(options.stop);
    const eos = new Set([...(options.ignoreEos ? [] : metadata.eosIds), ...options.stopTokens]);
    const aborted = (): boolean => io.stopped.aborted || options.signal?.aborted === true;
    const record = new TurnRecord(plan);
    const show = (piece: string): void => {
      record.text += piece;
      io.emit(piece);
    };
    if (options.echo) show(typeof plan.prompt === 'string' ? plan.prompt : tokenizer.decode(plan.promptTokens));
    record.prefilled = now();
    record.firstToken = record.prefilled;
    if (aborted()) {
      record.stopReason = 'aborted';
      return record.result(this.model.loadMs, this.loadMs);
    }
    // The pending token is part of this feed, or dropped with what the turn rewinds:
    // a failed call leaves the cache as far as its calls got.
    this.pending = undefined;
    this.tail = NO_TAIL;
    this.steps.rewind(plan.cached);
    let row = await this.steps.prefill(plan.feed);
    record.prefilled = now();
    // The penalties count the context the model sees: earlier turns, the prompt, then each generated token.
    sampler.accept(this.steps.tokens);
    const tail = new TailRecord(plan.tail);
    for (;;) {
      const sampleStart = now();
      for (const [from, to] of this.model.unsampled) row.fill(-Infinity, from, to);
      const token = sampler.sample(row);
      sampler.accept(token);
      const logprobs = options.topLogprobs === undefined ? undefined : tokenLogprob(tokenizer, row, token, options.topLogprobs);
      record.samplingMs += now() - sampleStart;
      if (record.tokens.length === 0) record.firstToken = now();
      record.tokens.push(token);
      if (logprobs !== undefined) record.logprobs?.push(logprobs);
      this.pending = token;
      options.onToken?.(token, logprobs);
      const bytes = tokenBytes(tokenizer, token);
      tail.push(bytes);
      if (eos.has(token)) {
        record.stopReason = 'eos';
        break;
      }
      const piece = stream.push(bytes);
      show(piece.text);
      if (piece.stopped) {
        record.stopReason = 'stop';
        break;
      }
      if (record.tokens.length >= plan.maxNewTokens) break;
      if (aborted()) {
        record.stopReason = 'aborted';
        break;
      }
      this.pending = undefined;
      row = await this.steps.decode(token);
    }
    if (record.stopReason !== 'stop') show(stream.finish());
    this.tail = tail.end();
    return record.result(this.model.loadMs, this.loadMs);
  }
}
