/**
 * `bench decode --dtype ... --peer llama.cpp`: per weight type, our decode and llama.cpp's at the same bit
 * width, each loaded and prefilled in a process of its own, then timed in alternating rounds
 * (alternating-rounds.ts): both see the same moments of a machine whose speed moves within a minute.
 * Each type's result is what `bench decode --json` reports for its pack, plus the ratios to llama.cpp: of
 * the medians over all steps (`ratio_to_peer`) and per round (`ratio_to_peer_by_round`, the figure the
 * machine's noise moves least), and each round's pair of medians.
 *
 * @example
 * const { results, peer } = await compareWithLlamaCpp({ preset: 'qwen2.5-0.5b', dtypes: ['q4'], threads: 2, copyBytes: 2 ** 30, promptTokens: 100, steps: 32, warmup: 4, rounds: 4, log });
 * console.log(formatPeerComparison(results, peer));
 */
import { loadModelPack } from '../../shared/model/model-pack.ts';
import type { BenchLayout } from '../models/random-pack.ts';
import { ensurePeerGgufs, PEER_TYPES, type PeerResult, startLlamaCppDecode } from '../llama-cpp-peer/llama-cpp-peer.ts';
import { type Alternation, alternateRounds, type RoundSide } from './alternating-rounds.ts';
import { DECODE_ROUND_CHILD } from './decode-round-child.ts';
import { type DtypeResult, measureBandwidth } from './decode-dtypes.ts';
import { type BenchDtype, ensureDtypePack } from './decode-packs.ts';
import { promptIds } from './decode-target.ts';
import { LineProcess } from './line-process.ts';
import { median } from '../../shared/statistics.ts';

export interface PeerComparisonOptions {
  preset: string;
  layout?: BenchLayout;
  dtypes: BenchDtype[];
  threads: number;
  copyBytes: number;
  promptTokens: number;
  steps: number;
  warmup: number;
  rounds: number;
  log: (line: string) => void;
}

/** Our result for one type with the comparison: `rounds[i]` gains the peer's median and the ratio of round i. */
export type ComparedResult = DtypeResult & {
  ratio_to_peer: number;
  ratio_to_peer_by_round: { median: number; min: number; max: number };
  /** Median over the rounds of our weight products alone over llama.cpp's step of the same round. */
  floor_to_peer_by_round?: number;
  rounds: (Record<string, unknown> & { ms_per_token: number; peer_ms_per_token: number; ratio_to_peer: number; kernel_floor_ms?: number })[];
};

/** Drives a helper over the line protocol as one side of the alternation. */
export function lineSide(helper: LineProcess): RoundSide {
  return {
    warmUp: async (steps) => void (await helper.request({ type: 'warmup', steps })),
    runRound: async (steps) => (await helper.request<{ stepsMs: number[] }>({ type: 'round', steps })).stepsMs,
  };
}

export async function compareWithLlamaCpp(o: PeerComparisonOptions): Promise<{ results: ComparedResult[]; peer: PeerResult[] }> {
  const packs = new Map<BenchDtype, string>();
  for (const dtype of o.dtypes) packs.set(dtype, await ensureDtypePack(o.preset, dtype, o.log, o.layout));
  const ggufs = ensurePeerGgufs(o.preset, o.dtypes, o.log);
  const ids = await promptIds(loadModelPack(packs.get(o.dtypes[0]!)!), o.promptTokens);
  const bandwidth = await measureBandwidth(o.copyBytes, o.threads);
  // Its copy buffers (2 × --copy-mib) are garbage now; freed before two models share the machine's memory.
  Bun.gc(true);
  o.log(`copy bandwidth ${bandwidth.toFixed(1)} GB/s (read + written), used for every type's bound`);
  const plannedSteps = o.warmup + o.steps;
  const results: ComparedResult[] = [];
  const peer: PeerResult[] = [];
  for (const dtype of o.dtypes) {
    o.log(`${dtype}: ${packs.get(dtype)} and llama.cpp ${PEER_TYPES[dtype]}, each in its own process, ${o.rounds} rounds each`);
    // Each of our rounds ends with the weight products alone, so every round has its floor beside llama.cpp's step.
    const childOptions = { dir: packs.get(dtype)!, threads: o.threads, promptTokens: o.promptTokens, plannedSteps, bandwidthGbS: bandwidth, kernelFloor: true };
    const ours = await LineProcess.start({
      command: [process.execPath, DECODE_ROUND_CHILD, JSON.stringify(childOptions)],
      name: `our ${dtype} decode`,
      log: o.log,
    });
    try {
      const theirs = await startLlamaCppDecode({ gguf: ggufs.get(dtype)!, threads: o.threads, promptIds: ids, plannedSteps, log: o.log });
      try {
        const alternation = await alternateRounds(lineSide(ours.helper), lineSide(theirs.helper), o);
        const { result } = await ours.helper.request<{ result: Omit<DtypeResult, 'dtype'> }>({ type: 'finish' });
        results.push(compared({ ...result, dtype } as DtypeResult, alternation));
        peer.push(peerResult(dtype, ggufs.get(dtype)!, theirs.ready, alternation));
      } finally {
        await theirs.helper.close();
      }
    } finally {
      await ours.helper.close();
    }
  }
  return { results, peer };
}

