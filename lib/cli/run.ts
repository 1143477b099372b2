// `etna run FILE`: runs one method, or a sequence of calls on one module.
import { writeFileSync } from 'node:fs';

import { EtnaError } from '../errors.js';
import { formatBytes, table } from '../format.js';
import { SHARE_WORDS, shareOption, type MemoryReport, type ShareMemoryArenas } from '../memory.js';
import { Module, type InputValue, type Value } from '../module.js';
import { summarizeProfile, toChromeTrace, type ProfileEvent } from '../profile.js';
import { readInputFile, type Command, type CommandSpec, type ParsedArgs } from './command.js';
import { formatOutput, SUMMARY_THRESHOLD } from './format.js';
import { FILLS, generateInputs, valueFromJson, valueToJson, type Fill } from './values-json.js';

const RUN_SPEC: CommandSpec = {
  name: 'run',
  synopsis: 'FILE',
  brief: 'run a method (or a sequence of calls) on one module and print the outputs',
  summary:
    'Loads FILE into one module, runs a method (or a sequence of calls) and prints the outputs.\n' +
    `Tensors of more than ${SUMMARY_THRESHOLD} elements print as a summary unless --full is given.`,
  options: [
    { name: 'method', value: 'NAME', help: 'the method to run (default forward, else the first method)' },
    { name: 'inputs', value: 'IN.json', help: 'inputs as a JSON array of values (default: generated from the metadata)' },
    { name: 'calls', value: 'CALLS.json', help: 'a JSON array of {"method", "inputs"} run in order on one module' },
    { name: 'external-data', value: 'FILE.ptd', help: 'the external data file the program takes tensors from' },
    { name: 'share', value: SHARE_WORDS.join('|'), help: 'shareMemoryArenas (default auto)' },
    { name: 'fill', value: 'zeros|ones|random', help: 'how generated tensor inputs are filled (default random)' },
    { name: 'seed', value: 'N', help: 'seed for --fill random (default 1)' },
    { name: 'full', help: 'print every element of long tensors instead of a summary' },
    { name: 'report', help: "also print the module's memory report" },
    {
      name: 'profile',
      value: 'TRACE.json',
      help: 'time every call: write a Chrome trace (Perfetto, chrome://tracing) and print the 10 costliest operators and stages',
    },
    { name: 'json', help: 'print one JSON object (outputs always in full)' },
  ],
};

export interface RunOptions {
  file: string;
  method?: string;
  inputs?: string;
  calls?: string;
  externalData?: string;
  share: ShareMemoryArenas;
  fill: Fill;
  seed: number;
  full: boolean;
  report: boolean;
  profile?: string;
  json: boolean;
}

export function runOptions(args: ParsedArgs): RunOptions {
  const share = args.choice('share', SHARE_WORDS, 'auto');
  return {
    file: args.positionals[0]!,
    method: args.string('method'),
    inputs: args.string('inputs'),
    calls: args.string('calls'),
    externalData: args.string('external-data'),
    share: shareOption(share),
    fill: args.choice('fill', FILLS, 'random'),
    seed: args.integer('seed', 1, 0),
    full: args.flag('full'),
    report: args.flag('report'),
    profile: args.string('profile'),
    json: args.flag('json'),
  };
}

interface Call {
  method: string;
  inputs: InputValue[] | undefined;
}

function readJson(path: string, what: string): unknown {
  const text = readInputFile(path, what).toString('utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new EtnaError('INVALID_INPUT', `${what} '${path}' is not JSON: ${(error as Error).message}`);
  }
}

function parseCalls(options: RunOptions, methodNames: string[]): Call[] {
  if (options.calls !== undefined) {
    const json = readJson(options.calls, 'calls file');
    if (!Array.isArray(json)) throw new EtnaError('INVALID_INPUT', 'the calls file must hold an array of {"method", "inputs"}');
    return json.map((entry, c) => {
      const { method, inputs } = (entry ?? {}) as { method?: unknown; inputs?: unknown };
      if (typeof method !== 'string') throw new EtnaError('INVALID_INPUT', `calls[${c}]: "method" must be a string`);
      if (inputs !== undefined && !Array.isArray(inputs)) throw new EtnaError('INVALID_INPUT', `calls[${c}]: "inputs" must be an array`);
      return { method, inputs: inputs?.map((v, i) => valueFromJson(v, `calls[${c}].inputs[${i}]`)) };
    });
  }
  const method = options.method ?? (methodNames.includes('forward') ? 'forward' : methodNames[0]);
  if (method === undefined) throw new EtnaError('METHOD_NOT_FOUND', 'this program has no methods');
  let inputs: InputValue[] | undefined;
  if (options.inputs !== undefined) {
    const json = readJson(options.inputs, 'inputs file');
    if (!Array.isArray(json)) throw new EtnaError('INVALID_INPUT', 'the inputs file must hold an array of values');
    inputs = json.map((v, i) => valueFromJson(v, `inputs[${i}]`));
  }
  return [{ method, inputs }];
}

