/**
 * Speculation's state machine, pure: every phase against every event gives the next phase or a refusal
 * (always INTERNAL: a refused transition is speculation's own bug), and the walks a generation takes. The
 * machine in real use (SpeculationChains enters every phase through it, and throws on a refusal) is run by
 * decoder-loop-speculation.test.ts and conditional-steps-grpc.test.ts.
 */
import { describe, expect, test } from 'bun:test';
import {
  enterSpeculationPhase,
  INITIAL_SPECULATION_PHASE,
  isSpeculationRefusal,
  SPECULATION_EVENTS,
  SPECULATION_PHASES,
  speculationTransition,
  type SpeculationEvent,
  type SpeculationPhase,
} from '../src/edge/loop/speculation/speculation-states.ts';
import { AppError } from '../src/shared/errors.ts';

/** A refusal: INTERNAL, whatever the message. */
const BUG = 'INTERNAL';

// Columns, in SPECULATION_EVENTS' order:
//                       replay               replay-last  send     open     settle  keep         keep-to-step         discard discard-step
const TABLE: Record<SpeculationPhase, string[]> = {
  idle: [BUG, BUG, 'sent', BUG, BUG, BUG, BUG, BUG, BUG],
  draining: [BUG, BUG, 'sent', BUG, BUG, BUG, BUG, BUG, BUG],
  sent: [BUG, BUG, BUG, 'ahead', 'idle', BUG, BUG, BUG, BUG],
  ahead: [BUG, BUG, BUG, BUG, BUG, 'replaying', 'replaying-to-step', 'idle', 'draining'],
  replaying: ['replaying', 'idle', BUG, BUG, BUG, BUG, BUG, BUG, BUG],
  'replaying-to-step': ['replaying-to-step', 'resuming', BUG, BUG, BUG, BUG, BUG, BUG, BUG],
  resuming: [BUG, BUG, 'ahead', BUG, BUG, BUG, BUG, BUG, BUG],
};

describe('the speculation transition table', () => {
  test('lists every phase', () => {
    expect(Object.keys(TABLE)).toEqual([...SPECULATION_PHASES]);
    expect(SPECULATION_EVENTS).toHaveLength(9);
  });

  for (const phase of SPECULATION_PHASES) {
    test(`from ${phase}`, () => {
      const row = SPECULATION_EVENTS.map((event): string => {
        const next = speculationTransition(phase, event);
        return isSpeculationRefusal(next) ? next.refused : next;
      });
      expect(row).toEqual(TABLE[phase]);
    });
  }
});

describe('walking the machine', () => {
  const walk = (events: SpeculationEvent[]) =>
    events.reduce<SpeculationPhase[]>((phases, event) => [...phases, enterSpeculationPhase(phases.at(-1)!, event)], [INITIAL_SPECULATION_PHASE]);

  test('a refusal is thrown as an AppError (INTERNAL) that names the event and the phase', () => {
    expect(() => enterSpeculationPhase('ahead', 'send')).toThrow(AppError);
    expect(() => enterSpeculationPhase('ahead', 'send')).toThrow(
      expect.objectContaining({ code: 'INTERNAL', message: expect.stringContaining('(send while ahead)') }),
    );
  });

  test('a right guess: the chain is kept, replayed, and speculation is idle again', () => {
    expect(walk(['send', 'open', 'keep', 'replay', 'replay-last'])).toEqual(['idle', 'sent', 'ahead', 'replaying', 'replaying', 'idle']);
  });

  test('a right guess with a conditional step behind it: replayed up to it, then the step out is taken', () => {
    expect(walk(['send', 'open', 'keep-to-step', 'replay-last', 'send', 'discard'])).toEqual([
      'idle',
      'sent',
      'ahead',
      'replaying-to-step',
      'resuming',
      'ahead',
      'idle',
    ]);
  });

  test('a wrong guess with a conditional step behind it: the next step waits for its skipped reply', () => {
    expect(walk(['send', 'open', 'discard-step', 'send', 'settle'])).toEqual(['idle', 'sent', 'ahead', 'draining', 'sent', 'idle']);
  });
});
