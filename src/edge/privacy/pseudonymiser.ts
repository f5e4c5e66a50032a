/**
 * The two translations of a generation with private values: the edge's context into the one the cloud
 * may see (every token that writes a character of a private value replaced, run by run, by the run's text
 * with each value's placeholder instead, spelled by the edge's tokenizer), and the cloud's tokens back
 * into the edge's (placeholders into the values, spelled likewise). Pure: no I/O, no clock.
 *
 * Whole tokens are replaced, so characters that share a token with a value go with it ("(ann@x.org)"
 * may be sent as "([EMAIL_1])"). The cloud context is a function of the edge's context, so two steps over
 * one growing context give one growing cloud context, and the shim's KV cache is reused as without
 * privacy; a value restored from the cloud's placeholder goes back as the cloud's own tokens. A context
 * that ends where a value may be under way (its start is there and the next tokens may complete it) is `withheld`: sending it would let the start of a value leave before it is recognised.
 *
 * @example
 * const pseudonyms = new Pseudonymiser(tokenizer, values);
 * const cloud = pseudonyms.toCloud(context, sources); // { ids, sources, withheld, placeholders }
 * pseudonyms.fromCloud(cloud.ids, replyIds, context.length); // { ids, restored }: the values back in place
 */
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { encodeContinuation } from './encode-continuation.ts';
import { FoldedText } from './folded-text.ts';
import type { PrivateRange, PrivateValues } from './private-values.ts';
import { SettledCloudContext } from './settled-cloud-context.ts';
import { TokenTexts } from './token-texts.ts';

export interface CloudContext {
  ids: number[];
  sources: TokenSource[];
  /** The context ends inside a possible value (or inside a character): nothing may be sent now. */
  withheld: boolean;
  /** The placeholders it holds. */
  placeholders: Set<string>;
}

/**
 * Folded characters at the end that more text may still change (a mark joining the last character), on top of the
 * longest value, before text counts as final.
 */
const FOLDING_MARGIN = 2;

/** Runs of token indices `[first, last]` and what they write. */
interface Run {
  first: number;
  last: number;
}

/** What a run of token texts needs to be cut and replaced: the text and the characters each token wrote. */
type TextRanges = Pick<TokenTexts, 'text' | 'rangeOf'>;

/** Tokens the cloud wrote around a placeholder and the value's tokens the edge put in their place. */
interface Restoration {
  real: number[];
  cloud: number[];
  placeholders: string[];
}

export class Pseudonymiser {
  private readonly texts: TokenTexts;
  /** The context's text folded as values are matched (kept as the context grows). */
  private readonly folded: FoldedText;
  /** The cloud context of the context's first tokens, final: only what follows is translated at each call. */
  private readonly settled = new SettledCloudContext();
  /** Spellings of run texts, which repeat step after step as the context grows. */
  private readonly spellings = new Map<string, number[]>();
  /**
   * Where the edge's context holds values restored from the cloud's placeholders, by the index of their first
   * token: sent back as the cloud's own tokens, so the cloud context goes on extending what the shim holds (its
   * KV cache), whatever the spelling.
   */
  private readonly restorations = new Map<number, Restoration>();
  /**
   * The cloud's context and the tokens it wrote after it, decoded as they grow: every reply is read from here,
   * so a step decodes only its new tokens (the cloud context of one step extends the last one's).
   */
  private readonly cloudTexts: TokenTexts;

  constructor(
    readonly tokenizer: TextTokenizer,
    readonly values: PrivateValues,
  ) {
    this.texts = new TokenTexts(tokenizer);
    this.cloudTexts = new TokenTexts(tokenizer);
    this.folded = new FoldedText(values.foldCase);
  }

