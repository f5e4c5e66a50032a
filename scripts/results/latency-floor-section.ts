/**
 * docs/results.md's latency floor, from `bun run bench latency --cloud-prefill lazy,eager --json`: each row's
 * extra time over small_only, split into cloud prefill on the critical path, the tail (round trips not
 * hidden) and re-decode after a wrong guess (src/tools/bench/latency-floor.ts), with the prompt sent ahead
 * or not.
 *
 * @example
 * ```ts
 * const markdown = latencyFloorSection(readDataFile('docs/results', 'demo-bench-latency-floor-24'));
 * ```
 */
import type { DataFile } from './data-file.ts';
import { f1, f2, orDash, pct, provenance, shortName, table } from './markdown.ts';

/** Where the forward passes ran, for a recording that says (those before --model-thread ran them on the main thread). */
function modelThread(d: DataFile['data']): string {
  return d.strOrNull('model_thread') === 'worker' ? ', forward passes on a worker thread' : ', forward passes on the JavaScript thread';
}

export function latencyFloorSection(file: DataFile): string {
  const d = file.data;
  const rows = d.list('rows').map((row) => {
    const threshold = row.numOrNull('threshold');
    const ways = [row.bool('speculate') ? 'speculating' : '', row.bool('prefill_ahead') ? 'prompt sent ahead' : ''].filter(Boolean).join(', ');
    const setting = threshold === null ? row.str('mode') : `${row.str('mode')} τ=${threshold}${ways ? `, ${ways}` : ''}`;
    return [
      setting,
      pct(row.num('routed_ratio')),
      f1(row.num('overall_ms')),
      f2(row.num('overall_ratio')),
      orDash(row.numOrNull('first_wait_ms'), f1),
      orDash(row.numOrNull('first_wait_ms') === null ? null : row.num('held_ms'), f1),
      orDash(row.numOrNull('decode_step_ms'), f1),
      f1(row.num('extra_ms')),
      f1(row.num('prefill_critical_ms')),
      f1(row.num('tail_ms')),
      f1(row.num('redecode_ms')),
    ];
  });
  const identical = d.boolOrNull('identical_outputs');
  return [
    provenance(file),
    '',
    `Edge model \`${shortName(d.str('slm'))}\`, router \`${shortName(d.str('router'))}\`, cloud \`${shortName(d.str('cloud'))}\`, ` +
      `${d.num('rtt_ms')} ms of round trip added${modelThread(d)}; ${d.num('prompts')} prompts, up to ${d.num('max_new_tokens')} new tokens, greedy; ` +
      "means per prompt. Extra is the overall time over small_only's; of it, cloud prefill is the shim's time on the first routed step " +
      'beyond one cloud decode step, re-decode the speculative steps thrown away, and the tail the rest: round trips the edge could not ' +
      "hide. Held is the first routed token's wait beyond one round trip and the shim's time on its step: behind an edge forward pass " +
      'in flight (with the model on the JavaScript thread), or at the shim behind the prefill or an extend sent ahead ' +
      '(src/tools/bench/latency-floor.ts). With the prompt sent ahead, the tokens the edge decides follow as extends. A cloud decode step is the median ' +
      "backend time of each generation's steps after its first (each with the tokens the edge decoded since the step before); " +
      'with the prompt sent ahead those tokens were computed as extends, so a step is the sampling alone, and one decode step of the ' +
      "cloud model is llm_only's (one token per step)." +
      (identical === null
        ? ''
        : identical
          ? ' The outputs are the same in every row of a τ (`identical_outputs`).'
          : ' **The outputs differ between rows of a τ** (`identical_outputs` false).'),
    '',
    table(
      [
        'setting',
        'routed',
        'overall (ms)',
        'overall / small_only',
        'first routed wait (ms)',
        'of it held (ms)',
        'cloud decode step (ms)',
        'extra (ms)',
        'cloud prefill (ms)',
        'tail (ms)',
        're-decode (ms)',
      ],
      rows,
    ),
  ].join('\n');
}
