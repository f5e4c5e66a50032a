/**
 * A cloud client that counts what the decoder loop sent and got back: steps, conditional steps (sent while
 * another was in flight), the most in flight at once, and the replies that came back skipped. Steps are
 * counted as they reach `inner`, in order.
 */
import { interceptSteps, type CloudClient } from '../../src/edge/cloud/cloud-client.ts';

export function recordingSteps(inner: CloudClient) {
  const counts = { steps: 0, conditional: 0, skipped: 0, maxInFlight: 0, inFlight: 0 };
  const client = interceptSteps(inner, async (request, next) => {
    counts.steps++;
    if (request.conditional) counts.conditional++;
    counts.maxInFlight = Math.max(counts.maxInFlight, ++counts.inFlight);
    try {
      const reply = await next(request);
      if (reply.skipped) counts.skipped++;
      return reply;
    } finally {
      counts.inFlight--;
    }
  });
  return { client, counts };
}
