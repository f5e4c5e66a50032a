/**
 * How `bun run eval` reports a chat dataset (chat-eval.ts): Markdown tables, and the JSON object
 * `{conversations, positions, small_only_accuracy, large_only_accuracy, teacher_forcing: {points:
 * [{threshold, routed_ratio, quality}], at_share: [...]}, replies: {count, max_new_tokens,
 * requests_naming_words, requested_words, points: [{threshold, routed_share, ended_by_model,
 * all_words_mentioned, words_mentioned, mean_reply_tokens, examples}]}}` (keys made snake_case by the caller).
 */
import type { ChatEvalResult } from './chat-eval.ts';
import { f3, pct, table } from './report-format.ts';

export function chatMarkdown(r: ChatEvalResult): string {
  const forced = table(
    ['τ', 'routed', 'accuracy'],
    r.forcedPoints.map((p) => [p.threshold.toFixed(2), f3(p.routedRatio), f3(p.quality)]),
  );
  const shares = table(
    ['share', 'router', 'random', 'top-1 prob.', 'entropy', 'oracle'],
    r.atShare.map((row) => [pct(row.share), pct(row.router), pct(row.random), pct(row.top1), pct(row.entropy), pct(row.oracle)]),
  );
  const replies = table(
    ['τ', 'routed', 'ended by the model', 'all requested words', 'requested words', 'mean tokens'],
    r.replyPoints.map((p) => [
      p.threshold.toFixed(2),
      f3(p.routedShare),
      pct(p.endedByModel),
      pct(p.allWordsMentioned),
      pct(p.wordsMentioned),
      p.meanReplyTokens.toFixed(1),
    ]),
  );
  const sections = [
    `Teacher forcing on the assistant's tokens of ${r.conversations} conversations (${r.positions} positions): next-token top-1 accuracy, edge alone ${f3(r.smallOnlyAccuracy)}, cloud alone ${f3(r.largeOnlyAccuracy)}.`,
    '',
    forced,
  ];
  if (r.atShare.length)
    sections.push('', 'At fixed routed shares: recovered fraction of the edge→cloud accuracy gap (every method routes exactly as many positions):', '', shares);
  sections.push(
    '',
    `Free-running replies to the last user turn of ${r.replies} conversations (greedy, up to ${r.maxNewTokens} tokens): replies the model ended itself, and of the ${r.requestsNamingWords} requests that name a subject or words (${r.requestedWords} words), those whose reply mentions all of them and the words mentioned:`,
    '',
    replies,
  );
  return sections.join('\n');
}

export function chatJson(r: ChatEvalResult): Record<string, unknown> {
  const { forcedPoints, atShare, replies, maxNewTokens, requestsNamingWords, requestedWords, replyPoints, kind: _kind, ...rest } = r;
  return {
    ...rest,
    teacherForcing: { points: forcedPoints, atShare },
    replies: { count: replies, maxNewTokens, requestsNamingWords, requestedWords, points: replyPoints },
  };
}
