// `etna run FILE`: runs one method, or a sequence of calls on one module.
import fs from 'node:fs';

import { EtnaError, toEtnaError } from '../errors.js';
import { Module, type InputValue, type MemoryReport, type ShareMemoryArenas } from '../module.js';
import { formatBytes, table } from './format.js';
import { generateInputs, valueFromJson, valueToJson, type Fill } from './values-json.js';

export interface RunOptions {
  file: string;
  method?: string;
  inputs?: string;
  calls?: string;
  share?: string;
  json: boolean;
  fill: string;
  seed: number;
  report: boolean;
}

interface Call {
  method: string;
  inputs: InputValue[] | undefined;
}

function readJson(path: string, what: string): unknown {
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (error) {
    throw new EtnaError('INVALID_INPUT', `cannot read ${what} '${path}': ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new EtnaError('INVALID_INPUT', `${what} '${path}' is not JSON: ${(error as Error).message}`);
  }
}

function parseShare(text: string | undefined): ShareMemoryArenas {
  if (text === undefined || text === 'auto') return 'auto';
  if (text === 'true') return true;
  if (text === 'false') return false;
  if (text === 'state') return 'state';
  throw new EtnaError('INVALID_INPUT', `--share takes true, false, state or auto, got '${text}'`);
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
    arena.shared ? 'shared' : 'per method',
    arena.methods.join(', '),
  ]);
  return [
    `memory: ${report.mode} (${report.reason})`,
    table(rows),
    `  planned ${formatBytes(report.plannedBytes)} allocated; per-method arenas would need ${formatBytes(report.unsharedPlannedBytes)}`,
    `  constants ${formatBytes(report.constantBytes)} (read in place), packed weights ${formatBytes(report.packedWeightBytes)}, workspace ${formatBytes(report.workspaceBytes)}`,
  ].join('\n');
}

export async function runRun(options: RunOptions): Promise<number> {
  try {
    if (!['zeros', 'ones', 'random'].includes(options.fill)) {
      throw new EtnaError('INVALID_INPUT', `--fill takes zeros, ones or random, got '${options.fill}'`);
    }
    const module = await Module.load(options.file, { shareMemoryArenas: parseShare(options.share) });
    try {
      const calls = parseCalls(options, module.methodNames);
      const results: { method: string; outputs: unknown[] }[] = [];
      for (const call of calls) {
        const inputs = call.inputs ?? generateInputs(call.method, module.methodMeta(call.method).inputs, options.fill as Fill, options.seed);
        const outputs = await module.execute(call.method, inputs);
        results.push({ method: call.method, outputs: outputs.map(valueToJson) });
      }
      const report = options.report ? module.memoryReport() : undefined;
      if (options.json) {
        console.log(JSON.stringify(report ? { calls: results, memory: report } : { calls: results }));
      } else {
        for (const result of results) {
          console.log(`${result.method}:`);
          result.outputs.forEach((output, i) => console.log(`  output ${i}: ${JSON.stringify(output)}`));
        }
        if (report) console.log(reportText(report));
      }
      return 0;
    } finally {
      await module.dispose();
    }
  } catch (error) {
    const etnaError = toEtnaError(error);
    if (options.json) console.log(JSON.stringify({ error: { code: etnaError.code, message: etnaError.message } }));
    else console.error(`etna run: ${etnaError.code}: ${etnaError.message}`);
    return 1;
  }
}
