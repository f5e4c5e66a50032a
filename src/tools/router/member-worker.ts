/**
 * One ensemble member's fit in a worker thread (member-training.ts): the datasets and options arrive in
 * one message, each epoch's figures go back as they come, then the result.
 */
import { parentPort } from 'node:worker_threads';
import { trainMlp, type Dataset, type TrainMlpOptions } from './train-mlp.ts';

export interface MemberJob {
  train: Dataset;
  validation: Dataset;
  options: Omit<TrainMlpOptions, 'onEpoch'>;
}

parentPort?.on('message', (job: MemberJob) => {
  try {
    const result = trainMlp(job.train, job.validation, { ...job.options, onEpoch: (epoch) => parentPort!.postMessage({ type: 'epoch', epoch }) });
    parentPort!.postMessage({ type: 'done', result });
  } catch (e) {
    parentPort!.postMessage({ type: 'failed', message: e instanceof Error ? e.message : String(e) });
  }
});
