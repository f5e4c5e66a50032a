/**
 * A raw Route stream to a shim, for what the edge client never sends (gaps, bad ids, oversized or
 * out-of-contract messages): writes `messages`, half-closes, and returns what came back and the status.
 * The client's send limit is off, so the shim's limits are the ones a test meets.
 */
import * as grpc from '@grpc/grpc-js';
import { CloudRouterClient, type RouteResponse__Output } from '../../src/shared/grpc/proto.ts';

export async function rawRouteStream(
  address: string,
  messages: object[],
  metadata = new grpc.Metadata(),
): Promise<{ responses: RouteResponse__Output[]; status: grpc.StatusObject }> {
  const client = new CloudRouterClient(address, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': -1 });
  try {
    const call = client.Route(metadata, { deadline: Date.now() + 10_000 });
    const responses: RouteResponse__Output[] = [];
    call.on('data', (m: RouteResponse__Output) => responses.push(m));
    call.on('error', () => {});
    const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    for (const m of messages) call.write(m);
    call.end();
    return { responses, status: await status };
  } finally {
    client.close();
  }
}
