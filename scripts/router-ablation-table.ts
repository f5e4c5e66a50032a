/**
 * The ablation table of docs/router-training.md, rendered from recorded `router train --json` runs
 * (docs/results/router-ablation-*.jsonl, each saved by `bun run results:record`): per pair and variant, the
 * held-out report's teacher-forced gap recovered at 30% routed and its free-running figures at 10/20/30%
 * routed against top-1 (with the shares each run reached: a lower perplexity is a win only where they are
 * within the verdict's MATCHED_WITHIN) and random, and the cloud's perplexity of the tokens outside repeated
 * 4-grams where the run recorded it. `--write` puts the table in the page between its markers, `--check`
 * fails when the page differs (tests/router-ablation-table.test.ts checks it too). No figure in the page
 * is typed by hand.
 *
 * @example
 * ```sh
 * bun run results:record router-ablation-d3l-defaults -- bun run router train ... --json
 * bun scripts/router-ablation-table.ts --write
 * ```
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { readDataFile, type DataFile, type Fields } from './results/data-file.ts';
import { f2, f3, table } from './results/markdown.ts';
import { DEFAULT_REPORT, MATCHED_WITHIN } from '../src/tools/router/held-out-report.ts';
import { defaultFeatures, loopCostShare, DEFAULT_MEMBERS, DEFAULT_ROLLOUT_WEIGHT, DEFAULT_ROUNDS } from '../src/tools/router/train-router-options.ts';
import { HORIZON_TOKENS } from '../src/tools/router/horizon-gain.ts';

export const ABLATION_PAGE = 'docs/router-training.md';
export const ABLATION_PREFIX = 'router-ablation-';
const BEGIN = '<!-- ablation: bun scripts/router-ablation-table.ts --write -->';
const END = '<!-- /ablation -->';

/** What a run was trained with, from its router.json: the two label rules, and what differs from today's defaults. */
export function variantOf(data: Fields): string {
  const training = data.obj('training');
  const features = data.strList('features');
  const parts = [`text: ${training.str('label_rule')}`, `rollouts: ${training.str('on_policy_label_rule')}`];
  if (training.has('horizon_tokens') && training.num('horizon_tokens') !== HORIZON_TOKENS) parts.push(`horizon ${training.num('horizon_tokens')} tokens`);
  // horizon-nll charged no loop step before --loop-cost existed (router.json without loop_cost), and a fixed
  // cost in nats before the default became a share of the median route gain (loop_cost_share).
  const kind = training.has('text_format') ? 'chat' : 'text';
  const loopCost = training.has('loop_cost') ? training.num('loop_cost') : 0;
  const share = training.has('loop_cost_share') ? training.num('loop_cost_share') : undefined;
  const defaultCost = share === undefined ? loopCost === 0 && loopCostShare(kind) === 0 : share === loopCostShare(kind);
  if (training.str('on_policy_label_rule') === 'horizon-nll' && !defaultCost)
    parts.push(share === undefined ? `loop cost ${loopCost}` : `loop cost ${share} of the median gain`);
  const defaults: readonly string[] = defaultFeatures(kind);
  const missing = defaults.filter((g) => !features.includes(g));
  if (missing.length) parts.push(`without ${missing.join(', ')}`);
  const added = features.filter((g) => !defaults.includes(g));
  if (added.length) parts.push(`with ${added.join(', ')}`);
  const rounds = training.list('rounds').length - 1;
  if (rounds !== DEFAULT_ROUNDS) parts.push(`${rounds} rounds`);
  // Rollouts weighed 1 before --rollout-weight existed (router.json without rollout_weight).
  const rolloutWeight = training.has('rollout_weight') ? training.num('rollout_weight') : 1;
  if (rounds > 0 && rolloutWeight !== DEFAULT_ROLLOUT_WEIGHT) parts.push(`rollout weight ${rolloutWeight}`);
  const seed = training.has('seed') ? training.num('seed') : 0;
  if (seed !== 0) parts.push(`seed ${seed}`);
  const members = training.num('members');
  if (members !== DEFAULT_MEMBERS) parts.push(`${members} member${members === 1 ? '' : 's'}`);
  return parts.join('; ');
}

/** The pair, from the saved command's packs (and the report text, for the chat pair). */
export function pairOf(command: string): string {
  const edge = command.match(/--edge-model \S*?([^/\s]+)(?=\s)/)?.[1] ?? '?';
  const cloud = command.match(/--cloud-model \S*?([^/\s]+)(?=\s)/)?.[1] ?? '?';
  return `${edge} → ${cloud}`;
}

/**
 * How the run's report generated, where it differs from today's default: greedy (every report before
 * sampling, whose router.json has no temperature), or from another number of prompts.
 */
