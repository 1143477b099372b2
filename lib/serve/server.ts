// An OpenAI-compatible HTTP server over one Llm: GET /v1/models, POST
// /v1/completions and POST /v1/chat/completions (whole replies or streams of
// chunks), GET /health. Requests run on a pool of sessions (sessions.ts)
// with a bounded wait line (429 past it); a client that goes away aborts its
// generation; shutdown() drains (503 to new requests, running ones finish,
// those past the deadline are cut).
import http from 'node:http';

import { EtnaError } from '../errors.js';
import type { Llm } from '../llm/llm.js';
import { describeNumberRule, numberFault, type GenerateOptions, type NumberRule } from '../llm/options.js';
import type { LlmSession } from '../llm/session.js';
import type { TokenLogprob } from '../llm/types.js';
import { checkOptionKeys } from '../program.js';
import { chatPrompt } from './chat.js';
import { ApiError, invalidField, toApiError } from './errors.js';
import { PoolClosedError, type PoolStats } from './pool.js';
import { PrefixCache, type PrefixCacheStats } from './prefix-cache.js';
import { parseBody, parseChatRequest, parseCompletionRequest, readBody, type ModelInfo } from './request.js';
import {
  CHAT_SHAPE,
  COMPLETION_SHAPE,
  finishReason,
  replyHeader,
  usageOf,
  writeEvent,
  type ReplyShape,
  type WireLogprobs,
} from './responses.js';
import { Sessions, type SessionsStats } from './sessions.js';
import { DEFAULT_STATE_TIMEOUT_MS, GuardedStore, type StateStore } from './state-store.js';

export interface ServerOptions {
  /** The model; the caller loads it, and disposes it after `shutdown()`. */
  llm: Llm;
  /** The name requests give as `model`, and /v1/models lists (default 'etna'). */
  modelName?: string;
  /** Sessions over the model: requests that generate at once (default 2). */
  sessions?: number;
  /** Requests that may wait for a session; beyond them 429 (default 16). */
  maxQueue?: number;
  /** BOS tokens put before a text prompt (default generate()'s: 1 when the model has one and the tokenizer adds it, else 0). */
  numBos?: number;
  /** Bytes of cached prompt prefixes at most (default 256 MiB; 0: no prefix cache). */
  prefixCacheBytes?: number;
  /** Prefixes are cached in whole blocks of this many tokens (default 32). */
  prefixBlockTokens?: number;
  /** Where conversations' states wait between turns (`openStateStore`); the caller closes it after `shutdown()`. */
  stateStore?: StateStore;
  /** Milliseconds a state store call may take before the request goes on without it (default 1000). */
  stateTimeoutMs?: number;
  /** Larger request bodies get 413 (default 1 MiB). */
  maxBodyBytes?: number;
  /** Where warnings go (a store that stops answering, and answers again); default console.warn. */
  warn?: (message: string) => void;
}

const SERVER_OPTIONS: readonly (keyof ServerOptions)[] = [
  'llm',
  'modelName',
  'sessions',
  'maxQueue',
  'numBos',
  'prefixCacheBytes',
  'prefixBlockTokens',
  'stateStore',
  'stateTimeoutMs',
  'maxBodyBytes',
  'warn',
];

export const DEFAULT_MODEL_NAME = 'etna';
export const DEFAULT_PREFIX_CACHE_BYTES = 256 * 2 ** 20;
export const DEFAULT_PREFIX_BLOCK_TOKENS = 32;

/** The request header that names a conversation, whose state is stored after each reply. */
export const CONVERSATION_HEADER = 'x-conversation-id';
const CONVERSATION_ID = /^[\x21-\x7e]{1,256}$/;

/** How long a stopping server still reads requests on idle connections before closing them. */
const IDLE_CLOSE_DELAY_MS = 200;
/** After the listener has closed, how long busy connections get to finish their answer before they are closed. */
const CLOSE_GRACE_MS = 1000;

const ROUTES: readonly (readonly [string, RegExp, string])[] = [
  ['GET', /^\/v1\/models\/?$/, 'GET /v1/models'],
  ['GET', /^\/v1\/models\/[^/]+$/, 'GET /v1/models/{model}'],
  ['POST', /^\/v1\/completions\/?$/, 'POST /v1/completions'],
  ['POST', /^\/v1\/chat\/completions\/?$/, 'POST /v1/chat/completions'],
  ['GET', /^\/health\/?$/, 'GET /health'],
];

