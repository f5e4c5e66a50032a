/**
 * One generation's grammar matcher: the constraint held on every token, whichever model chose it. The
 * edge's own tokens are drawn from its logits with every token the grammar forbids masked out; a routed
 * step's tokens are checked one by one (a span keeps its allowed prefix), and a first token the grammar
 * forbids is replaced by the cloud's most likely allowed alternative from its top-k; where none of them is
 * allowed, the edge draws its own (a constrained fallback). End tokens are allowed only where the grammar
 * may end, and a grammar that can take nothing more ends the generation.
 *
 * @example
 * const constraint = await TokenConstraint.open(compiled, [151645]);
 * const id = await constraint.pick(logits, { temperature: 1, topP: 1, random });
 * const kept = constraint.acceptCloud(reply.tokens, reply.topAlternatives, vocabSize); // undefined: the edge picks
 */
import type { CompiledGrammar, GrammarMatcher } from '@mlc-ai/web-xgrammar';
import type { TokenAlternative } from '../../shared/contract/contract-vocabulary.ts';
import { AppError } from '../../shared/errors.ts';
import { sampleToken, type SamplingOptions } from '../../shared/model/sampling.ts';
import { loadXGrammar } from './xgrammar-module.ts';
import { isVocabularyId } from '../../shared/model/vocabulary-id.ts';

/** How many alternatives a constrained generation asks the cloud for at each routed token. */
export const CONSTRAINED_TOP_K = 20;

/** What the constraint changed, for the generation's metrics and `usage`. */
export interface ConstraintCounts {
  /** Cloud tokens the grammar forbade, replaced by an allowed one of the cloud's own top-k. */
  cloudTokensReplaced: number;
  /** Routed positions where none of the cloud's top-k was allowed: the edge's best allowed token was taken. */
  constrainedFallbacks: number;
  /** Later tokens of cloud spans dropped from the first one the grammar forbade. */
  spanTokensDropped: number;
}

export class TokenConstraint {
  /** The allowed tokens at the current position, one bit each; computed when first needed there. */
  private bitmask: Int32Array | undefined;
  private readonly stops: ReadonlySet<number>;
  readonly counts: ConstraintCounts = { cloudTokensReplaced: 0, constrainedFallbacks: 0, spanTokensDropped: 0 };

  private constructor(
    private readonly matcher: GrammarMatcher,
    stopIds: readonly number[],
  ) {
    this.stops = new Set(stopIds);
  }

  static async open(compiled: CompiledGrammar, stopIds: readonly number[]): Promise<TokenConstraint> {
    const xg = await loadXGrammar();
    return new TokenConstraint(await xg.GrammarMatcher.createGrammarMatcher(compiled, [...stopIds]), stopIds);
  }

  private async mask(): Promise<Int32Array> {
    this.bitmask ??= await this.matcher.getNextTokenBitmask();
    return this.bitmask;
  }

  /** Whether the grammar is complete: it took an end token, or can take nothing but one (the generation ends here). */
  async finished(): Promise<boolean> {
    if (this.matcher.isTerminated()) return true;
    const mask = await this.mask();
    for (let word = 0; word < mask.length; word++) {
      let bits = mask[word]!;
      while (bits !== 0) {
        const bit = 31 - Math.clz32(bits & -bits);
        if (!this.stops.has(word * 32 + bit)) return false;
        bits &= bits - 1;
      }
    }
    return true;
  }

  /** Whether a token is allowed at the current position: what `pick` masks, for reporting the edge's alternatives. */
  async allowedNow(): Promise<(id: number) => boolean> {
    const mask = await this.mask();
    return (id) => isAllowed(mask, id);
  }

  /**
   * The alternatives of a routed step's tokens as the grammar lets them through, position by position, for
   * reporting: the matcher walks the tokens and is rolled back, so `acceptCloud` then sees it as it was.
   */
  async allowedAlternatives(ids: readonly number[], alternatives: readonly (readonly TokenAlternative[])[], vocabSize: number): Promise<TokenAlternative[][]> {
    const allowed: TokenAlternative[][] = [];
    let walked = 0;
    for (const [i, id] of ids.entries()) {
      const mask = await this.matcher.getNextTokenBitmask();
      allowed.push((alternatives[i] ?? []).filter((a) => isVocabularyId(a.id, vocabSize) && isAllowed(mask, a.id)));
      if (!isVocabularyId(id, vocabSize) || this.matcher.isTerminated() || !this.matcher.acceptToken(id)) break;
      walked++;
    }
    if (walked > 0) this.matcher.rollBack(walked);
    return allowed;
  }

  /** Whether an end token is allowed here: the grammar may end at this point. */
  async mayEnd(): Promise<boolean> {
    const mask = await this.mask();
    return [...this.stops].some((id) => ((mask[id >>> 5]! >>> (id & 31)) & 1) === 1);
  }

