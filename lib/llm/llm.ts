// Text in, text out over one Program: `Llm` loads the program, its tokenizer
// and its metadata once, and each session is a Module over the program
// (weights packed once, a KV cache of its own) that runs the generation loop
// of session.ts, as ExecuTorch's TextLLMRunner does.
import { describeValue, EtnaError, toEtnaError } from '../errors.js';
import { Module, MODULE_OPTIONS, snapshotBytes, type ModuleOptions } from '../module.js';
import { asyncDisposeSymbol, checkOptionKeys, checkProgramSource, Program, type ProgramSource } from '../program.js';
import { ChatSession, type ChatSessionOptions } from './chat.js';
import { CHAT_TEMPLATE_OPTIONS, chatTemplates, type ChatMessage, type ChatTemplateOptions, type RenderedChat } from './chat-template.js';
import { besideFile, generationEosIds, readGenerationConfig, type ConfigSource } from './config.js';
import { Generation } from './generation.js';
import { readLlmMetadata, type LlmMetadata } from './metadata.js';
import { GENERATE_OPTIONS, type GenerateOptions } from './options.js';
import { LlmSession } from './session.js';
import { loadTokenizer, type LlmTokenizer, type TokenizerSource } from './tokenizer.js';

export interface LlmLoadOptions extends ModuleOptions {
  /** A tokenizer.json or tiktoken file (path or bytes), or a tokenizer made with `loadTokenizer`. */
  tokenizer: TokenizerSource;
  /**
   * tokenizer_config.json (a path, its bytes or the object): the chat
   * template and the BOS and EOS tokens. Default: the file beside a
   * tokenizer given by path.
   */
  tokenizerConfig?: ConfigSource;
  /** generation_config.json (a path, its bytes or the object), for its eos_token_id. Default: the file beside a tokenizer given by path. */
  generationConfig?: ConfigSource;
}

const LOAD_OPTIONS = ['tokenizer', 'tokenizerConfig', 'generationConfig'] as const;
const CHAT_OPTIONS = [...GENERATE_OPTIONS, ...CHAT_TEMPLATE_OPTIONS.filter((key) => key !== 'addGenerationPrompt')];

/** generate()'s options and a chat template's, but addGenerationPrompt: a reply always follows. */
export type ChatOptions = GenerateOptions & Omit<ChatTemplateOptions, 'addGenerationPrompt'>;

const now = (): number => performance.now();

/**
 * An LLM program with its tokenizer. `generate()` runs on a fresh session
 * (a module over the one program, so weights are packed once) and disposes
 * it: each call starts from an empty cache, and concurrent calls run side by
 * side, each giving what it would alone. `session()` keeps a cache across
 * turns.
 */
export class Llm {
  private disposed = false;
  /**
   * One module loaded ahead for the next `session()` (and so the next
   * `fork()`, `generate()` or `chat()`) to take, so that none of them waits
   * for a module to load: taking it starts loading the next one. Until a
   * fork has run, its arenas stay untouched and it holds little memory (its
   * `memoryReport().untouchedBytes` is nearly all of its arenas); see
   * forkRows. Disposed with the Llm; undefined when its load failed (the
   * next session then loads a module itself, and reports the error).
   */
  private spare: Promise<Module | undefined> | undefined;
  /**
   * The state's bytes the latest fork copied. Once a session has been
   * forked, the module loaded ahead has the pages under them faulted in
   * (with their bytes unchanged), off the path of the fork that takes it:
   * the fork's copy then writes into memory in place, and costs what copying
   * its rows does, where fresh pages would be zeroed first, whole huge pages
   * of them, twice the rows' bytes when the rows fill half of each cache.
   * What it costs: one session's rows in memory while the module waits.
   */
  private forkRows: readonly (readonly [number, number])[] | undefined;
  /**
   * Whether a text prompt that starts a context (`generate()`, the first
   * turn of a session, `complete()`) gets one BOS token by default: the
   * model has one (`metadata.bosId`) and the tokenizer adds it to a text
   * (tokenizer_config's add_bos_token, else its post-processor).
   */
  readonly addsBos: boolean;
  /** @internal Ranges [from, to) of ids the tokenizer lacks, never sampled: the program's padding past the tokenizer's vocabulary. */
  readonly unsampled: readonly (readonly [number, number])[];

