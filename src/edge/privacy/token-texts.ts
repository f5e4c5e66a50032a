/**
 * The text of a growing token context, and which characters each token wrote: what finding private values
 * in generated text needs, where a value may start in the middle of one token and end in another. It is
 * kept as the context grows; when the context changes below its end (a rejected guess), it is cut back to
 * the last token both share and decoded on from there.
 *
 * A token that writes no character on its own (the first bytes of a UTF-8 character split over tokens)
 * shares the range of the character that completes it; a special token (BOS, `<|im_start|>`) writes nothing
 * and never belongs to a value.
 *
 * @example
 * const texts = new TokenTexts(tokenizer);
 * texts.update(ids);
 * texts.text;          // decode(ids)
 * texts.rangeOf(3);    // { start: 10, end: 14 }: the characters token 3 wrote
 */
import type { TextTokenizer, TokenStreamDecoder } from '../../shared/text/tokenizer.ts';

/** Ids decoded again before a cut-back point: enough for the tokenizer's word-start rules to see a word's start. */
const DECODER_CONTEXT = 4;

export class TokenTexts {
  private ids: number[] = [];
  private starts: number[] = [];
  private ends: number[] = [];
  /** Tokens whose character is not complete yet, at the end of the context (special tokens may follow them). */
  private pending = 0;
  /** The first of them. */
  private pendingFrom = 0;
  private decoder: TokenStreamDecoder;
  text = '';

  /** `after`: ids the text continues (not part of it), for the tokenizer's word-start rules. */
  constructor(
    private readonly tokenizer: TextTokenizer,
    after: readonly number[] = [],
  ) {
    this.decoder = tokenizer.createStreamDecoder({ context: after.slice(-DECODER_CONTEXT) });
  }

  get length(): number {
    return this.ids.length;
  }

  /** Whether the last tokens end inside a character (its remaining bytes have yet to come). */
  get endsInsideCharacter(): boolean {
    return this.pending > 0;
  }

  /** The characters token `i` wrote, `end` exclusive; empty for a special token or one still pending. */
  rangeOf(i: number): { start: number; end: number } {
    return { start: this.starts[i]!, end: this.ends[i]! };
  }

  /**
   * Brings the text to `ids`: decodes what was added, after cutting back to what both share. Returns how many
   * tokens were kept as they were (their text and ranges unchanged).
   */
  update(ids: readonly number[]): number {
    let shared = 0;
    const limit = Math.min(ids.length, this.ids.length);
    while (shared < limit && ids[shared] === this.ids[shared]) shared++;
    if (shared < this.ids.length) this.cutBack(shared);
    // Tokens waiting for the rest of their character get their range once it comes.
    const kept = this.pending > 0 ? this.pendingFrom : this.ids.length;
    for (let i = this.ids.length; i < ids.length; i++) this.push(ids[i]!);
    return kept;
  }

  private push(id: number): void {
    const at = this.text.length;
    this.ids.push(id);
    this.starts.push(at);
    this.ends.push(at);
    if (this.tokenizer.isSpecialId(id)) return;
    const piece = this.decoder.push(id);
    if (piece === '') {
      if (this.pending++ === 0) this.pendingFrom = this.ids.length - 1;
      return;
    }
    this.text += piece;
    for (let i = this.pending > 0 ? this.pendingFrom : this.ids.length - 1; i < this.ids.length; i++) [this.starts[i], this.ends[i]] = [at, this.text.length];
    this.pending = 0;
  }

  /** Keeps the first `keep` tokens (fewer when that would split a character) and decodes on after them. */
  private cutBack(keep: number): void {
    // Tokens that share one character are kept or dropped together; pending ones have no character yet.
    const sharesWithPrevious = (j: number) => this.starts[j] === this.starts[j - 1] && this.ends[j] === this.ends[j - 1] && this.ends[j]! > this.starts[j]!;
    if (this.pending > 0) keep = Math.min(keep, this.pendingFrom);
    while (keep > 0 && keep < this.ids.length && sharesWithPrevious(keep)) keep--;
    this.text = this.text.slice(0, keep === 0 ? 0 : this.ends[keep - 1]);
    this.ids.length = this.starts.length = this.ends.length = keep;
    this.pending = 0;
    this.decoder = this.tokenizer.createStreamDecoder({ context: this.ids.slice(Math.max(0, keep - DECODER_CONTEXT)) });
  }
}
