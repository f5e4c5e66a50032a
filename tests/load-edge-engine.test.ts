/**
 * loadEdgeEngine: the edge's parts loaded once, with every compatibility check, and a router that does
 * not fit the edge model refused with a clear message by the loader and by its users (the edge server,
 * the eval CLI, the edge bench CLI), before any generation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { startEdge } from '../src/edge/server/edge-server.ts';
import { loadEdgeEngine } from '../src/edge/server/load-edge-engine.ts';
import type { Router } from '../src/edge/routing/router.ts';
import { loadModelPack, readJsonFile } from '../src/shared/model/model-pack.ts';
import { DEMO, PROJECT_ROOT } from '../src/shared/paths.ts';
import { silentLogger } from '../src/shared/process/logger.ts';
import { readLlama2cCheckpoint } from '../src/tools/models/llama2c-checkpoint.ts';
import { writeDecoderPack } from '../src/tools/models/pack-writer.ts';
import { writeRandomRouterPack } from '../src/tools/router/random-router.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const work = mkdtempSync(join(tmpdir(), 'load-edge-engine-'));
/** A router for hidden size 32 (the demo edge model's is 64). */
const narrowRouter = join(work, 'router-hidden-32');
/** A router of the right hidden size whose token table covers 1,000 ids (the demo vocabulary has 512). */
const otherVocabularyRouter = join(work, 'router-vocabulary-1000');
/** A router that fits the demo edge model in every way. */
const fittingRouter = join(work, 'router-fits');
/** The demo edge model exported without its hidden_states output. */
const noHiddenPack = join(work, 'edge-without-hidden-states');

