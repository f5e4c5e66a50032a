/**
 * The edge's Route stream state machine, pure: every phase with every number of steps in flight, against
 * every event, gives the next state or a refusal with its status code. Unreachable combinations (a stream
 * `opening` with no step in flight) are listed too, so nothing is left unsaid.
 */
import { describe, expect, test } from 'bun:test';
import {
  enterRouteStreamState,
  INITIAL_ROUTE_STREAM_STATE,
  isRefusal,
  mayResend,
  ROUTE_STREAM_EVENTS,
  ROUTE_STREAM_PHASES,
  routeStreamTransition,
  type Refusal,
  type RouteStreamState,
} from '../src/edge/cloud/route-stream-states.ts';
import { AppError } from '../src/shared/errors.ts';

const CLOSED: Refusal = { refused: 'FAILED_PRECONDITION', message: 'the cloud conversation is closed' };
const BUSY: Refusal = { refused: 'FAILED_PRECONDITION', message: 'a step of this conversation is still in flight: only one conditional step may join it' };
/** The conversation's own bug: INTERNAL, whatever the message. */
const BUG = 'INTERNAL';

type Expected = string | Refusal;

// Columns, in ROUTE_STREAM_EVENTS' order:
//                  step           pipeline       open           ahead          answer         drop           settle         close          closed
const TABLE: Record<string, Expected[]> = {
  'no-stream/0': ['no-stream/1', BUG, BUG, 'opening/0', BUG, 'no-stream/0', BUG, 'draining/0', BUG],
  'no-stream/1': [BUSY, BUSY, 'opening/1', BUG, 'no-stream/1', 'no-stream/1', 'no-stream/0', 'draining/1', BUG],
  'no-stream/2': [BUSY, BUSY, BUG, BUG, 'no-stream/2', 'no-stream/2', 'no-stream/1', 'draining/2', BUG],
  'opening/0': ['opening/1', BUG, BUG, BUG, BUG, 'no-stream/0', BUG, 'draining/0', BUG],
  'opening/1': [BUSY, 'opening/2', BUG, BUG, 'open/1', 'no-stream/1', 'opening/0', 'draining/1', BUG],
  'opening/2': [BUSY, BUSY, BUG, BUG, 'open/2', 'no-stream/2', 'opening/1', 'draining/2', BUG],
  'open/0': ['open/1', BUG, BUG, BUG, BUG, 'no-stream/0', BUG, 'draining/0', BUG],
  'open/1': [BUSY, 'open/2', BUG, BUG, 'open/1', 'no-stream/1', 'open/0', 'draining/1', BUG],
  'open/2': [BUSY, BUSY, BUG, BUG, 'open/2', 'no-stream/2', 'open/1', 'draining/2', BUG],
  'draining/0': [CLOSED, CLOSED, CLOSED, CLOSED, BUG, 'draining/0', BUG, CLOSED, 'ended/0'],
  'draining/1': [CLOSED, CLOSED, CLOSED, CLOSED, 'draining/1', 'draining/1', 'draining/0', CLOSED, 'ended/1'],
  'draining/2': [CLOSED, CLOSED, CLOSED, CLOSED, 'draining/2', 'draining/2', 'draining/1', CLOSED, 'ended/2'],
  'ended/0': [CLOSED, CLOSED, CLOSED, CLOSED, BUG, 'ended/0', BUG, CLOSED, BUG],
  'ended/1': [CLOSED, CLOSED, CLOSED, CLOSED, 'ended/1', 'ended/1', 'ended/0', CLOSED, BUG],
  'ended/2': [CLOSED, CLOSED, CLOSED, CLOSED, 'ended/2', 'ended/2', 'ended/1', CLOSED, BUG],
};

const STATES: RouteStreamState[] = ROUTE_STREAM_PHASES.flatMap((phase) => ([0, 1, 2] as const).map((inFlight) => ({ phase, inFlight })));
const key = (s: RouteStreamState) => `${s.phase}/${s.inFlight}`;

describe('the edge Route stream transition table', () => {
  test('lists every state', () => {
    expect(Object.keys(TABLE)).toEqual(STATES.map(key));
  });

  for (const state of STATES) {
    test(`from ${key(state)}`, () => {
      const row = ROUTE_STREAM_EVENTS.map((event): Expected => {
        const next = routeStreamTransition(state, event);
        if (!isRefusal(next)) return key(next);
        return next.refused === 'INTERNAL' ? BUG : next;
      });
      expect(row).toEqual(TABLE[key(state)]!);
    });
  }
});

describe('walking the machine', () => {
  test('a refusal is thrown as an AppError with its status code', () => {
    const busy = enterRouteStreamState(INITIAL_ROUTE_STREAM_STATE, 'step');
    expect(() => enterRouteStreamState(busy, 'step')).toThrow(AppError);
    expect(() => enterRouteStreamState(busy, 'step')).toThrow(expect.objectContaining({ code: 'FAILED_PRECONDITION', message: BUSY.message }));
  });

  test('a step opens a stream, a conditional step joins it, both are answered and settle', () => {
    const events = ['step', 'open', 'pipeline', 'answer', 'settle', 'answer', 'settle'] as const;
    const states = events.reduce<RouteStreamState[]>((walk, event) => [...walk, enterRouteStreamState(walk.at(-1)!, event)], [INITIAL_ROUTE_STREAM_STATE]);
    expect(states.map(key)).toEqual(['no-stream/0', 'no-stream/1', 'opening/1', 'opening/2', 'open/2', 'open/1', 'open/1', 'open/0']);
  });

  test('a step is resent only when it is the one step in flight and its stream was dropped, not while closing', () => {
    expect(STATES.filter(mayResend).map(key)).toEqual(['no-stream/1']);
  });
});