function compared(ours: DtypeResult, a: Alternation): ComparedResult {
  const rounds = (ours.rounds as (Record<string, unknown> & { kernel_floor_ms?: number })[]).map((r, i) => ({
    ...r,
    ms_per_token: a.ours.roundMsPerToken[i]!,
    peer_ms_per_token: a.peer.roundMsPerToken[i]!,
    ratio_to_peer: a.roundRatios[i]!,
  }));
  const floors = rounds.flatMap((r) => (typeof r.kernel_floor_ms === 'number' ? [r.kernel_floor_ms / r.peer_ms_per_token] : []));
  return {
    ...ours,
    ratio_to_peer: a.ratio,
    ratio_to_peer_by_round: a.ratioByRound,
    ...(floors.length ? { floor_to_peer_by_round: median(floors) } : {}),
    rounds,
  };
}

function peerResult(dtype: BenchDtype, gguf: string, ready: { prefillMs: number; threads: number }, a: Alternation): PeerResult {
  return {
    dtype: PEER_TYPES[dtype].toLowerCase() as PeerResult['dtype'],
    ms_per_token: a.peer.msPerToken,
    ms_per_token_p90: a.peer.msPerTokenP90,
    min_ms_per_token: a.peer.minMsPerToken,
    tokens_per_second: 1000 / a.peer.msPerToken,
    prefill_ms: ready.prefillMs,
    threads: ready.threads,
    gguf,
    rounds_ms_per_token: a.peer.roundMsPerToken,
  };
}

/**
 * Per type: both medians and fastest steps, the ratio of the medians and the per-round ratios, and our
 * weight products alone (decode-kernel-floor.ts) over llama.cpp's whole step, median of the rounds: above 1,
 * no graph on these kernels can match llama.cpp.
 */
export function formatPeerComparison(results: readonly ComparedResult[], peer: readonly PeerResult[]): string {
  const header =
    'dtype  peer  ours ms/token  fastest  llama.cpp ms/token  fastest  llama.cpp prefill ms  ours/llama.cpp  by round: median (min–max)  kernel floor ms  floor/llama.cpp';
  const rows = results.map((r, i) => {
    const p = peer[i]!;
    const byRound = r.ratio_to_peer_by_round;
    return [
      r.dtype.padEnd(6),
      p.dtype.padEnd(5),
      r.ms_per_token.toFixed(1).padStart(14),
      Number(r.min_ms_per_token).toFixed(1).padStart(8),
      p.ms_per_token.toFixed(1).padStart(19),
      p.min_ms_per_token.toFixed(1).padStart(8),
      p.prefill_ms.toFixed(0).padStart(21),
      r.ratio_to_peer.toFixed(2).padStart(15),
      `  ${byRound.median.toFixed(2)} (${byRound.min.toFixed(2)}–${byRound.max.toFixed(2)})`.padEnd(27),
      (typeof r.kernel_floor_ms === 'number' ? r.kernel_floor_ms.toFixed(1) : '-').padStart(16),
      (r.floor_to_peer_by_round === undefined ? '-' : r.floor_to_peer_by_round.toFixed(2)).padStart(16),
    ].join(' ');
  });
  const floor = (x: { kernel_floor_ms?: unknown }) => (typeof x.kernel_floor_ms === 'number' ? `/${x.kernel_floor_ms.toFixed(1)}` : '');
  const perRound = results.map(
    (r) =>
      `${r.dtype} rounds, ours/llama.cpp${r.floor_to_peer_by_round === undefined ? '' : '/floor'} ms: ${r.rounds.map((x) => `${x.ms_per_token.toFixed(1)}/${x.peer_ms_per_token.toFixed(1)}${floor(x)}`).join('  ')}`,
  );
  return [header, ...rows, ...perRound].join('\n');
}
