// Text in, text out: the generation loop over one Program. Each session is a
// Module over the program (weights packed once, a KV cache of its own); the
// loop feeds the prompt in chunks the methods take, samples, streams text and
// stops, as ExecuTorch's TextLLMRunner does.
import { randomInt } from 'node:crypto';

import { describeValue, EtnaError, toEtnaError } from '../errors.js';
import { Module, MODULE_OPTIONS, type ModuleOptions } from '../module.js';
import { asyncDisposeSymbol, checkOptionKeys, checkProgramSource, Program, type ProgramSource } from '../program.js';
import { Tensor } from '../tensor.js';
import { TextStream } from './detokenizer.js';
import { readLlmMetadata, type LlmMetadata, type StepMethod } from './metadata.js';
import { Sampler } from './sampler.js';
import { loadTokenizer, type LlmTokenizer, type TokenizerSource } from './tokenizer.js';

export interface LlmLoadOptions extends ModuleOptions {
  /** A tokenizer.json or tiktoken file (path or bytes), or a tokenizer made with `loadTokenizer`. */
  tokenizer: TokenizerSource;
}

/** ExecuTorch's GenerationConfig, in camel case. */
export interface GenerateOptions {
  /** Tokens to generate at most. Default: as many as the context has room for. */
  maxNewTokens?: number;
  /** 0 is greedy. Default 0.8, as ExecuTorch's runner. */
  temperature?: number;
  /** Sample among the k most likely tokens only (0, the default: all). */
  topK?: number;
  /** Sample among the most likely tokens that make up this much probability (1, the default: all). */
  topP?: number;
  /** Seeds sampling; the same seed, prompt and options give the same text. Default: a random seed. */
  seed?: number;
  /** Stop before any of these strings; the text never contains them. */
  stop?: readonly string[];
  /** Keep generating past an end-of-sequence token. */
  ignoreEos?: boolean;
  /** Stream the prompt first and start the text with it. */
  echo?: boolean;
  /** BOS tokens put before the prompt's tokens (default 0), EOS tokens after them (default 0). */
  numBos?: number;
  numEos?: number;
  /** Stops the generation between two calls; the result then has stopReason 'aborted'. */
  signal?: AbortSignal;
}

const GENERATE_OPTIONS: readonly (keyof GenerateOptions)[] = [
  'maxNewTokens',
  'temperature',
  'topK',
  'topP',
  'seed',
  'stop',
  'ignoreEos',
  'echo',
  'numBos',
  'numEos',
  'signal',
];
const DEFAULT_TEMPERATURE = 0.8;

/** ExecuTorch's Stats, in milliseconds. */
export interface GenerationStats {
  promptTokens: number;
  generatedTokens: number;
  /** Loading the program and reading its metadata (`Llm.load`). */
  loadMs: number;
  /** Loading this generation's module over the program (0 for a later turn of a session). */
  sessionLoadMs: number;
  /** Encoding the prompt into tokens. */
  encodeMs: number;
  /** Running the prompt through the model, up to the logits of its last token. */
  prefillMs: number;
  /** From the start of the generation to the first generated token. */
  timeToFirstTokenMs: number;
  /** From the end of the prefill to the last generated token. */
  decodeMs: number;
  /** Time spent sampling, over all generated tokens. */
  samplingMs: number;
  /** From the start of the generation to its end. */
  totalMs: number;
  /** promptTokens over prefillMs. */
  promptTokensPerSecond: number;
  /** generatedTokens over decodeMs, as ExecuTorch reports its generation rate. */
  tokensPerSecond: number;
}

export type StopReason = 'eos' | 'length' | 'stop' | 'aborted' | 'context';

export interface GenerationResult {
  /** The prompt's token ids as fed (BOS and EOS included). */
  promptTokens: number[];
  /** Generated token ids, the end-of-sequence token included when that was the reason to stop. */
  tokens: number[];
  /** Every streamed piece joined. */
  text: string;
  stopReason: StopReason;
  stats: GenerationStats;
}