  private constructor(
    readonly program: Program,
    private readonly ownsProgram: boolean,
    readonly tokenizer: LlmTokenizer,
    readonly metadata: LlmMetadata,
    private readonly moduleOptions: ModuleOptions,
    /** Milliseconds `Llm.load` took: the program, its metadata and the tokenizer. */
    readonly loadMs: number,
  ) {
    this.addsBos = metadata.bosId !== undefined && (tokenizer.addsBos ?? true);
    const unsampled: [number, number][] = [];
    for (const id of tokenizer.missingIds ?? []) {
      const last = unsampled.at(-1);
      if (last !== undefined && last[1] === id) last[1] = id + 1;
      else unsampled.push([id, id + 1]);
    }
    if (tokenizer.vocabSize < metadata.vocabSize) unsampled.push([tokenizer.vocabSize, metadata.vocabSize]);
    this.unsampled = unsampled;
  }

  /**
   * Loads an LLM program (a path, bytes or a loaded Program) and its
   * tokenizer, reads the program's metadata and checks that the runner can
   * drive it. Other options are those of `Module.load`, used for every session.
   */
  static async load(pte: ProgramSource | Program, options: LlmLoadOptions): Promise<Llm> {
    const started = now();
    if (!(pte instanceof Program)) checkProgramSource(pte, 'Llm.load');
    const checked = checkOptionKeys(options, [...MODULE_OPTIONS, ...LOAD_OPTIONS], 'Llm.load');
    if (checked['tokenizer'] === undefined) {
      throw new EtnaError(
        'INVALID_INPUT',
        'Llm.load: options.tokenizer is required (a tokenizer.json or tiktoken file, its bytes, or a loaded tokenizer)',
      );
    }
    const { tokenizer: tokenizerSource, tokenizerConfig, generationConfig, ...moduleOptions } = options;
    const tokenizer = loadTokenizer(tokenizerSource, tokenizerConfig === undefined ? {} : { tokenizerConfig });
    const besideGeneration = typeof tokenizerSource === 'string' ? besideFile(tokenizerSource, 'generation_config.json') : undefined;
    const generationSource = generationConfig ?? besideGeneration;
    const eosFromGeneration =
      generationSource === undefined
        ? []
        : generationEosIds(
            readGenerationConfig(generationSource, generationSource === besideGeneration ? besideGeneration : 'generationConfig'),
          );
    const owns = !(pte instanceof Program);
    const program = pte instanceof Program ? pte : Program.load(pte, moduleOptions.mmap === undefined ? {} : { mmap: moduleOptions.mmap });
    try {
      const { mmap: _mmap, ...perModule } = moduleOptions;
      const module = await Module.load(program, perModule);
      try {
        const metadata = await readLlmMetadata({
          program,
          module,
          tokenizer,
          sharesState: module.memoryReport().mode !== 'unshared',
          generationEosIds: eosFromGeneration,
        });
        return new Llm(program, owns, tokenizer, metadata, perModule, now() - started);
      } finally {
        await module.dispose();
      }
    } catch (error) {
      if (owns) program.dispose();
      throw toEtnaError(error);
    }
  }

