// `etna generate MODEL.pte --tokenizer FILE --prompt TEXT`: streams generated
// text to stdout, then one stats line to stderr, as ExecuTorch's llama_main
// reports after its text. With --chat (or --system) the prompt is one user
// turn, rendered with the tokenizer's chat template.
import { EtnaError } from '../errors.js';
import {
  describeNumberRule,
  GENERATE_NUMBER_RULES,
  Llm,
  LOGIT_BIAS_RULE,
  logitBiasFault,
  numberFault,
  type ChatMessage,
  type GenerateOptions,
  type GenerationResult,
  type NumericGenerateOption,
  type TokenLogprob,
  type TopLogprob,
} from '../llm/index.js';
import { MAX_NUM_THREADS } from '../module.js';
import { type Command, type OptionSpec, type ParsedArgs, THREADS_OPTION } from './command.js';

/** A generate() option from the command line, checked by generate()'s own rule; undefined when absent. */
function generateOption(args: ParsedArgs, flag: string, option: NumericGenerateOption): number | undefined {
  const rule = GENERATE_NUMBER_RULES[option];
  return args.number(flag, (value) => numberFault(value, rule) === undefined, describeNumberRule(rule));
}

/** `--logit-bias ID=VALUE`, repeated, as generate()'s logitBias, checked by its rule; undefined when absent. */
function logitBiasOption(args: ParsedArgs): Record<string, number> | undefined {
  const items = args.list('logit-bias');
  if (items.length === 0) return undefined;
  const bias: Record<string, number> = {};
  for (const item of items) {
    const [id = '', value = '', extra] = item.split('=');
    const one = { [id]: value.trim() === '' ? Number.NaN : Number(value) };
    if (extra !== undefined || logitBiasFault(one) !== undefined) {
      throw new EtnaError(
        'INVALID_INPUT',
        `--logit-bias takes ID=VALUE, a token id and ${describeNumberRule(LOGIT_BIAS_RULE)}, got '${item}'`,
      );
    }
    Object.assign(bias, one);
  }
  return bias;
}

/** One line per generated token: its id, text and log-probability, then the most likely tokens at its position. */
export function logprobLines(logprobs: readonly TokenLogprob[]): string[] {
  const entry = ({ id, text, logprob }: TopLogprob): string => `${id} ${JSON.stringify(text)} ${logprob.toFixed(4)}`;
  return logprobs.map(
    (token) => `logprob: ${entry(token)}` + (token.topLogprobs.length === 0 ? '' : ` | top: ${token.topLogprobs.map(entry).join(', ')}`),
  );
}

const seconds = (ms: number): string => (ms / 1000).toFixed(3);

/** The one line printed after the text: ExecuTorch's Stats, in its report's terms. */
export function statsLine({ stats, stopReason }: GenerationResult): string {
  return [
    `prompt tokens: ${stats.promptTokens}`,
    `generated tokens: ${stats.generatedTokens}`,
    `load: ${seconds(stats.loadMs + stats.sessionLoadMs)} s`,
    `prompt eval: ${seconds(stats.prefillMs)} s (${stats.promptTokensPerSecond.toFixed(1)} tok/s)`,
    `first token: ${seconds(stats.timeToFirstTokenMs)} s`,
    `generation: ${seconds(stats.decodeMs)} s (${stats.tokensPerSecond.toFixed(1)} tok/s)`,
    `sampling: ${seconds(stats.samplingMs)} s`,
    `stop: ${stopReason}`,
  ].join(' | ');
}

/** generate()'s options from the command line, those given only. */
export function generateOptionsOf(args: ParsedArgs): GenerateOptions {
  const topLogprobs = generateOption(args, 'logprobs', 'topLogprobs');
  const options: GenerateOptions = {
    maxNewTokens: generateOption(args, 'max-new-tokens', 'maxNewTokens'),
    temperature: generateOption(args, 'temperature', 'temperature'),
    topK: generateOption(args, 'top-k', 'topK'),
    topP: generateOption(args, 'top-p', 'topP'),
    seed: generateOption(args, 'seed', 'seed'),
    stop: args.list('stop'),
    ignoreEos: args.flag('ignore-eos'),
    repetitionPenalty: generateOption(args, 'repetition-penalty', 'repetitionPenalty'),
    frequencyPenalty: generateOption(args, 'frequency-penalty', 'frequencyPenalty'),
    presencePenalty: generateOption(args, 'presence-penalty', 'presencePenalty'),
    penaltyLastN: generateOption(args, 'penalty-last-n', 'penaltyLastN'),
    minP: generateOption(args, 'min-p', 'minP'),
    logitBias: logitBiasOption(args),
    ...(topLogprobs !== undefined && { logprobs: true, topLogprobs }),
  };
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
}