  /** The text `reply` writes after `cloudContext`, and the characters each of its tokens wrote, from `cloudTexts`. */
  private replyTexts(cloudContext: readonly number[], reply: readonly number[]): TextRanges & { endsInsideCharacter: boolean } {
    const all = this.cloudTexts;
    all.update(cloudContext.concat(reply));
    const n = cloudContext.length;
    // A character the context began and the reply completed is the reply's.
    const base = reply.length > 0 ? all.rangeOf(n).start : all.text.length;
    return {
      text: all.text.slice(base),
      endsInsideCharacter: all.endsInsideCharacter,
      rangeOf: (i) => {
        const { start, end } = all.rangeOf(n + i);
        return { start: start - base, end: end - base };
      },
    };
  }

  /** The cloud's version of the edge's context: what is settled from earlier calls, and the rest translated now. */
  toCloud(ids: readonly number[], sources: readonly TokenSource[]): CloudContext {
    const { texts, values, folded, settled } = this;
    const kept = texts.update(ids);
    if (!settled.holds(kept, sources)) settled.clear();
    folded.sync(texts.text);
    // Values that reach the unsettled text start at most the longest value before it.
    let ranges = values.privateRanges(folded, Math.max(0, folded.foldedAt(settled.rawEnd) - values.longestFolded));
    if (ranges.some((r) => r.start < settled.rawEnd && r.end > settled.rawEnd)) {
      // A value across the settled end: what settled it no longer holds, so nothing is taken as settled.
      settled.clear();
      ranges = values.privateRanges(folded);
    }
    const placeholders = new Set(settled.placeholders);
    const withheld = texts.endsInsideCharacter || values.endsInsideValue(folded);
    const tail = { ids: [] as number[], sources: [] as TokenSource[] };
    // Text before this raw offset is final: a value found later starts after it, one found now ends before it.
    const stable = folded.text.length - values.longestFolded - FOLDING_MARGIN;
    const rawLimit = stable <= 0 ? 0 : folded.rawRange(stable, stable + 1).start;
    let settling = true;
    const head = { ids: settled.ids.length, sources: settled.sources.length };
    const runs = runsOf(texts, settled.tokens, ids.length, ranges);
    for (let r = 0; r < runs.length; r++) {
      const run = runs[r]!;
      const start = run.first < 0 ? run.last : run.first;
      const from = tail.ids.length;
      const used = new Set<string>();
      const restored = this.restoredAt(start, ids, runs, r);
      if (restored) {
        tail.ids.push(...restored.entry.cloud);
        for (const _ of restored.entry.cloud) tail.sources.push(sources[start]!);
        for (const p of restored.entry.placeholders) used.add(p);
        r = restored.lastRun;
      } else if (run.first < 0) {
        tail.ids.push(ids[run.last]!);
        tail.sources.push(sources[run.last]!);
      } else {
        const spelled = this.spell(this.replaced(run, ranges, (r) => r.values.map((v) => v.placeholder).join(''), used));
        tail.ids.push(...spelled);
        for (const _ of spelled) tail.sources.push(sources[run.first]!);
      }
      for (const p of used) placeholders.add(p);
      const last = runs[r]!.last;
      const end = texts.rangeOf(last).end;
      settling &&= end <= rawLimit;
      if (settling) settled.add(last + 1, end, tail.ids.slice(from), tail.sources.slice(from), used, sources);
    }
    return {
      ids: settled.ids.slice(0, head.ids).concat(tail.ids),
      sources: settled.sources.slice(0, head.sources).concat(tail.sources),
      withheld,
      placeholders,
    };
  }

  /**
   * The edge's version of tokens the cloud wrote after `cloudContext`: unchanged unless they write one of
   * this generation's placeholders, whose tokens are then spelled again with the value in its place.
   */
  fromCloud(cloudContext: readonly number[], reply: readonly number[], at: number): { ids: number[]; restored: boolean; text: string } {
    const texts = this.replyTexts(cloudContext, reply);
    const found = this.values.placeholders(texts.text);
    if (found.length === 0) return { ids: [...reply], restored: false, text: texts.text };
    const ranges: PrivateRange[] = found.map((o) => ({ start: o.start, end: o.end, values: [o.value] }));
    const ids: number[] = [];
    for (const run of runsOf(texts, 0, reply.length, ranges)) {
      if (run.first < 0) {
        ids.push(reply[run.last]!);
        continue;
      }
      const placeholders: string[] = [];
      const real = encodeContinuation(
        this.tokenizer,
        replacedText(texts, run, ranges, (r) => (placeholders.push(r.values[0]!.placeholder), r.values[0]!.text)),
      );
      this.restorations.set(at + ids.length, { real, cloud: reply.slice(run.first, run.last + 1), placeholders });
      ids.push(...real);
    }
    return { ids, restored: true, text: this.textAfter(cloudContext, ids) };
  }

