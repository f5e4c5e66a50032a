/**
 * A CloudClient that runs the real cloud pack in process (no network), keeping one KV cache per
 * session and feeding it only the ids it has not seen. For loop tests; the product uses the gRPC client.
 */
import type { CloudClient, CloudSession, CloudStepReply, CloudStepRequest } from '../../src/edge/cloud-client.ts';
import type { DecoderModel, DecoderSequence, AppendResult } from '../../src/shared/decoder-session.ts';
import { AppError } from '../../src/shared/errors.ts';
import { sampleToken } from '../../src/shared/sampling.ts';
import { seededRandom } from '../../src/shared/seeded-random.ts';

export class InProcessCloud implements CloudClient {
  /** Every step request received, for assertions on what the edge sends. */
  readonly requests: CloudStepRequest[] = [];
  openSessions = 0;
  /** When set, `next` throws this error (a cloud outage). */
  failWith: Error | undefined;

  constructor(private readonly model: DecoderModel) {}

  openSession(): CloudSession {
    this.openSessions++;
    let sequence: DecoderSequence | undefined;
    let last: AppendResult | undefined;
    let closed = false;
    const cloud = this;
    return {
      async next(request: CloudStepRequest): Promise<CloudStepReply> {
        cloud.requests.push({ ...request, context: [...request.context], sources: [...request.sources] });
        if (cloud.failWith) throw cloud.failWith;
        if (closed) throw new AppError('FAILED_PRECONDITION', 'session closed');
        sequence ??= cloud.model.newSequence();
        const start = performance.now();
        const unseen = request.context.slice(sequence.length);
        if (unseen.length) last = await sequence.append(unseen);
        const random = seededRandom(request.seed ?? 0);
        const tokens: number[] = [];
        while (tokens.length < request.maxTokens) {
          const id = sampleToken(last!.logits, { temperature: request.temperature, topP: request.topP, random });
          tokens.push(id);
          if (request.stopTokenIds.includes(id) || tokens.length === request.maxTokens) break;
          last = await sequence.append([id]);
        }
        return { tokens, text: '', logprobs: [], topAlternatives: [], cachedTokens: 0, backendMs: performance.now() - start, shimMs: 0 };
      },
      async close() {
        if (closed) return;
        closed = true;
        cloud.openSessions--;
        sequence?.dispose();
      },
    };
  }

  state() {
    return 'ready' as const;
  }

  async close(): Promise<void> {}
}
