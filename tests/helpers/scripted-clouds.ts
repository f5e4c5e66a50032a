/**
 * Clouds with a scripted behaviour for the decoding-loop tests: a real cloud held back by a round trip, and
 * one that answers the edge model's own greedy token (shifted by `offset`), so a test chooses whether the
 * edge's guesses hit (offset 0) or miss (offset 1).
 *
 * @example
 * const cloud = late(pair.cloud, 5);
 * const disagreeing = edgeEcho(pair.edge, pair.tokenizer, 1, 5);
 */
import { interceptSteps, type CloudClient, type CloudStepReply } from '../../src/edge/cloud/cloud-client.ts';
import type { DecoderModel } from '../../src/shared/model/decoder-model.ts';
import { argmax } from '../../src/shared/model/logits.ts';
import type { TextTokenizer } from '../../src/shared/text/tokenizer.ts';

/** `inner` with every step held `ms` first: the round trip speculation hides. */
export function late(inner: CloudClient, ms: number): CloudClient {
  return interceptSteps(inner, async (request, next) => (await Bun.sleep(ms), next(request)));
}

/** A cloud that answers `edge`'s own greedy token plus `offset` after `delayMs`: 0 always agrees, 1 never does. */
export function edgeEcho(edge: DecoderModel, tokenizer: TextTokenizer, offset: number, delayMs: number): CloudClient {
  return {
    openConversation: () => ({
      async next(request): Promise<CloudStepReply> {
        await Bun.sleep(delayMs);
        const seq = edge.newSequence();
        const { logits } = await seq.append(request.context);
        seq.dispose();
        const token = (argmax(logits.subarray(0, tokenizer.vocabSize)) + offset) % tokenizer.vocabSize;
        return { tokens: [token], text: '', logprobs: [], topAlternatives: [], cachedTokens: 0, backendMs: 0, shimMs: 0 };
      },
      close: async () => {},
    }),
    state: () => 'ready',
    close: async () => {},
  };
}
