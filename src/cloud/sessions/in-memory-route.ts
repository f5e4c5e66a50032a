/**
 * The shim's Route call without a socket: an in-memory duplex stream whose far end runs the `routeSession`
 * core, as grpc-service.ts runs it for a gRPC stream. Every message is serialized and parsed with the
 * proto's own (de)serializers on the way, requests with the strict decoder the shim's server uses, so the
 * wire format is exercised as on the network. The edge side is the stream GrpcCloudConversation reads and
 * writes: `end()` half-closes, `cancel()` aborts the core and fails the stream with CANCELLED, and an error
 * of the core fails it after the core's final `end` message, as grpc-js delivers a status after the last
 * message. What grpc-service.ts adds for the network (bearer token, message size limit) is not here.
 *
 * @example
 * const stream = openInMemoryRoute({ config, store, backend, admission, tokenizer, log }, shutdown.signal);
 * const reader = new StreamReader<RouteResponse__Output>(stream);
 * await writeMessage(stream, { open: { requestId: 'r1', contextIds: [1, 403], sampling: { temperature: 0, topP: 1 } } });
 * await writeMessage(stream, { step: { offset: 2, maxTokens: 1, threshold: 0.5 } });
 * (await reader.next()).value; // { opened: { sessionId, backend: 'embedded:stories260k', ... } }
 */
import { Duplex, PassThrough } from 'node:stream';
import { AppError } from '../../shared/errors.ts';
import { toAppError } from '../../shared/grpc/errors.ts';
import {
  CLOUD_ROUTER_SERVICE_NAME,
  type RouteRequest,
  type RouteRequest__Output,
  type RouteResponse,
  type RouteResponse__Output,
} from '../../shared/grpc/proto.ts';
import { assertWellFormed, strictService } from '../../shared/grpc/strict-decode.ts';
import { StreamReader } from '../../shared/grpc/stream.ts';
import { routeSession, type RequestSource, type ShimContext } from './route-session.ts';

interface RouteSerializers {
  requestSerialize(message: RouteRequest): Buffer;
  requestDeserialize(bytes: Buffer): RouteRequest__Output;
  responseSerialize(message: RouteResponse): Buffer;
  responseDeserialize(bytes: Buffer): RouteResponse__Output;
}

/** The Route method's serializers, with the strict request decoder of the shim's server. */
const route: RouteSerializers = strictService('cloud_router.proto', CLOUD_ROUTER_SERVICE_NAME).Route!;

/** An edge-side Route stream: a duplex of RouteRequest in and RouteResponse__Output out, and `cancel`. */
export type InMemoryRouteStream = Duplex & { cancel(): void };

/**
 * Opens one Route stream to the shim core `ctx` in this process; `shutdown` aborts it with its reason
 * (the in-memory counterpart of the server's shutdown).
 */
export function openInMemoryRoute(ctx: ShimContext, shutdown: AbortSignal): InMemoryRouteStream {
  const requests = new PassThrough({ objectMode: true });
  const reader = new StreamReader<RouteRequest__Output>(requests);
  const controller = new AbortController();
  let cancelled = false;
  const stream = new Duplex({
    objectMode: true,
    read() {},
    write(message: RouteRequest, _encoding, done) {
      try {
        requests.write(route.requestDeserialize(route.requestSerialize(message)));
        done();
      } catch (e) {
        done(toAppError(e));
      }
    },
    final(done) {
      requests.end();
      done();
    },
  }) as InMemoryRouteStream;
  stream.cancel = () => {
    if (cancelled) return;
    cancelled = true;
    const reason = new AppError('CANCELLED', 'the edge cancelled the stream');
    reader.fail(reason);
    controller.abort(reason);
    stream.emit('error', reason);
  };
  // A request that failed the strict decoder ends the session with INVALID_ARGUMENT, as on the server.
  const source: RequestSource = {
    async next(signal) {
      const message = await reader.next(signal);
      if (!message.done) assertWellFormed(message.value);
      return message;
    },
    waiting: () => reader.buffered,
  };
  void serve(routeSession(source, ctx, AbortSignal.any([controller.signal, shutdown])), stream, () => cancelled);
  return stream;
}

/** Hands what the core yields to the edge side, through the response serializers. */
async function serve(session: AsyncGenerator<RouteResponse>, stream: Duplex, cancelled: () => boolean): Promise<void> {
  try {
    for await (const response of session) {
      if (!cancelled()) stream.push(route.responseDeserialize(route.responseSerialize(response)));
    }
    if (!cancelled()) stream.push(null);
  } catch (e) {
    // The final `end` message was pushed before the error reached here; the error follows it a turn later,
    // as grpc-js's status follows the last message. Emitted, not destroyed: a conditional step may still be
    // writing behind the failed step, and a write to a destroyed stream never settles.
    if (!cancelled()) setImmediate(() => stream.emit('error', toAppError(e)));
  }
}
