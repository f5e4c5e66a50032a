/**
 * One generation's speculation as a state machine, pure (no model, no cloud): where it stands between the
 * loop's calls. Every change goes through `speculationTransition`; SpeculationChains does the work around it
 * and holds, beside the phase, only what the phase says is there (`SpeculationHeld`).
 *
 * Phases: `idle` (no routed step out, nothing kept), `draining` (idle, but a conditional step thrown away is
 * still to be answered: the next step waits for it), `sent` (a routed step is out and the edge waits for it),
 * `ahead` (a routed step is out and a chain decodes ahead of it from the edge's guess), `replaying` (the chain
 * was kept: its positions are replayed as the loop's decisions), `replaying-to-step` (the same, and the last
 * kept position's conditional step is out), `resuming` (the kept positions are replayed: the position being
 * decided takes that conditional step instead of sending one).
 *
 * @example
 * let phase = INITIAL_SPECULATION_PHASE;            // 'idle'
 * phase = enterSpeculationPhase(phase, 'send');      // 'sent'
 * phase = enterSpeculationPhase(phase, 'open');      // 'ahead'
 * speculationTransition(phase, 'send');              // { refused: 'INTERNAL', message: 'a step is sent ... while ...' }
 */
import { AppError } from '../../../shared/errors.ts';

export type SpeculationPhase = 'idle' | 'draining' | 'sent' | 'ahead' | 'replaying' | 'replaying-to-step' | 'resuming';

/**
 * `replay`: a kept position is replayed and more are left; `replay-last`: the last one is. `send`: a routed
 * position's step goes out (or, `resuming`, the one out for it is taken). `open`: a chain starts decoding
 * ahead. `settle`: the reply came with nothing decoded ahead. `keep` / `keep-to-step`: the guess was right and
 * the chain is kept (up to a conditional step out from inside it). `discard` / `discard-step`: the guess was
 * wrong, the chain is thrown away (with the conditional step sent from inside it).
 */
export type SpeculationEvent = 'replay' | 'replay-last' | 'send' | 'open' | 'settle' | 'keep' | 'keep-to-step' | 'discard' | 'discard-step';

export const SPECULATION_PHASES: readonly SpeculationPhase[] = ['idle', 'draining', 'sent', 'ahead', 'replaying', 'replaying-to-step', 'resuming'];
export const SPECULATION_EVENTS: readonly SpeculationEvent[] = [
  'replay',
  'replay-last',
  'send',
  'open',
  'settle',
  'keep',
  'keep-to-step',
  'discard',
  'discard-step',
];
export const INITIAL_SPECULATION_PHASE: SpeculationPhase = 'idle';

/** A transition that does not happen: always speculation's own bug (INTERNAL), never the loop's or the cloud's. */
export interface SpeculationRefusal {
  readonly refused: 'INTERNAL';
  readonly message: string;
}

const refuse = (event: SpeculationEvent, phase: SpeculationPhase, why: string): SpeculationRefusal => ({
  refused: 'INTERNAL',
  message: `speculation: ${why} (${event} while ${phase})`,
});

/** Where a chain's reply leaves speculation: its kept positions to replay, or nothing (a thrown-away conditional step to drain). */
const AFTER_SETTLING: Record<'keep' | 'keep-to-step' | 'discard' | 'discard-step', SpeculationPhase> = {
  keep: 'replaying',
  'keep-to-step': 'replaying-to-step',
  discard: 'idle',
  'discard-step': 'draining',
};

export function speculationTransition(phase: SpeculationPhase, event: SpeculationEvent): SpeculationPhase | SpeculationRefusal {
  const replaying = phase === 'replaying' || phase === 'replaying-to-step';
  switch (event) {
    case 'replay':
      return replaying ? phase : refuse(event, phase, 'no kept position is left to replay');
    case 'replay-last':
      if (!replaying) return refuse(event, phase, 'no kept position is left to replay');
      return phase === 'replaying' ? 'idle' : 'resuming';
    case 'send':
      // A kept position was decided while decoding ahead: only the last one may route, once it is replayed.
      if (phase === 'idle' || phase === 'draining') return 'sent';
      return phase === 'resuming' ? 'ahead' : refuse(event, phase, 'a step is sent while another is out or kept positions are left');
    case 'open':
      return phase === 'sent' ? 'ahead' : refuse(event, phase, 'a chain opens only at a step sent without one');
    case 'settle':
      return phase === 'sent' ? 'idle' : refuse(event, phase, 'only a step with nothing decoded ahead settles alone');
    case 'keep':
    case 'keep-to-step':
    case 'discard':
    case 'discard-step':
      if (phase !== 'ahead') return refuse(event, phase, 'only a chain decoding ahead is kept or thrown away');
      return AFTER_SETTLING[event];
  }
}

export function isSpeculationRefusal(next: SpeculationPhase | SpeculationRefusal): next is SpeculationRefusal {
  return typeof next !== 'string';
}

/** The next phase; a refusal is thrown as an AppError (INTERNAL). */
export function enterSpeculationPhase(phase: SpeculationPhase, event: SpeculationEvent): SpeculationPhase {
  const next = speculationTransition(phase, event);
  if (isSpeculationRefusal(next)) throw new AppError(next.refused, next.message);
  return next;
}
