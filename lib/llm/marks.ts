// Marks: strings that stand for something else inside a text, such as a chat
// template's own control tokens written as placeholders no message contains.

const patterns = new WeakMap<ReadonlyMap<string, unknown>, RegExp>();

/** A global pattern matching any key of `marks`, the longest where several start at one place. */
function markPattern(marks: ReadonlyMap<string, unknown>): RegExp {
  let pattern = patterns.get(marks);
  if (pattern === undefined) {
    const keys = [...marks.keys()].sort((a, b) => b.length - a.length);
    pattern = new RegExp(keys.map((key) => key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
    patterns.set(marks, pattern);
  }
  return pattern;
}

/** `text` cut at the marks: the pieces of text between them, and what each mark stands for, in order. */
export function splitMarked<T>(text: string, marks: ReadonlyMap<string, T>): ({ text: string } | { mark: T })[] {
  if (marks.size === 0) return text.length === 0 ? [] : [{ text }];
  const pieces: ({ text: string } | { mark: T })[] = [];
  let at = 0;
  for (const match of text.matchAll(markPattern(marks))) {
    if (match.index > at) pieces.push({ text: text.slice(at, match.index) });
    pieces.push({ mark: marks.get(match[0])! });
    at = match.index + match[0].length;
  }
  if (at < text.length) pieces.push({ text: text.slice(at) });
  return pieces;
}

/** `text` with every mark replaced by the string it stands for. */
export function replaceMarked(text: string, marks: ReadonlyMap<string, string>): string {
  return marks.size === 0 ? text : text.replace(markPattern(marks), (mark) => marks.get(mark)!);
}
