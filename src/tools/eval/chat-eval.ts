/**
 * The threshold sweep on a chat dataset (JSONL of `messages`), in two parts.
 *
 * 1. Teacher forcing on the assistant's tokens, the records router training learns from
 *    (training-documents.ts): at each τ the share routed and the next-token top-1 accuracy, and at fixed
 *    shares the recovered fraction of the edge→cloud gap for the router, random, the edge's top-1
 *    probability, its entropy and the oracle, each routing exactly as many positions (share-table.ts).
 * 2. Free-running replies: each conversation's last user turn, rendered with the generation prompt, is
 *    answered greedily through the decoding loop at every τ (0: the edge alone; 1: every token routed,
 *    the cloud alone). Reported per τ: the share of generated tokens routed, the share of replies the
 *    model ended itself (its stop token, `</s>` for the chat pair) before `maxNewTokens` or the window,
 *    and, for the requests that name a subject or words (requested-words.ts), the share of replies that
 *    mention all of them and the share of the words mentioned.
 *
 * @example
 * const result = await evaluateChat({ edge, scorer, router, routerPack, conversations, template, thresholds: [0, 0.8, 1], shares: [0.3], seed: 0, maxNewTokens: 300 });
 */
import type { Router } from '../../edge/routing/router.ts';
import type { ChatTemplate } from '../../shared/text/chat-template.ts';
import type { Conversation } from '../lab/chat-dataset.ts';
import { userTurnPrompts } from '../lab/chat-turns.ts';
import type { CloudScorer } from '../lab/cloud-scorer.ts';
import { generateAll, type EvalEdge, type GenerationRun, type Prompt } from '../lab/generation-runs.ts';
import type { ProgressReporter } from '../lab/progress.ts';
import { teacherForceSequences } from '../lab/teacher-forcing.ts';
import { trainingDocuments } from '../lab/training-documents.ts';
import { scoreWithRouterPack } from '../router/batch-scorer.ts';
import { forcedBaselineScores } from '../lab/baseline-routers.ts';
import { mentions, requestedWords } from './requested-words.ts';
import { atShare, type ShareRow } from '../lab/share-table.ts';

export interface ChatEvalOptions {
  edge: EvalEdge;
  scorer: CloudScorer;
  router: Router;
  /** The trained router's pack, scored in batches under teacher forcing; absent = the built-in top-1 scorer. */
  routerPack?: string;
  /** The file the conversations come from, to name them in errors. */
  path: string;
  conversations: readonly Conversation[];
  template: ChatTemplate;
  thresholds: readonly number[];
  shares: readonly number[];
  seed: number;
  maxNewTokens: number;
  progress?: ProgressReporter;
}

export interface ChatForcedPoint {
  threshold: number;
  routedRatio: number;
  quality: number;
}

export interface ChatReplyPoint {
  threshold: number;
  /** Routed tokens / generated tokens over all replies. */
  routedShare: number;
  /** Replies the model ended with its stop token, of all replies. */
  endedByModel: number;
  /** Of the requests naming words: replies that mention every one of them. */
  allWordsMentioned: number;
  /** Of all the words the requests name: those their reply mentions. */
  wordsMentioned: number;
  meanReplyTokens: number;
  /** The first replies, as text. */
  examples: string[];
}

export interface ChatEvalResult {
  kind: 'chat';
  qualityMetric: 'next_token_accuracy';
  conversations: number;
  /** Teacher-forced assistant positions. */
  positions: number;
  smallOnlyAccuracy: number;
  largeOnlyAccuracy: number;
  forcedPoints: ChatForcedPoint[];
  atShare: ShareRow[];
  /** Free-running: replies generated per τ, the cap, how many requests name words and how many words. */
  replies: number;
  maxNewTokens: number;
  requestsNamingWords: number;
  requestedWords: number;
  replyPoints: ChatReplyPoint[];
}

/** Replies kept as examples per τ. */
const EXAMPLES = 2;

