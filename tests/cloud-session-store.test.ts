/** The shim's session store: deltas, caps, expiry. */
import { afterEach, describe, expect, test } from 'bun:test';
import * as grpc from '@grpc/grpc-js';
import { endMessage } from '../src/cloud/sessions/route-session.ts';
import { SessionStore } from '../src/cloud/sessions/session-store.ts';
import { AppError } from '../src/shared/errors.ts';

const stores: SessionStore[] = [];
function store(limits: Partial<ConstructorParameters<typeof SessionStore>[0]> = {}): SessionStore {
  const s = new SessionStore({ maxSessions: 4, maxContextTokens: 100, idleMs: 60_000, ...limits });
  stores.push(s);
  return s;
}
afterEach(() => {
  for (const s of stores.splice(0)) s.shutdown(new AppError('UNAVAILABLE', 'test over'));
});

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return (e as AppError).code;
  }
  return undefined;
}

describe('session store', () => {
  test('appends deltas at the end of the context, with their sources', () => {
    const s = store();
    const session = s.open('r', [1, 403], []);
    s.append(session, 2, [407, 261], ['slm', 'fallback']);
    s.appendGenerated(session, [378]);
    s.append(session, 5, [], []);
    expect(session.ids).toEqual([1, 403, 407, 261, 378]);
    expect(session.sources).toEqual(['prompt', 'prompt', 'slm', 'fallback', 'llm']);
    expect(session.generated).toBe(1);
    expect(s.totalTokens).toBe(5);
  });

  test('a gap or an overlap is FAILED_PRECONDITION and changes nothing', () => {
    const s = store();
    const session = s.open('r', [1, 403], []);
    expect(codeOf(() => s.append(session, 3, [5], ['slm']))).toBe('FAILED_PRECONDITION');
    expect(codeOf(() => s.append(session, 1, [403, 5], ['slm', 'slm']))).toBe('FAILED_PRECONDITION');
    expect(session.ids).toEqual([1, 403]);
  });

  test('caps on sessions and on context tokens are RESOURCE_EXHAUSTED; closing frees both', () => {
    const s = store({ maxSessions: 2, maxContextTokens: 10 });
    const a = s.open('a', [1, 2, 3, 4], []);
    const b = s.open('b', [1, 2, 3, 4], []);
    expect(codeOf(() => s.open('c', [1], []))).toBe('RESOURCE_EXHAUSTED');
    expect(codeOf(() => s.append(a, 4, [5, 6, 7], ['slm', 'slm', 'slm']))).toBe('RESOURCE_EXHAUSTED');
    s.close(b);
    s.close(b);
    expect(s.count).toBe(1);
    expect(s.totalTokens).toBe(4);
    s.append(a, 4, [5, 6, 7], ['slm', 'slm', 'slm']);
    expect(s.totalTokens).toBe(7);
  });

  test('idle sessions expire with DEADLINE_EXCEEDED on their signal; busy ones do not', () => {
    const s = store({ idleMs: 1_000 });
    const idle = s.open('idle', [1], []);
    const busy = s.open('busy', [1], []);
    busy.busy = true;
    const now = performance.now() + 5_000;
    expect(s.sweep(now)).toBe(1);
    expect(idle.signal.aborted).toBe(true);
    expect((idle.signal.reason as AppError).code).toBe('DEADLINE_EXCEEDED');
    expect(busy.signal.aborted).toBe(false);
    expect(s.count).toBe(1);
    // The stream's final message says the session expired (so the edge may resend a step that crossed it);
    // other failures, a step's own deadline among them, do not.
    expect(endMessage(idle.signal.reason).end).toMatchObject({ code: grpc.status.DEADLINE_EXCEEDED, expired: true });
    expect(endMessage(new AppError('DEADLINE_EXCEEDED', 'the backend did not answer')).end).toMatchObject({
      code: grpc.status.DEADLINE_EXCEEDED,
      expired: false,
    });
  });

  test('shutdown aborts every session and refuses new ones', () => {
    const s = store();
    const session = s.open('r', [1], []);
    s.shutdown(new AppError('UNAVAILABLE', 'bye'));
    expect((session.signal.reason as AppError).message).toBe('bye');
    expect(codeOf(() => s.open('late', [1], []))).toBe('UNAVAILABLE');
  });
});

describe('conditional steps', () => {
  test('a step whose overlap matches the context appends only the rest; consecutive routed positions append nothing', () => {
    const s = store();
    const session = s.open('r', [1, 403], []);
    s.appendGenerated(session, [407]);
    expect(s.appendConditional(session, 2, [407, 261, 378], ['slm', 'slm', 'slm'])).toBe(true);
    expect(session.ids).toEqual([1, 403, 407, 261, 378]);
    expect(session.sources).toEqual(['prompt', 'prompt', 'llm', 'slm', 'slm']);
    s.appendGenerated(session, [432]);
    expect(s.appendConditional(session, 5, [432], ['slm'])).toBe(true);
    expect(session.ids).toEqual([1, 403, 407, 261, 378, 432]);
    expect(s.totalTokens).toBe(6);
  });

  test('a mismatch, a step past the end or ending before it, and a step after a skipped one are skipped, the context untouched', () => {
    const s = store();
    const session = s.open('r', [1, 403], []);
    s.appendGenerated(session, [407]);
    expect(s.appendConditional(session, 2, [261, 378], ['slm', 'slm'])).toBe(false);
    expect(session.ids).toEqual([1, 403, 407]);
    // Assumes the skipped step's token at 3: skipped as well, although its offset is the context's end.
    expect(s.appendConditional(session, 3, [5], ['slm'])).toBe(false);
    expect(session.ids).toEqual([1, 403, 407]);
    // A plain step starts over; conditional steps after it are judged on their own again.
    s.append(session, 3, [261], ['slm']);
    expect(s.appendConditional(session, 4, [378], ['slm'])).toBe(true);
    expect(s.appendConditional(session, 9, [5], ['slm'])).toBe(false);
    s.append(session, 5, [], []);
    s.appendGenerated(session, [6, 7]);
    expect(s.appendConditional(session, 5, [6], ['slm'])).toBe(false);
    expect(session.ids).toEqual([1, 403, 407, 261, 378, 6, 7]);
    expect(s.totalTokens).toBe(7);
  });

  test('the token budget covers only what a conditional step appends', () => {
    const s = store({ maxContextTokens: 4 });
    const session = s.open('r', [1, 403, 407], []);
    expect(s.appendConditional(session, 2, [407, 261], ['slm', 'slm'])).toBe(true);
    expect(codeOf(() => s.appendConditional(session, 4, [5], ['slm']))).toBe('RESOURCE_EXHAUSTED');
  });
});
