/**
 * The chat pair's measurements on docs/results.md: `bun run eval` on held-back conversations (teacher forcing
 * on the assistant's tokens, the recovered gap at fixed shares against the baselines, and free-running replies
 * per τ) and `bun run router eval` on the same file (the routing curve).
 *
 * @example
 * ```ts
 * const markdown = chatEvalSection(readDataFile('docs/results', 'chat-eval-heldback'), { defaultThreshold: 0.8 });
 * ```
 */
import type { DataFile } from './data-file.ts';
import { packsLine, pointAt } from './eval-sections.ts';
import { f1, f2, f3, pct, provenance, table } from './markdown.ts';

/** A reply quoted as an example: its first characters, on one line. */
const EXAMPLE_CHARS = 240;
const quoted = (text: string) => {
  const line = text.trim().replace(/\s+/g, ' ');
  return JSON.stringify(line.length > EXAMPLE_CHARS ? `${line.slice(0, EXAMPLE_CHARS)}…` : line);
};

export function chatEvalSection(file: DataFile, options: { defaultThreshold: number }): string {
  const d = file.data;
  const forced = d.obj('teacher_forcing');
  const points = forced.list('points');
  const atShare = forced.list('at_share');
  const replies = d.obj('replies');
  const replyPoints = replies.list('points');
  const share30 = atShare.find((row) => row.num('share') === 0.3) ?? atShare[0]!;
  // Where the router does not recover more than both baselines, the sentence names the shares.
  const behind = atShare.filter((row) => !(row.num('router') > row.num('random') && row.num('router') > row.num('top1'))).map((row) => pct(row.num('share')));
  const { point: atDefault } = pointAt(replyPoints, options.defaultThreshold, file.data.file);
  const edgeAlone = pointAt(replyPoints, 0, file.data.file).point;
  const cloudAlone = pointAt(replyPoints, 1, file.data.file).point;
  return [
    provenance(file),
    '',
    packsLine(d),
    '',
    `${d.num('conversations')} conversations, ${d.num('positions')} teacher-forced positions (the assistant's tokens and each turn's \`</s>\`). ` +
      `Next-token accuracy of the edge model alone ${f3(d.num('small_only_accuracy'))}, of the cloud model alone ${f3(d.num('large_only_accuracy'))}. ` +
      `At ${pct(share30.num('share'))} of positions routed the router recovers ${pct(share30.num('router'))} of the gap, random routing ` +
      `${pct(share30.num('random'))}, the edge's top-1 probability ${pct(share30.num('top1'))}; ` +
      (behind.length === 0
        ? 'the router recovers more than both at every share measured.'
        : `the router does not recover more than both at ${behind.join(', ')}.`) +
      ` Replying freely at the default τ ${options.defaultThreshold}, ${pct(atDefault.num('routed_share'))} of the generated tokens are routed and ` +
      `${pct(atDefault.num('ended_by_model'))} of the replies end with \`</s>\` (the edge alone: ${pct(edgeAlone.num('ended_by_model'))}, the cloud alone: ` +
      `${pct(cloudAlone.num('ended_by_model'))}).`,
    '',
    'Next-token top-1 accuracy under teacher forcing, by τ:',
    '',
    table(
      ['τ', 'routed', 'accuracy'],
      points.map((p) => [f2(p.num('threshold')), f3(p.num('routed_ratio')), f3(p.num('quality'))]),
    ),
    '',
    'At fixed routed shares: the recovered fraction of the gap (every method routes exactly as many positions; the oracle routes where only the cloud is right):',
    '',
    table(
      ['share', 'router', 'random', 'top-1 prob.', 'entropy', 'oracle'],
      atShare.map((row) => [
        pct(row.num('share')),
        pct(row.num('router')),
        pct(row.num('random')),
        pct(row.num('top1')),
        pct(row.num('entropy')),
        pct(row.num('oracle')),
      ]),
    ),
    '',
    `Free-running replies to each conversation's last user turn (${replies.num('count')} replies, greedy, at most ${replies.num('max_new_tokens')} tokens), ` +
      `from τ = 0 (the edge alone) to τ = 1 (the cloud alone): the share ending with \`</s>\`, and of the ${replies.num('requests_naming_words')} requests ` +
      `that name a subject or words (${replies.num('requested_words')} words), the replies mentioning all of them and the words mentioned:`,
    '',
    table(
      ['τ', 'routed', 'ends with `</s>`', 'all requested words', 'requested words', 'mean tokens'],
      replyPoints.map((p) => [
        f2(p.num('threshold')),
        f3(p.num('routed_share')),
        pct(p.num('ended_by_model')),
        pct(p.num('all_words_mentioned')),
        pct(p.num('words_mentioned')),
        f1(p.num('mean_reply_tokens')),
      ]),
    ),
    '',
    `The reply to the first conversation at τ ${options.defaultThreshold}: ${quoted(atDefault.strList('examples')[0]!)}`,
  ].join('\n');
}

export function routerEvalSection(file: DataFile): string {
  const d = file.data;
  return [
    provenance(file),
    '',
    `${d.num('positions')} teacher-forced positions; next-token accuracy of the edge model alone ${f3(d.num('smallOnlyAccuracy'))}, of the cloud model ` +
      `alone ${f3(d.num('largeOnlyAccuracy'))}:`,
    '',
    table(
      ['τ', 'routed', 'accuracy'],
      d.list('points').map((p) => [f2(p.num('threshold')), f3(p.num('routedRatio')), f3(p.num('accuracy'))]),
    ),
  ].join('\n');
}