function replyFigures(run: GenerationRun, wanted: readonly string[][]): Omit<ChatReplyPoint, 'threshold'> {
  let allMentioned = 0;
  let mentioned = 0;
  let naming = 0;
  let words = 0;
  for (const [i, item] of run.items.entries()) {
    const asked = wanted[i]!;
    if (asked.length === 0) continue;
    naming++;
    words += asked.length;
    const found = asked.filter((w) => mentions(item.text, w)).length;
    mentioned += found;
    if (found === asked.length) allMentioned++;
  }
  const n = run.items.length;
  return {
    routedShare: run.routedRatio,
    endedByModel: n ? run.items.filter((item) => item.finishReason === 'eos').length / n : NaN,
    allWordsMentioned: naming ? allMentioned / naming : NaN,
    wordsMentioned: words ? mentioned / words : NaN,
    meanReplyTokens: n ? run.tokens / n : NaN,
    examples: run.items.slice(0, EXAMPLES).map((item) => item.text),
  };
}

export async function evaluateChat(o: ChatEvalOptions): Promise<ChatEvalResult> {
  const { edge, progress } = o;
  const documents = trainingDocuments({ kind: 'chat', path: o.path, sha256: '', conversations: [...o.conversations], skipped: [] }, edge, o.template);
  const all = o.conversations.map((_, i) => i);
  progress?.start('teacher forcing', all.length);
  const forced = await teacherForceSequences({
    edgeModel: edge.edgeModel,
    cloud: o.scorer,
    sequences: documents.sequences(all),
    onSequence: (done) => progress?.update(done),
  }).finally(() => progress?.stop());
  const n = forced.count;
  const { top1, entropy } = forcedBaselineScores(forced);
  const scores = o.routerPack ? await scoreWithRouterPack(o.routerPack, forced) : top1;
  const accuracy = (routed: (i: number) => boolean) => {
    let right = 0;
    for (let i = 0; i < n; i++) right += routed(i) ? forced.cloudCorrect[i]! : forced.edgeCorrect[i]!;
    return n ? right / n : NaN;
  };
  const forcedPoints = o.thresholds.map((threshold) => ({
    threshold,
    routedRatio: n ? scores.filter((s) => s < threshold).length / n : 0,
    quality: accuracy((i) => scores[i]! < threshold),
  }));

  // The reply to each conversation's last user turn: the prompt is everything up to it.
  const prompts: Prompt[] = [];
  const wanted: string[][] = [];
  for (const c of o.conversations) {
    const last = userTurnPrompts(o.template, edge.tokenizer, c.messages).at(-1);
    const request = c.messages.findLast((m) => m.role === 'user');
    if (!last || !request || last.ids.length >= edge.edgeModel.pack.maxPositions) continue;
    prompts.push(last);
    wanted.push(requestedWords(request.content));
  }
  const replyPoints: ChatReplyPoint[] = [];
  progress?.start('replying', o.thresholds.length);
  try {
    for (const [i, threshold] of o.thresholds.entries()) {
      progress?.update(i, `τ=${threshold}`);
      const run = await generateAll(edge, o.router, prompts, { threshold, maxNewTokens: o.maxNewTokens });
      replyPoints.push({ threshold, ...replyFigures(run, wanted) });
    }
  } finally {
    progress?.stop();
  }
  return {
    kind: 'chat',
    qualityMetric: 'next_token_accuracy',
    conversations: o.conversations.length,
    positions: n,
    smallOnlyAccuracy: accuracy(() => false),
    largeOnlyAccuracy: accuracy(() => true),
    forcedPoints,
    atShare: atShare(forced, { router: scores, top1, entropy }, o.shares, o.seed),
    replies: prompts.length,
    maxNewTokens: o.maxNewTokens,
    requestsNamingWords: wanted.filter((w) => w.length > 0).length,
    requestedWords: wanted.reduce((s, w) => s + w.length, 0),
    replyPoints,
  };
}
