// `etna chat MODEL.pte --tokenizer FILE`: a conversation in the terminal. Each
// line read from stdin is a user message; the reply streams to stdout and one
// stats line per turn goes to stderr. The history and the cache are kept
// between turns; `/reset` starts over, `/exit` (or the end of stdin) ends.
import { createInterface } from 'node:readline';

import type { Command, ParsedArgs } from './command.js';
import { generateOptionsOf, loadLlm, MODEL_OPTIONS, reportResult, SAMPLING_OPTIONS, statsLine } from './generate.js';

async function runChat(args: ParsedArgs): Promise<number> {
  const options = generateOptionsOf(args);
  const system = args.string('system');
  const llm = await loadLlm(args);
  const chat = await llm.chatSession(system === undefined ? {} : { systemPrompt: system }).catch(async (error: unknown) => {
    await llm.dispose();
    throw error;
  });
  const interactive = process.stdin.isTTY === true;
  const lines = createInterface({ input: process.stdin, output: process.stdout, terminal: interactive });
  // Ctrl-C stops the reply being written; at the prompt it ends the chat.
  let reply: AbortController | undefined;
  let turns = 0;
  lines.on('SIGINT', () => (reply === undefined ? lines.close() : reply.abort()));
  if (interactive)
    process.stderr.write(`${llm.metadata.layout} program, context of ${llm.metadata.maxContextLen}; /reset starts over, /exit ends\n`);
  try {
    lines.setPrompt('> ');
    if (interactive) lines.prompt();
    for await (const line of lines) {
      const text = line.trim();
      if (text === '/exit') break;
      if (text === '/reset') {
        chat.reset();
        process.stderr.write('(the conversation starts over)\n');
      } else if (text.length > 0) {
        reply = new AbortController();
        const generation = chat.send(line, { ...options, signal: reply.signal });
        for await (const piece of generation) process.stdout.write(piece);
        const result = await generation;
        reply = undefined;
        process.stdout.write('\n');
        // The program was loaded once, before the first turn: later turns count no load time.
        const stats = turns++ === 0 ? result.stats : { ...result.stats, loadMs: 0 };
        reportResult(result, `${statsLine({ ...result, stats })} | context: ${chat.session.position}/${llm.metadata.maxContextLen}`);
      }
      if (interactive) lines.prompt();
    }
    return 0;
  } finally {
    lines.close();
    await chat.dispose();
    await llm.dispose();
  }
}

export const CHAT: Command = {
  spec: {
    name: 'chat',
    synopsis: 'MODEL.pte --tokenizer FILE',
    brief: "chat with an LLM program in the terminal, through its tokenizer's chat template",
    summary:
      'Reads user messages from stdin, one per line, and streams each reply to stdout, rendering the conversation with the ' +
      "tokenizer's chat template; one stats line per turn goes to stderr. The conversation and its cache are kept between turns.\n" +
      'Lines /reset (start over) and /exit (or the end of stdin) are commands.',
    options: [
      ...MODEL_OPTIONS,
      { name: 'system', value: 'TEXT', help: 'the system message the conversation starts with' },
      ...SAMPLING_OPTIONS,
    ],
    notes: 'docs/llm.md describes chat templates, the tokens that end a reply, and what each stats figure means.',
  },
  run: runChat,
};
