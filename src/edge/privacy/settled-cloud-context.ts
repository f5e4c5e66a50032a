/**
 * The part of a generation's cloud context that no later token can change, kept from one routed step to the
 * next so the pseudonymiser translates only what is new. A token's translation is final once every private
 * value that could still reach it is known: a value found later starts after the text's end less the longest
 * value, and one found now may still grow only where it runs to the end. Tokens wholly before that point, in
 * runs that end there, are settled. A context that no longer starts with the settled tokens as they were (a
 * rejected guess, a token whose source changed) drops them all.
 *
 * @example
 * const settled = new SettledCloudContext();
 * if (!settled.holds(kept, sources)) settled.clear();
 * settled.add(last + 1, rawEnd, ids, sources, placeholders, edgeSources);
 */
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';

export class SettledCloudContext {
  /** How many of the edge context's tokens are settled, and where their text ends. */
  tokens = 0;
  rawEnd = 0;
  /** Their cloud context: ids, sources, and the placeholders it holds. */
  readonly ids: number[] = [];
  readonly sources: TokenSource[] = [];
  readonly placeholders = new Set<string>();
  /** The edge context's sources of the settled tokens, as they were when settled. */
  private readonly edgeSources: TokenSource[] = [];

  /** Whether a context whose first `kept` tokens are unchanged, with `sources`, still starts with the settled tokens. */
  holds(kept: number, sources: readonly TokenSource[]): boolean {
    if (kept < this.tokens) return false;
    for (let i = 0; i < this.tokens; i++) if (sources[i] !== this.edgeSources[i]) return false;
    return true;
  }

  clear(): void {
    this.tokens = this.rawEnd = 0;
    this.ids.length = this.sources.length = this.edgeSources.length = 0;
    this.placeholders.clear();
  }

  /** Settles the edge tokens up to `tokens` (exclusive), whose text ends at `rawEnd` and whose translation is given. */
  add(
    tokens: number,
    rawEnd: number,
    ids: readonly number[],
    sources: readonly TokenSource[],
    placeholders: Iterable<string>,
    edgeSources: readonly TokenSource[],
  ): void {
    for (let i = this.tokens; i < tokens; i++) this.edgeSources.push(edgeSources[i]!);
    this.tokens = tokens;
    this.rawEnd = rawEnd;
    for (const id of ids) this.ids.push(id);
    for (const s of sources) this.sources.push(s);
    for (const p of placeholders) this.placeholders.add(p);
  }
}