// ------------------------------------------------------------------ streaming result

/**
 * A running generation: `for await (const piece of generation)` streams its
 * text, and awaiting it (or `.result`) gives the result. Breaking out of the
 * loop stops the generation, as an abort does.
 */
export class Generation implements AsyncIterable<string>, PromiseLike<GenerationResult> {
  readonly result: Promise<GenerationResult>;
  private readonly pieces: string[] = [];
  private wake: (() => void) | undefined;
  private finished = false;
  private failure: unknown;
  private readonly stopper = new AbortController();

  /** @internal */
  constructor(run: (emit: (piece: string) => void, stopped: AbortSignal) => Promise<GenerationResult>) {
    this.result = run((piece) => this.push(piece), this.stopper.signal).then(
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

  [Symbol.asyncIterator](): AsyncIterator<string> {
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

// ------------------------------------------------------------------ options

interface ResolvedOptions {
  maxNewTokens: number | undefined;
  sampling: { temperature: number; topK: number; topP: number; seed: number };
  stop: readonly string[];
  ignoreEos: boolean;
  echo: boolean;
  numBos: number;
  numEos: number;
  signal: AbortSignal | undefined;
}

function resolveOptions(options: GenerateOptions): ResolvedOptions {
  const checked = checkOptionKeys(options, GENERATE_OPTIONS, 'generate');
  const invalid = (name: string, rule: string): never => {
    throw new EtnaError('INVALID_INPUT', `generate: ${name} must be ${rule}, got ${describeValue(checked[name])}`);
  };
  const count = (name: keyof GenerateOptions, fallback: number | undefined, min: number): number | undefined => {
    const value = checked[name];
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) invalid(name, `an integer >= ${min}`);
    return value as number;
  };
  const number = (name: keyof GenerateOptions, fallback: number, ok: (v: number) => boolean, rule: string): number => {
    const value = checked[name];
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !ok(value)) invalid(name, rule);
    return value as number;
  };
  const flag = (name: keyof GenerateOptions): boolean => {
    const value = checked[name];
    if (value !== undefined && typeof value !== 'boolean') invalid(name, 'a boolean');
    return value === true;
  };
  const stop = checked['stop'] ?? [];
  if (!Array.isArray(stop) || stop.some((s) => typeof s !== 'string' || s.length === 0)) invalid('stop', 'an array of non-empty strings');
  const signal = checked['signal'];
  if (signal !== undefined && !(signal instanceof AbortSignal)) invalid('signal', 'an AbortSignal');
  return {
    maxNewTokens: count('maxNewTokens', undefined, 1),
    sampling: {
      temperature: number('temperature', DEFAULT_TEMPERATURE, (v) => Number.isFinite(v) && v >= 0, 'a finite number >= 0'),
      topK: count('topK', 0, 0)!,
      topP: number('topP', 1, (v) => v > 0 && v <= 1, 'a number in (0, 1]'),
      seed: number('seed', randomInt(2 ** 32), (v) => Number.isInteger(v) && v >= 0 && v < 2 ** 32, 'an integer from 0 to 2^32 - 1'),
    },
    stop: stop as string[],
    ignoreEos: flag('ignoreEos'),
    echo: flag('echo'),
    numBos: count('numBos', 0, 0)!,
    numEos: count('numEos', 0, 0)!,
    signal: signal as AbortSignal | undefined,
  };
}

const now = (): number => performance.now();
const perSecond = (count: number, ms: number): number => (ms > 0 ? (count * 1000) / ms : 0);

// ------------------------------------------------------------------ sessions

/**
 * One conversation: a module over the program with its own KV cache. Each
 * `generate()` continues from where the last one stopped, so a chat turn
 * only feeds its new tokens. One generation at a time.
 */
export class LlmSession {
  private cached = 0;
  // The last generated token: sampled, not yet in the cache; the next turn feeds it first.
  private pending: number | undefined;
  private busy = false;
  private disposed = false;
  private readonly logits = new Map<string, Float32Array>();

  /** @internal */
  constructor(
    private readonly llm: Llm,
    private readonly module: Module,
    private loadMs: number,
  ) {}

  /** Tokens in the cache plus the one generated token not yet fed: where the next turn starts. */
  get position(): number {
    return this.cached + (this.pending === undefined ? 0 : 1);
  }

  /** Positions left for the next turn's prompt and generated tokens. */
  get remaining(): number {
    return this.llm.metadata.maxContextLen - this.position;
  }

  generate(prompt: string | readonly number[], options: GenerateOptions = {}): Generation {
    return new Generation((emit, stopped) => this.run(prompt, options, emit, stopped));
  }

  /**
   * Starts the next turn from an empty context, as ExecuTorch's runner
   * resets: position 0, nothing pending. The cache keeps its old entries,
   * but every call writes its positions before attending over positions up
   * to its own, so none of them is read again. A pool of sessions reuses a
   * session for another conversation this way.
   */
  reset(): void {
    if (this.disposed) throw new EtnaError('DISPOSED', 'reset: the session has been disposed');
    if (this.busy) throw new EtnaError('INVALID_INPUT', 'reset: this session is generating; await the generation (or abort it) first');
    this.cached = 0;
    this.pending = undefined;
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
  ): Promise<GenerationResult> {
    if (this.disposed) throw new EtnaError('DISPOSED', 'generate: the session has been disposed');
    if (this.busy) {
      throw new EtnaError(
        'INVALID_INPUT',
        'generate: this session is already generating; await it, or use another session (llm.session())',
      );
    }
    const started = now();
    const config = resolveOptions(options);
    const { metadata, tokenizer } = this.llm;
    if (typeof prompt !== 'string' && !Array.isArray(prompt)) {
      throw new EtnaError('INVALID_INPUT', `generate: the prompt must be a string or an array of token ids, got ${describeValue(prompt)}`);
    }
    const ids = typeof prompt === 'string' ? tokenizer.encode(prompt) : Array.from(prompt);
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
    const promptTokens = [
      ...special('numBos', metadata.bosId, config.numBos),
      ...ids,
      ...special('numEos', metadata.eosIds[0], config.numEos),
    ];
    promptTokens.forEach((id, i) => {
      if (!Number.isInteger(id) || id < 0 || id >= metadata.vocabSize) {
        throw new EtnaError(
          'INVALID_INPUT',
          `generate: prompt token ${i} is ${typeof id === 'number' ? id : describeValue(id)}, outside the model's vocabulary ` +
            `0..${metadata.vocabSize - 1}`,
        );
      }
    });
    const feed = this.pending === undefined ? promptTokens : [this.pending, ...promptTokens];
    if (feed.length === 0) {
      throw new EtnaError('INVALID_INPUT', 'generate: the prompt has no tokens, and nothing was generated before it to continue from');
    }
    // The last generated token is never fed, so a turn takes feed + maxNewTokens - 1 positions.
    const room = metadata.maxContextLen - this.cached - feed.length + 1;
    const maxNewTokens = config.maxNewTokens ?? room;
    if (maxNewTokens > room || room < 1) {
      throw new EtnaError(
        'INVALID_INPUT',
        `generate: the context holds ${metadata.maxContextLen} positions; ${this.cached} are used, the prompt takes ${feed.length}` +
          (config.maxNewTokens === undefined ? '' : ` and maxNewTokens ${config.maxNewTokens} would take ${config.maxNewTokens - 1} more`) +
          ` (room for ${Math.max(room, 0)} new token(s))`,
      );
    }
    this.busy = true;
    try {
      return await this.loop(feed, promptTokens, maxNewTokens, config, emit, stopped, prompt, started, encoded);
    } finally {
      this.busy = false;
      this.loadMs = 0;
    }
  }

  private async loop(
    feed: number[],
    promptTokens: number[],
    maxNewTokens: number,
    config: ResolvedOptions,
    emit: (piece: string) => void,
    stopped: AbortSignal,
    prompt: string | readonly number[],
    started: number,
    encoded: number,
  ): Promise<GenerationResult> {
    const { metadata, tokenizer } = this.llm;
    const sampler = new Sampler(config.sampling);
    const stream = new TextStream(config.stop);
    const eos = new Set(config.ignoreEos ? [] : metadata.eosIds);
    const aborted = (): boolean => stopped.aborted || config.signal?.aborted === true;
    let text = '';
    const show = (piece: string): void => {
      text += piece;
      emit(piece);
    };
    if (config.echo) show(typeof prompt === 'string' ? prompt : tokenizer.decode(promptTokens));
    const tokens: number[] = [];
    let samplingMs = 0;
    let stopReason: StopReason = 'length';
    let prefilled = now();
    let firstToken = prefilled;
    if (aborted()) stopReason = 'aborted';
    else {
      // The pending token is part of this feed: a failed call leaves the cache as far as its calls got.
      this.pending = undefined;
      let row = await this.feed(feed);
      prefilled = now();
      for (;;) {
        const sampleStart = now();
        const token = sampler.sample(row);
        samplingMs += now() - sampleStart;
        if (tokens.length === 0) firstToken = now();
        tokens.push(token);
        this.pending = token;
        if (eos.has(token)) {
          stopReason = 'eos';
          break;
        }
        const piece = stream.push(token < tokenizer.vocabSize ? tokenizer.tokenBytes(token) : new Uint8Array(0));
        show(piece.text);
        if (piece.stopped) {
          stopReason = 'stop';
          break;
        }
        if (tokens.length >= maxNewTokens) break;
        if (aborted()) {
          stopReason = 'aborted';
          break;
        }
        this.pending = undefined;
        row = await this.feed([token]);
      }
      if (stopReason !== 'stop') show(stream.finish());
    }
    const ended = now();
    const prefillMs = prefilled - encoded;
    const decodeMs = ended - prefilled;
    return {
      promptTokens,
      tokens,
      text,
      stopReason,
      stats: {
        promptTokens: promptTokens.length,
        generatedTokens: tokens.length,
        loadMs: this.llm.loadMs,
        sessionLoadMs: this.loadMs,
        encodeMs: encoded - started,
        prefillMs,
        timeToFirstTokenMs: tokens.length > 0 ? firstToken - started : 0,
        decodeMs,
        samplingMs,
        totalMs: ended - started,
        promptTokensPerSecond: perSecond(promptTokens.length, prefillMs),
        tokensPerSecond: perSecond(tokens.length, decodeMs),
      },
    };
  }

  /** Runs tokens through the model from the cache's position; the logits row of the last one. */
  private async feed(tokens: readonly number[]): Promise<Float32Array> {
    const { prefill, decode, vocabSize } = this.llm.metadata;
    let at = 0;
    let row: Float32Array | undefined;
    while (at < tokens.length) {
      const left = tokens.length - at;
      // A fixed-length prefill takes whole chunks only; what is left over goes through decode one token at a time.
      const step = left > 1 && (!prefill.exact || left >= prefill.tokens) ? prefill : decode;
      const count = step.exact ? step.tokens : Math.min(left, step.tokens);
      const chunk = BigInt64Array.from(tokens.slice(at, at + count), BigInt);
      const outputs = await this.module.execute(
        step.name,
        [
          new Tensor('int64', [1, count], chunk),
          new Tensor('int64', step.positionInput.shape ?? [1], BigInt64Array.of(BigInt(this.cached))),
        ],
        { outputs: [this.logitsBuffer(step)] },
      );
      this.cached += count;
      at += count;
      const logits = outputs[0];
      const isLogits = logits instanceof Tensor && logits.data instanceof Float32Array;
      if (!isLogits || logits.data.length % vocabSize !== 0 || logits.data.length === 0) {
        throw new EtnaError('INTERNAL', `method '${step.name}' returned ${describeValue(logits)} where logits were expected`);
      }
      // [1, n, vocab] rows for every token, or [1, vocab] / [1, 1, vocab] for the last one only: the last row is the one to sample.
      row = logits.data.subarray(logits.data.length - vocabSize);
    }
    return row!;
  }

  // One logits array per method, reused by every call: the method's output is copied into it once.
  private logitsBuffer(step: StepMethod): Float32Array {
    let buffer = this.logits.get(step.name);
    if (buffer === undefined) {
      buffer = new Float32Array(step.logitsBytes / Float32Array.BYTES_PER_ELEMENT);
      this.logits.set(step.name, buffer);
    }
    return buffer;
  }
}

// ------------------------------------------------------------------ the model

/**
 * An LLM program with its tokenizer. `generate()` runs on a fresh session
 * (a module over the one program, so weights are packed once) and disposes
 * it: each call starts from an empty cache, and concurrent calls run side by
 * side, each giving what it would alone. `session()` keeps a cache across
 * turns.
 */
export class Llm {
  private disposed = false;

  private constructor(
    readonly program: Program,
    private readonly ownsProgram: boolean,
    readonly tokenizer: LlmTokenizer,
    readonly metadata: LlmMetadata,
    private readonly moduleOptions: ModuleOptions,
    /** Milliseconds `Llm.load` took: the program, its metadata and the tokenizer. */
    readonly loadMs: number,
  ) {}

  /**
   * Loads an LLM program (a path, bytes or a loaded Program) and its
   * tokenizer, reads the program's metadata and checks that the runner can
   * drive it. Other options are those of `Module.load`, used for every session.
   */
  static async load(pte: ProgramSource | Program, options: LlmLoadOptions): Promise<Llm> {
    const started = now();
    if (!(pte instanceof Program)) checkProgramSource(pte, 'Llm.load');
    const checked = checkOptionKeys(options, [...MODULE_OPTIONS, 'tokenizer'], 'Llm.load');
    if (checked['tokenizer'] === undefined) {
      throw new EtnaError(
        'INVALID_INPUT',
        'Llm.load: options.tokenizer is required (a tokenizer.json or tiktoken file, its bytes, or a loaded tokenizer)',
      );
    }
    const { tokenizer: tokenizerSource, ...moduleOptions } = options;
    const tokenizer = loadTokenizer(tokenizerSource);
    const owns = !(pte instanceof Program);
    const program = pte instanceof Program ? pte : Program.load(pte, moduleOptions.mmap === undefined ? {} : { mmap: moduleOptions.mmap });
    try {
      const { mmap: _mmap, ...perModule } = moduleOptions;
      const module = await Module.load(program, perModule);
      try {
        const metadata = await readLlmMetadata({ program, module, tokenizer, sharesState: module.memoryReport().mode !== 'unshared' });
        return new Llm(program, owns, tokenizer, metadata, perModule, now() - started);
      } finally {
        await module.dispose();
      }
    } catch (error) {
      if (owns) program.dispose();
      throw toEtnaError(error);
    }
  }

  /** A new conversation with an empty cache. */
  async session(): Promise<LlmSession> {
    if (this.disposed) throw new EtnaError('DISPOSED', 'Llm has been disposed');
    const started = now();
    const module = await Module.load(this.program, this.moduleOptions);
    return new LlmSession(this, module, now() - started);
  }

  /** Generates from an empty cache on a session of its own, disposed at the end. */
  generate(prompt: string | readonly number[], options: GenerateOptions = {}): Generation {
    return new Generation(async (emit, stopped) => {
      const session = await this.session();
      try {
        return await session.run(prompt, options, emit, stopped);
      } finally {
        await session.dispose();
      }
    });
  }

  /** Disposes the program when `Llm.load` loaded it; sessions keep it alive until they are disposed. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    if (this.ownsProgram) this.program.dispose();
  }

  async [asyncDisposeSymbol](): Promise<void> {
    await this.dispose();
  }
}
