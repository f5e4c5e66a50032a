/**
 * Teacher forcing through the cloud conversation, with or without pseudonyms: the router's routed positions
 * at τ are each asked of the cloud as the loop asks them (one step, greedy, one token), through the product's
 * PseudonymisedConversation when the run has pseudonyms and straight to the cloud otherwise. Every other
 * position keeps the edge's top-1, and so does a routed position the privacy rule kept home (`withheld`).
 * The accuracy is then compared with the eval's gap (share-table.ts): (accuracy − edge alone) / (cloud
 * alone − edge alone), edge and cloud alone as teacher forcing read them without pseudonyms.
 *
 * Each story is one conversation: the context grows position by position, so the shim's cache is reused
 * where the cloud's last token was the true one, and the stream is opened again with the whole context where
 * it was not (what a rejected guess costs; the figures of what left are measured on generations instead).
 *
 * @example
 * const run = await forceThroughCloud({ edge, forced, scores, stories, threshold: 0.8, pseudonyms: true, watch });
 * run.gapRecovered; run.withheld;
 */
import { randomUUID } from 'node:crypto';
import { CloudDisclosure } from '../../edge/cloud/cloud-disclosure.ts';
import { encodePrompt } from '../../edge/loop/edge-engine.ts';
import { PrivateValues } from '../../edge/privacy/private-values.ts';
import { openConversation } from '../../edge/privacy/pseudonymised-conversation.ts';
import { Pseudonymiser } from '../../edge/privacy/pseudonymiser.ts';
import { AppError } from '../../shared/errors.ts';
import type { TeacherForced } from '../lab/forced-records.ts';
import type { EvalEdge } from '../lab/generation-runs.ts';
import type { ProgressReporter } from '../lab/progress.ts';
import type { StoryWithEntities } from './synthetic-entities.ts';
import { generationStopIds } from '../../shared/model/stop-ids.ts';

/** Teacher forcing of one run: what the router sent, what the privacy kept home, and the accuracy that came of it. */
export interface ForcedPrivacyRun {
  /** Positions the router routed (the same with and without pseudonyms). */
  routed: number;
  routedShare: number;
  /** Routed positions decided by the edge because a private value was under way there. */
  withheld: number;
  /** Positions the cloud decided: (routed − withheld) / positions. */
  cloudShare: number;
  accuracy: number;
  /** (accuracy − edge alone) / (cloud alone − edge alone). */
  gapRecovered: number;
  /** Distinct placeholders the cloud read, summed over the stories. */
  placeholders: number;
}

export interface ForcingOptions {
  edge: EvalEdge;
  /** Teacher forcing of `stories` (their text, one sequence each, none windowed). */
  forced: TeacherForced;
  /** The router's score per record of `forced`. */
  scores: ArrayLike<number>;
  stories: readonly StoryWithEntities[];
  threshold: number;
  pseudonyms: boolean;
  /** Told each story's entities before its steps go out (the leak check reads the contexts sent). */
  onStory?: (story: StoryWithEntities) => void;
  progress?: ProgressReporter;
}

export async function forceThroughCloud(o: ForcingOptions): Promise<ForcedPrivacyRun> {
  const { edge, forced, scores } = o;
  const { tokenizer, edgeModel } = edge;
  const stopTokenIds = generationStopIds(edgeModel.pack, tokenizer);
  let record = 0;
  let edgeRight = 0;
  let cloudRight = 0;
  let right = 0;
  let routed = 0;
  let withheld = 0;
  let placeholders = 0;
  for (const [p, story] of o.stories.entries()) {
    const ids = encodePrompt(edge, story.text);
    const disclosure = new CloudDisclosure();
    const pseudonymiser = o.pseudonyms ? new Pseudonymiser(tokenizer, PrivateValues.of(story.entities, story.text)) : undefined;
    const conversation = openConversation(edge.cloud, { requestId: randomUUID(), disclosure }, pseudonymiser);
    o.onStory?.(story);
    try {
      for (let k = 0; k + 1 < ids.length; k++, record++) {
        if (forced.paragraph[record] !== p || forced.nextId[record] !== ids[k + 1]) {
          throw new AppError('INTERNAL', `teacher forcing's record ${record} is not position ${k} of story ${p}`);
        }
        edgeRight += forced.edgeCorrect[record]!;
        cloudRight += forced.cloudCorrect[record]!;
        if (!(scores[record]! < o.threshold)) {
          right += forced.edgeCorrect[record]!;
          continue;
        }
        routed++;
        const context = ids.slice(0, k + 1);
        const reply = await conversation.next({
          context,
          // The first id opens the story; the shim takes later ones only as written by someone, and the story's
          // text is what the edge reads as its own (the cloud wrote none of it).
          sources: context.map((_, i) => (i === 0 ? 'prompt' : 'slm')),
          tokenIndex: k,
          maxTokens: 1,
          temperature: 0,
          topP: 1,
          stopTokenIds,
          routerScore: scores[record]!,
          threshold: o.threshold,
          topLogprobs: 0,
        });
        if (reply.withheld) {
          withheld++;
          right += forced.edgeCorrect[record]!;
        } else if (reply.tokens.length === 0) {
          // An evaluation must not quietly turn routed tokens into edge tokens (generation-runs.ts does the same).
          throw new AppError('UNAVAILABLE', 'the cloud answered a routed step without a token (overloaded)');
        } else if (reply.tokens[0] === ids[k + 1]) right++;
      }
    } finally {
      await conversation.close();
    }
    placeholders += disclosure.placeholders.size;
    o.progress?.update(p + 1);
  }
  if (record !== forced.count) throw new AppError('INTERNAL', `teacher forcing has ${forced.count} records, the stories ${record} positions`);
  const n = forced.count;
  const accuracy = n ? right / n : NaN;
  const gap = (cloudRight - edgeRight) / n;
  return {
    routed,
    routedShare: n ? routed / n : 0,
    withheld,
    cloudShare: n ? (routed - withheld) / n : 0,
    accuracy,
    gapRecovered: gap !== 0 ? (accuracy - edgeRight / n) / gap : NaN,
    placeholders,
  };
}
