// `etna inspect FILE [--json]`: what a program holds, without running it.
import { EtnaError, toEtnaError } from '../errors.js';
import { Program } from '../program.js';
import type { ProgramDescription, ValueDescription } from '../program-types.js';
import { formatBytes, formatValue, table } from './format.js';

export interface InspectIO {
  kind: string;
  dtype?: string;
  shape?: number[];
  dynamism?: string;
  planned?: boolean;
}

function ioJson(value: ValueDescription): InspectIO {
  if (value.kind !== 'tensor') return { kind: value.kind };
  return { kind: 'tensor', dtype: value.dtype, shape: value.shape, dynamism: value.dynamism, planned: value.planned };
}

/** The JSON document `etna inspect --json` prints (docs/cli.md). */
export function inspectJson(file: string, description: ProgramDescription): object {
  const header = description.extendedHeader;
  return {
    file,
    identifier: description.identifier,
    extendedHeader: header
      ? { headerLength: header.headerLength, programSize: header.programSize, segmentBaseOffset: header.segmentBaseOffset }
      : null,
    segments: description.segments,
    namedDataKeys: description.namedDataKeys,
    constants: description.constants,
    delegates: description.delegates,
    methods: description.methods.map((method) => ({
      name: method.name,
      inputs: method.inputs.map(ioJson),
      outputs: method.outputs.map(ioJson),
      operators: method.operators,
      delegates: method.delegates,
      instructions: method.instructions,
      memoryPlan: method.memoryPlan,
      constantBytes: method.constantBytes,
      state: method.state,
    })),
  };
}

export function inspectText(file: string, fileSize: number, description: ProgramDescription): string {
  const header = description.extendedHeader;
  const lines = [
    `${file}: ExecuTorch program (${description.identifier}), ${formatBytes(fileSize)}`,
    `  extended header: ${header ? `${header.headerLength} bytes, program ${formatBytes(header.programSize)}, segments at byte ${header.segmentBaseOffset}` : 'none'}`,
    `  segments: ${description.segments}, named data keys: ${description.namedDataKeys}, constants: ${description.constants.count} (${formatBytes(description.constants.bytes)})`,
  ];
  for (const delegate of description.delegates) {
    lines.push(`  delegate ${delegate.id}: ${formatBytes(delegate.bytes)} ${delegate.location}`);
  }
  for (const method of description.methods) {
    const arenas = method.memoryPlan
      .slice(1)
      .map((bytes, i) => `arena ${i + 1}: ${formatBytes(bytes)}`)
      .join(', ');
    const instructions = Object.entries(method.instructions)
      .map(([kind, count]) => `${kind} x${count}`)
      .join(', ');
    lines.push('', `method ${method.name}`);
    lines.push(
      table([
        ['  inputs', method.inputs.map(formatValue).join(', ') || '(none)'],
        ['  outputs', method.outputs.map(formatValue).join(', ') || '(none)'],
        ['  operators', method.operators.join(', ') || '(none)'],
        ['  delegates', method.delegates.join(', ') || '(none)'],
        ['  instructions', instructions || '(none)'],
        ['  memory plan', arenas || '(nothing planned)'],
        ['  constants', formatBytes(method.constantBytes)],
        ...method.state.map((t, i) => [i === 0 ? '  state (mem_id 2)' : '', `${t.name ?? `values[${t.value}]`} ${t.dtype}[${t.shape.join('x')}] at ${t.offset}, ${formatBytes(t.bytes)}`]),
      ]),
    );
  }
  return lines.join('\n');
}

export function runInspect(file: string, json: boolean): number {
  try {
    const program = Program.load(file);
    const description = program.describe();
    console.log(json ? JSON.stringify(inspectJson(file, description), null, 2) : inspectText(file, program.handle.fileSize, description));
    return 0;
  } catch (error) {
    const etnaError: EtnaError = toEtnaError(error);
    if (json) console.log(JSON.stringify({ error: { code: etnaError.code, message: etnaError.message } }));
    else console.error(`etna inspect: ${etnaError.code}: ${etnaError.message}`);
    return 1;
  }
}
