/**
 * One CloudConversation over Route streams: the edge's side of one generation's talk with the shim. The
 * stream opens at the first `next` with the whole context and carries one step at a time after that (the
 * messages themselves are context-delta.ts's). A stream that broke, expired or disagrees with the edge's
 * context is dropped and the next step opens another with the whole context. One rule resends a step: the
 * shim ended the reused stream before looking at it (idle expiry, shutdown); any other failure answers the
 * step. A conditional step goes out behind the step in flight on the same stream and reads its result after
 * that one's; when the stream fails, both steps fail and neither is sent again. A failed step's error says
 * why in plain words (cloud-failure-reason.ts): that is what the page shows on a fallback token.
 *
 * Where streams come from is the host's business (RouteStreamHost): GrpcCloudClient opens them on its
 * channel behind the circuit breaker; the lab's in-process cloud over an in-memory pipe to the shim's core.
 *
 * A step the shim refused as overloaded is answered, not failed (the reply says `overloaded`, the loop decides
 * the position), and counts as a success for the breaker like any reply: the shim is up and answering, and a
 * busy cloud that refuses quickly is what the breaker must not trip on. A conversation's own, shorter step
 * deadline is sent in `open` (the shim refuses by it) and bounds the wait for each reply.
 *
 * @example
 * const conversation = new GrpcCloudConversation(host, 'r1', signal, 'chat-42');
 * const reply = await conversation.next(stepRequest);
 * await conversation.close();
 */
import type { Readable, Writable } from 'node:stream';
import { AppError } from '../../shared/errors.ts';
import { appErrorCode, toAppError } from '../../shared/grpc/errors.ts';
import type { RouteRequest, RouteResponse__Output, StepResult__Output } from '../../shared/grpc/proto.ts';
import { abortReason, StreamReader, writeMessage } from '../../shared/grpc/stream.ts';
import { CircuitOpenError } from './cloud-backoff.ts';
import { skippedReply, type CloudConversation, type CloudStepReply, type CloudStepRequest } from './cloud-client.ts';
import { withPlainReason } from './cloud-failure-reason.ts';
import { checkSources, loadOf, ShimContextCopy, toReply } from './context-delta.ts';

/** A Route stream as the conversation uses it: grpc-js's ClientDuplexStream, or an in-memory one. */
export type RouteStream = Readable & Writable & { cancel(): void };

/**
 * How a failed step ended, for the host's breaker: `abandoned` says nothing about the cloud; `refused` is
 * the shim turning down this edge's credentials, which no retry mends and the box's state must show.
 */
export type StepFailure = 'abandoned' | 'error' | 'deadline' | 'refused';

/** What a conversation needs from whoever carries its streams. */
export interface RouteStreamHost {
  /** Deadline of one step, from sending it to its reply. */
  readonly stepTimeoutMs: number;
  /** How long `close` waits for the shim to confirm the end of a stream. */
  readonly closeTimeoutMs: number;
  /** Opens a Route stream; throws CircuitOpenError when the host refuses without trying. */
  startStream(): RouteStream;
  stepSucceeded(): void;
  stepFailed(failure: StepFailure): void;
  /** The conversation closed. */
  forget(conversation: GrpcCloudConversation): void;
}

