/**
 * Router training options small enough for a test (a minute on 2 cores at most), with one on-policy round so
 * rollouts run through the decoding loop: what the tests that compare a router trained in process with one
 * trained through a shim give both, less the cloud and the output folder.
 */
import type { TrainRouterOptions } from '../../src/tools/router/train-router-options.ts';

export function smallRouterTraining(edgeModel: string, text: string): Omit<TrainRouterOptions, 'cloudModel' | 'cloud' | 'out'> {
  return {
    edgeModel,
    text,
    trainFraction: 0.8,
    seed: 0,
    maxEpochs: 12,
    hiddenUnits: 32,
    members: 1,
    labels: 'citer',
    features: ['hidden'],
    rounds: 1,
    rolloutPrompts: 3,
    rolloutTokens: 12,
  };
}