/** Generations by how they ended. */
export interface GenerationCounts {
  finished: number;
  aborted: number;
  failed: number;
}

/** A request's prompt and options, ready to run. */
interface Job {
  readonly shape: ReplyShape;
  readonly prompt: readonly number[];
  readonly options: GenerateOptions;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  readonly conversationId: string | undefined;
}

/** The server's settings with their defaults, checked. */
interface Settings {
  readonly modelName: string;
  readonly sessions: number;
  readonly maxQueue: number;
  readonly numBos: number;
  readonly maxBodyBytes: number;
}

function checkSettings(options: ServerOptions): Settings & { prefixCacheBytes: number; prefixBlockTokens: number; stateTimeoutMs: number } {
  const checked = checkOptionKeys(options, SERVER_OPTIONS, 'createServer');
  const integer = (name: keyof ServerOptions, fallback: number, rule: NumberRule): number => {
    const value = checked[name] ?? fallback;
    if (numberFault(value, rule) !== undefined) {
      throw new EtnaError('INVALID_INPUT', `createServer: ${name} must be ${describeNumberRule(rule)}, got ${String(value)}`);
    }
    return value as number;
  };
  const atLeast = (min: number): NumberRule => ({ integer: true, min, max: Infinity });
  const { llm } = options;
  if (llm === undefined || typeof llm.session !== 'function')
    throw new EtnaError('INVALID_INPUT', 'createServer: llm must be a loaded Llm');
  const modelName = checked['modelName'] ?? DEFAULT_MODEL_NAME;
  if (typeof modelName !== 'string' || modelName.length === 0) {
    throw new EtnaError('INVALID_INPUT', `createServer: modelName must be a non-empty string, got ${String(modelName)}`);
  }
  // generate()'s rule for a text prompt that starts a context: one BOS when the tokenizer adds it.
  const numBos = integer('numBos', llm.addsBos ? 1 : 0, atLeast(0));
  if (numBos > 0 && llm.metadata.bosId === undefined) {
    throw new EtnaError('INVALID_INPUT', `createServer: numBos is ${numBos}, but neither the program nor its tokenizer names a BOS token`);
  }
  return {
    modelName,
    sessions: integer('sessions', 2, atLeast(1)),
    maxQueue: integer('maxQueue', 16, atLeast(0)),
    numBos,
    maxBodyBytes: integer('maxBodyBytes', 2 ** 20, atLeast(1)),
    prefixCacheBytes: integer('prefixCacheBytes', DEFAULT_PREFIX_CACHE_BYTES, atLeast(0)),
    prefixBlockTokens: integer('prefixBlockTokens', DEFAULT_PREFIX_BLOCK_TOKENS, atLeast(1)),
    stateTimeoutMs: integer('stateTimeoutMs', DEFAULT_STATE_TIMEOUT_MS, atLeast(1)),
  };
}

/**
 * Makes the server's sessions over `options.llm`; listen with
 * `server.listen(port, host)`, or route requests to `server.handle` from a
 * server of your own.
 */
export function createServer(options: ServerOptions): Promise<LlmServer> {
  return LlmServer.create(options);
}

/** What GET /health answers. */
export interface ServerStats {
  model: { name: string; layout: string; vocabSize: number; maxContextLen: number; maxSeqLen: number };
  pool: PoolStats;
  generations: GenerationCounts;
  /** Requests whose cache came from each place. */
  cacheSources: SessionsStats['sources'];
  prefixCache: PrefixCacheStats;
  stateStore: { location: string; available: boolean; stored: number; failures: number } | null;
  stopping: boolean;
}

export class LlmServer extends http.Server {
  /** Generations by how they ended. */
  readonly generations: GenerationCounts = { finished: 0, aborted: 0, failed: 0 };
  private stopping = false;
  private stopped: Promise<void> | undefined;
  /** The AbortController of every request between its body and its last byte. */
  private readonly inFlight = new Set<AbortController>();
  /** Requests received and not yet answered, per connection (see answerHeaders). */
  private readonly openRequests = new WeakMap<object, number>();
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly model: ModelInfo;