export function reportOf(free: Fields): string {
  const temperature = free.has('temperature') ? free.num('temperature') : 0;
  const prompts = free.num('prompts');
  const how = temperature === DEFAULT_REPORT.temperature ? '' : temperature === 0 ? 'greedy ' : `temperature ${temperature} `;
  const count = prompts === DEFAULT_REPORT.prompts ? '' : ` on ${prompts} prompts`;
  // A loop check from before it had prompts of its own: the sampled runs' prompts, one random stream.
  const loops = free.has('greedy_loop_check') ? free.list('greedy_loop_check') : [];
  const check = loops[0] && !loops[0].obj('router').has('outputs') ? `; loop check on ${prompts} prompts, one random stream` : '';
  return (how || count ? `; ${how}report${count}` : '') + check;
}

/** The verdict's rule: a lower perplexity than top-1 counts only where the two routed about the same share. */
function pplWon(row: Fields): boolean {
  const [router, top1] = [row.obj('router'), row.obj('top1')];
  return router.num('ppl_cloud') < top1.num('ppl_cloud') && Math.abs(router.num('routed_share') - top1.num('routed_share')) <= MATCHED_WITHIN;
}

/** Repetition as the verdict reads it: a sampled report's greedy loop check, a greedy report's own runs. */
function loopRowsOf(free: Fields): Fields[] {
  return free.has('greedy_loop_check') ? free.list('greedy_loop_check') : free.list('at_share');
}

const repeatsNoMore = (row: Fields) => row.obj('router').num('rep4') <= row.obj('random').num('rep4');

const pct0 = (x: number) => `${(x * 100).toFixed(0)}%`;
const pct1 = (x: number) => `${(x * 100).toFixed(1)}%`;

function row(file: DataFile): string[] {
  const r = file.data.obj('training').obj('held_out_report');
  const at30 = r.list('teacher_forced').at(-1)!;
  const free = r.obj('free_running').list('at_share');
  const ppl = (row: Fields) => {
    const router = row.obj('router').num('ppl_cloud');
    const top1 = row.obj('top1').num('ppl_cloud');
    const shares = [row.obj('router').num('routed_share'), row.obj('top1').num('routed_share')] as const;
    // Two decimals, or three where two would show a win or a loss as a tie (the verdict reads the unrounded figures).
    const f = f2(router) === f2(top1) ? f3 : f2;
    return `${f(router)} / ${f(top1)} [${pct0(shares[0])} / ${pct0(shares[1])}]${pplWon(row) ? ' ✓' : ''}`;
  };
  const rep = (row: Fields) => `${f3(row.obj('router').num('rep4'))} / ${f3(row.obj('random').num('rep4'))}${repeatsNoMore(row) ? ' ✓' : ''}`;
  // Recorded since the report has it: a repeating output's perplexity is lower for its repeats alone.
  const fresh = (row: Fields) => {
    if (!row.obj('router').has('ppl_cloud_fresh')) return null;
    return `${f2(row.obj('router').num('ppl_cloud_fresh'))} / ${f2(row.obj('top1').num('ppl_cloud_fresh'))}`;
  };
  const freshCells = free.map(fresh);
  return [
    pairOf(file.provenance.command),
    variantOf(file.data) + reportOf(r.obj('free_running')),
    `${pct1(at30.num('router'))} / ${pct1(at30.num('top1'))} (${r.num('documents')})${at30.num('router') >= 0.6 ? ' ✓' : ''}`,
    ...free.map(ppl),
    loopRowsOf(r.obj('free_running')).map(rep).join('; '),
    freshCells.every((c) => c !== null) ? freshCells.join('; ') : '–',
    r.bool('beats_top1') ? 'yes' : 'no',
    `[${file.name.replace(ABLATION_PREFIX, '')}](results/${file.name}.jsonl)`,
  ];
}

/** The table from every recorded ablation run in `dir`, ordered by pair, then by file name. */
export function ablationMarkdown(dir = 'docs/results'): string {
  const names = readdirSync(dir)
    .filter((f) => f.startsWith(ABLATION_PREFIX) && f.endsWith('.jsonl'))
    .map((f) => f.slice(0, -'.jsonl'.length));
  const files = names.sort().map((name) => readDataFile(dir, name));
  const rows = files.map(row).sort((a, b) => a[0]!.localeCompare(b[0]!));
  return table(
    [
      'pair',
      'variant',
      'TF gap at 30%: trained / top-1 (documents)',
      'ppl 10%: trained / top-1 [routed]',
      'ppl 20%',
      'ppl 30%',
      'rep4 greedy 10/20/30%: trained / random',
      'ppl outside repeats 10/20/30%: trained / top-1',
      'beats top-1',
      'data',
    ],
    rows,
  );
}

const STANDING_BEGIN = '<!-- standing: bun scripts/router-ablation-table.ts --write -->';
const STANDING_END = '<!-- /standing -->';
/** The runs trained as `router train` trains without label, feature or cost flags, per seed. */
const STANDING_RUN = /^router-ablation-(.+)-defaults(?:-seed-(\d+))?$/;

