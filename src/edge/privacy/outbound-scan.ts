/**
 * What the cloud gate (cloud/cloud-gate.ts) of a generation with private values looks for: the ids the
 * shim would hold, decoded with the edge's tokenizer, folded (folded-text.ts) and searched for every value,
 * whole, begun and left, or under way at the end. The pseudonymiser should have replaced all of them; this
 * scan does not trust it, nor the tokenizer's spelling of a placeholder, nor the loop.
 *
 * The context grows step by step, so the text is decoded and folded only where it changed, and searched
 * from where it was last known clean, less the longest value.
 *
 * @example
 * const gate = CloudGate.guarding(new OutboundTextScan(tokenizer, values));
 */
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import type { OutboundScan } from '../cloud/cloud-gate.ts';
import { FoldedText, foldString } from './folded-text.ts';
import type { PrivateValues } from './private-values.ts';
import { TokenTexts } from './token-texts.ts';

export class OutboundTextScan implements OutboundScan {
  private readonly texts: TokenTexts;
  private readonly folded: FoldedText;
  /** Folded characters before this index hold no value that a later character could not change. */
  private cleanUpTo = 0;

  constructor(
    tokenizer: TextTokenizer,
    private readonly values: PrivateValues,
  ) {
    this.texts = new TokenTexts(tokenizer);
    this.folded = new FoldedText(values.foldCase);
  }

  disclosedByContext(ids: readonly number[]): string | undefined {
    this.texts.update(ids);
    const changedFrom = this.folded.sync(this.texts.text);
    this.cleanUpTo = Math.min(this.cleanUpTo, changedFrom);
    const from = Math.max(0, this.cleanUpTo - this.values.longestFolded);
    const found = this.values.disclosedIn(this.folded.text, from);
    if (found) return found.kind;
    // A character not complete yet may be the start of a value's: the whole context is checked again once it is.
    if (!this.texts.endsInsideCharacter) this.cleanUpTo = this.folded.text.length;
    return undefined;
  }

  disclosedByText(text: string): string | undefined {
    return this.values.disclosedIn(foldString(text, this.values.foldCase), 0, true)?.kind;
  }
}