  /** The edge's token from `logits` with every forbidden token masked out, drawn as `options` say; taken into the grammar. */
  async pick(logits: Float32Array, options: SamplingOptions): Promise<number> {
    const mask = await this.mask();
    const limit = Math.min(options.vocabLimit ?? logits.length, logits.length);
    // Greedy reads the allowed logits in place; sampling draws from a copy with the forbidden ones at -Infinity.
    let id = -1;
    if (options.temperature === 0) id = bestAllowed(logits, mask, limit);
    else {
      const masked = maskedCopy(logits, mask, limit);
      if (masked) id = sampleToken(masked, options);
    }
    if (id < 0) throw new AppError('INTERNAL', 'the grammar allows no token of the edge vocabulary here');
    this.accept(id);
    return id;
  }

  /**
   * A routed step's tokens as the grammar lets them through, taken into it: the allowed prefix of the span,
   * or else the cloud's most likely allowed alternative for its first token. Undefined when neither: the
   * caller picks the edge's own token (`pick`), counted as a constrained fallback.
   */
  acceptCloud(ids: readonly number[], alternatives: readonly (readonly TokenAlternative[])[], vocabSize: number): number[] | undefined {
    const kept: number[] = [];
    for (const id of ids) {
      if (!this.tryAccept(id)) break;
      kept.push(id);
      if (this.matcher.isTerminated()) break;
    }
    if (kept.length > 0) {
      this.counts.spanTokensDropped += ids.length - kept.length;
      return kept;
    }
    this.counts.spanTokensDropped += Math.max(0, ids.length - 1);
    // A padded model's top-k may name rows past the tokenizer's ids: those are no tokens.
    const ranked = (alternatives[0] ?? []).filter((a) => isVocabularyId(a.id, vocabSize)).sort((a, b) => b.logprob - a.logprob);
    for (const { id } of ranked) {
      if (id !== ids[0] && this.tryAccept(id)) {
        this.counts.cloudTokensReplaced++;
        return [id];
      }
    }
    this.counts.cloudTokensReplaced++;
    this.counts.constrainedFallbacks++;
    return undefined;
  }

  /** The text every continuation from here starts with (xgrammar's jump-forward string); '' when the next character is open. */
  forcedText(): string {
    return this.matcher.findJumpForwardString();
  }

  /** Takes `text` in as characters rather than tokens (a probe's, not a generation's); false when the grammar refuses it. */
  acceptText(text: string): boolean {
    this.bitmask = undefined;
    return text === '' || this.matcher._acceptString(text);
  }

  private tryAccept(id: number): boolean {
    const ok = this.matcher.acceptToken(id);
    if (ok) this.bitmask = undefined;
    return ok;
  }

  private accept(id: number): void {
    if (!this.tryAccept(id)) throw new AppError('INTERNAL', `the grammar refused token ${id}, which its own mask allowed`);
  }

  dispose(): void {
    this.matcher.dispose();
  }
}

function isAllowed(mask: Int32Array, id: number): boolean {
  return ((mask[id >>> 5]! >>> (id & 31)) & 1) === 1;
}

/**
 * The allowed id of the highest logit below `limit` (the lowest id of equals, as argmax), or -1 when none is
 * allowed: one pass over the mask's words, a forbidden word skipped whole, an allowed one read straight through.
 */
function bestAllowed(logits: Float32Array, mask: Int32Array, limit: number): number {
  let best = -1;
  let bestValue = -Infinity;
  const words = Math.min(mask.length, Math.ceil(limit / 32));
  for (let word = 0; word < words; word++) {
    let bits = mask[word]!;
    if (bits === 0) continue;
    const base = word * 32;
    if (bits === -1 && base + 32 <= limit) {
      for (let i = base; i < base + 32; i++) {
        if (best < 0 || logits[i]! > bestValue) [best, bestValue] = [i, logits[i]!];
      }
      continue;
    }
    while (bits !== 0) {
      const i = base + 31 - Math.clz32(bits & -bits);
      if (i >= limit) break;
      if (best < 0 || logits[i]! > bestValue) [best, bestValue] = [i, logits[i]!];
      bits &= bits - 1;
    }
  }
  return best;
}

/** `logits` with every forbidden id at -Infinity (ids from `limit` on cut), or undefined when none is allowed. */
function maskedCopy(logits: Float32Array, mask: Int32Array, limit: number): Float32Array | undefined {
  const masked = logits.slice(0, limit);
  let allowed = false;
  for (let word = 0; word * 32 < limit; word++) {
    const bits = mask[word] ?? 0;
    const end = Math.min(limit, word * 32 + 32);
    if (bits === -1) allowed = true;
    else if (bits === 0) masked.fill(-Infinity, word * 32, end);
    else {
      for (let i = word * 32; i < end; i++) if (((bits >>> (i & 31)) & 1) === 0) masked[i] = -Infinity;
      allowed ||= masked.subarray(word * 32, end).some((v) => v !== -Infinity);
    }
  }
  return allowed ? masked : undefined;
}