  private constructor(
    readonly llm: Llm,
    private readonly settings: Settings,
    private readonly sessions: Sessions,
    private readonly prefixCache: PrefixCache,
    private readonly store: GuardedStore | undefined,
    private readonly warn: (message: string) => void,
  ) {
    super();
    const { vocabSize, maxContextLen } = llm.metadata;
    this.model = { name: settings.modelName, vocabSize, maxContextLen };
    this.on('request', (request: http.IncomingMessage, response: http.ServerResponse) => void this.handle(request, response));
  }

  /** createServer(): the settings checked, then the sessions made. */
  static async create(options: ServerOptions): Promise<LlmServer> {
    const settings = checkSettings(options);
    const warn = options.warn ?? ((message: string) => console.warn(message));
    const prefixCache = new PrefixCache({ maxBytes: settings.prefixCacheBytes, blockTokens: settings.prefixBlockTokens });
    const store = options.stateStore === undefined ? undefined : new GuardedStore(options.stateStore, settings.stateTimeoutMs, warn);
    const sessions = await Sessions.create(options.llm, {
      sessions: settings.sessions,
      maxQueue: settings.maxQueue,
      prefixCache,
      store,
      keyPrefix: `etna:${settings.modelName}:`,
      warn,
    });
    return new LlmServer(options.llm, settings, sessions, prefixCache, store, warn);
  }

  get modelName(): string {
    return this.settings.modelName;
  }

  /** What GET /health answers. */
  get stats(): ServerStats {
    const { layout, vocabSize, maxContextLen, maxSeqLen } = this.llm.metadata;
    const { pool, sources, stored, storeFailures } = this.sessions.stats;
    return {
      model: { name: this.settings.modelName, layout, vocabSize, maxContextLen, maxSeqLen },
      pool,
      generations: { ...this.generations },
      cacheSources: sources,
      prefixCache: this.prefixCache.stats,
      stateStore:
        this.store === undefined
          ? null
          : { location: this.store.store.location, available: this.store.available, stored, failures: storeFailures },
      stopping: this.stopping,
    };
  }

  /** Answers one request: the server's own listener, or a server of yours that hands requests on. */
  readonly handle = async (request: http.IncomingMessage, response: http.ServerResponse): Promise<void> => {
    const { socket } = request;
    this.openRequests.set(socket, (this.openRequests.get(socket) ?? 0) + 1);
    response.on('close', () => this.openRequests.set(socket, (this.openRequests.get(socket) ?? 1) - 1));
    try {
      const { pathname } = new URL(request.url ?? '/', 'http://localhost');
      const matches = ROUTES.filter(([, pattern]) => pattern.test(pathname));
      if (matches.length === 0) {
        const routes = ROUTES.map(([, , name]) => name).join(', ');
        throw new ApiError(404, 'invalid_request_error', 'not_found', `no route for ${request.method} ${pathname} (routes: ${routes})`);
      }
      const route = matches.find(([method]) => method === request.method);
      if (route === undefined) {
        const allowed = matches.map(([method]) => method).join(', ');
        throw new ApiError(
          405,
          'invalid_request_error',
          'method_not_allowed',
          `${pathname} takes ${allowed}, not ${request.method}`,
          null,
          {
            allow: allowed,
          },
        );
      }
      await this.route(route[2], pathname, request, response);
    } catch (error) {
      const answer = toApiError(error);
      if (answer.status >= 500 && answer.code !== 'shutting_down')
        this.warn(`${request.method} ${request.url}: ${answer.code}: ${answer.message}`);
      if (response.headersSent || response.destroyed) return;
      this.sendJson(response, answer.status, answer.body, answer.headers);
    }
  };

  private async route(name: string, pathname: string, request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    if (name === 'GET /health') return this.sendJson(response, 200, this.stats);
    if (name === 'GET /v1/models') return this.sendJson(response, 200, { object: 'list', data: [this.modelCard()] });
    if (name === 'GET /v1/models/{model}') {
      const id = decodeURIComponent(pathname.slice('/v1/models/'.length));
      if (id !== this.settings.modelName) {
        throw new ApiError(
          404,
          'invalid_request_error',
          'model_not_found',
          `the model '${id}' does not exist; this server has '${this.settings.modelName}'`,
          'model',
        );
      }
      return this.sendJson(response, 200, this.modelCard());
    }
    if (this.stopping) throw new PoolClosedError();
    const body = parseBody(await readBody(request, this.settings.maxBodyBytes));
    const conversationId = this.conversationId(request);
    if (name === 'POST /v1/completions') {
      const { prompt, ...parsed } = parseCompletionRequest(body, this.model);
      return this.run(response, { shape: COMPLETION_SHAPE, prompt: this.promptTokens(prompt), conversationId, ...parsed });
    }
    const { messages, ...parsed } = parseChatRequest(body, this.model);
    const chat = chatPrompt(this.llm, messages);
    return this.run(response, {
      shape: CHAT_SHAPE,
      prompt: chat.tokens,
      conversationId,
      ...parsed,
      options: { ...chat.options, ...parsed.options },
    });
  }

