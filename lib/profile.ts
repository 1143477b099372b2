// Profile events of module calls, the Chrome trace they become, and the
// per-name summary the CLI prints. Recording happens natively (the
// instruction loop and the delegates); see docs/profiling.md.

/**
 * What an event measures:
 * - `js`: one call as JavaScript sees it, from handing it to the addon (after any queue wait) to its results being back;
 * - `call`: the native instruction loop of that call (named by the method);
 * - `kernel`: one KernelCall (named by its operator, `aten::add.out`);
 * - `delegate`: one DelegateCall (named by its backend, `XnnpackBackend`);
 * - `instruction`: a MoveCall, JumpFalseCall or FreeCall;
 * - `stage`: one step a delegate runs inside its DelegateCall (for XNNPACK: a
 *   subgraph runtime, a packed operator or an etna kernel).
 */
export type ProfileCategory = 'js' | 'call' | 'kernel' | 'delegate' | 'instruction' | 'stage';

/** One timed step of a profiled call. */
export interface ProfileEvent {
  /** The API method (`js`), the program method (`call`), the operator, the backend id or the stage's name. */
  name: string;
  category: ProfileCategory;
  /** The program method the call ran. */
  method: string;
  /** The call's position among every call made on its module (0 for the first). */
  call: number;
  /** Start in microseconds on a monotonic clock shared by every module of the process. */
  startUs: number;
  durationUs: number;
  /** Events enclosing this one: 0 for `js`, 1 for `call`, 2 for instructions, 3 for delegate stages. */
  depth: number;
  /** The instruction's index in the method (instructions), the stage's index in its delegate (stages), else -1. */
  index: number;
  /** Which module ran the call: a number unique in the process, used as the trace's thread id. */
  module: number;
}

/** One Chrome trace event ("complete" event), as onnxruntime's profiler writes them. */
export interface ChromeTraceEvent {
  name: string;
  cat: ProfileCategory;
  ph: 'X';
  /** Microseconds since the first event of the trace. */
  ts: number;
  dur: number;
  pid: number;
  tid: number;
  args: { method: string; call: number; index?: number };
}

// Three decimals keep nanoseconds: sub-microsecond kernels keep a duration.
function roundUs(us: number): number {
  return Math.round(us * 1000) / 1000;
}

/**
 * Turns profile events into Chrome trace events (JSON-serialisable; open the
 * file in https://ui.perfetto.dev or chrome://tracing). Times start at the
 * first event; each module is one thread (`tid`) of the process (`pid`).
 */
export function toChromeTrace(events: readonly ProfileEvent[], options: { pid?: number } = {}): ChromeTraceEvent[] {
  const origin = events.reduce((min, event) => Math.min(min, event.startUs), Infinity);
  const pid = options.pid ?? process.pid;
  return events.map((event) => {
    // Rounded ends, not rounded durations, so children stay inside their parent.
    const ts = roundUs(event.startUs - origin);
    const end = roundUs(event.startUs + event.durationUs - origin);
    const args: ChromeTraceEvent['args'] = { method: event.method, call: event.call };
    if (event.index >= 0) args.index = event.index;
    return { name: event.name, cat: event.category, ph: 'X', ts, dur: roundUs(end - ts), pid, tid: event.module, args };
  });
}

/** Time spent in one operator, delegate or stage name over the profiled calls. */
export interface ProfileSummaryRow {
  name: string;
  category: ProfileCategory;
  /** Events of this name. */
  count: number;
  /** Self time: the events' durations minus the events nested in them (a delegate's stages), in milliseconds. */
  selfMs: number;
  /** selfMs as a percentage of the calls' native time (the `call` events). */
  percent: number;
}

/**
 * Self time per name and category, largest first: where the calls' native
 * time went. The rows add up to the calls' time, less the loop's own
 * bookkeeping between instructions.
 */
export function summarizeProfile(events: readonly ProfileEvent[]): ProfileSummaryRow[] {
  const selfUs = events.map((event) => event.durationUs);
  // Events come in open order with their depth: the one below the top of the
  // stack is its parent.
  const open: number[] = [];
  events.forEach((event, i) => {
    while (open.length > 0 && events[open[open.length - 1]!]!.depth >= event.depth) open.pop();
    const parent = open[open.length - 1];
    if (parent !== undefined && events[parent]!.depth === event.depth - 1) selfUs[parent]! -= event.durationUs;
    open.push(i);
  });
  const callUs = events.reduce((sum, event) => sum + (event.category === 'call' ? event.durationUs : 0), 0);
  const rows = new Map<string, ProfileSummaryRow>();
  events.forEach((event, i) => {
    if (event.category === 'js' || event.category === 'call') return;
    const key = `${event.category}\u0000${event.name}`;
    const row = rows.get(key) ?? { name: event.name, category: event.category, count: 0, selfMs: 0, percent: 0 };
    row.count++;
    row.selfMs += selfUs[i]! / 1000;
    rows.set(key, row);
  });
  const sorted = [...rows.values()].sort((a, b) => b.selfMs - a.selfMs);
  for (const row of sorted) row.percent = callUs > 0 ? (row.selfMs * 1000 * 100) / callUs : 0;
  return sorted;
}
