/**
 * A training corpus as teacher forcing and the on-policy rounds read it: each document's ids with the
 * positions to learn from, and the prompts rollouts start from. Text: a paragraph encoded as a prompt is
 * (every position), prompts its first tokens (continuation-prompts.ts). Chat: a conversation rendered
 * through the edge pack's chat template with the assistant's positions only, prompts its turns up to each
 * user message an assistant answers (chat-turns.ts).
 *
 * @example
 * const template = chatTemplateFor(corpus, tokenizer, edgePack.dir); // refuses a chat dataset on a pack without one
 * const documents = trainingDocuments(corpus, { edgeModel, tokenizer }, template);
 * await teacherForceSequences({ edgeModel, cloud, sequences: documents.sequences([0, 1, 2]) });
 */
import { chatTemplateOption } from '../../edge/chat/edge-chat.ts';
import { encodePrompt } from '../../edge/loop/decoder-loop.ts';
import { ChatTemplate } from '../../shared/text/chat-template.ts';
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { assistantPositions, userTurnPrompts } from './chat-turns.ts';
import { continuationPrompts } from './continuation-prompts.ts';
import type { ForcedSequence } from './forced-records.ts';
import type { Prompt } from './generation-runs.ts';
import type { TrainingCorpus } from './training-corpus.ts';
import { generationStopIds } from '../../shared/model/stop-ids.ts';

export interface TrainingDocuments {
  /** The sequences of documents `indices`, in that order. */
  sequences(indices: readonly number[]): ForcedSequence[];
  /** The rollout prompts of documents `indices`, in order (text: `prefixTokens` tokens of each long enough). */
  rolloutPrompts(indices: readonly number[], prefixTokens: number): Prompt[];
}

/** The edge pack's chat template for a chat dataset (a clear error when it has none); undefined for text. */
export function chatTemplateFor(corpus: TrainingCorpus, tokenizer: TextTokenizer, packDir: string, option?: string): ChatTemplate | undefined {
  if (corpus.kind === 'text') return undefined;
  // The edge's --chat-template, when the deployment names one: train in the format it serves.
  const template = option === undefined ? ChatTemplate.ofTokenizer(tokenizer) : chatTemplateOption(tokenizer, option);
  if (!template) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `${corpus.path} is a chat dataset, but the edge pack ${packDir} has no chat template (no chat_template.jinja, no chat_template in its tokenizer_config.json) to render its conversations with; use a pack with one, or train on plain text`,
    );
  }
  return template;
}

export function trainingDocuments(
  corpus: TrainingCorpus,
  edge: { edgeModel: DecoderModel; tokenizer: TextTokenizer },
  template: ChatTemplate | undefined,
): TrainingDocuments {
  if (corpus.kind === 'text') {
    const paragraphs = corpus.paragraphs;
    return {
      // Encoded as generation encodes a prompt (BOS first where pack and tokenizer both have one).
      sequences: (indices) => indices.map((i) => ({ ids: encodePrompt(edge, paragraphs[i]!) })),
      rolloutPrompts: (indices, prefixTokens) =>
        continuationPrompts(
          edge,
          indices.map((i) => paragraphs[i]!),
          Infinity,
          prefixTokens,
        ),
    };
  }
  if (!template) throw new AppError('INTERNAL', 'a chat dataset needs its chat template');
  const { tokenizer } = edge;
  // What generation stops at (as the decoding loop stops): the end of an assistant's turn.
  const stopIds = new Set(generationStopIds(edge.edgeModel.pack, tokenizer));
  const conversations = corpus.conversations;
  return {
    sequences: (indices) =>
      indices.map((i) => {
        const c = conversations[i]!;
        const { ids, positions } = assistantPositions(template, tokenizer, stopIds, c.messages, `${corpus.path}:${c.line}`);
        return { ids, positions };
      }),
    // A prompt must leave the edge model's window room to answer.
    rolloutPrompts: (indices) =>
      indices.flatMap((i) => userTurnPrompts(template, tokenizer, conversations[i]!.messages)).filter((p) => p.ids.length < edge.edgeModel.pack.maxPositions),
  };
}
