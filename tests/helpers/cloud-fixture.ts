/**
 * Shared setup for the cloud tests: the real stories260K cloud pack, an in-process shim on a loopback
 * port, step requests shaped like the decoding loop's, and a reference greedy decode run directly on a
 * DecoderSequence.
 */
import { shimConfig, type ShimConfig } from '../../src/cloud/config.ts';
import { silentLogger } from '../../src/shared/process/logger.ts';
import { startShim, type ShimDependencies, type ShimServer } from '../../src/cloud/shim-server.ts';
import type { TokenSource } from '../../src/shared/contract/contract-vocabulary.ts';
import type { CloudStepRequest } from '../../src/edge/cloud/cloud-client.ts';
import { DecoderModel } from '../../src/shared/model/decoder-model.ts';
import { argmax } from '../../src/shared/model/logits.ts';
import { loadModelPack } from '../../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../../src/shared/text/tokenizer.ts';
import { ensureDemoPacks } from './demo-packs.ts';

export async function cloudPackDir(): Promise<string> {
  return (await ensureDemoPacks()).cloudPack;
}

/** The cloud model and its tokenizer, loaded directly (the reference the shim is compared with). */
export async function loadCloudModel(): Promise<{ model: DecoderModel; tokenizer: TextTokenizer; dir: string }> {
  const dir = await cloudPackDir();
  const [model, tokenizer] = await Promise.all([DecoderModel.load(loadModelPack(dir)), TextTokenizer.fromPack(dir)]);
  return { model, tokenizer, dir };
}

/**
 * A shim on a loopback port over the embedded cloud pack. Its prefix cache is off unless `overrides` says
 * otherwise: the tests that count `cachedTokens` check what a session's own cache and its stream carried.
 */
export async function startTestShim(overrides: Partial<ShimConfig> = {}, deps: ShimDependencies = {}): Promise<ShimServer> {
  const modelPack = await cloudPackDir();
  return startShim(shimConfig({ host: '127.0.0.1', port: 0, logLevel: 'silent', modelPack, prefixCacheMb: 0, ...overrides }), { log: silentLogger, ...deps });
}

/** Greedy continuation of `context` by `count` tokens, on a fresh KV cache (no shim involved). */
export async function greedyReference(model: DecoderModel, context: readonly number[], count: number): Promise<number[]> {
  const sequence = model.newSequence();
  try {
    let { logits } = await sequence.append(context);
    const out: number[] = [];
    for (let i = 0; i < count; i++) {
      const id = argmax(logits);
      out.push(id);
      if (i + 1 < count) logits = (await sequence.append([id])).logits;
    }
    return out;
  } finally {
    sequence.dispose();
  }
}

/** Logits after `context`, on a fresh KV cache. */
export async function referenceLogits(model: DecoderModel, context: readonly number[]): Promise<Float32Array> {
  const sequence = model.newSequence();
  try {
    return (await sequence.append(context)).logits;
  } finally {
    sequence.dispose();
  }
}

/** A generation's context as the decoding loop keeps it. */
export class EdgeContext {
  readonly ids: number[];
  readonly sources: TokenSource[];

  constructor(prompt: readonly number[] = [1]) {
    this.ids = [...prompt];
    this.sources = prompt.map(() => 'prompt');
  }

  push(ids: readonly number[], source: TokenSource): void {
    for (const id of ids) {
      this.ids.push(id);
      this.sources.push(source);
    }
  }

  step(overrides: Partial<CloudStepRequest> = {}): CloudStepRequest {
    return {
      context: this.ids,
      sources: this.sources,
      tokenIndex: this.ids.length - 1,
      maxTokens: 1,
      temperature: 0,
      topP: 1,
      stopTokenIds: [2],
      routerScore: 0.25,
      threshold: 0.5,
      topLogprobs: 0,
      ...overrides,
    };
  }
}

/** Polls `condition` until it holds or `timeoutMs` passes. */
export async function waitFor(condition: () => boolean, timeoutMs = 3_000, what = 'condition'): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > until) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(5);
  }
}

/** The AppError code a promise rejects with. */
export async function rejectionCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (e) {
    return (e as { code?: string }).code ?? `not an AppError: ${String(e)}`;
  }
  return 'resolved';
}
