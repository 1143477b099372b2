// What a module holds and how its methods share memory, in users' words: the
// shareMemoryArenas option, the one mapping from it to the word the addon
// parses, and MemoryReport (which the addon fills field for field). The
// package entry re-exports the types.
import { EtnaError } from './errors.js';

/**
 * How methods share planned memory.
 * - `true`: one activation arena (mem_id 1) and one state arena (mem_id 2) for the whole module.
 * - `false`: every method its own arenas (ExecuTorch's default); state does not carry across methods.
 * - `'state'`: share only mem_id 2 (for programs that keep per-method buffers in mem_id 1).
 * - `'auto'` (default): `true` when two or more methods plan a mem_id 2 arena, else `false`.
 */
export type ShareMemoryArenas = boolean | 'state' | 'auto';

/**
 * The one place the sharing option becomes the word the addon parses: the
 * same words users give (`true`, `false`, `'state'`, `'auto'`) and the CLI's
 * `--share` takes. The module reports the resolved choice as
 * `MemoryReport.mode`: `true` -> 'shared', `'state'` -> 'state',
 * `false` -> 'unshared'; `'auto'` resolves to 'shared' or 'unshared'.
 */
export const SHARE_WORDS = ['true', 'false', 'state', 'auto'] as const;
export type ShareWord = (typeof SHARE_WORDS)[number];

export function shareWord(value: ShareMemoryArenas | undefined): ShareWord {
  if (value === undefined) return 'auto';
  if (value === true || value === false || value === 'state' || value === 'auto') return String(value) as ShareWord;
  throw new EtnaError('INVALID_INPUT', `shareMemoryArenas must be true, false, 'state' or 'auto', got ${JSON.stringify(value)}`);
}

/** The option value a share word stands for (the inverse of `shareWord`). */
export function shareOption(word: ShareWord): ShareMemoryArenas {
  return word === 'true' ? true : word === 'false' ? false : word;
}

export interface ArenaReport {
  memoryId: number;
  bytes: number;
  shared: boolean;
  /**
   * Borrowed from the program's pool for each call instead of owned: the
   * module's mem_id 1 when it shares arenas and nothing is loaded into mem_id 1.
   */
  pooled: boolean;
  methods: string[];
}

/**
 * What a module holds. Without sharing, methods load on first use, so their
 * arenas and delegate memory appear once each has run.
 */
export interface MemoryReport {
  /** The resolved sharing: 'shared' (`true`), 'state' (`'state'`) or 'unshared' (`false`). */
  mode: 'shared' | 'state' | 'unshared';
  /** Why that mode was chosen. */
  reason: string;
  arenas: ArenaReport[];
  /** Arena bytes the methods use: the module's own plus the pooled activation arena (`pooledArenaBytes`). */
  plannedBytes: number;
  /** What one set of arenas per method would need. */
  unsharedPlannedBytes: number;
  /** Bytes of the distinct constants the methods read, each counted once; read in place from the program's bytes (copied or mapped once per program, not per module). */
  constantBytes: number;
  /**
   * Delegate weights this module uses, in the form the delegate runs them
   * (packed weights and padded constant copies), whether or not other modules
   * share them.
   */
  packedWeightBytes: number;
  /**
   * The part of `packedWeightBytes` that other live modules over the same
   * `Program` use too: it exists once per program, not once per module.
   * `packedWeightBytes - sharedPackedWeightBytes` is what this module alone keeps alive.
   */
  sharedPackedWeightBytes: number;
  /** Delegate scratch memory the module uses: its own plus what it borrows (`pooledWorkspaceBytes`). */
  workspaceBytes: number;
  /**
   * The activation arena (mem_id 1) each call borrows from the program's pool,
   * which holds one per call in flight over the program; 0 when the module owns it.
   */
  pooledArenaBytes: number;
  /** The delegate workspace each call borrows from the program's pool; 0 when the module owns its workspaces. */
  pooledWorkspaceBytes: number;
  /** What this module alone keeps alive: its own arenas (its state) and workspaces, and weights no other module uses. */
  ownedBytes: number;
  /**
   * What it uses that the program holds for all its modules: shared weights
   * (`sharedPackedWeightBytes`) and the pooled arena and workspace.
   */
  sharedBytes: number;
  /**
   * The part of `ownedBytes` in pages of its own arenas that nothing has
   * written yet, which costs no memory until it is: a state arena is reserved
   * whole at load, and a KV cache fills as the session runs. The module
   * reports `ownedBytes - untouchedBytes` to V8 as external memory.
   */
  untouchedBytes: number;
  /** Per method: the constant bytes it reads (methods may read the same constants; `constantBytes` counts them once). */
  methods: { name: string; constantBytes: number }[];
}
