/**
 * The routing key of a shim session: `open.routing_key` when the edge named one (a conversation), else
 * `open.request_id`, which the edge keeps for the whole generation, reopened streams included. Either way
 * every backend request of the generation carries the same key, and a gateway in front of several SGLang
 * workers (sgl-model-gateway's `consistent_hashing` or `manual` policy) keeps them on one worker, the one
 * whose radix cache holds the context. The key becomes an HTTP header value, so it is checked here, where a
 * bad one can still be refused as the edge's mistake (INVALID_ARGUMENT) rather than fail at the backend.
 *
 * @example
 * sessionRoutingKey({ requestId: 'r1', routingKey: '' });        // 'r1'
 * sessionRoutingKey({ requestId: 'r1', routingKey: 'chat-42' }); // 'chat-42'
 * sessionRoutingKey({ requestId: 'r1', routingKey: 'a\r\nb' });  // throws INVALID_ARGUMENT
 */
import { AppError } from '../../shared/errors.ts';
import type { OpenSession__Output } from '../../shared/grpc/proto.ts';
import { ROUTING_KEY_MAX_CHARS, routingKeyProblem } from '../../shared/contract/routing-key.ts';

/** The key for a session opened by `open`; empty when both fields are (the backend then sends none). */
export function sessionRoutingKey(open: Pick<OpenSession__Output, 'requestId' | 'routingKey'>): string {
  const key = open.routingKey || open.requestId;
  if (key === '') return '';
  const field = open.routingKey ? 'routing_key' : 'request_id (the routing key when routing_key is empty)';
  const problem = routingKeyProblem(key, field, ROUTING_KEY_MAX_CHARS);
  if (problem) throw new AppError('INVALID_ARGUMENT', problem);
  return key;
}
