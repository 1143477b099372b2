// `etna import-onnx MODEL.onnx -o OUT.pte [options]`: an ONNX model as a
// multi-method program, state pairs in shared buffers.
import fs from 'node:fs';
import { parseArgs } from 'node:util';

import { EtnaError, toEtnaError } from '../errors.js';
import { importOnnx, type OnnxContextWindow, type OnnxStatePair } from '../onnx/index.js';
import { formatBytes } from './format.js';

export const IMPORT_ONNX_USAGE = `usage: etna import-onnx MODEL.onnx -o OUT.pte [--bind NAME=VALUE]... [--shape NAME=1x512]...
                        [--state IN:OUT]... [--context INPUT:KEEP]... [--method NAME]
                        [--wide-accumulation] [--no-xnnpack]

  --bind NAME=VALUE     fix a scalar input at import time (e.g. --bind sr=16000)
  --shape NAME=DxDx..   concrete shape of an input with symbolic dims (the model's
                        full shape, context included)
  --state IN:OUT        keep IN/OUT as one shared buffer at mem_id 2: the method
                        reads IN from it and writes OUT back in place
  --context INPUT:KEEP  keep the last KEEP elements of INPUT (last dim) between
                        calls; the method then takes only the new part
  --method NAME         name of the method running the graph (default forward)
  --wide-accumulation   compute float32 convolutions and matrix products in float64
  --no-xnnpack          portable kernels only (by default float32 convolutions,
                        matrix products and the ops around them run on XNNPACK)`;

function splitPair(text: string, separator: string, flag: string): [string, string] {
  const at = text.lastIndexOf(separator);
  if (at <= 0 || at === text.length - 1) throw new EtnaError('INVALID_INPUT', `${flag} ${text}: expected A${separator}B`);
  return [text.slice(0, at), text.slice(at + 1)];
}

function parseShape(text: string, flag: string): number[] {
  if (text === '' || text === 'scalar') return [];
  const dims = text.split('x').map(Number);
  if (dims.some((d) => !Number.isInteger(d) || d < 0)) throw new EtnaError('INVALID_INPUT', `${flag}: '${text}' is not a shape like 1x512`);
  return dims;
}

function parseNumber(text: string, flag: string): number | bigint {
  if (/^-?\d+$/.test(text)) return BigInt(text);
  const value = Number(text);
  if (!Number.isFinite(value)) throw new EtnaError('INVALID_INPUT', `${flag}: '${text}' is not a number`);
  return value;
}

export async function runImportOnnx(args: readonly string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        output: { type: 'string', short: 'o' },
        bind: { type: 'string', multiple: true, default: [] },
        shape: { type: 'string', multiple: true, default: [] },
        state: { type: 'string', multiple: true, default: [] },
        context: { type: 'string', multiple: true, default: [] },
        method: { type: 'string', default: 'forward' },
        'wide-accumulation': { type: 'boolean', default: false },
        'no-xnnpack': { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
    });
  } catch (error) {
    console.error(`etna import-onnx: ${(error as Error).message}\n\n${IMPORT_ONNX_USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length !== 1 || values.output === undefined) {
    console.error(IMPORT_ONNX_USAGE);
    return values.help ? 0 : 2;
  }
  try {
    const bind: Record<string, number | bigint> = {};
    for (const item of values.bind) {
      const [name, value] = splitPair(item, '=', '--bind');
      bind[name] = parseNumber(value, `--bind ${name}`);
    }
    const shapes: Record<string, number[]> = {};
    for (const item of values.shape) {
      const [name, shape] = splitPair(item, '=', '--shape');
      shapes[name] = parseShape(shape, `--shape ${name}`);
    }
    const state: OnnxStatePair[] = values.state.map((item) => {
      const [input, output] = splitPair(item, ':', '--state');
      return { input, output };
    });
    const context: OnnxContextWindow[] = values.context.map((item) => {
      const [input, keep] = splitPair(item, ':', '--context');
      return { input, keep: Number(keep) };
    });
    const model = fs.readFileSync(positionals[0] as string);
    const result = importOnnx(model, {
      bind,
      shapes,
      state,
      context,
      method: values.method,
      wideAccumulation: values['wide-accumulation'] === true,
      xnnpack: values['no-xnnpack'] !== true,
    });
    fs.writeFileSync(values.output, result.bytes);
    const io = (list: { name: string; dtype: string; shape: number[] }[]): string => list.map((t) => `${t.name} ${t.dtype}[${t.shape.join(',')}]`).join(', ') || '-';
    console.log(`wrote ${values.output} (${formatBytes(result.bytes.length)}), opset ${result.opset}: ${result.nodes.lowered} nodes lowered, ${result.nodes.folded} folded`);
    console.log(`  ${values.method}(${io(result.inputs)}) -> ${io(result.outputs)}`);
    if (result.stateBuffers.length > 0) {
      console.log(`  state at mem_id 2: ${io(result.stateBuffers)}`);
      console.log(`  methods: ${result.methods.join(', ')}`);
    }
    return 0;
  } catch (error) {
    const e = toEtnaError(error);
    console.error(`etna import-onnx: ${e.code}: ${e.message}`);
    return 1;
  }
}
