/**
 * Whether the shim means what the edge model means by every token id: the edge's tokenizer fingerprint
 * (src/shared/text/tokenizer-fingerprint.ts) against the one the shim reports, in its Describe answer (asked at
 * start) and in every session's `opened` (before the first step's result is read). A shim whose tokenizer
 * differs gets nothing: every new stream is refused at once, so every routed token falls back to the edge
 * model, and the state says `mismatch` with the parts that differ. While it lasts the shim is asked again
 * every `recheckMs`, so a shim restarted with the right pack is routed to again without an edge restart.
 *
 * A shim that reports no fingerprint (one older than the field, or one without a tokenizer: no
 * --model-pack) is taken as before: nothing shows a mismatch, so nothing is refused.
 *
 * @example
 * const agreement = new VocabularyAgreement(tokenizerFingerprint(packDir), () => describeShim(), realProbeClock, 10_000);
 * await agreement.check();
 * agreement.refusal(); // a VocabularyMismatchError to throw instead of opening a stream, or undefined
 */
import { describeTokenizerMismatch, type TokenizerFingerprint } from '../../shared/text/tokenizer-fingerprint.ts';
import { CircuitOpenError } from './cloud-backoff.ts';
import type { ProbeClock } from './cloud-health-probe.ts';

/** `unchecked`: the shim has not said yet; `unknown`: it says nothing (or the edge has no fingerprint to compare). */
export type VocabularyVerdict = 'unchecked' | 'unknown' | 'agreed' | 'mismatch';

/** The shim's tokenizer is not the edge model's: a refusal without trying, not a cloud failure. */
export class VocabularyMismatchError extends CircuitOpenError {
  constructor(message: string) {
    super(message, 'FAILED_PRECONDITION');
  }
}

/** Asks the shim for its tokenizer's fingerprint: undefined when it reports none. Rejects when it cannot be asked. */
export type AskShimTokenizer = () => Promise<TokenizerFingerprint | undefined>;

export class VocabularyAgreement {
  private current: VocabularyVerdict = 'unchecked';
  private mismatch: VocabularyMismatchError | undefined;
  private timer: unknown;
  private closed = false;

  constructor(
    /** The edge model's tokenizer; undefined: nothing is compared. */
    private readonly edge: TokenizerFingerprint | undefined,
    private readonly ask: AskShimTokenizer,
    private readonly clock: ProbeClock,
    private readonly recheckMs: number,
  ) {}

  get verdict(): VocabularyVerdict {
    return this.current;
  }

  /** What differs, while the verdict is `mismatch`. */
  get reason(): string | undefined {
    return this.mismatch?.message;
  }

  /** The error to refuse a new stream with, while the verdict is `mismatch`. */
  refusal(): VocabularyMismatchError | undefined {
    return this.mismatch;
  }

  /** Takes the shim's report in; returns the mismatch when its tokenizer is not the edge model's. */
  judge(shim: TokenizerFingerprint | undefined): VocabularyMismatchError | undefined {
    if (!this.edge || !shim) {
      this.settle('unknown');
    } else if (shim.sha256 === this.edge.sha256) {
      this.settle('agreed');
    } else {
      const differs = describeTokenizerMismatch({ name: "the shim's tokenizer", fingerprint: shim }, { name: "the edge model's", fingerprint: this.edge });
      this.settle('mismatch', new VocabularyMismatchError(`${differs}; nothing is routed to it (its ids mean other tokens)`));
    }
    return this.mismatch;
  }

  /** Asks the shim (when there is a fingerprint to compare) and judges its answer. */
  async check(): Promise<VocabularyVerdict> {
    if (!this.edge || this.closed) return this.current;
    this.judge(await this.ask());
    return this.current;
  }

  close(): void {
    this.closed = true;
    this.disarm();
  }

  private settle(verdict: VocabularyVerdict, mismatch?: VocabularyMismatchError): void {
    this.current = verdict;
    this.mismatch = mismatch;
    if (mismatch) this.arm();
    else this.disarm();
  }

  /** While mismatched: ask again after `recheckMs` (a failed ask keeps the verdict and tries again later). */
  private arm(): void {
    if (this.closed || this.timer !== undefined) return;
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      void this.check()
        .catch(() => {})
        .finally(() => {
          if (this.mismatch) this.arm();
        });
    }, this.recheckMs);
  }

  private disarm(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }
}
