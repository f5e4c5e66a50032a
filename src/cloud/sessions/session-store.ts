/**
 * The shim's sessions: one per stream, holding the generation's context (ids and their routing sources)
 * so the edge only ever sends what was appended. The store enforces the caps (session count, total
 * context tokens → RESOURCE_EXHAUSTED), checks that each delta starts exactly where the context ends
 * (gap or overlap → FAILED_PRECONDITION) or, for a conditional step, that the ids it overlaps are the
 * context's (otherwise the step is skipped), and expires sessions that stay idle: their `signal` aborts with
 * DEADLINE_EXCEEDED, which ends the stream that owns them.
 *
 * @example
 * const store = new SessionStore({ maxSessions: 64, maxContextTokens: 1 << 20, idleMs: 300_000 });
 * const session = store.open('req-1', [1, 403], []);
 * store.append(session, 2, [407], ['slm']);
 * store.close(session);
 */
import { randomUUID } from 'node:crypto';
import { AppError } from '../../shared/errors.ts';
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';

/** A session ended for sitting idle: nothing it was asked was computed, so its step may be resent elsewhere. */
export class SessionExpiredError extends AppError {
  constructor(message: string) {
    super('DEADLINE_EXCEEDED', message);
  }
}

export interface SessionLimits {
  maxSessions: number;
  maxContextTokens: number;
  idleMs: number;
}

export class RoutingSession {
  readonly id = randomUUID().replaceAll('-', '');
  readonly ids: number[] = [];
  readonly sources: TokenSource[] = [];
  steps = 0;
  generated = 0;
  lastActive = performance.now();
  /** A step is running: the session is not idle whatever the clock says. */
  busy = false;
  /** The last step was a skipped conditional one: a conditional step after it assumed its result, so it is skipped too. */
  skippedLast = false;
  private readonly controller = new AbortController();

  constructor(
    readonly requestId: string,
    /** The key every backend request of this session carries (open.routing_key, or else the request id); empty = none. */
    readonly routingKey = requestId,
  ) {}

  /** Aborts (with an AppError reason) when the session expires or the store shuts down. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** @internal */
  abort(reason: AppError): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
  }
}

export class SessionStore {
  private readonly sessions = new Set<RoutingSession>();
  private tokens = 0;
  private sweeper: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly limits: SessionLimits) {
    this.sweeper = setInterval(() => this.sweep(), Math.max(10, Math.min(limits.idleMs / 4, 5_000)));
    this.sweeper.unref?.();
  }

  get count(): number {
    return this.sessions.size;
  }

  /** Context tokens held over all sessions. */
  get totalTokens(): number {
    return this.tokens;
  }

  open(requestId: string, ids: readonly number[], sources: readonly TokenSource[], routingKey = requestId): RoutingSession {
    if (this.sweeper === undefined) throw new AppError('UNAVAILABLE', 'the shim is shutting down');
    if (this.sessions.size >= this.limits.maxSessions) {
      throw new AppError('RESOURCE_EXHAUSTED', `too many sessions: the shim serves at most ${this.limits.maxSessions} at once`);
    }
    this.reserve(ids.length);
    const session = new RoutingSession(requestId, routingKey);
    this.sessions.add(session);
    this.push(session, ids, sources);
    return session;
  }

  /** Appends the edge's delta, which must start exactly at the end of the session's context. */
  append(session: RoutingSession, offset: number, ids: readonly number[], sources: readonly TokenSource[]): void {
    this.touch(session);
    session.skippedLast = false;
    if (offset !== session.ids.length) {
      const kind = offset > session.ids.length ? 'gap' : 'overlap';
      throw new AppError(
        'FAILED_PRECONDITION',
        `${kind} in context ids: the step or extend starts at offset ${offset}, the session holds ${session.ids.length} tokens`,
      );
    }
    if (ids.length === 0) return;
    this.reserve(ids.length);
    this.push(session, ids, sources);
  }

  /**
   * Appends a conditional step's delta, which starts at or before the end of the context: the ids that overlap
   * the context must be its own (the assumed token the previous step returned). False, with the context
   * untouched, when they are not, when the previous step was skipped (or the step starts past the end, which
   * says the same), or when it ends before the context does.
   *
   * @example
   * store.appendConditional(session, 4, [407, 261], ['slm', 'slm']); // context [.., 407]: appends 261 only
   */
  appendConditional(session: RoutingSession, offset: number, ids: readonly number[], sources: readonly TokenSource[]): boolean {
    this.touch(session);
    session.skippedLast = !this.assumes(session, offset, ids);
    if (session.skippedLast) return false;
    const overlap = session.ids.length - offset;
    const rest = ids.slice(overlap);
    if (rest.length === 0) return true;
    this.reserve(rest.length);
    this.push(session, rest, sources.slice(overlap));
    return true;
  }

  /** Whether the context a conditional step assumed is the session's. */
  private assumes(session: RoutingSession, offset: number, ids: readonly number[]): boolean {
    const length = session.ids.length;
    // After a skipped step, past the end, or ending before it (the previous step returned more tokens than
    // the edge assumed): not the context the step was built on.
    if (session.skippedLast || offset > length || offset + ids.length < length) return false;
    for (let i = offset; i < length; i++) if (session.ids[i] !== ids[i - offset]) return false;
    return true;
  }

  /** Appends tokens the backend generated (source `llm`). */
  appendGenerated(session: RoutingSession, ids: readonly number[]): void {
    this.reserve(ids.length);
    this.push(
      session,
      ids,
      ids.map(() => 'llm'),
    );
    session.generated += ids.length;
  }

  touch(session: RoutingSession): void {
    session.lastActive = performance.now();
  }

  /** Frees the session; safe to call twice. */
  close(session: RoutingSession): void {
    if (!this.sessions.delete(session)) return;
    this.tokens -= session.ids.length;
  }

  /** Expires sessions idle longer than the limit; returns how many. */
  sweep(now = performance.now()): number {
    let expired = 0;
    for (const session of this.sessions) {
      if (session.busy || now - session.lastActive <= this.limits.idleMs) continue;
      session.abort(new SessionExpiredError(`session idle for more than ${this.limits.idleMs} ms`));
      this.close(session);
      expired++;
    }
    return expired;
  }

  /** Stops the sweeper and aborts every session with `reason`; later opens fail with UNAVAILABLE. */
  shutdown(reason: AppError): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    for (const session of [...this.sessions]) session.abort(reason);
  }

  private reserve(n: number): void {
    if (this.tokens + n > this.limits.maxContextTokens) {
      throw new AppError(
        'RESOURCE_EXHAUSTED',
        `context token budget exhausted: ${this.tokens} held + ${n} new > ${this.limits.maxContextTokens} over all sessions`,
      );
    }
  }

  private push(session: RoutingSession, ids: readonly number[], sources: readonly TokenSource[]): void {
    for (let i = 0; i < ids.length; i++) {
      session.ids.push(ids[i]!);
      session.sources.push(sources[i] ?? 'prompt');
    }
    this.tokens += ids.length;
  }
}