function reportText(report: MemoryReport): string {
  const rows = report.arenas.map((arena) => [
    `  mem_id ${arena.memoryId}`,
    formatBytes(arena.bytes),
    arena.pooled ? 'borrowed per call from the program' : arena.shared ? 'shared' : 'per method',
    arena.methods.join(', '),
  ]);
  return [
    `memory: ${report.mode} (${report.reason})`,
    table(rows),
    `  planned ${formatBytes(report.plannedBytes)} allocated; per-method arenas would need ${formatBytes(report.unsharedPlannedBytes)}`,
    `  constants ${formatBytes(report.constantBytes)} (read in place), packed weights ${formatBytes(report.packedWeightBytes)}, ` +
      `workspace ${formatBytes(report.workspaceBytes)}`,
    `  owned by this module ${formatBytes(report.ownedBytes)}; held by the program for all its modules ` +
      `${formatBytes(report.sharedBytes)} (pooled arena ${formatBytes(report.pooledArenaBytes)}, pooled workspace ` +
      `${formatBytes(report.pooledWorkspaceBytes)})`,
  ].join('\n');
}

// Rows of the profile table the CLI prints.
const PROFILE_TABLE_ROWS = 10;

// The costliest names by self time, as a table.
function profileText(events: ProfileEvent[], file: string): string {
  const callMs = events.reduce((sum, event) => sum + (event.category === 'call' ? event.durationUs / 1000 : 0), 0);
  const calls = events.filter((event) => event.category === 'call').length;
  const rows = summarizeProfile(events)
    .slice(0, PROFILE_TABLE_ROWS)
    .map((row) => [`  ${row.name}`, row.category, String(row.count), row.selfMs.toFixed(3), `${row.percent.toFixed(1)}%`]);
  return [
    `profile: ${calls} call${calls === 1 ? '' : 's'}, ${callMs.toFixed(3)} ms in the instruction loop; trace written to ${file}`,
    table([['  name', 'kind', 'calls', 'self ms', '% of calls'], ...rows]),
  ].join('\n');
}

export async function runRun(options: RunOptions): Promise<number> {
  const module = await Module.load(options.file, { shareMemoryArenas: options.share, externalData: options.externalData });
  try {
    const calls = parseCalls(options, module.methodNames);
    if (options.profile !== undefined) module.startProfiling();
    const results: { method: string; outputs: Value[] }[] = [];
    for (const call of calls) {
      const inputs = call.inputs ?? generateInputs(call.method, module.methodMeta(call.method).inputs, options.fill, options.seed);
      results.push({ method: call.method, outputs: await module.execute(call.method, inputs) });
    }
    const report = options.report ? module.memoryReport() : undefined;
    let profile: string | undefined;
    if (options.profile !== undefined) {
      const events = module.endProfiling();
      writeFileSync(options.profile, JSON.stringify(toChromeTrace(events)));
      profile = profileText(events, options.profile);
    }
    if (options.json) {
      const calls = results.map(({ method, outputs }) => ({ method, outputs: outputs.map(valueToJson) }));
      console.log(JSON.stringify(report ? { calls, memory: report } : { calls }));
    } else {
      for (const result of results) {
        console.log(`${result.method}:`);
        result.outputs.forEach((output, i) => console.log(`  output ${i}: ${formatOutput(output, options.full)}`));
      }
      if (report) console.log(reportText(report));
    }
    // Beside --json's one object on stdout, the table goes to stderr.
    if (profile !== undefined) (options.json ? console.error : console.log)(profile);
    return 0;
  } finally {
    await module.dispose();
  }
}

export const RUN: Command = { spec: RUN_SPEC, run: (args) => runRun(runOptions(args)) };
