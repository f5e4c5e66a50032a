/**
 * Fits the router's ensemble members side by side, one worker thread each, as many at once as the machine
 * has cores. The members are independent (their own seed, their own warm start), and the fit is plain
 * arithmetic in JS, single-threaded: in turn, three members took three times one, most of a training run.
 * Each member's result is what trainMlp returns in this thread, to the bit (a test checks it); with one
 * member or one core there is no worker at all.
 *
 * @example
 * const results = await trainMembers(train, validation, [{ ...options, seed: 0 }, { ...options, seed: 1 }], (k, e) => log(k, e.epoch));
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { MemberJob } from './member-worker.ts';
import { trainMlp, type Dataset, type EpochReport, type TrainMlpOptions, type TrainMlpResult } from './train-mlp.ts';

type MemberOptions = Omit<TrainMlpOptions, 'onEpoch'>;
type WorkerReply = { type: 'epoch'; epoch: EpochReport } | { type: 'done'; result: TrainMlpResult } | { type: 'failed'; message: string };

/** Runs one member in a worker thread. */
function inWorker(job: MemberJob, onEpoch: (e: EpochReport) => void): Promise<TrainMlpResult> {
  const worker = new Worker(new URL('./member-worker.ts', import.meta.url));
  return new Promise<TrainMlpResult>((resolve, reject) => {
    worker.on('message', (reply: WorkerReply) => {
      if (reply.type === 'epoch') onEpoch(reply.epoch);
      else if (reply.type === 'done') resolve(reply.result);
      else reject(new Error(`router member training failed: ${reply.message}`));
    });
    worker.on('error', reject);
    worker.on('exit', (code) => reject(new Error(`router member training worker exited (${code}) before its result`)));
    worker.postMessage(job);
  }).finally(() => void worker.terminate());
}

/** Fits one member per entry of `members`, at most `parallel` at a time (default: the machine's cores). */
export async function trainMembers(
  train: Dataset,
  validation: Dataset,
  members: readonly MemberOptions[],
  onEpoch: (member: number, e: EpochReport) => void = () => {},
  parallel = availableParallelism(),
): Promise<TrainMlpResult[]> {
  if (members.length === 1 || parallel <= 1) {
    return members.map((options, k) => trainMlp(train, validation, { ...options, onEpoch: (e) => onEpoch(k, e) }));
  }
  const results: TrainMlpResult[] = new Array(members.length);
  let next = 0;
  const lane = async () => {
    while (next < members.length) {
      const k = next++;
      results[k] = await inWorker({ train, validation, options: members[k]! }, (e) => onEpoch(k, e));
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, members.length) }, lane));
  return results;
}