  private modelCard(): object {
    return {
      id: this.settings.modelName,
      object: 'model',
      created: this.created,
      owned_by: 'etna',
      max_model_len: this.model.maxContextLen,
    };
  }

  private conversationId(request: http.IncomingMessage): string | undefined {
    const value = request.headers[CONVERSATION_HEADER];
    if (value === undefined) return undefined;
    if (typeof value !== 'string' || !CONVERSATION_ID.test(value)) {
      throw invalidField(
        'invalid_value',
        'X-Conversation-Id',
        'the X-Conversation-Id header must be 1 to 256 printable ASCII characters, no spaces',
      );
    }
    return value;
  }

  /** A text prompt's tokens, after the BOS tokens; token ids as they are. */
  private promptTokens(prompt: string | readonly number[]): number[] {
    if (typeof prompt !== 'string') return [...prompt];
    const bos = new Array<number>(this.settings.numBos).fill(this.llm.metadata.bosId ?? 0);
    return [...bos, ...this.llm.tokenizer.encode(prompt)];
  }

  /** Refuses what the context cannot hold before the request takes a session. */
  private checkContext(job: Job): void {
    const context = this.model.maxContextLen;
    const param = job.shape.route === 'chat' ? 'messages' : 'prompt';
    if (job.prompt.length === 0) throw invalidField('invalid_value', param, 'the prompt has no tokens');
    // The last generated token is never fed, so a reply takes prompt + max_tokens - 1 positions.
    const room = context - job.prompt.length + 1;
    const wanted = job.options.maxNewTokens ?? 1;
    if (wanted > room) {
      throw invalidField(
        'context_length_exceeded',
        job.options.maxNewTokens === undefined || room < 1 ? param : 'max_tokens',
        `this model's context holds ${context} tokens; the prompt takes ${job.prompt.length}, leaving room for ${Math.max(room, 0)} ` +
          `new token(s)${job.options.maxNewTokens === undefined ? '' : `, and max_tokens asks for ${job.options.maxNewTokens}`}`,
      );
    }
  }

  private async run(response: http.ServerResponse, job: Job): Promise<void> {
    this.checkContext(job);
    const controller = new AbortController();
    // The response closes before it has finished only when the client has gone.
    response.on('close', () => {
      if (!response.writableFinished) controller.abort(new Error('the client closed the connection'));
    });
    this.inFlight.add(controller);
    try {
      const conversation = job.conversationId === undefined ? undefined : await this.sessions.conversation(job.conversationId);
      let session: LlmSession;
      try {
        session = await this.sessions.acquire(job.prompt, conversation, controller.signal);
      } catch (error) {
        // The client left while waiting in line: nobody to answer.
        if (controller.signal.aborted && error === controller.signal.reason) return;
        throw error;
      }
      try {
        await this.reply(response, session, job, controller.signal);
      } finally {
        this.sessions.release(session);
      }
    } finally {
      this.inFlight.delete(controller);
    }
  }

