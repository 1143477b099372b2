// Text in, text out over one Program: `Llm` loads the program, its tokenizer
// and its metadata once, and each session is a Module over the program
// (weights packed once, a KV cache of its own) that runs the generation loop
// of session.ts, as ExecuTorch's TextLLMRunner does.
import { EtnaError, toEtnaError } from '../errors.js';
import { Module, MODULE_OPTIONS, snapshotBytes, type ModuleOptions } from '../module.js';
import { asyncDisposeSymbol, checkOptionKeys, checkProgramSource, Program, type ProgramSource } from '../program.js';
import { Generation } from './generation.js';
import { readLlmMetadata, type LlmMetadata } from './metadata.js';
import type { GenerateOptions } from './options.js';
import { LlmSession } from './session.js';
import { loadTokenizer, type LlmTokenizer, type TokenizerSource } from './tokenizer.js';

export interface LlmLoadOptions extends ModuleOptions {
  /** A tokenizer.json or tiktoken file (path or bytes), or a tokenizer made with `loadTokenizer`. */
  tokenizer: TokenizerSource;
}

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
    if (this.ownsProgram) this.program.dispose();
  }

  async [asyncDisposeSymbol](): Promise<void> {
    await this.dispose();
  }
}