/**
 * Where today's defaults stand, one line per pair and seed (the `defaults` and `defaults-seed-N` runs): each
 * target of the issue, ✓ where met, ✗ where not, as the ablation table reads them.
 */
export function standingMarkdown(dir = 'docs/results'): string {
  const files = readdirSync(dir)
    .map((f) => f.slice(0, -'.jsonl'.length))
    .filter((name) => STANDING_RUN.test(name))
    .map((name) => readDataFile(dir, name));
  const mark = (ok: boolean) => (ok ? ' ✓' : ' ✗');
  const rows = files.map((file) => {
    const r = file.data.obj('training').obj('held_out_report');
    const free = r.obj('free_running');
    const ppl = free.list('at_share').map((row) => `${f2(row.obj('router').num('ppl_cloud'))} / ${f2(row.obj('top1').num('ppl_cloud'))}${mark(pplWon(row))}`);
    const rep4 = loopRowsOf(free).map((row) => `${f3(row.obj('router').num('rep4'))} / ${f3(row.obj('random').num('rep4'))}${mark(repeatsNoMore(row))}`);
    const tf = r.list('teacher_forced').at(-1)!.num('router');
    // One decimal would show a miss by a hundredth of a point as 60.0%, the target itself.
    const tfCell = pct1(tf) === '60.0%' && tf < 0.6 ? `${(tf * 100).toFixed(2)}%` : pct1(tf);
    return {
      pair: pairOf(file.provenance.command),
      seed: Number(file.name.match(STANDING_RUN)![2] ?? 0),
      cells: [ppl.join('; '), rep4.join('; '), `${tfCell}${mark(tf >= 0.6)}`, `[${file.name.replace(ABLATION_PREFIX, '')}](results/${file.name}.jsonl)`],
    };
  });
  rows.sort((a, b) => a.pair.localeCompare(b.pair) || a.seed - b.seed);
  return table(
    ['pair', 'seed', 'ppl 10 / 20 / 30%: trained / top-1', 'rep4 greedy 10 / 20 / 30%: trained / random', 'TF gap at 30%', 'data'],
    rows.map((row) => [row.pair, String(row.seed), ...row.cells]),
  );
}

export const GAIN_PREFIX = 'router-on-policy-gain-';
const GAIN_BEGIN = '<!-- on-policy gain: bun scripts/router-ablation-table.ts --write -->';
const GAIN_END = '<!-- /on-policy gain -->';

/** The diagnostic's tables (scripts/router-on-policy-gain.ts): share of the best immediate NLL gain each scorer routes. */
export function onPolicyGainMarkdown(dir = 'docs/results'): string {
  const files = readdirSync(dir)
    .filter((f) => f.startsWith(GAIN_PREFIX) && f.endsWith('.jsonl'))
    .sort()
    .map((f) => readDataFile(dir, f.slice(0, -'.jsonl'.length)));
  return files
    .map((file) => {
      const shares = file.data.numList('shares');
      const rows = file.data.list('rows').map((r) => [r.str('name'), ...r.numList('captured').map(pct0)]);
      return [
        `${pairOf(file.provenance.command)}, ${file.data.num('positions')} positions (data: [results/${file.name}.jsonl](results/${file.name}.jsonl)):`,
        '',
        table(['scorer', ...shares.map((x) => `${pct0(x)} routed`)], rows),
      ].join('\n');
    })
    .join('\n\n');
}

function between(page: string, begin: string, end: string, markdown: string): string {
  const at = page.indexOf(begin);
  const to = page.indexOf(end);
  if (at < 0 || to < at) throw new Error(`${ABLATION_PAGE} has no section between ${begin} and ${end}`);
  return `${page.slice(0, at + begin.length)}\n${markdown}\n${page.slice(to)}`;
}

/** The page with the ablation table, and the on-policy gain and standing tables where given. */
export function pageWithAblation(page: string, markdown: string, gain?: string, standing?: string): string {
  const next = between(page, BEGIN, END, markdown);
  const withGain = gain === undefined ? next : between(next, GAIN_BEGIN, GAIN_END, gain);
  return standing === undefined ? withGain : between(withGain, STANDING_BEGIN, STANDING_END, standing);
}

if (import.meta.main) {
  const page = readFileSync(ABLATION_PAGE, 'utf8');
  const next = pageWithAblation(page, ablationMarkdown(), onPolicyGainMarkdown(), standingMarkdown());
  if (process.argv.includes('--check')) {
    if (next !== page) {
      console.error(`${ABLATION_PAGE}: the ablation table is not what the recorded runs render: run bun scripts/router-ablation-table.ts --write`);
      process.exit(1);
    }
  } else if (process.argv.includes('--write')) writeFileSync(ABLATION_PAGE, next);
  else console.log(ablationMarkdown());
}
