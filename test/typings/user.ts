// What a user writes under `strict`, against the published entry points:
// no casts, errors narrowed by `instanceof EtnaError`. The lines under each
// ts-expect-error directive in misuse() must keep failing to compile.
import {
  EtnaError,
  MAX_NUM_THREADS,
  Module,
  Program,
  summarizeProfile,
  Tensor,
  toChromeTrace,
  type ElementValue,
  type Feeds,
  type NamedValues,
  type ProfileEvent,
  type Value,
} from 'etna-runtime';
import { ProgramBuilder } from 'etna-runtime/export';
import { Llm, type ChatMessage, type ChatSession, type GenerationResult } from 'etna-runtime/llm';
import { createServer, openStateStore, type LlmServer } from 'etna-runtime/serve';
import * as ort from 'onnxruntime-node';

export function author(): Uint8Array {
  const program = new ProgramBuilder();
  program.method('forward', (m) => {
    const tokens = m.input('tokens', 'float32', [1, 4]);
    const mask = m.input('mask', 'float32', [1, 4]);
    m.output({ logits: m.mul(tokens, mask), scores: m.relu(tokens) });
  });
  return program.toPte();
}

export async function infer(source: string | Uint8Array): Promise<number> {
  const module = await Module.load(source);
  const names: string[] = module.methodMeta('forward').inputs.map((input) => input.name);
  const feeds: Feeds = {
    tokens: Tensor.float32([1, 4], [1, 2, 3, 4]),
    mask: new ort.Tensor('float32', new Float32Array([1, 1, 0, 0]), [1, 4]),
  };
  const outputs: NamedValues = await module.run('forward', feeds);
  let first = 0;
  const logits = outputs.logits;
  if (logits instanceof Tensor && logits.is('float32')) {
    const data: Float32Array = logits.data;
    first = data[0] ?? Number.NaN;
    first += logits.data[1] ?? 0;
  }
  const positional: Value[] = await module.execute('forward', [
    { dtype: 'float32', shape: [1, 4], data: new Float32Array(4) },
    Tensor.float32([1, 4], [0, 0, 0, 0]),
  ]);
  const scores = positional[1];
  if (scores instanceof Tensor) {
    const element: number | bigint | undefined = scores.data[0];
    first += Number(element);
  }
  await module.dispose();
  return first + names.length;
}

export async function profile(module: Module, feeds: Feeds): Promise<string> {
  await module.run('forward', feeds, { profile: true });
  const events: ProfileEvent[] = module.takeProfile();
  const slowest: string | undefined = summarizeProfile(events)[0]?.name;
  return JSON.stringify(toChromeTrace(events)) + (slowest ?? '');
}

export function tensors(): void {
  const f: Float32Array = Tensor.float32([2], [1, 2]).data;
  const ids: BigInt64Array = Tensor.int64([2], [1, 2n]).data;
  const flags: Uint8Array = Tensor.zeros('bool', [3]).data;
  const halves: Uint16Array = new Tensor('float16', [1], new Uint16Array(1)).data;
  const int32: Tensor<'int32'> = new Tensor('int32', [2], new Int32Array(2));
  const any: Tensor = int32;
  void [f, ids, flags, halves, any];
  try {
    Tensor.int64([2], [1, 2.5]);
  } catch (error) {
    if (error instanceof EtnaError) {
      const code: 'INVALID_INPUT' | 'INTERNAL' | string = error.code;
      console.log(code, error.message);
    }
  }
}

// Habits from onnxruntime-node, and freeing with `using`.
export async function migrate(path: string): Promise<number> {
  using program = Program.load(path);
  await using module = await Module.load(program, { numThreads: Math.min(4, MAX_NUM_THREADS) });
  const names: readonly string[] = module.inputNames;
  const decodeOutputs: readonly string[] = module.outputNamesOf('forward');
  const values: ElementValue[] = ['9007199254740993', 2n, 3, true];
  const ids: Tensor<'int64'> = Tensor.from('int64', [4], values, 'ids');
  const feeds: Feeds = Object.fromEntries(names.map((name) => [name, Tensor.from('float32', [1, 4], [1, 'NaN', 0, 0])]));
  const outputs: NamedValues = await module.run(feeds);
  const logits = outputs.logits;
  let total = ids.dims.length + decodeOutputs.length;
  if (logits instanceof Tensor && logits.is('float32')) {
    const dims: readonly number[] = logits.dims;
    const asOrt = new ort.Tensor(logits.type, logits.data, logits.dims);
    total += dims.length + asOrt.size;
  }
  return total;
}

