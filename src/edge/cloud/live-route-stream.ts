/**
 * One Route stream while a conversation uses it: the stream, its reader, how many steps it answered and its
 * last write. It writes a step's messages (a conditional step's after the step it joins), reads up to a
 * step's result under the step deadline, and half-closes at the end. What a step is and when a stream is
 * opened or dropped is GrpcCloudConversation's business (route-stream-states.ts names the states).
 *
 * @example
 * const live = new LiveRouteStream(host.startStream());
 * const sent = live.send(messages, { reused: false });
 * const result = await live.result(sent, 10_000, signal); // throws StreamEnded when the shim's `end` comes first
 * await live.halfClose(AbortSignal.timeout(1_000));
 */
import type { Readable, Writable } from 'node:stream';
import { AppError } from '../../shared/errors.ts';
import { appErrorCode } from '../../shared/grpc/errors.ts';
import type { Prefilled__Output, RouteResponse__Output, SessionEnd__Output, SessionOpened__Output, StepResult__Output } from '../../shared/grpc/proto.ts';
import { StreamReader, writeMessage } from '../../shared/grpc/stream.ts';
import type { PassedMessages } from './cloud-gate.ts';

/** A Route stream as the conversation uses it: grpc-js's ClientDuplexStream, or an in-memory one. */
export type RouteStream = Readable & Writable & { cancel(): void };

/** A step on its way: the stream it went out on, and what the resend rule needs to know about it. */
export interface SentStep {
  readonly live: LiveRouteStream;
  /** Written on a stream that carried steps before it (not the one it opened). */
  readonly reused: boolean;
  /** Steps the stream had answered when it went out. */
  readonly stepsBefore: number;
  /** Settles once its messages are written. */
  readonly written: Promise<void>;
}

export class LiveRouteStream {
  readonly reader: StreamReader<RouteResponse__Output>;
  /** Steps this stream has answered. */
  private answered = 0;
  /** Settles once the last step's messages are written: a conditional step is written after them. */
  private lastWrite: Promise<unknown> = Promise.resolve();
  /** The shim's id for this stream's session (for logs). */
  sessionId: string | undefined;
  /** Opened ahead of its first step (`open.prefill`) and `prefilled` not read yet: the shim has read no step. */
  awaitingPrefill: boolean;
  /** What the prefill ahead did, once read. */
  prefilled: Prefilled__Output | undefined;

  constructor(
    readonly stream: RouteStream,
    /** Sees the shim's `opened` before any result is read; what it throws fails the step. */
    private readonly onOpened?: (opened: SessionOpened__Output) => void,
    { ahead = false }: { ahead?: boolean } = {},
  ) {
    this.reader = new StreamReader<RouteResponse__Output>(stream);
    this.awaitingPrefill = ahead;
  }

  /**
   * The shim ended it between steps (idle expiry, shutdown: between steps it sends nothing but its final
   * message), so it cannot carry another. What it says on its own first, `opened` and a stream opened ahead's
   * `prefilled`, is read here, or a stream opened ahead would pass for ended once those had arrived, and its
   * first step would go out on a new stream and compute the prompt again.
   */
  endedBetweenSteps(): boolean {
    for (let notice; (notice = this.reader.takeIf(isNotice)); ) this.readNotice(notice);
    return this.reader.finished || this.reader.buffered > 0;
  }

  /** Writes a step's messages in order, which a gate passed (cloud-gate.ts); `behind`: after the last step's (a conditional step joining it). */
  send(messages: PassedMessages, { reused, behind = false }: { reused: boolean; behind?: boolean }): SentStep {
    const write = async () => {
      for (const m of messages) await writeMessage(this.stream, m);
    };
    const written = behind ? this.lastWrite.catch(() => {}).then(write) : write();
    this.lastWrite = written;
    return { live: this, reused, stepsBefore: this.answered, written };
  }

  /** Reads until `sent`'s result, under `ms` and `signal`; the shim's final message instead throws StreamEnded. */
  async result(sent: SentStep, ms: number, signal: AbortSignal | undefined): Promise<StepResult__Output> {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new AppError('DEADLINE_EXCEEDED', `cloud did not answer within ${ms} ms`)), ms);
    const wait = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
    try {
      while (true) {
        const next = await this.reader.next(wait);
        if (next.done) throw new AppError('UNAVAILABLE', 'the cloud ended the stream without answering the step');
        const { step, end } = next.value;
        if (isNotice(next.value)) this.readNotice(next.value);
        else if (step) {
          this.answered++;
          return step;
        } else if (end) throw new StreamEnded(end, sent);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  private readNotice({ opened, prefilled }: RouteResponse__Output): void {
    if (opened) {
      this.sessionId = opened.sessionId;
      this.onOpened?.(opened);
    } else if (prefilled) {
      this.prefilled = prefilled;
      this.awaitingPrefill = false;
    }
  }

  /** Half-closes and reads to the end under `deadline`: the shim answers with its final message and frees the session. Cancels when that fails. */
  async halfClose(deadline: AbortSignal): Promise<void> {
    try {
      this.stream.end();
      while (!(await this.reader.next(deadline)).done);
    } catch {
      this.stream.cancel();
    }
  }
}

/** What the shim says on its own, not as a step's answer or the stream's end: `opened`, `prefilled`. */
function isNotice(message: RouteResponse__Output): boolean {
  return Boolean(message.opened || message.prefilled);
}

/** The shim's final message arrived instead of a step's result. */
export class StreamEnded extends AppError {
  /** The shim expired the session for idleness before it looked at the step on its way. */
  readonly expired: boolean;
  /** The shim ended a stream the step reused without answering anything after the steps before it: it never looked at the step. */
  readonly unseen: boolean;
  /** The shim ended a stream opened ahead before its `prefilled`: it reads no step before that, so it never read this one. */
  readonly beforePrefilled: boolean;

  constructor(end: SessionEnd__Output, sent: SentStep) {
    const clean = end.code === 0;
    super(clean ? 'UNAVAILABLE' : appErrorCode(end.code), clean ? 'the cloud ended the stream without answering the step' : end.message);
    this.expired = end.expired;
    this.unseen = sent.reused && end.steps === sent.stepsBefore;
    this.beforePrefilled = sent.live.awaitingPrefill;
  }

  /**
   * The shim ended the stream before looking at the step, for a reason a new stream may not share: it expired
   * the idle session (its final message crossed the step), or it ended as UNAVAILABLE (shutting down, backend
   * unreachable: a retry fails fast if that persists). Any other end answers the step (the shim saw it and
   * failed it, e.g. at its deadline): sending it again would only make the edge wait again. A stream opened
   * ahead that ended before its prefill was answered (a session cap, the prefill's own failure) never read the
   * step either, whatever the code: the step goes out on a new stream as it would have without the open ahead.
   */
  get resendable(): boolean {
    return this.beforePrefilled || (this.unseen && (this.code === 'UNAVAILABLE' || this.expired));
  }
}

/** A conditional step's predecessor failed, and with it the stream both were on. */
export class PredecessorFailed extends AppError {
  constructor() {
    super('UNAVAILABLE', 'the step this conditional step assumed failed; pipelined steps are not sent again');
  }
}
