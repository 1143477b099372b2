// `etna import-onnx MODEL.onnx -o OUT.pte [options]`: an ONNX model as a
// multi-method program, state pairs in shared buffers.
import fs from 'node:fs';

import { EtnaError } from '../errors.js';
import { formatBounds } from '../onnx/bounded.js';
import { importOnnx, type ImportedTensorInfo, type OnnxContextWindow, type OnnxStatePair } from '../onnx/index.js';
import { readInputFile, reportUsageError, type Command, type ParsedArgs } from './command.js';
import { formatBytes } from '../format.js';

export const IMPORT_ONNX: Command = {
  spec: {
    name: 'import-onnx',
    synopsis: 'MODEL.onnx -o OUT.pte',
    brief: 'import an ONNX model, state pairs in shared buffers',
    summary: 'Imports an ONNX model as a program; state pairs live in shared buffers at mem_id 2 (docs/onnx.md).',
    options: [
      { name: 'output', short: 'o', value: 'OUT.pte', help: 'where to write the program (required)' },
      { name: 'bind', value: 'NAME=VALUE', multiple: true, help: 'fix a scalar input at import time (e.g. --bind sr=16000)' },
      {
        name: 'shape',
        value: 'NAME=DxDx..',
        multiple: true,
        help: 'shape of an input with symbolic dims (full shape, context included); a dim LO..HI varies per call',
      },
      {
        name: 'state',
        value: 'IN:OUT',
        multiple: true,
        help: 'keep IN/OUT as one shared buffer at mem_id 2, read from IN and written back in place',
      },
      {
        name: 'context',
        value: 'INPUT:KEEP',
        multiple: true,
        help: 'keep the last KEEP elements of INPUT (last dim) between calls; the method takes only the new part',
      },
      { name: 'method', value: 'NAME', help: 'name of the method running the graph (default forward)' },
      { name: 'wide-accumulation', help: 'compute float32 convolutions and matrix products in float64' },
      { name: 'no-xnnpack', help: 'portable kernels only (by default float32 convolutions and products run on XNNPACK)' },
    ],
  },
  run: (args) => {
    const output = args.string('output');
    if (output === undefined) return reportUsageError(IMPORT_ONNX.spec, 'missing -o OUT.pte');
    return runImportOnnx(args, output);
  },
};

function splitPair(text: string, separator: string, flag: string): [string, string] {
  const at = text.lastIndexOf(separator);
  if (at <= 0 || at === text.length - 1) throw new EtnaError('INVALID_INPUT', `${flag} ${text}: expected A${separator}B`);
  return [text.slice(0, at), text.slice(at + 1)];
}

function parseNumber(text: string, flag: string): number | bigint {
  if (/^-?\d+$/.test(text)) return BigInt(text);
  const value = Number(text);
  if (!Number.isFinite(value)) throw new EtnaError('INVALID_INPUT', `${flag}: '${text}' is not a number`);
  return value;
}

function runImportOnnx(args: ParsedArgs, output: string): number {
  const method = args.string('method') ?? 'forward';
  const bind: Record<string, number | bigint> = {};
  for (const item of args.list('bind')) {
    const [name, value] = splitPair(item, '=', '--bind');
    bind[name] = parseNumber(value, `--bind ${name}`);
  }
  // The importer reads the text form (sizes and LO..HI ranges).
  const shapes: Record<string, string> = {};
  for (const item of args.list('shape')) {
    const [name, shape] = splitPair(item, '=', '--shape');
    shapes[name] = shape;
  }
  const state: OnnxStatePair[] = args.list('state').map((item) => {
    const [input, output] = splitPair(item, ':', '--state');
    return { input, output };
  });
  const context: OnnxContextWindow[] = args.list('context').map((item) => {
    const [input, keep] = splitPair(item, ':', '--context');
    return { input, keep: Number(keep) };
  });
  const model = readInputFile(args.positionals[0]!, 'ONNX model');
  const result = importOnnx(model, {
    bind,
    shapes,
    state,
    context,
    method,
    wideAccumulation: args.flag('wide-accumulation'),
    xnnpack: !args.flag('no-xnnpack'),
  });
  fs.writeFileSync(output, result.bytes);
  const tensor = (t: ImportedTensorInfo): string => `${t.name} ${t.dtype}[${formatBounds({ max: t.shape, min: t.minShape ?? t.shape })}]`;
  const io = (list: ImportedTensorInfo[]): string => list.map(tensor).join(', ') || '-';
  console.log(
    `wrote ${output} (${formatBytes(result.bytes.length)}), opset ${result.opset}: ${result.nodes.lowered} nodes lowered, ` +
      `${result.nodes.folded} folded; ${result.calls.delegate} delegate calls, ${result.calls.kernel} kernel calls`,
  );
  console.log(`  ${method}(${io(result.inputs)}) -> ${io(result.outputs)}`);
  if (result.stateBuffers.length > 0) {
    console.log(`  state at mem_id 2: ${io(result.stateBuffers)}`);
    console.log(`  methods: ${result.methods.join(', ')}`);
  }
  return 0;
}