  /**
   * The restoration at token `start` of `ids`, when the context still holds its value's tokens there and no
   * run of this step's reaches past them; and the index of the last run it covers.
   */
  private restoredAt(start: number, ids: readonly number[], runs: readonly Run[], r: number): { entry: Restoration; lastRun: number } | undefined {
    const entry = this.restorations.get(start);
    if (!entry) return undefined;
    const end = start + entry.real.length;
    if (end > ids.length || entry.real.some((id, i) => ids[start + i] !== id)) return undefined;
    let last = r;
    while (last + 1 < runs.length && (runs[last + 1]!.first < 0 ? runs[last + 1]!.last : runs[last + 1]!.first) < end) last++;
    const lastRun = runs[last]!;
    return lastRun.last === end - 1 ? { entry, lastRun: last } : undefined;
  }

  /** The text `ids` write after `context`. */
  textAfter(context: readonly number[], ids: readonly number[]): string {
    const texts = new TokenTexts(this.tokenizer, context);
    texts.update(ids);
    return texts.text;
  }

  /**
   * Where the cloud's reply so far stands: whether it ends inside one of this generation's placeholders (or a
   * character), and how many whole placeholders it wrote.
   */
  placeholdersIn(cloudContext: readonly number[], reply: readonly number[]): { inside: boolean; complete: number } {
    const texts = this.replyTexts(cloudContext, reply);
    return { inside: texts.endsInsideCharacter || this.values.endsInsidePlaceholder(texts.text), complete: this.values.placeholders(texts.text).length };
  }

  private replaced(run: Run, ranges: readonly PrivateRange[], by: (r: PrivateRange) => string, used: Set<string>): string {
    return replacedText(this.texts, run, ranges, (r) => {
      for (const v of r.values) used.add(v.placeholder);
      return by(r);
    });
  }

  private spell(text: string): number[] {
    let ids = this.spellings.get(text);
    if (!ids) this.spellings.set(text, (ids = encodeContinuation(this.tokenizer, text)));
    return ids;
  }
}

/**
 * The context cut into runs: a token outside every range is its own run (`first` -1, `last` its index); a
 * run of tokens that each write a character inside some range is one run.
 */
function runsOf(texts: TextRanges, first: number, length: number, ranges: readonly PrivateRange[]): Run[] {
  const runs: Run[] = [];
  let r = 0;
  let open: Run | undefined;
  for (let i = first; i < length; i++) {
    const { start, end } = texts.rangeOf(i);
    while (r < ranges.length && ranges[r]!.end <= start) r++;
    const inside = end > start && r < ranges.length && ranges[r]!.start < end;
    if (inside && open) open.last = i;
    else if (inside) runs.push((open = { first: i, last: i }));
    else {
      open = undefined;
      runs.push({ first: -1, last: i });
    }
  }
  return runs;
}

/** The text a run writes, with each range inside it written as `by` says. */
function replacedText(texts: TextRanges, run: Run, ranges: readonly PrivateRange[], by: (r: PrivateRange) => string): string {
  const from = texts.rangeOf(run.first).start;
  const to = texts.rangeOf(run.last).end;
  let text = '';
  let at = from;
  for (const range of ranges) {
    if (range.end <= from || range.start >= to) continue;
    text += texts.text.slice(at, range.start) + by(range);
    at = range.end;
  }
  return text + texts.text.slice(at, to);
}
