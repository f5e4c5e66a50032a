/**
 * `bench scoring`: what teacher forcing costs through a running shim against the cloud pack in this
 * process, the figure that decides whether a router can be trained against the deployed cloud. Both read
 * the same documents of the TinyStories excerpt (the demo pair, or --edge-model / --cloud-model), in
 * alternating rounds (in process, then through the shim, then again), so a machine whose speed moves
 * slows both alike; the shim runs on loopback in this process with the embedded backend, or is `--cloud`.
 * Reports each side's median seconds per round, their ratio (target ≤ 2), and the Score calls made against
 * the windows the documents hold (target: equal, one call per window, no per-token round trips).
 */
import { shimConfig } from '../../cloud/config.ts';
import { startShim, type ShimServer } from '../../cloud/shim-server.ts';
import { DecoderModel } from '../../shared/model/decoder-model.ts';
import { silentLogger } from '../../shared/process/logger.ts';
import { loadModelPack } from '../../shared/model/model-pack.ts';
import { DEMO } from '../../shared/paths.ts';
import { median, round } from '../../shared/statistics.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { encodePrompt } from '../../edge/loop/decoder-loop.ts';
import { integerFlag, parseFlags } from '../cli-support.ts';
import { InProcessScorer, ShimScorer } from '../lab/cloud-scorer.ts';
import { teacherForce } from '../lab/teacher-forcing.ts';
import { readTextCorpus } from '../lab/text-corpus.ts';
import { buildDemoPacks } from '../models/demo.ts';

export const USAGE = `bench scoring [--documents N] [--rounds R] [--edge-model PACK] [--cloud-model PACK] [--cloud HOST:PORT] [--json]
      teacher forcing of N documents with the cloud in this process and through a shim's Score call (one on
      loopback, or --cloud), alternating rounds: seconds each, their ratio, Score calls against windows`;

export interface ScoringBenchResult {
  documents: number;
  positions: number;
  rounds: number;
  in_process_s: number;
  through_shim_s: number;
  /** through_shim_s / in_process_s, each side's median round. */
  ratio: number;
  /** Score calls of one round, and the windows its documents hold: equal when each window is one call. */
  score_calls_per_round: number;
  windows: number;
  shim: string;
  targets: { ratio_at_most_2: boolean; one_call_per_window: boolean };
}

export async function runScoringBench(o: {
  documents: number;
  rounds: number;
  edgeModel: string;
  cloudModel: string;
  cloud?: string;
}): Promise<ScoringBenchResult> {
  const edgePack = loadModelPack(o.edgeModel);
  const tokenizer = await TextTokenizer.fromPack(edgePack.dir);
  const paragraphs = readTextCorpus(DEMO.tinyStories).paragraphs.slice(0, o.documents);
  const edgeModel = await DecoderModel.load(edgePack);
  const cloudModel = await DecoderModel.load(loadModelPack(o.cloudModel));
  let shim: ShimServer | undefined;
  let remote: ShimScorer | undefined;
  try {
    if (!o.cloud) {
      // Threads as the in-process side has them (onnxruntime's choice), so the two sides differ by the hop alone.
      shim = await startShim(shimConfig({ host: '127.0.0.1', port: 0, modelPack: o.cloudModel, logLevel: 'silent', prefixCacheMb: 0 }), { log: silentLogger });
    }
    remote = await ShimScorer.connect({ address: o.cloud ?? shim!.address });
    const local = new InProcessScorer(cloudModel);
    const window = Math.min(edgePack.maxPositions, remote.maxContext);
    const windows = paragraphs.reduce((n, p) => n + Math.ceil((encodePrompt({ edgeModel, tokenizer }, p).length - 1) / (window - 1)), 0);
    const timed = async (scorer: InProcessScorer | ShimScorer) => {
      const started = performance.now();
      const forced = await teacherForce({ edgeModel, cloud: scorer, tokenizer, paragraphs });
      return { seconds: (performance.now() - started) / 1000, positions: forced.count };
    };
    // One untimed round each: sessions, threads and the channel warm.
    await timed(local);
    await timed(remote);
    const localRounds: number[] = [];
    const remoteRounds: number[] = [];
    let positions = 0;
    let callsBefore = remote.calls;
    let callsPerRound = 0;
    for (let r = 0; r < o.rounds; r++) {
      localRounds.push((await timed(local)).seconds);
      const through = await timed(remote);
      remoteRounds.push(through.seconds);
      positions = through.positions;
      callsPerRound = remote.calls - callsBefore;
      callsBefore = remote.calls;
    }
    const inProcess = median(localRounds);
    const throughShim = median(remoteRounds);
    const ratio = throughShim / inProcess;
    return {
      documents: paragraphs.length,
      positions,
      rounds: o.rounds,
      in_process_s: round(inProcess, 3),
      through_shim_s: round(throughShim, 3),
      ratio: round(ratio, 3),
      score_calls_per_round: callsPerRound,
      windows,
      shim: remote.description,
      targets: { ratio_at_most_2: ratio <= 2, one_call_per_window: callsPerRound === windows },
    };
  } finally {
    remote?.close();
    await shim?.shutdown();
    await cloudModel.release();
    await edgeModel.release();
  }
}

export async function main(args: string[]): Promise<void> {
  const { values } = parseFlags(args, {
    documents: { type: 'string' },
    rounds: { type: 'string' },
    'edge-model': { type: 'string' },
    'cloud-model': { type: 'string' },
    cloud: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (values['edge-model'] === undefined || values['cloud-model'] === undefined) await buildDemoPacks(DEMO, (line) => console.error(line));
  const result = await runScoringBench({
    documents: integerFlag(values, 'documents', 40, [1, 100_000])!,
    rounds: integerFlag(values, 'rounds', 3, [1, 50])!,
    edgeModel: values['edge-model'] ?? DEMO.edgePack,
    cloudModel: values['cloud-model'] ?? DEMO.cloudPack,
    ...(values.cloud ? { cloud: values.cloud } : {}),
  });
  console.log(`teacher forcing of ${result.documents} documents (${result.positions} positions), median of ${result.rounds} alternating rounds`);
  console.log(`  cloud in process        ${result.in_process_s.toFixed(3)} s`);
  console.log(
    `  through ${result.shim}   ${result.through_shim_s.toFixed(3)} s   ${result.ratio.toFixed(2)}× (target ≤ 2: ${result.targets.ratio_at_most_2 ? 'met' : 'missed'})`,
  );
  console.log(
    `  Score calls per round   ${result.score_calls_per_round} for ${result.windows} windows (one per window: ${result.targets.one_call_per_window ? 'yes' : 'no'})`,
  );
  if (values.json) console.log(JSON.stringify(result));
}
