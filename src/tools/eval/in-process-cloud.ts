/**
 * A CloudClient that runs the cloud pack in process (no network) through the shim's own embedded backend:
 * each conversation is one BackendSequence, stepped with the same code (`EmbeddedBackend`'s sampling,
 * span, stop and window rules, KV cache reuse) that serves a routed step behind the shim, so the
 * evaluation measures the cloud path the system really has. The evaluation CLI uses it to route tokens to
 * the cloud model without a shim; the loop tests use it too.
 *
 * @example
 * const cloud = new InProcessCloud(await DecoderModel.load(loadModelPack('models/stories260k')), { record: false });
 * for await (const event of generate({ slm, router, tokenizer, cloud }, request)) ...
 */
import { randomUUID } from 'node:crypto';
import { EmbeddedBackend } from '../../cloud/embedded-backend.ts';
import { skippedReply, type CloudClient, type CloudConversation, type CloudStepReply, type CloudStepRequest } from '../../edge/cloud-client.ts';
import type { DecoderModel } from '../../shared/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';

export interface InProcessCloudOptions {
  /** Keep a copy of every step request in `requests` (for tests; default true). */
  record?: boolean;
  /** Ids the tokenizer knows: sampling never picks a padding row of the embedding beyond them. */
  tokenVocabSize?: number;
}

/** Conversations end with their generation, so every one may keep its cache. */
const MAX_LIVE_SEQUENCES = 1 << 16;

export class InProcessCloud implements CloudClient {
  /** Every step request received, for assertions on what the edge sends (empty when not recording). */
  readonly requests: CloudStepRequest[] = [];
  openConversations = 0;
  /** Conditional steps answered `skipped` (their assumed token was not the previous step's). */
  skipped = 0;
  /** When set, `next` throws this error (a cloud outage). */
  failWith: Error | undefined;
  readonly backend: EmbeddedBackend;
  private readonly record: boolean;

  constructor(model: DecoderModel, options: InProcessCloudOptions = {}) {
    this.record = options.record ?? true;
    this.backend = EmbeddedBackend.over(model, { maxLiveSequences: MAX_LIVE_SEQUENCES, tokenVocabSize: options.tokenVocabSize });
  }

  openConversation(): CloudConversation {
    this.openConversations++;
    const id = randomUUID();
    const sequence = this.backend.openSequence();
    let steps = 0;
    let closed = false;
    const cloud = this;
    // Steps are served one after the other, like the shim reads its stream; `previous` is the last one's
    // outcome: the context it had and the tokens it returned (undefined when it failed or was skipped).
    let previous: Promise<number[] | undefined> = Promise.resolve(undefined);
    const serve = async (request: CloudStepRequest): Promise<CloudStepReply> => {
      if (cloud.failWith) throw cloud.failWith;
      if (closed) throw new AppError('FAILED_PRECONDITION', 'conversation closed');
      const result = await sequence.step({
        context: request.context,
        maxTokens: request.maxTokens,
        sampling: {
          temperature: request.temperature,
          topP: request.topP,
          seed: request.seed,
          stopTokenIds: request.stopTokenIds,
          topLogprobs: request.topLogprobs,
        },
        requestId: `${id}-${steps++}`,
        signal: request.signal ?? new AbortController().signal,
      });
      return {
        tokens: result.ids,
        text: result.text ?? '',
        logprobs: result.logprobs,
        topAlternatives: result.top,
        cachedTokens: result.cachedTokens,
        backendMs: result.backendMs,
        shimMs: 0,
      };
    };
    return {
      next(request: CloudStepRequest): Promise<CloudStepReply> {
        if (cloud.record) cloud.requests.push({ ...request, context: [...request.context], sources: [...request.sources] });
        const assumed = previous;
        const reply = (async () => {
          const before = await assumed;
          // A conditional step assumed the previous step's context and its tokens: the shim's rule, skip otherwise.
          if (request.conditional && !(before && startsWith(request.context, before))) {
            cloud.skipped++;
            return skippedReply();
          }
          return serve(request);
        })();
        previous = reply.then(
          (r) => (r.skipped ? undefined : [...request.context, ...r.tokens]),
          () => undefined,
        );
        return reply;
      },
      async close() {
        if (closed) return;
        closed = true;
        cloud.openConversations--;
        sequence.dispose();
      },
    };
  }

  state() {
    return 'ready' as const;
  }

  async close(): Promise<void> {}
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  return prefix.length <= ids.length && prefix.every((id, i) => ids[i] === id);
}