export async function misuse(module: Module, unknownDType: Tensor): Promise<void> {
  // @ts-expect-error etna takes (dtype, shape, data), not onnxruntime's (type, data, dims)
  new Tensor('float32', new Float32Array(4), [1, 4]);
  // @ts-expect-error a float32 tensor holds a Float32Array
  const wrongArray: BigInt64Array = Tensor.float32([1], [1]).data;
  // @ts-expect-error an int64 tensor's data is a BigInt64Array
  new Tensor('int64', [1], new Float64Array(1));
  // @ts-expect-error a plain tensor's data must match its dtype
  await module.execute('forward', [{ dtype: 'int64', shape: [1], data: new Float32Array(1) }]);
  // @ts-expect-error feeds are keyed by input name
  await module.run('forward', Tensor.float32([1], [1]));
  // @ts-expect-error a misspelt option is no ModuleOptions key
  await Module.load('model.pte', { shareMemoryArena: true });
  // @ts-expect-error dims are read-only
  Tensor.float32([1], [1]).dims.push(2);
  // @ts-expect-error before narrowing, an element is number | bigint
  const unnarrowed: number = unknownDType.data[0]!;
  void [wrongArray, unnarrowed];
}

export async function chat(model: string, tokenizer: string): Promise<string> {
  const llm = await Llm.load(model, { tokenizer, numThreads: 2 });
  const session = await llm.session();
  const generation = session.generate('Hello', { temperature: 0, maxNewTokens: 8, stop: ['\n'], signal: AbortSignal.timeout(1000) });
  let text = '';
  for await (const piece of generation) text += piece;
  const result: GenerationResult = await generation;
  const rate: number = result.stats.tokensPerSecond;
  // A generation chains as a promise of its result does.
  const fallback: GenerationResult | string = await llm.generate('Hi').catch((error: unknown) => String(error));
  const counted: number = await llm
    .generate('Hi')
    .finally(() => undefined)
    .then((done) => done.tokens.length);
  void [fallback, counted];
  await session.dispose();
  // Chat: messages through the template, a reply, a conversation kept between turns.
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'Hi' }] },
  ];
  const rendered: { text: string; tokens: number[] } = llm.applyChatTemplate(messages, { templateVariables: { enable_thinking: false } });
  const reply: GenerationResult = await llm.chat(messages, { maxNewTokens: 8, stopTokens: [2], tools: [] });
  const conversation: ChatSession = await llm.chatSession({ systemPrompt: 'Be brief.' });
  for await (const piece of conversation.send('Hello', { temperature: 0 })) text += piece;
  const roles: string[] = conversation.history.map((message) => message.role);
  // @ts-expect-error a chat session's turns always end with the generation prompt
  await llm.chatSession({ addGenerationPrompt: false });
  void [rendered, reply, roles];
  await conversation.dispose();
  await llm.dispose();
  return `${text} ${result.stopReason} ${rate} ${llm.metadata.maxContextLen}`;
}

export async function serve(model: string, tokenizer: string): Promise<number> {
  const llm = await Llm.load(model, { tokenizer });
  const stateStore = await openStateStore('redis://127.0.0.1:6379', { ttlSeconds: 600 });
  const server: LlmServer = await createServer({
    llm,
    modelName: 'llama',
    sessions: 2,
    stateStore,
    stateTimeoutMs: 500,
    warn: (message) => console.warn(message),
  });
  server.listen(0, '127.0.0.1');
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  // @ts-expect-error a misspelt option is no ServerOptions key
  await createServer({ llm, modelname: 'llama' });
  await server.shutdown({ drainTimeoutMs: 1000 });
  await stateStore.close();
  await llm.dispose();
  return port;
}
