/**
 * Reads a reply's function calls as its text arrives, in the form the model's template writes them
 * (constraint/tool-call-tags.ts): the text outside calls is content, and each call gives its name once its
 * opening is complete, then its arguments' text piece by piece, as OpenAI streams `delta.tool_calls`.
 * Text that might still become a call's opening (a `<tool_` at the end so far) or a call's closing is held
 * back until the next text says which. Whitespace right before a call or between calls is the template's
 * separator, not content. The whole reply (`readToolCalls`) is read by the same steps, so a stream's pieces
 * always add up to the whole response.
 *
 * @example
 * const reader = new ToolCallReader(format);
 * reader.push('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par');
 * // [{ type: 'call', index: 0, id: 'call_…', name: 'get_weather' }, { type: 'arguments', index: 0, text: '{"city": "Par' }]
 */
import { randomUUID } from 'node:crypto';
import { callClosing, type ToolCallFormat } from '../constraint/tool-call-tags.ts';

export type ToolCallPiece =
  | { type: 'content'; text: string }
  | { type: 'call'; index: number; id: string; name: string }
  | { type: 'arguments'; index: number; text: string };

export interface ReadToolCall {
  id: string;
  name: string;
  /** The arguments' JSON text, as the model wrote it. */
  arguments: string;
}

const FUNCTION_NAME = /^[A-Za-z0-9_-]*$/;

export class ToolCallReader {
  private buffer = '';
  private state: 'text' | 'opening' | 'arguments' = 'text';
  /** Whitespace after content, held until it is known not to be the separator before a call. */
  private space = '';
  private calls = 0;
  private readonly opening: string;
  private readonly closing: string;

  constructor(private readonly format: ToolCallFormat) {
    this.opening = format.begin + format.namePrefix;
    this.closing = callClosing(format);
  }

  /** How many calls have opened so far. */
  get callCount(): number {
    return this.calls;
  }

  /** The pieces `text` completes. */
  push(text: string): ToolCallPiece[] {
    this.buffer += text;
    const pieces: ToolCallPiece[] = [];
    while (this.step(pieces));
    return pieces;
  }

  /** What was held back, at the reply's end: held text is content, a call cut short keeps the arguments it has. */
  finish(): ToolCallPiece[] {
    const pieces: ToolCallPiece[] = [];
    const rest = this.buffer;
    this.buffer = '';
    if (this.state === 'arguments') {
      if (rest !== '') pieces.push({ type: 'arguments', index: this.calls - 1, text: rest });
    } else {
      const text = (this.calls === 0 ? this.space : '') + rest;
      if (text.trim() !== '') pieces.push({ type: 'content', text });
    }
    this.space = '';
    return pieces;
  }

  /** One step of the reading; false when it waits for more text. */
  private step(pieces: ToolCallPiece[]): boolean {
    const { buffer, format } = this;
    if (this.state === 'text') {
      const at = buffer.indexOf(format.trigger);
      const upTo = at >= 0 ? at : buffer.length - heldPrefix(buffer, format.trigger);
      this.content(buffer.slice(0, upTo), pieces);
      this.buffer = buffer.slice(upTo);
      if (at < 0) return false;
      this.space = '';
      this.state = 'opening';
      return true;
    }
    if (this.state === 'opening') {
      const head = buffer.slice(0, this.opening.length);
      if (!this.opening.startsWith(head)) return this.notACall(pieces);
      if (head.length < this.opening.length) return false;
      const end = buffer.indexOf(format.argumentsPrefix, this.opening.length);
      const rest = buffer.slice(this.opening.length);
      // Until the name's end has come, the text may end with the start of what follows the name.
      const name = end >= 0 ? buffer.slice(this.opening.length, end) : rest.slice(0, rest.length - heldPrefix(rest, format.argumentsPrefix));
      if (!FUNCTION_NAME.test(name)) return this.notACall(pieces);
      if (end < 0) return false;
      pieces.push({ type: 'call', index: this.calls++, id: `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`, name });
      this.buffer = buffer.slice(end + format.argumentsPrefix.length);
      this.state = 'arguments';
      return true;
    }
    const at = buffer.indexOf(this.closing);
    const upTo = at >= 0 ? at : buffer.length - heldPrefix(buffer, this.closing);
    if (upTo > 0) pieces.push({ type: 'arguments', index: this.calls - 1, text: buffer.slice(0, upTo) });
    this.buffer = at >= 0 ? buffer.slice(at + this.closing.length) : buffer.slice(upTo);
    if (at < 0) return false;
    this.state = 'text';
    return true;
  }

  /** A tag that opened no call (the model wrote the trigger in prose): it is content. */
  private notACall(pieces: ToolCallPiece[]): boolean {
    this.content(this.format.trigger, pieces);
    this.buffer = this.buffer.slice(this.format.trigger.length);
    this.state = 'text';
    return true;
  }

  private content(text: string, pieces: ToolCallPiece[]): void {
    if (text === '') return;
    const trimmed = text.trimEnd();
    if (trimmed === '') {
      this.space += text;
      return;
    }
    // Whitespace after a call is the separator before the next, or nothing; before content, it is content again.
    pieces.push({ type: 'content', text: (this.calls === 0 ? this.space : '') + trimmed });
    this.space = text.slice(trimmed.length);
  }
}

/** The length of the longest end of `text` that begins `tag` (what may yet become it). */
function heldPrefix(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) if (text.endsWith(tag.slice(0, n))) return n;
  return 0;
}

/** A whole reply's content (null when there is none) and calls. */
export function readToolCalls(format: ToolCallFormat, text: string): { content: string | null; calls: ReadToolCall[] } {
  const reader = new ToolCallReader(format);
  let content = '';
  const calls: ReadToolCall[] = [];
  for (const piece of [...reader.push(text), ...reader.finish()]) {
    if (piece.type === 'content') content += piece.text;
    else if (piece.type === 'call') calls.push({ id: piece.id, name: piece.name, arguments: '' });
    else calls[piece.index]!.arguments += piece.text;
  }
  return { content: content === '' ? null : content, calls };
}