beforeAll(async () => {
  await ensureDemoPacks();
  const edge = loadModelPack(DEMO.edgePack);
  expect([edge.hiddenSize, edge.vocabSize]).toEqual([64, 512]);
  await writeRandomRouterPack(narrowRouter, { hiddenSize: 32, vocabSize: 512, hiddenUnits: 8, seed: 0, edgeModel: 'elsewhere', edgeModelDir: DEMO.edgePack });
  await writeRandomRouterPack(otherVocabularyRouter, {
    hiddenSize: 64,
    vocabSize: 1000,
    hiddenUnits: 8,
    seed: 0,
    edgeModel: 'elsewhere',
    edgeModelDir: DEMO.edgePack,
  });
  await writeRandomRouterPack(fittingRouter, { hiddenSize: 64, vocabSize: 512, hiddenUnits: 8, seed: 0, edgeModel: 'elsewhere', edgeModelDir: DEMO.edgePack });
  const { spec, weights } = readLlama2cCheckpoint(DEMO.edgeCheckpoint);
  await writeDecoderPack(noHiddenPack, {
    spec,
    weights,
    graph: { head: 'gemm', hiddenStatesOutput: false },
    tokenizerJson: readJsonFile(join(DEMO.edgePack, 'tokenizer.json')),
    tokenizerConfig: readJsonFile(join(DEMO.edgePack, 'tokenizer_config.json')),
    externalData: false,
    source: { tool: 'test' },
  });
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A synthetic router that records its release. */
function fakeRouter(hiddenSize: number | null): Router & { released: number } {
  return {
    info: { name: `fake:${hiddenSize}`, hiddenSize, defaultThreshold: 0.5 },
    released: 0,
    score: async () => 1,
    async release() {
      this.released++;
    },
  };
}

describe('loadEdgeEngine', () => {
  test('loads the demo edge model, its tokenizer and router; release is idempotent', async () => {
    const parts = await loadEdgeEngine({ edgeModel: DEMO.edgePack, router: DEMO.routerPack, threads: 1 });
    expect(parts.edgeModel.pack.dir).toBe(DEMO.edgePack);
    expect(parts.edgeModel.hasHiddenStates).toBe(true);
    expect(parts.router.info.name).toBe('onnx:router-stories260k-distilled-1l');
    expect(parts.router.info.hiddenSize).toBe(64);
    expect(parts.tokenizer.vocabSize).toBe(512);
    await parts.release();
    await parts.release();
  });

  test('without a router folder: the built-in top-1 scorer, which fits any edge model', async () => {
    const parts = await loadEdgeEngine({ edgeModel: DEMO.cloudPack });
    expect(parts.router.info).toEqual({ name: 'builtin:top1-probability', hiddenSize: null, defaultThreshold: 0.5 });
    await parts.release();
  });

  test('a router that fits in every way loads (token table over the edge vocabulary)', async () => {
    const parts = await loadEdgeEngine({ edgeModel: DEMO.edgePack, router: fittingRouter });
    expect(parts.router.info.hiddenSize).toBe(64);
    await parts.release();
  });

  test('a router of another hidden size is refused, naming both sizes', async () => {
    const refused = loadEdgeEngine({ edgeModel: DEMO.edgePack, router: narrowRouter });
    await expect(refused).rejects.toThrow(`router ${narrowRouter} expects hidden size 32; ${DEMO.edgePack} has 64`);
    await expect(refused).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  test('a token-reading router built over another vocabulary is refused, naming both vocabularies', async () => {
    await expect(loadEdgeEngine({ edgeModel: DEMO.edgePack, router: otherVocabularyRouter })).rejects.toThrow(
      `router ${otherVocabularyRouter} reads the proposed token over a vocabulary of 1000 ids; ${DEMO.edgePack} has 512 (router trained for another model?)`,
    );
  });

  test('a trained router on an edge model without hidden states is refused', async () => {
    await expect(loadEdgeEngine({ edgeModel: noHiddenPack, router: DEMO.routerPack })).rejects.toThrow(
      `router ${DEMO.routerPack} reads the edge model's hidden states; ${join(noHiddenPack, 'model.onnx')} has no hidden_states output`,
    );
    // The built-in scorer reads only the logits: the same model serves with it.
    const parts = await loadEdgeEngine({ edgeModel: noHiddenPack });
    expect(parts.edgeModel.hasHiddenStates).toBe(false);
    await parts.release();
  });

  test('a router the caller built is checked too, and released when refused', async () => {
    const router = fakeRouter(48);
    await expect(loadEdgeEngine({ edgeModel: DEMO.edgePack, router })).rejects.toThrow('router fake:48 expects hidden size 48');
    expect(router.released).toBe(1);
    const fits = fakeRouter(64);
    const parts = await loadEdgeEngine({ edgeModel: DEMO.edgePack, router: fits });
    expect(parts.router).toBe(fits);
    await parts.release();
    expect(fits.released).toBe(1);
  });

  test('an aborted start-up releases what was loaded and throws the reason', async () => {
    const router = fakeRouter(64);
    const controller = new AbortController();
    controller.abort(new Error('stop signal'));
    await expect(loadEdgeEngine({ edgeModel: DEMO.edgePack, router, signal: controller.signal })).rejects.toThrow('stop signal');
    expect(router.released).toBe(1);
  });
});

describe('its users refuse a router that does not fit', () => {
  test('the edge server', async () => {
    const config = parseEdgeConfig(['--port', '0', '--grpc-port', 'off', '--cloud', 'none', '--router', narrowRouter], {});
    await expect(startEdge(config, { log: silentLogger })).rejects.toThrow(`router ${narrowRouter} expects hidden size 32`);
  });

  test('the eval CLI: a non-zero exit and the message, no report', async () => {
    const proc = Bun.spawn(['bun', 'src/tools/eval/cli.ts', '--dataset', DEMO.tinyStories, '--router', otherVocabularyRouter, '--limit', '1'], {
      cwd: PROJECT_ROOT,
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(code).not.toBe(0);
    expect(stderr).toContain(`reads the proposed token over a vocabulary of 1000 ids; ${DEMO.edgePack} has 512`);
    expect(stdout).toBe('');
  });

  test('the edge bench CLI', async () => {
    const proc = Bun.spawn(['bun', 'src/tools/bench/cli.ts', 'edge', '--pack', DEMO.edgePack, '--router', narrowRouter, '--runs', '1'], {
      cwd: PROJECT_ROOT,
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(code).not.toBe(0);
    expect(stderr).toContain(`router ${narrowRouter} expects hidden size 32; ${DEMO.edgePack} has 64`);
  });
});
