/**
 * A CloudClient that runs the real cloud pack in process (no network), keeping one KV cache per
 * session and feeding it only the ids it has not seen. The evaluation CLI uses it to route tokens to the
 * cloud model without a shim; the loop tests use it too (through tests/helpers/in-process-cloud.ts).
 *
 * @example
 * const cloud = new InProcessCloud(await DecoderModel.load(loadModelPack('models/stories260k')), { record: false });
 * for await (const event of generate({ slm, router, tokenizer, cloud }, request)) ...
 */
import type { CloudClient, CloudConversation, CloudStepReply, CloudStepRequest } from '../../edge/cloud-client.ts';
import type { AppendResult, DecoderModel, DecoderSequence } from '../../shared/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import { sampleToken } from '../../shared/sampling.ts';
import { seededRandom } from '../../shared/seeded-random.ts';

export interface InProcessCloudOptions {
  /** Keep a copy of every step request in `requests` (for tests; default true). */
  record?: boolean;
  /** Ids the tokenizer knows: sampling never picks a padding row of the embedding beyond them. */
  tokenVocabSize?: number;
}

export class InProcessCloud implements CloudClient {
  /** Every step request received, for assertions on what the edge sends (empty when not recording). */
  readonly requests: CloudStepRequest[] = [];
  openConversations = 0;
  /** When set, `next` throws this error (a cloud outage). */
  failWith: Error | undefined;
  private readonly record: boolean;
  private readonly tokenVocabSize: number | undefined;

  constructor(
    private readonly model: DecoderModel,
    options: InProcessCloudOptions = {},
  ) {
    this.record = options.record ?? true;
    this.tokenVocabSize = options.tokenVocabSize;
  }

  openConversation(): CloudConversation {
    this.openConversations++;
    let sequence: DecoderSequence | undefined;
    let last: AppendResult | undefined;
    let closed = false;
    // One generator per session, seeded by its first step: re-seeding every step would replay the same draws.
    let random: (() => number) | undefined;
    const cloud = this;
    return {
      async next(request: CloudStepRequest): Promise<CloudStepReply> {
        if (cloud.record) cloud.requests.push({ ...request, context: [...request.context], sources: [...request.sources] });
        if (cloud.failWith) throw cloud.failWith;
        if (closed) throw new AppError('FAILED_PRECONDITION', 'session closed');
        sequence ??= cloud.model.newSequence();
        const start = performance.now();
        const unseen = request.context.slice(sequence.length);
        if (unseen.length) last = await sequence.append(unseen);
        random ??= seededRandom(request.seed ?? 0);
        const tokens: number[] = [];
        while (tokens.length < request.maxTokens) {
          const id = sampleToken(last!.logits, { temperature: request.temperature, topP: request.topP, random: random!, vocabLimit: cloud.tokenVocabSize });
          tokens.push(id);
          if (request.stopTokenIds.includes(id) || tokens.length === request.maxTokens) break;
          last = await sequence.append([id]);
        }
        return { tokens, text: '', logprobs: [], topAlternatives: [], cachedTokens: 0, backendMs: performance.now() - start, shimMs: 0 };
      },
      async close() {
        if (closed) return;
        closed = true;
        cloud.openConversations--;
        sequence?.dispose();
      },
    };
  }

  state() {
    return 'ready' as const;
  }

  async close(): Promise<void> {}
}