  /**
   * Generates and answers: a stream begins with the first piece (so what
   * generate() refuses before its first call is still a plain error answer);
   * the conversation's state is stored before the reply's end, so a client
   * that has the reply can send the next turn to any replica.
   */
  private async reply(response: http.ServerResponse, session: LlmSession, job: Job, signal: AbortSignal): Promise<void> {
    const { shape } = job;
    const header = replyHeader(shape, this.settings.modelName);
    // A chunk carries the log-probabilities of the tokens sampled since the chunk before it: its own, and
    // any sampled while the client was being written to (their text follows in a later chunk).
    const writeLogprobs = job.options.logprobs === true ? shape.logprobsWriter() : undefined;
    const sampled: TokenLogprob[] = [];
    const takeLogprobs = (): WireLogprobs =>
      writeLogprobs === undefined || sampled.length === 0 ? null : writeLogprobs(sampled.splice(0));
    const onToken = (_id: number, logprobs: TokenLogprob | undefined): void => {
      if (logprobs !== undefined && job.stream) sampled.push(logprobs);
    };
    const generation = session.complete(job.prompt, { ...job.options, signal, onToken });
    let started = false;
    const start = async (): Promise<void> => {
      if (started) return;
      started = true;
      response.writeHead(
        200,
        this.answerHeaders(response, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' }),
      );
      const opening = shape.opening(header);
      if (opening !== undefined) await writeEvent(response, opening);
    };
    let result;
    try {
      if (job.stream) {
        for await (const piece of generation) {
          await start();
          await writeEvent(response, shape.chunk(header, piece, null, takeLogprobs()));
        }
      }
      result = await generation;
    } catch (error) {
      // Leaving the loop early stops the generation; it is over once its result has settled.
      await generation.result.catch(() => undefined);
      const answer = toApiError(error);
      if (answer.status >= 500) this.generations.failed++;
      if (!started) throw error;
      await writeEvent(response, answer.body);
      response.end();
      return;
    }
    if (result.stopReason === 'aborted') {
      this.generations.aborted++;
      // Cut by the drain deadline: the client is still there and is told; a client that left is not.
      if (!(signal.reason instanceof PoolClosedError)) return;
      if (!job.stream) throw signal.reason;
      await start();
      await writeEvent(response, toApiError(signal.reason).body);
      response.end();
      return;
    }
    this.generations.finished++;
    if (job.conversationId !== undefined) await this.sessions.storeConversation(session, job.conversationId);
    const finish = finishReason(result.stopReason);
    const usage = usageOf(result);
    if (job.stream) {
      await start();
      await writeEvent(response, shape.chunk(header, '', finish, takeLogprobs()));
      if (job.includeUsage) await writeEvent(response, shape.usage(header, usage));
      await writeEvent(response, '[DONE]');
      response.end();
    } else {
      const logprobs = writeLogprobs === undefined ? null : writeLogprobs(result.logprobs ?? []);
      this.sendJson(response, 200, shape.reply(header, result.text, finish, usage, logprobs));
    }
    await this.sessions.cachePrefix(session, job.prompt);
  }

  /**
   * While stopping, the answer to the last request received on a connection
   * ends it, so no client sends another there; requests already received
   * behind it (pipelined) are answered first.
   */
  private answerHeaders(response: http.ServerResponse, headers: Record<string, string | number>): Record<string, string | number> {
    return this.stopping && this.openRequests.get(response.req.socket) === 1 ? { ...headers, connection: 'close' } : headers;
  }

  private sendJson(response: http.ServerResponse, status: number, body: object, headers: Readonly<Record<string, string>> = {}): void {
    const text = JSON.stringify(body);
    response.writeHead(
      status,
      this.answerHeaders(response, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers }),
    );
    response.end(text);
  }

  /**
   * Stops taking work and resolves once stopped: new requests, and those
   * waiting for a session, get 503 while the server keeps listening (so
   * clients are told rather than refused); running generations finish, and
   * those still running after `drainTimeoutMs` are cut (a stream gets an
   * error event, a whole reply a 503). Then the server stops listening,
   * closes idle connections and disposes its sessions. The Llm and the state
   * store are the caller's to dispose.
   */
  shutdown(options: { drainTimeoutMs?: number } = {}): Promise<void> {
    this.stopped ??= this.drain(options.drainTimeoutMs ?? 10_000);
    return this.stopped;
  }

  private async drain(drainTimeoutMs: number): Promise<void> {
    this.stopping = true;
    const drained = this.sessions.close();
    const deadline = setTimeout(() => {
      for (const controller of this.inFlight) controller.abort(new PoolClosedError());
    }, drainTimeoutMs);
    await drained;
    clearTimeout(deadline);
    if (!this.listening) return;
    // A keep-alive client may have sent a request on a connection that looks
    // idle here, and closing a connection that holds a request resets it: wait
    // briefly for requests on their way (they get 503 and `connection: close`),
    // then stop listening and close the idle connections (close() does).
    await new Promise((resolve) => setTimeout(resolve, IDLE_CLOSE_DELAY_MS));
    const closed = new Promise<void>((resolve) => this.close(() => resolve()));
    const grace = setTimeout(() => this.closeAllConnections(), CLOSE_GRACE_MS).unref();
    await closed;
    clearTimeout(grace);
  }
}
