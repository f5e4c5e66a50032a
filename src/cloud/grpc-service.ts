/**
 * The CloudRouter gRPC service: thin. Score calls go to the `scoreSequence` core the same way; Describe
 * answers what the shim serves (its backend and tokenizer) from the context. Per stream it checks the bearer token, turns the call into a
 * StreamReader, runs the `routeSession` core and writes what it yields; an error becomes the stream's
 * status (after the core's final `end` message), and so does a reply too large to send. Client
 * cancellation and shim shutdown abort the core through one AbortController per stream.
 */
import type { sendUnaryData, ServerDuplexStream, ServerUnaryCall } from '@grpc/grpc-js';
import { AppError } from '../shared/errors.ts';
import { checkBearer } from '../shared/grpc/auth.ts';
import { toGrpcStatus } from '../shared/grpc/errors.ts';
import {
  serializeRouteResponse,
  type CloudRouterHandlers,
  type DescribeRequest__Output,
  type RouteRequest__Output,
  type RouteResponse,
  type ScoreRequest__Output,
  type ScoreResponse,
  type ShimDescription,
} from '../shared/grpc/proto.ts';
import { toWireFingerprint } from '../shared/grpc/wire.ts';
import { assertWellFormed } from '../shared/grpc/strict-decode.ts';
import { StreamReader, writeMessage } from '../shared/grpc/stream.ts';
import { endMessage, routeSession, type RequestSource, type ShimContext } from './sessions/route-session.ts';
import { scoreSequence } from './scoring/score-sequence.ts';
import type { FifoSlots } from '../shared/process/fifo-slots.ts';

/**
 * RESOURCE_EXHAUSTED when `response` serializes to more than the limit the server sends under (a span
 * with many alternatives per token under a small `--max-message-bytes`). Serializing twice costs little:
 * a step result is tens of bytes.
 */
function oversize(response: RouteResponse, limit: number): AppError | undefined {
  const bytes = serializeRouteResponse(response).length;
  if (bytes <= limit) return undefined;
  return new AppError(
    'RESOURCE_EXHAUSTED',
    `the step result is ${bytes} bytes, above this shim's gRPC message limit of ${limit}: ask for fewer tokens (max_tokens) or alternatives (top_logprobs)`,
  );
}

/** The controllers of the streams in flight, so shutdown can end them all. */
export class ActiveStreams {
  private readonly controllers = new Set<AbortController>();

  get size(): number {
    return this.controllers.size;
  }

  track(controller: AbortController): () => void {
    this.controllers.add(controller);
    return () => this.controllers.delete(controller);
  }

  abortAll(reason: AppError): void {
    for (const controller of this.controllers) controller.abort(reason);
  }
}

type RouteCall = ServerDuplexStream<RouteRequest__Output, RouteResponse>;

type ScoreCall = ServerUnaryCall<ScoreRequest__Output, ScoreResponse>;

export function cloudRouterHandlers(ctx: ShimContext, streams: ActiveStreams, scores: FifoSlots): CloudRouterHandlers {
  return {
    Route: (call: RouteCall) => void serveRoute(call, ctx, streams),
    Score: (call: ScoreCall, callback: sendUnaryData<ScoreResponse>) => void serveScore(call, callback, ctx, streams, scores),
    Describe: (call: ServerUnaryCall<DescribeRequest__Output, ShimDescription>, callback: sendUnaryData<ShimDescription>) => {
      try {
        checkBearer(call.metadata, ctx.config.authToken);
        assertWellFormed(call.request);
        callback(null, describe(ctx));
      } catch (e) {
        callback(toGrpcStatus(e));
      }
    },
  };
}

/** The shim's backend and tokenizer, as `opened` names them. */
function describe(ctx: ShimContext): ShimDescription {
  const { info } = ctx.backend;
  return {
    backend: info.name,
    vocabSize: info.vocabSize ?? 0,
    maxContext: info.maxContext ?? 0,
    ...(ctx.tokenizerFingerprint ? { tokenizer: toWireFingerprint(ctx.tokenizerFingerprint) } : {}),
  };
}

/** One Score call: the token, the strict decoder's verdict, then the core; cancellation and shutdown abort it. */
async function serveScore(call: ScoreCall, callback: sendUnaryData<ScoreResponse>, ctx: ShimContext, streams: ActiveStreams, scores: FifoSlots): Promise<void> {
  const controller = new AbortController();
  const untrack = streams.track(controller);
  call.on('cancelled', () => controller.abort(new AppError('CANCELLED', 'the client cancelled the call')));
  try {
    checkBearer(call.metadata, ctx.config.authToken);
    assertWellFormed(call.request);
    callback(null, await scoreSequence(call.request, ctx, scores, controller.signal));
  } catch (e) {
    callback(toGrpcStatus(e));
  } finally {
    untrack();
  }
}

async function serveRoute(call: RouteCall, ctx: ShimContext, streams: ActiveStreams): Promise<void> {
  const controller = new AbortController();
  const untrack = streams.track(controller);
  const reader = new StreamReader<RouteRequest__Output>(call);
  // The server decodes strictly (shim-server.ts): a message that failed arrives as a marker and ends the
  // stream with INVALID_ARGUMENT, after the core's final `end` message like any other error.
  const requests: RequestSource = {
    async next(signal) {
      const message = await reader.next(signal);
      if (!message.done) assertWellFormed(message.value);
      return message;
    },
    waiting: () => reader.buffered,
  };
  let cancelled = false;
  call.on('cancelled', () => {
    cancelled = true;
    const reason = new AppError('CANCELLED', 'the edge cancelled the stream');
    reader.fail(reason);
    controller.abort(reason);
  });
  try {
    try {
      checkBearer(call.metadata, ctx.config.authToken);
    } catch (e) {
      await writeMessage(call, endMessage(e));
      throw e;
    }
    const session = routeSession(requests, ctx, controller.signal);
    for (let next = await session.next(); !next.done; ) {
      const response = next.value;
      const tooLarge = oversize(response, ctx.config.maxMessageBytes);
      if (tooLarge) {
        // grpc-js would end the call with a bare RESOURCE_EXHAUSTED on writing it; thrown into the core
        // instead, the error gets the core's final `end` message first, like any other.
        next = await session.throw(tooLarge);
        continue;
      }
      if (!cancelled) await writeMessage(call, response);
      next = await session.next();
    }
    call.end();
  } catch (e) {
    if (!cancelled) call.emit('error', toGrpcStatus(e));
  } finally {
    untrack();
  }
}
