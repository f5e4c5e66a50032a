/**
 * docs/results.md's timing sections, from `bun run bench <target> --json` output: the edge ↔ cloud hop
 * (`shim`), the routing cost on the edge (`edge`), edge decode speed against its memory-bandwidth bound
 * (`decode`), the same against llama.cpp in alternating rounds (`decode --peer llama.cpp`), the reference paper's latency table over a delayed gRPC link (`latency`) and the shim under
 * sustained load, its memory included (`load`).
 *
 * @example
 * ```ts
 * const markdown = shimBenchSection(readDataFile('docs/results', 'demo-bench-shim'));
 * ```
 */
import type { DataFile } from './data-file.ts';
import { f1, f2, f3, orDash, pct, provenance, shortName, table } from './markdown.ts';

const ms = (x: number) => `${f3(x)} ms`;

export function shimBenchSection(file: DataFile): string {
  const d = file.data;
  return [
    provenance(file),
    '',
    `Cloud model \`${shortName(d.str('pack'))}\` with the embedded backend, ${d.num('steps')} routed steps over a real gRPC stream on loopback:`,
    '',
    table(
      ['what', 'figure'],
      [
        ['round trip of a routed step, p50', ms(d.num('round_trip_ms_p50'))],
        ["the shim's overhead (round trip − backend time), p50 / p90", `${ms(d.num('shim_overhead_ms_p50'))} / ${ms(d.num('shim_overhead_ms_p90'))}`],
        ['bytes on the wire per routed step', `${d.num('wire_bytes_per_step')} (${d.num('wire_bytes_per_step_with_hidden')} with the hidden state)`],
        ["the cloud model's step at context 50 / 400 (KV cache reused)", `${ms(d.num('llm_step_ms_ctx50'))} / ${ms(d.num('llm_step_ms_ctx400'))}`],
        ['KV reuse ratio (step at 400 / step at 50)', f2(d.num('kv_reuse_ratio'))],
        ['re-prefilling 400 tokens instead', ms(d.num('reprefill_ms_ctx400'))],
      ],
    ),
  ].join('\n');
}

export function edgeBenchSection(file: DataFile): string {
  const d = file.data;
  return [
    provenance(file),
    '',
    `Edge model \`${shortName(d.str('pack'))}\` (hidden size ${d.num('hidden_size')}), router \`${shortName(d.str('router'))}\`; ` +
      `${d.num('runs')} runs of ${d.num('tokens_per_run')} tokens, τ ${f3(d.num('threshold'))} routing ${pct(d.num('routed_ratio'))} of them:`,
    '',
    table(
      ['what', 'figure'],
      [
        ['edge decode step', ms(d.num('slm_step_ms'))],
        ['router call', `${ms(d.num('router_ms'))} (${pct(d.num('router_share_of_step'))} of a step)`],
        ['time between tokens, no routing / routing', `${ms(d.num('tbt_ms_no_routing'))} / ${ms(d.num('tbt_ms_routing'))} (ratio ${f2(d.num('tbt_ratio'))})`],
        [
          'time between tokens recomputing the whole sequence per token (no KV cache)',
          `${ms(d.num('tbt_ms_reprefill'))} (the KV cache is ${f1(d.num('speedup_vs_reprefill'))}× faster)`,
        ],
      ],
    ),
  ].join('\n');
}

export function loadBenchSection(file: DataFile): string {
  const d = file.data;
  const mb = (x: number) => `${f1(x)} MB`;
  return [
    provenance(file),
    '',
    `One shim (embedded backend, prefix cache on by default) under ${d.num('streams')} edge streams of one-token routed steps for ` +
      `${d.num('duration_s')} s (sessions of 32 steps, opened and closed), then ${d.num('generations_concurrent')} concurrent joint ` +
      "generations on one edge for as long. The shim's memory is measured after a warm-up and after the load, each after a forced GC once RSS stops falling; " +
      "the prefix cache keeps closed sessions' KV caches on purpose, so the end is also shown net of it:",
    '',
    table(
      ['what', 'figure'],
      [
        ['routed steps completed', `${d.num('routed_steps')} (${f1(d.num('steps_per_s'))}/s, ${d.num('sessions')} sessions)`],
        ['routed step round trip, p50 / p99', `${ms(d.num('p50_ms'))} / ${ms(d.num('p99_ms'))}`],
        ['generations completed', `${d.num('generations')} (${d.num('generation_tokens')} tokens, ${d.num('generation_routed_tokens')} routed)`],
        ['errors', `${d.num('errors')}`],
        ['shim RSS after warm-up → after load', `${mb(d.num('rss_start_mb'))} → ${mb(d.num('rss_end_mb'))}`],
        ['of it the prefix cache', `${mb(d.num('prefix_cache_mb_start'))} → ${mb(d.num('prefix_cache_mb_end'))}`],
        ['after load, net of the prefix cache (target ≤ 1.5× the start)', `${mb(d.num('rss_end_net_of_cache_mb'))}, ${f2(d.num('rss_net_growth'))}× the start`],
        [
          'shim at the end: sessions, context tokens, streams',
          `${d.num('shim_sessions_end')}, ${d.num('shim_context_tokens_end')}, ${d.num('shim_streams_end')}`,
        ],
      ],
    ),
  ].join('\n');
}

