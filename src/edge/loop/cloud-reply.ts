/**
 * What a routed step's asking the cloud came to, as one value the loop handles with a `switch`: the
 * transport's flags (CloudStepReply's `skipped`, `overloaded`, `withheld`) and its failures (a rejected step,
 * a conversation that cannot open) are read here, in one place, and nowhere else on the loop's side.
 *
 * `served`: the cloud's tokens (not yet checked: `checkCloudReply`). `skipped`: a conditional step whose
 * assumed token was not the previous step's (speculation sends it again). `overloaded`: the shim refused the
 * step at once, its backend saturated. `withheld`: not sent, the context ends where a private value may be
 * under way. `failed`: the step failed or its reply cannot be used, with the reason in words. `cancelled`: the
 * generation was cancelled while the step was out.
 *
 * @example
 * const reply = await sendStep(() => cloud.conversation(), request, signal);
 * switch (reply.kind) { case 'served': ...; case 'failed': ...; ... default: unhandledReply(reply); }
 */
import type { TokenAlternative } from '../../shared/contract/contract-vocabulary.ts';
import { errorMessage, isAbortError } from '../../shared/errors.ts';
import type { CloudConversation, CloudLoad, CloudStepReply, CloudStepRequest } from '../cloud/cloud-client.ts';

export type CloudReply =
  | {
      kind: 'served';
      tokens: number[];
      /** The cloud's log-probability of each of its tokens (NaN where it has none: a private value put back). */
      logprobs: number[];
      topAlternatives: TokenAlternative[][];
      /** The tokens may run past the step's span, up to the room (a private value put back: privacy/). */
      pastSpan: boolean;
      load?: CloudLoad;
    }
  | { kind: 'skipped'; load?: CloudLoad }
  | { kind: 'overloaded'; load?: CloudLoad }
  | { kind: 'withheld' }
  | { kind: 'failed'; reason: string; load?: CloudLoad }
  | { kind: 'cancelled' };

export type CloudReplyKind = CloudReply['kind'];

/** Sends one step and gives its reply as a value; the conversation is opened by `conversation` on first use. */
export type StepSender = (request: CloudStepRequest) => Promise<CloudReply>;

/** The transport's reply as a value: the one place its flags are read. */
export function replyOf(answer: CloudStepReply | undefined): CloudReply {
  // A broken cloud may answer nothing at all: that is a served step without tokens, which the check refuses.
  const load = answer?.load ? { load: answer.load } : {};
  if (answer?.skipped) return { kind: 'skipped', ...load };
  if (answer?.overloaded) return { kind: 'overloaded', ...load };
  if (answer?.withheld) return { kind: 'withheld' };
  return {
    kind: 'served',
    tokens: answer?.tokens ?? [],
    logprobs: answer?.logprobs ?? [],
    topAlternatives: answer?.topAlternatives ?? [],
    pastSpan: answer?.pastSpan === true,
    ...load,
  };
}

/** A step that did not come back: cancelled with the generation, or failed with its reason. */
export function failedReply(error: unknown, signal: AbortSignal | undefined): CloudReply {
  if (signal?.aborted || isAbortError(error)) return { kind: 'cancelled' };
  return { kind: 'failed', reason: errorMessage(error) };
}

/**
 * Sends `request` on the conversation `conversation` gives (opening it the first time) and resolves with its
 * reply as a value; never rejects. A conversation that cannot open (no cloud configured) is a failed step.
 */
export function sendStep(conversation: () => CloudConversation, request: CloudStepRequest, signal: AbortSignal | undefined): Promise<CloudReply> {
  let sent: Promise<CloudStepReply>;
  try {
    sent = conversation().next(request);
  } catch (error) {
    return Promise.resolve(failedReply(error, signal));
  }
  return sent.then(replyOf, (error: unknown) => failedReply(error, signal));
}

/** The exhaustiveness check of a `switch` over a reply's kind: a kind added to CloudReply fails the type-check here. */
export function unhandledReply(reply: never): never {
  throw new Error(`unhandled cloud reply ${JSON.stringify(reply)}`);
}
