/**
 * The shim's Route stream state machine, pure: every state against every thing the edge can send next (or
 * its half-close) gives the next state or a refusal with its status code; and the edge's messages read as
 * those events. The same refusals through a real stream are bad-input.test.ts's Route matrix.
 */
import { describe, expect, test } from 'bun:test';
import {
  nextRouteSessionState,
  ROUTE_SESSION_EVENTS,
  ROUTE_SESSION_STATES,
  ROUTE_SESSION_TRANSITIONS,
  routeRequestRead,
  type Refusal,
  type RouteSessionState,
} from '../src/cloud/sessions/route-session-states.ts';
import type { ContextExtend__Output, OpenSession__Output, RouteStep__Output } from '../src/shared/grpc/proto.ts';

const FIRST_MUST_OPEN: Refusal = { refused: 'FAILED_PRECONDITION', message: 'the first message of a stream must be `open`' };
const OPENS_ONCE: Refusal = { refused: 'FAILED_PRECONDITION', message: 'a stream opens its session once: only `step` and `extend` messages may follow `open`' };
const AFTER_END: Refusal = { refused: 'INTERNAL', message: 'the stream has ended: nothing follows its final message' };

// Columns, in ROUTE_SESSION_EVENTS' order:
//                    open             step             extend           empty            half-close
const TABLE: Record<RouteSessionState, (RouteSessionState | Refusal)[]> = {
  'awaiting-open': ['open', FIRST_MUST_OPEN, FIRST_MUST_OPEN, FIRST_MUST_OPEN, 'ended'],
  open: [OPENS_ONCE, 'open', 'open', OPENS_ONCE, 'ended'],
  ended: [AFTER_END, AFTER_END, AFTER_END, AFTER_END, AFTER_END],
};

describe('the shim Route stream transition table', () => {
  test('lists every state and every event', () => {
    expect(Object.keys(TABLE)).toEqual([...ROUTE_SESSION_STATES]);
    expect(ROUTE_SESSION_EVENTS).toEqual(['open', 'step', 'extend', 'empty', 'half-close']);
  });

  for (const state of ROUTE_SESSION_STATES) {
    test(`from ${state}`, () => {
      expect(ROUTE_SESSION_EVENTS.map((event) => ROUTE_SESSION_TRANSITIONS[state][event])).toEqual(TABLE[state]);
      for (const event of ROUTE_SESSION_EVENTS) {
        const next = ROUTE_SESSION_TRANSITIONS[state][event];
        if (typeof next === 'string') expect(nextRouteSessionState(state, event)).toBe(next);
        else expect(() => nextRouteSessionState(state, event)).toThrow(expect.objectContaining({ code: next.refused, message: next.message }));
      }
    });
  }
});

describe("the edge's messages as events", () => {
  const open = { requestId: 'r1' } as OpenSession__Output;
  const step = { offset: 2 } as RouteStep__Output;
  const extend = { offset: 3, ids: [7], sources: ['TOKEN_SOURCE_SLM'] } as ContextExtend__Output;

  test('open, step, extend, a message with none of them, and the half-close', () => {
    expect(routeRequestRead({ done: false, value: { extend, message: 'extend' } })).toEqual({ event: 'extend', extend });
    expect(routeRequestRead({ done: false, value: { open, message: 'open' } })).toEqual({ event: 'open', open });
    expect(routeRequestRead({ done: false, value: { step, message: 'step' } })).toEqual({ event: 'step', step });
    expect(routeRequestRead({ done: false, value: {} })).toEqual({ event: 'empty' });
    expect(routeRequestRead({ done: true, value: undefined })).toEqual({ event: 'half-close' });
  });

  test('a stream that half-closes before opening ends cleanly; one that steps first fails', () => {
    expect(nextRouteSessionState('awaiting-open', 'half-close')).toBe('ended');
    expect(() => nextRouteSessionState('awaiting-open', 'step')).toThrow(expect.objectContaining({ code: 'FAILED_PRECONDITION' }));
  });
});