export function decodeBenchSection(file: DataFile): string {
  const d = file.data;
  const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  return [
    provenance(file),
    '',
    table(
      ['what', 'figure'],
      [
        ['decode, ms per token (p90)', `${f2(d.num('ms_per_token'))} (${f2(d.num('ms_per_token_p90'))}), ${f1(d.num('tokens_per_second'))} tokens/s`],
        [`prefill of ${d.num('prompt_tokens')} tokens`, `${f1(d.num('prefill_ms'))} ms`],
        ['weights and KV cache read per token', `${mib(d.num('weight_bytes'))} + ${mib(d.num('kv_bytes'))}`],
        ['measured copy bandwidth', `${f1(d.num('bandwidth_gb_s'))} GB/s`],
        ['bound (bytes read per token / bandwidth), share of it reached', `${f2(d.num('bound_ms_per_token'))} ms, ${f2(d.num('fraction_of_bound'))}`],
        ['peak RSS', `${f1(d.num('peak_rss_mb'))} MB`],
      ],
    ),
  ].join('\n');
}

/**
 * `bench decode --dtype … --peer llama.cpp --json`: per weight type, our decode step and llama.cpp's on the
 * same random weights (`results[i]` beside `peer[i]`), each engine in a process of its own, in alternating rounds.
 */
export function decodePeerBenchSection(file: DataFile): string {
  const d = file.data;
  const peer = d.list('peer');
  const results = d.list('results');
  const rows = results.map((ours, i) => {
    const theirs = peer[i] ?? d.obj(`peer[${i}]`);
    const byRound = ours.obj('ratio_to_peer_by_round');
    return [
      `${ours.str('dtype')} / ${theirs.str('dtype').toUpperCase()}`,
      `${f1(ours.num('ms_per_token'))} (${f1(ours.num('min_ms_per_token'))})`,
      `${f1(theirs.num('ms_per_token'))} (${f1(theirs.num('min_ms_per_token'))})`,
      `${f2(byRound.num('median'))} (${f2(byRound.num('min'))}–${f2(byRound.num('max'))})`,
      `${f1(ours.num('prefill_ms'))} ms / ${f1(theirs.num('prefill_ms'))} ms`,
    ];
  });
  return [
    provenance(file),
    '',
    `Both engines decode the same random weights (\`${d.str('target')}\`), each loaded in a process of its own, in alternating rounds at ` +
      `${d.num('threads')} threads after a ${results[0]!.num('prompt_tokens')}-token prompt. Milliseconds per token are medians over all steps, ` +
      'the fastest step in brackets; "by round" is the median (min–max) of the rounds\' ratios, the figure a shared machine\'s noise moves least.',
    '',
    table(
      ['weights (ours / llama.cpp)', 'ours ms/token (fastest)', 'llama.cpp ms/token (fastest)', 'ours / llama.cpp by round', 'prefill, ours / llama.cpp'],
      rows,
    ),
  ].join('\n');
}

export function latencyBenchSection(file: DataFile): string {
  const d = file.data;
  const rows = d.list('rows').map((row) => {
    const threshold = row.numOrNull('threshold');
    const setting = threshold === null ? row.str('mode') : `${row.str('mode')} τ=${threshold}${row.bool('speculate') ? ', speculating' : ''}`;
    return [
      setting,
      pct(row.num('routed_ratio')),
      f1(row.num('tokens')),
      f3(row.num('tbt_ms')),
      orDash(row.numOrNull('tbt_ratio'), f2),
      f1(row.num('overall_ms')),
      f2(row.num('overall_ratio')),
      orDash(row.numOrNull('hit_rate'), f2),
      f1(row.num('wasted_steps')),
    ];
  });
  const identical = d.boolOrNull('identical_outputs');
  return [
    provenance(file),
    '',
    `Edge model \`${shortName(d.str('slm'))}\`, router \`${shortName(d.str('router'))}\`, cloud \`${shortName(d.str('cloud'))}\` behind a real gRPC ` +
      `link with ${d.num('rtt_ms')} ms of round trip added; ${d.num('prompts')} prompts of \`${shortName(d.str('dataset'))}\`, up to ` +
      `${d.num('max_new_tokens')} new tokens, greedy. Figures are means per prompt; TBT is the edge's time between tokens, waiting for the ` +
      'cloud left out; overall is the whole request.' +
      (identical === null
        ? ''
        : identical
          ? ' With and without speculation the outputs are the same (`identical_outputs`).'
          : ' **The outputs with and without speculation differ** (`identical_outputs` false).'),
    '',
    table(['setting', 'routed', 'tokens', 'TBT (ms)', 'TBT / small_only', 'overall (ms)', 'overall / small_only', 'hit rate', 'wasted steps'], rows),
  ].join('\n');
}
