/**
 * Streaming a generation's text: ids in as they are emitted, text out once it can no longer change.
 */
import { AppError } from '../errors.ts';

export interface DecodeOptions {
  /** Leave special tokens (BOS, EOS, `<|im_end|>`...) out of the text. Default true. */
  skipSpecialTokens?: boolean;
}

/** What the stream decoder needs of a tokenizer (tokenizer.ts's TextTokenizer). */
export interface IdDecoder {
  decode(ids: readonly number[], options?: DecodeOptions): string;
}

const REPLACEMENT_CHARACTER = '\uFFFD';

/**
 * Turns generated ids into text pieces as they arrive. `push` returns only text that can no longer
 * change: while the text decoded so far ends in U+FFFD (a UTF-8 sequence still missing bytes) it waits.
 * The pieces from `push`, then `flush`, concatenate to `decode(allIds)`, or, for ids that continue a
 * context, to what they add to its text: `decode(context + ids)` less `decode(context)`.
 *
 * Each step decodes a short window: the ids emitted by the previous step (`window[0, readOffset)`) and
 * the new ones after them, and emits what the new ones added. Decoding the previous step's ids along
 * with the new ones keeps decoder steps that act on the start of the text (the Strip of llama2.c's
 * dummy-prefix space) off the new text, and the window never starts inside a UTF-8 sequence, so the
 * window's text always begins with the previous step's text.
 */
export class TokenStreamDecoder {
  /** The ids of the previous step and the ones pushed since; earlier ones are no longer needed. */
  private window: number[] = [];
  private readOffset = 0;
  private finished = false;

  constructor(
    private readonly tokenizer: IdDecoder,
    private readonly options: DecodeOptions,
    context: readonly number[],
  ) {
    // The context counts as already emitted: the first step decodes after it, not at the start of a text.
    this.window = [...context];
    this.readOffset = context.length;
  }

  push(id: number): string {
    if (this.finished) throw new AppError('FAILED_PRECONDITION', 'stream decoder already flushed');
    this.window.push(id);
    return this.advance(false);
  }

  /** Ends the stream: emits what is held back (an incomplete UTF-8 sequence comes out as U+FFFD). */
  flush(): string {
    if (this.finished) return '';
    this.finished = true;
    return this.advance(true);
  }

  private advance(final: boolean): string {
    const before = this.tokenizer.decode(this.window.slice(0, this.readOffset), this.options);
    const after = this.tokenizer.decode(this.window, this.options);
    if (after.length <= before.length || (!final && after.endsWith(REPLACEMENT_CHARACTER))) return '';
    this.window = this.window.slice(this.readOffset);
    this.readOffset = this.window.length;
    return after.slice(before.length);
  }
}