/** The program and its tokenizer, as --tokenizer, --tokenizer-config and --threads say. */
export function loadLlm(args: ParsedArgs): Promise<Llm> {
  const tokenizer = args.string('tokenizer');
  if (tokenizer === undefined)
    throw new EtnaError('INVALID_INPUT', '--tokenizer FILE is required (a tokenizer.json or a tiktoken tokenizer.model)');
  const tokenizerConfig = args.string('tokenizer-config');
  return Llm.load(args.positionals[0]!, {
    tokenizer,
    ...(tokenizerConfig !== undefined && { tokenizerConfig }),
    numThreads: args.integer('threads', 1, 1, MAX_NUM_THREADS),
  });
}

/** What follows a generation's text on stderr: its log-probabilities when asked for, then its stats. */
export function reportResult(result: GenerationResult, stats = statsLine(result)): void {
  for (const line of logprobLines(result.logprobs ?? [])) process.stderr.write(`${line}\n`);
  process.stderr.write(`${stats}\n`);
}

async function runGenerate(args: ParsedArgs): Promise<number> {
  const prompt = args.string('prompt');
  if (prompt === undefined) throw new EtnaError('INVALID_INPUT', '--prompt TEXT is required');
  const system = args.string('system');
  const chat = args.flag('chat') || system !== undefined;
  const options = { ...generateOptionsOf(args), ...(args.flag('echo') && { echo: true }) };
  const llm = await loadLlm(args);
  try {
    const messages: ChatMessage[] = [
      ...(system === undefined ? [] : [{ role: 'system', content: system }]),
      { role: 'user', content: prompt },
    ];
    const generation = chat ? llm.chat(messages, options) : llm.generate(prompt, options);
    for await (const piece of generation) process.stdout.write(piece);
    const result = await generation;
    process.stdout.write('\n');
    reportResult(result);
    return 0;
  } finally {
    await llm.dispose();
  }
}

/** The options `etna generate` and `etna chat` share: the model and its tokenizer. */
export const MODEL_OPTIONS: readonly OptionSpec[] = [
  { name: 'tokenizer', value: 'FILE', help: 'tokenizer.json (Hugging Face) or tokenizer.model in tiktoken form (Llama 3)' },
  {
    name: 'tokenizer-config',
    value: 'FILE',
    help: 'tokenizer_config.json: chat template, BOS and EOS (default: the one beside the tokenizer, if any)',
  },
];

/** The options `etna generate` and `etna chat` share: how to sample and stop, and the threads. */
export const SAMPLING_OPTIONS: readonly OptionSpec[] = [
  { name: 'max-new-tokens', value: 'N', help: 'tokens to generate at most (default: as many as the context holds)' },
  { name: 'temperature', value: 'T', help: '0 is greedy (default 0.8)' },
  { name: 'top-k', value: 'K', help: 'sample among the K most likely tokens (default 0: all)' },
  { name: 'top-p', value: 'P', help: 'sample among the most likely tokens making up P of the probability (default 1: all)' },
  { name: 'seed', value: 'S', help: 'seed for sampling (default: random)' },
  { name: 'min-p', value: 'P', help: 'sample among tokens at least P times as likely as the most likely one (default 0: all)' },
  {
    name: 'repetition-penalty',
    value: 'R',
    help: 'divide the positive logits (multiply the negative ones) of recent tokens by R (default 1: off)',
  },
  { name: 'frequency-penalty', value: 'F', help: 'subtract F per occurrence from the logit of a recent token, -2 to 2 (default 0)' },
  { name: 'presence-penalty', value: 'P', help: 'subtract P from the logit of each recent token, -2 to 2 (default 0)' },
  { name: 'penalty-last-n', value: 'N', help: 'the recent tokens the penalties count (default 64; -1: the whole context)' },
  { name: 'logit-bias', value: 'ID=VALUE', multiple: true, help: 'add VALUE (-100 to 100) to the logit of token ID (repeatable)' },
  { name: 'logprobs', value: 'N', help: 'print the log-probability of each token and of the N most likely ones (0 to 20) to stderr' },
  { name: 'stop', value: 'TEXT', multiple: true, help: 'stop before this text (repeatable)' },
  { name: 'ignore-eos', help: 'keep generating past end-of-sequence tokens' },
  THREADS_OPTION,
];

export const GENERATE: Command = {
  spec: {
    name: 'generate',
    synopsis: 'MODEL.pte --tokenizer FILE --prompt TEXT',
    brief: 'generate text with an LLM program',
    summary:
      "Runs an ExecuTorch LLM program (export_llama's forward, or prefill and decode) on a prompt and streams the text to stdout, then prints one stats line to stderr.",
    options: [
      ...MODEL_OPTIONS,
      { name: 'prompt', value: 'TEXT', help: 'the text to continue (with --chat, the user message)' },
      { name: 'chat', help: "take the prompt as a user message and render it with the tokenizer's chat template" },
      { name: 'system', value: 'TEXT', help: 'a system message before the prompt (implies --chat)' },
      { name: 'echo', help: 'print the prompt before the generated text' },
      ...SAMPLING_OPTIONS,
    ],
    notes:
      'A text prompt starts with BOS when the tokenizer adds one (docs/llm.md, BOS); a chat template writes its own.\n' +
      'docs/llm.md describes the programs it runs, the tokenizers and what each stats figure means.',
  },
  run: runGenerate,
};