  /**
   * Renders a conversation with the tokenizer's chat template (or
   * `options.template`) and tokenizes it: `{ text, tokens }`, as
   * transformers' `apply_chat_template` with `tokenize: true` gives them for
   * ordinary messages. The template's control tokens are control tokens; the
   * text of the messages is text, special tokens' text included, unless
   * `parseSpecialTokensInContent` is set.
   */
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): RenderedChat {
    return chatTemplates(this.tokenizer).apply(messages, options);
  }

  /** The assistant's reply to `messages`, generated on a session of its own (as `generate()`). */
  chat(messages: readonly ChatMessage[], options: ChatOptions = {}): Generation {
    return new Generation(async (emit, stopped) => {
      const templateOptions: Record<string, unknown> = {};
      const generateOptions: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(checkOptionKeys(options, CHAT_OPTIONS, 'chat'))) {
        (CHAT_TEMPLATE_OPTIONS.includes(key as keyof ChatTemplateOptions) ? templateOptions : generateOptions)[key] = value;
      }
      const { tokens } = this.applyChatTemplate(messages, { ...templateOptions, addGenerationPrompt: true });
      const session = await this.session();
      try {
        return await session.run(tokens, generateOptions, emit, stopped);
      } finally {
        await session.dispose();
      }
    });
  }

  /** A conversation that keeps its messages and its cache between turns (`send()`). */
  async chatSession(options: ChatSessionOptions = {}): Promise<ChatSession> {
    const known = ['systemPrompt', ...CHAT_TEMPLATE_OPTIONS.filter((key) => key !== 'addGenerationPrompt')];
    const { systemPrompt, ...templateOptions } = checkOptionKeys(options, known, 'chatSession') as ChatSessionOptions;
    if (systemPrompt !== undefined && typeof systemPrompt !== 'string') {
      throw new EtnaError('INVALID_INPUT', `chatSession: systemPrompt must be a string, got ${describeValue(systemPrompt)}`);
    }
    // Checked now, so that a bad option fails here rather than at the first send.
    chatTemplates(this.tokenizer).check(templateOptions, 'chatSession');
    return new ChatSession(this, await this.session(), templateOptions, systemPrompt);
  }

  /** A new conversation with an empty cache. */
  async session(): Promise<LlmSession> {
    const session = await this.takeSession();
    this.makeSpare();
    return session;
  }

  /**
   * @internal The new session of a fork, which `fill` copies `rows` of the
   * state into; the next module starts loading once it has, so as not to
   * compete with the copy.
   */
  async forkSession(rows: readonly (readonly [number, number])[], fill: (session: LlmSession) => Promise<void>): Promise<LlmSession> {
    this.forkRows = rows;
    const session = await this.takeSession();
    try {
      await fill(session);
    } finally {
      this.makeSpare();
    }
    return session;
  }

  // A session on the module loaded ahead, or on one loaded now when there is none.
  private async takeSession(): Promise<LlmSession> {
    if (this.disposed) throw new EtnaError('DISPOSED', 'Llm has been disposed');
    const started = now();
    const spare = this.spare;
    this.spare = undefined;
    const module = (await spare) ?? (await Module.load(this.program, this.moduleOptions));
    return new LlmSession(this, module, now() - started);
  }

  // Starts loading the module the next session will take, unless one is on its way.
  private makeSpare(): void {
    if (this.disposed || this.spare !== undefined) return;
    const rows = this.forkRows;
    this.spare = Module.load(this.program, this.moduleOptions).then(
      async (module) => {
        // Not faulted in, the pages are faulted by the copy: only slower.
        if (rows !== undefined) await module.populateState({ ranges: rows }).catch(() => undefined);
        return module;
      },
      () => undefined,
    );
  }

  /**
   * A new session where `session.save()` left one: the same cache rows,
   * tokens and pending token. Refused with INVALID_INPUT, and nothing made,
   * when the snapshot is cut short or comes from another program.
   */
  async restoreSession(snapshot: ArrayBuffer | ArrayBufferView): Promise<LlmSession> {
    snapshotBytes(snapshot, 'restoreSession: a session snapshot');
    const session = await this.session();
    try {
      await session.restore(snapshot);
      return session;
    } catch (error) {
      await session.dispose();
      throw toEtnaError(error);
    }
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
    const spare = this.spare;
    this.spare = undefined;
    await (await spare)?.dispose();
    if (this.ownsProgram) this.program.dispose();
  }

  async [asyncDisposeSymbol](): Promise<void> {
    await this.dispose();
  }
}