/** Failures that say the shim is gone, broken or overloaded, rather than that the request was wrong. */
const TRANSPORT_FAILURES = new Set<AppError['code']>(['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'INTERNAL', 'RESOURCE_EXHAUSTED']);
/** The shim's answers to a wrong or missing token (or a client certificate it does not accept). */
export const CREDENTIAL_REFUSALS = new Set<AppError['code']>(['UNAUTHENTICATED', 'PERMISSION_DENIED']);

export class GrpcCloudConversation implements CloudConversation {
  private stream: RouteStream | undefined;
  private reader: StreamReader<RouteResponse__Output> | undefined;
  private readonly shim = new ShimContextCopy();
  /** Steps the current stream has answered. */
  private steps = 0;
  /** Steps sent and not answered: a conditional step may join one. */
  private inFlight = 0;
  /** Settle once the last step's messages are written, and once its result is read: a conditional step waits for both. */
  private written: Promise<unknown> = Promise.resolve();
  private answered: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** The shim's id for the current stream's session (for logs). */
  sessionId: string | undefined;

  constructor(
    private readonly host: RouteStreamHost,
    private readonly requestId: string,
    private readonly signal: AbortSignal | undefined,
    /** Sent in every `open`, reopened streams included: the shim's backend keeps the generation on one worker by it. */
    private readonly routingKey = '',
    /** This conversation's step deadline when shorter than the host's (a wait budget); the host's otherwise. */
    private readonly ownStepTimeoutMs?: number,
  ) {
    signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  /** The deadline of each step: sent in `open` (the shim refuses by it) and enforced on the reply. */
  get stepTimeoutMs(): number {
    const own = this.ownStepTimeoutMs;
    return own !== undefined && own > 0 ? Math.min(own, this.host.stepTimeoutMs) : this.host.stepTimeoutMs;
  }

  private readonly onAbort = () => this.dropStream();

  async next(request: CloudStepRequest): Promise<CloudStepReply> {
    if (this.closed) throw new AppError('FAILED_PRECONDITION', 'the cloud conversation is closed');
    const pipelined = request.conditional === true && this.inFlight === 1 && this.stream !== undefined;
    if (this.inFlight > 0 && !pipelined) {
      throw new AppError('FAILED_PRECONDITION', 'a step of this conversation is still in flight: only one conditional step may join it');
    }
    // A conditional step whose assumption is already answered: sent as a plain step, or skipped without asking.
    if (request.conditional && !pipelined && this.stream && !this.shim.matches(request.context)) return skippedReply();
    this.inFlight++;
    const reply = pipelined ? this.conditionalStep(request) : this.step(request);
    this.answered = reply;
    try {
      return await reply;
    } finally {
      this.inFlight--;
    }
  }

  /**
   * Sends a step while the previous one is in flight, assuming its token (see the proto), and reads its
   * result after the previous one's. It is never sent again: when the stream fails, both steps fail.
   */
  private async conditionalStep(request: CloudStepRequest): Promise<CloudStepReply> {
    const signal = this.signalFor(request);
    const { stream, reader } = this;
    const previous = { written: this.written, answered: this.answered };
    checkSources(request);
    const message = this.shim.conditionalStep(request);
    try {
      if (signal?.aborted) throw abortReason(signal);
      const writing = previous.written.catch(() => {}).then(() => writeMessage(stream!, message));
      this.written = writing;
      await writing;
      await previous.answered.catch(() => {});
      if (this.stream !== stream) throw new PredecessorFailed();
      const result = await this.awaitResult(signal, reader!);
      this.steps++;
      if (result.skipped) return { ...skippedReply(), ...loadOf(result) };
      this.host.stepSucceeded();
      if (!this.shim.answeredConditional(request, result)) this.dropStream();
      return toReply(result);
    } catch (e) {
      if (this.stream === stream) this.dropStream();
      // The step it assumed failed and said so to the breaker already; this one only follows it.
      if (e instanceof PredecessorFailed) throw e;
      throw this.failed(e, signal);
    }
  }

  private signalFor(request: CloudStepRequest): AbortSignal | undefined {
    const signals = [request.signal, this.signal].filter((s): s is AbortSignal => s !== undefined);
    return signals.length > 1 ? AbortSignal.any(signals) : signals[0];
  }

  private async step(request: CloudStepRequest): Promise<CloudStepReply> {
    const signal = this.signalFor(request);
    if (signal?.aborted) throw abortReason(signal);
    checkSources(request);
    // A stream that ended between steps (idle expiry, shim shutdown: the shim sends nothing between steps
    // but its final message) or whose context diverged from the edge's is replaced by a new one carrying
    // the whole context.
    if (this.stream && (this.reader!.finished || this.reader!.buffered > 0 || !this.shim.matches(request.context))) this.dropStream();
    try {
      try {
        return await this.attempt(request, signal);
      } catch (e) {
        // The shim ended the stream we were reusing while this step was on its way, without computing it:
        // it expired the idle session (its final message crossed the step), or it ended as UNAVAILABLE
        // (shutting down, backend unreachable: a retry fails fast if that persists). The step is retried
        // once on a new stream. Any other end answers this step (the shim saw it and failed it, e.g. at its
        // deadline): retrying would only make the edge wait again.
        // Not when a conditional step was sent behind it on that stream: it fails with it (no resend of pipelined steps).
        const resendable = e instanceof StreamEnded && (e.code === 'UNAVAILABLE' || e.expired) && this.inFlight === 1;
        if (!resendable || !e.reused || e.steps !== e.stepsBefore || signal?.aborted) throw e;
        return await this.attempt(request, signal);
      }
    } catch (e) {
      this.dropStream();
      throw this.failed(e, signal);
    }
  }

  /** Reports a failed step to the host's breaker; returns the error to throw, in plain words. */
  private failed(e: unknown, signal: AbortSignal | undefined): AppError {
    const error = signal?.aborted ? abortReason(signal) : toAppError(e);
    // A refusal by the breaker tried nothing, so it says nothing about the cloud; an attempt that was
    // cancelled or refused as a bad request says nothing either, but may have been the half-open probe.
    if (e instanceof CircuitOpenError) return error;
    // Past a deadline shorter than the host's (a wait budget's), the edge gave up on the step by its own choice:
    // a cloud slower than the budget is not a broken one, and the budget itself backs off (wait-budget.ts).
    const budgetMissed = error.code === 'DEADLINE_EXCEEDED' && this.stepTimeoutMs < this.host.stepTimeoutMs;
    if (!signal?.aborted && CREDENTIAL_REFUSALS.has(error.code)) this.host.stepFailed('refused');
    else if (signal?.aborted || budgetMissed || !TRANSPORT_FAILURES.has(error.code)) this.host.stepFailed('abandoned');
    else this.host.stepFailed(error.code === 'DEADLINE_EXCEEDED' ? 'deadline' : 'error');
    return withPlainReason(error);
  }

  /** Sends one step (opening a stream first when there is none) and waits for its result. */
  private async attempt(request: CloudStepRequest, signal: AbortSignal | undefined): Promise<CloudStepReply> {
    const reused = this.stream !== undefined;
    let messages: RouteRequest[];
    if (!this.stream) {
      this.stream = this.host.startStream();
      this.reader = new StreamReader<RouteResponse__Output>(this.stream);
      this.steps = 0;
      messages = this.shim.open(request, this.requestId, this.stepTimeoutMs, this.routingKey);
    } else {
      messages = [this.shim.step(request)];
    }
    const stepsBefore = this.steps;
    const stream = this.stream;
    try {
      // A conditional step sent meanwhile is written after these (see conditionalStep).
      const writing = (async () => {
        for (const m of messages) await writeMessage(stream, m);
      })();
      this.written = writing;
      await writing;
      const result = await this.awaitResult(signal, this.reader!);
      this.host.stepSucceeded();
      this.steps++;
      if (!this.shim.answered(result)) this.dropStream();
      return toReply(result);
    } catch (e) {
      this.dropStream();
      if (e instanceof StreamEnded) {
        e.reused = reused;
        e.stepsBefore = stepsBefore;
      }
      throw e;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.signal?.removeEventListener('abort', this.onAbort);
    const { stream, reader } = this;
    this.stream = undefined;
    this.reader = undefined;
    try {
      if (stream && reader && !reader.finished) {
        const deadline = AbortSignal.timeout(this.host.closeTimeoutMs);
        // A step still in flight (a conditional step the generation no longer needs, usually skipped) reads
        // its own result first: the half-close below must be the stream's only reader.
        if (this.inFlight > 0) await Promise.race([this.answered.catch(() => {}), new Promise((resolve) => deadline.addEventListener('abort', resolve, { once: true }))]);
        // Half-close: the shim answers with its final message and frees the session.
        stream.end();
        while (!(await reader.next(deadline)).done);
      }
    } catch {
      stream?.cancel();
    } finally {
      this.host.forget(this);
    }
  }

  /** Reads until this step's result, under the step deadline. */
  private async awaitResult(signal: AbortSignal | undefined, reader: StreamReader<RouteResponse__Output>): Promise<StepResult__Output> {
    const ms = this.stepTimeoutMs;
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new AppError('DEADLINE_EXCEEDED', `cloud did not answer within ${ms} ms`)), ms);
    const wait = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
    try {
      while (true) {
        const next = await reader.next(wait);
        if (next.done) throw new AppError('UNAVAILABLE', 'the cloud ended the stream without answering the step');
        const response = next.value;
        if (response.opened) this.sessionId = response.opened.sessionId;
        else if (response.step) return response.step;
        else if (response.end) {
          const { code, message, steps, expired } = response.end;
          throw new StreamEnded(code === 0 ? 'UNAVAILABLE' : appErrorCode(code), code === 0 ? 'the cloud ended the stream without answering the step' : message, steps, expired);
        }
      }
    } finally {
      clearTimeout(timer);
    }
  }

  private dropStream(): void {
    this.stream?.cancel();
    this.stream = undefined;
    this.reader = undefined;
    this.shim.reset();
  }
}

/** A conditional step's predecessor failed, and with it the stream both were on. */
class PredecessorFailed extends AppError {
  constructor() {
    super('UNAVAILABLE', 'the step this conditional step assumed failed; pipelined steps are not sent again');
  }
}

/** The shim's final message arrived instead of a step result; `steps` is how many steps it had answered. */
class StreamEnded extends AppError {
  reused = false;
  stepsBefore = 0;

  constructor(
    code: AppError['code'],
    message: string,
    readonly steps: number,
    /** The shim expired the session for idleness before it looked at the step on its way. */
    readonly expired: boolean,
  ) {
    super(code, message);
  }
}
