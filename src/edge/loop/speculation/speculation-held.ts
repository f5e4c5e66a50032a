/**
 * What speculation holds (speculation-chains.ts): the chains it decodes ahead on, and, beside its phase
 * (speculation-states.ts), only what that phase says is there.
 */
import type { AppendResult } from '../../../shared/model/decoder-model.ts';
import type { TokenSource } from '../../../shared/contract/contract-vocabulary.ts';
import type { RoutingCut } from '../../routing/routing-cut.ts';
import type { CloudReply } from '../cloud-reply.ts';
import type { SpeculativeStep } from './decode-ahead.ts';
import type { SpeculationPhase } from './speculation-states.ts';

/**
 * A routed position whose step is in flight, and what the edge decoded past it from its guess. When a
 * position of the chain routed too, its conditional step went out at once: `behind` holds it, with the
 * chain's part after it. Each chain holds one checkpoint of the edge's cache, at its routed position.
 */
export interface Chain {
  /** The step's reply as a value: it never rejects. */
  step: Promise<CloudReply>;
  /** Token index of the routed position. */
  tokenIndex: number;
  guess: number;
  from: AppendResult;
  draws: number;
  steps: SpeculativeStep[];
  /** The context up to the end of the chain (shared with the chain behind, which continues it). */
  ids: number[];
  /** The sources of `ids` as the steps sent from inside the chain give them: its routed positions' tokens as `llm`. */
  idSources: TokenSource[];
  behind?: { index: number; chain: Chain };
  replied: boolean;
  /**
   * The generation's cut as it will stand at the chain's end: a fork taken at the routed position, fed every
   * position decoded ahead, so each is decided as the loop would decide it. The chain behind continues it.
   */
  cut: RoutingCut;
}

/**
 * What speculation holds besides its phase (speculation-states.ts), as the phase says: the chain decoding
 * ahead of the step out, the kept positions left to replay, the conditional step out for the last of them,
 * or a thrown-away conditional step the next step waits for.
 */
export type SpeculationHeld =
  | { phase: 'idle' | 'sent' }
  | { phase: 'draining'; drain: Promise<void> }
  | { phase: 'ahead'; chain: Chain }
  | { phase: 'replaying'; kept: SpeculativeStep[] }
  | { phase: 'replaying-to-step'; kept: SpeculativeStep[]; pending: Chain }
  | { phase: 'resuming'; pending: Chain };

/** What each phase holds besides itself. */
export type HeldData<P extends SpeculationPhase> = Omit<Extract<SpeculationHeld, { phase: P }>, 'phase'>;
