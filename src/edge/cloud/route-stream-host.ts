/**
 * What a GrpcCloudConversation needs from whoever carries its streams (GrpcCloudClient on its channel behind
 * the circuit breaker, the lab's in-process cloud over an in-memory pipe), and how a failed step is told to
 * the host's breaker.
 */
import type { AppError } from '../../shared/errors.ts';
import type { SessionOpened__Output } from '../../shared/grpc/proto.ts';
import type { CloudConversation } from './cloud-client.ts';
import type { RouteStream } from './live-route-stream.ts';

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
  /** Checks the shim's `opened` before any result on its stream is read; throws to refuse the stream (a tokenizer not the edge model's). */
  sessionOpened?(opened: SessionOpened__Output): void;
  stepSucceeded(): void;
  /** `since`: `failureMark()` when the step started (CloudBackoff.mark): failures of steps in flight together count once. */
  stepFailed(failure: StepFailure, since?: number): void;
  /** The breaker's mark of counted failures (CloudBackoff.mark); absent where nothing is counted. */
  failureMark?(): number;
  /** The conversation closed. */
  forget(conversation: CloudConversation): void;
}

/** Failures that say the shim is gone, broken or overloaded, rather than that the request was wrong. */
export const TRANSPORT_FAILURES = new Set<AppError['code']>(['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'INTERNAL', 'RESOURCE_EXHAUSTED']);
/** The shim's answers to a wrong or missing token (or a client certificate it does not accept). */
export const CREDENTIAL_REFUSALS = new Set<AppError['code']>(['UNAUTHENTICATED', 'PERMISSION_DENIED']);
