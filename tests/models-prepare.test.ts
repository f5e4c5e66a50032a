/**
 * `models prepare` on hub downloads laid out the hub's way (helpers/hub-downloads.ts: the real stories260K
 * exports in onnx/, config and tokenizer files at the top): a decoder optimize knows becomes a fused pack
 * that the edge's loader takes and that gives the export's greedy ids (transformers' for the 5-layer
 * model) with logits within LOGIT_TOLERANCE; --dtype quantizes it exactly as `models quantize` does; other
 * exports keep their files, with hidden_states, and the same logits bit for bit; what is missing is named
 * with where it comes from, and leaves nothing at --out; --cloud-only makes a pack the shim starts on with
 * an HTTP backend.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseShimConfig } from '../src/cloud/config.ts';
import { startShim } from '../src/cloud/shim-server.ts';
import { loadEdgeEngine } from '../src/edge/server/load-edge-engine.ts';
import { DataType, GraphBuilder, valueInfo } from '../src/shared/model/onnx-graph.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { inspectPath } from '../src/tools/models/inspect-model.ts';
import { readModel, writeModel } from '../src/tools/models/onnx-file.ts';
import { optimizeHubExport } from '../src/tools/models/optimize.ts';
import { preparePack } from '../src/tools/models/prepare.ts';
import { quantizePack } from '../src/tools/models/quantize.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { addProjectionBiases, editedHub, untieLmHead } from './helpers/edited-hub-exports.ts';
import { greedyRun, greedyRunOfPack, maxStepDiff } from './helpers/greedy-run.ts';
import { hubExport, layOutHubDownload } from './helpers/hub-downloads.ts';

/** [BOS] "Once upon a time" in the stories260K tokenizer, the MANIFEST's prompt. */
const PROMPT_IDS = [1, 403, 407, 261, 378];
/** transformers' greedy continuation of PROMPT_IDS with the 5-layer model (MANIFEST.md). */
const TRANSFORMERS_5L = [432, 383, 286, 261, 376, 298, 315, 421, 395, 317];
/**
 * The fused pack vs the export it was rebuilt from, largest absolute logit difference over 10 greedy
 * steps: the same float32 weights with the arithmetic in another order, as in models-optimize.test.ts
 * (measured here 1.0e-5 for the 5-layer model, 9.5e-6 for the edited Qwen2 one).
 */
const LOGIT_TOLERANCE = 1e-4;
const TEMPLATE = '{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}';

const work = mkdtempSync(join(tmpdir(), 'models-prepare-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const listing = (dir: string) => readdirSync(dir).sort();
/** Folders optimize, quantize or the atomic writer left behind (there must be none). */
const partials = () => readdirSync(work).filter((f) => f.includes('.partial-'));

describe('a Llama hub download (stories260k-hf: onnx/ with all four files, model.onnx_data, a chat template)', () => {
  let hub: string;
  const out = join(work, 'llama-pack');
  beforeAll(() => {
    hub = layOutHubDownload(work, 'llama-hub', { from: hubExport('stories260k-hf'), chatTemplate: TEMPLATE, externalData: ['model.onnx'] });
  });

  test("the fused layout from model.onnx; the hub's other files left out; config, tokenizer and chat template along", async () => {
    const r = await preparePack({ input: hub, output: out });
    expect(r.layout).toBe('fused');
    expect(r.layout === 'fused' && r.optimized.modelPath).toBe(join(hub, 'onnx', 'model.onnx'));
    expect(r.leftOut.map((l) => l.file)).toEqual(['model_fp16.onnx', 'model_q4.onnx', 'model_quantized.onnx']);
    expect(listing(out)).toEqual([
      'chat_template.jinja',
      'config.json',
      'generation_config.json',
      'model.onnx',
      'pack-source.json',
      'tokenizer.json',
      'tokenizer_config.json',
      'written-by.json',
    ]);
    const ops = Object.fromEntries(inspectPath(out)[0]!.opCounts.map((o) => [o.opType, o.count]));
    expect(ops['com.microsoft.GroupQueryAttention']).toBe(5);
    expect(readFileSync(join(out, 'tokenizer.json'))).toEqual(readFileSync(join(hub, 'tokenizer.json')));
    expect((await TextTokenizer.fromPack(out)).chatTemplate).toBe(TEMPLATE);
    expect(JSON.parse(readFileSync(join(out, 'pack-source.json'), 'utf8'))).toMatchObject({
      tool: 'prepare',
      layout: 'fused',
      from: { tool: 'optimize', layout: 'fused' },
    });
  });

  test(`the edge's loader takes it: the tokenizer encodes the prompt, transformers' greedy ids, logits within ${LOGIT_TOLERANCE} of the export`, async () => {
    const parts = await loadEdgeEngine({ edgeModel: out, threads: 1 });
    try {
      expect(parts.tokenizer.encode('Once upon a time', { addBos: true })).toEqual(PROMPT_IDS);
      const prepared = await greedyRun(parts.edgeModel, PROMPT_IDS, TRANSFORMERS_5L.length);
      const exported = await greedyRunOfPack(hubExport('stories260k-hf'), 'model.onnx', PROMPT_IDS, TRANSFORMERS_5L.length);
      expect(prepared.ids).toEqual(TRANSFORMERS_5L);
      expect(exported.ids).toEqual(TRANSFORMERS_5L);
      expect(maxStepDiff(prepared.logits, exported.logits)).toBeLessThan(LOGIT_TOLERANCE);
      expect(parts.edgeModel.hasHiddenStates).toBe(true);
    } finally {
      await parts.release();
    }
  });
});

describe.each(['q4', 'int8'] as const)('--dtype %s (stories260k-3l-hf)', (dtype) => {
  test('the fused model.onnx quantized byte for byte as optimize + quantize by hand, and the edge runs it', async () => {
    const hub = layOutHubDownload(work, `hub-3l-${dtype}`, { from: hubExport('stories260k-3l-hf') });
    const out = join(work, `pack-3l-${dtype}`);
    const r = await preparePack({ input: hub, output: out, dtype });
    expect(r.layout === 'fused' && r.quantized?.dtype).toBe(dtype);
    const byHand = join(work, `by-hand-3l-${dtype}`);
    await optimizeHubExport({ input: hub, output: `${byHand}-fp32` });
    await quantizePack({ input: `${byHand}-fp32`, output: byHand, dtype });
    expect(readFileSync(join(out, 'model.onnx'))).toEqual(readFileSync(join(byHand, 'model.onnx')));
    expect(JSON.parse(readFileSync(join(out, 'pack-source.json'), 'utf8'))).toMatchObject({
      tool: 'prepare',
      dtype,
      from: { tool: 'quantize', dtype, from: { tool: 'optimize' } },
    });
    const ops = Object.fromEntries(inspectPath(out)[0]!.opCounts.map((o) => [o.opType, o.count]));
    expect([ops['com.microsoft.GroupQueryAttention'], ops['com.microsoft.MatMulNBits']]).toEqual([3, 3 * 4 + 1]);
    const run = await greedyRunOfPack(out, 'model.onnx', PROMPT_IDS, 2);
    expect(run.ids.every((id) => id >= 0 && id < 512)).toBe(true);
  });
});

test(`a Qwen2 export (q/k/v biases, untied LM head) in onnx/: the fused path, the export's greedy ids, logits within ${LOGIT_TOLERANCE}`, async () => {
  const edited = editedHub(work, 'qwen2-edited', {
    modelFrom: 'stories260k-3l-hf',
    config: (c) => Object.assign(c, { model_type: 'qwen2', architectures: ['Qwen2ForCausalLM'], tie_word_embeddings: false }),
    graph: (m) => {
      addProjectionBiases(m, ['q', 'k', 'v']);
      untieLmHead(m);
    },
  });
  const hub = layOutHubDownload(work, 'qwen2-hub', { from: edited, files: ['model.onnx'] });
  const out = join(work, 'qwen2-pack');
  const r = await preparePack({ input: hub, output: out });
  expect(r.layout === 'fused' && [r.optimized.spec.modelType, r.optimized.spec.qkvBias, r.optimized.spec.tieEmbeddings]).toEqual(['qwen2', true, false]);
  const [exported, prepared] = [await greedyRunOfPack(edited, 'model.onnx', PROMPT_IDS, 10), await greedyRunOfPack(out, 'model.onnx', PROMPT_IDS, 10)];
  expect(prepared.ids).toEqual(exported.ids);
  expect(maxStepDiff(prepared.logits, exported.logits)).toBeLessThan(LOGIT_TOLERANCE);
});

describe('exports optimize does not rewrite: the files as they come, hidden_states exposed in each', () => {
  test('only quantized files (q4, int8 with its weights in model_quantized.onnx_data) and one the edge refuses: both kept with hidden_states, the same logits bit for bit; the refused one left out with why', async () => {
    const hub = layOutHubDownload(work, 'quantized-hub', {
      from: hubExport('stories260k-3l-hf'),
      files: ['model_q4.onnx', 'model_quantized.onnx'],
      externalData: ['model_quantized.onnx'],
    });
    // A merged decoder's branch input: the edge cannot fill it, so the file cannot run there.
    const merged = readModel(join(hub, 'onnx', 'model_q4.onnx'));
    merged.graph!.input.push(valueInfo('use_cache_branch', DataType.BOOL, [1]));
    writeModel(merged, join(hub, 'onnx', 'decoder_model_merged.onnx'));
    const out = join(work, 'quantized-pack');
    const r = await preparePack({ input: hub, output: out });
    if (r.layout !== 'plain') throw new Error(`expected the plain layout, got ${r.layout}`);
    expect(r.whyNotFused).toBe('no model.onnx or model_fp16.onnx to rebuild (only decoder_model_merged.onnx, model_q4.onnx, model_quantized.onnx)');
    expect(r.leftOut).toEqual([{ file: 'decoder_model_merged.onnx', reason: expect.stringContaining('input use_cache_branch is not fed by the edge') }]);
    expect(r.runFile).toBe('model_q4.onnx');
    expect(listing(out)).toEqual([
      'config.json',
      'generation_config.json',
      'model_q4.onnx',
      'model_quantized.onnx',
      'model_quantized.onnx_data',
      'pack-source.json',
      'tokenizer.json',
      'tokenizer_config.json',
      'written-by.json',
    ]);
    for (const file of ['model_q4.onnx', 'model_quantized.onnx']) {
      const [exported, prepared] = [
        await greedyRunOfPack(hubExport('stories260k-3l-hf'), file, PROMPT_IDS, 4),
        await greedyRunOfPack(out, file, PROMPT_IDS, 4),
      ];
      expect(prepared.hidden[0]).toHaveLength(64);
      expect(prepared.ids).toEqual(exported.ids);
      expect(prepared.logits).toEqual(exported.logits);
    }
    const int8 = await preparePack({ input: hub, output: join(work, 'quantized-pack-int8'), dtype: 'int8' });
    expect(int8.layout === 'plain' && int8.runFile).toBe('model_quantized.onnx');
  });

  test('a pack-like folder (files at the top) of a graph not named as exporters name it: a random Qwen2 pack without hidden_states', async () => {
    const source = join(work, 'random-qwen2');
    await writeRandomPack({ preset: 'tiny-qwen2', out: source, seed: 3, hiddenStatesOutput: false });
    const reference = join(work, 'random-qwen2-hidden');
    await writeRandomPack({ preset: 'tiny-qwen2', out: reference, seed: 3, hiddenStatesOutput: true });
    const out = join(work, 'random-qwen2-pack');
    const r = await preparePack({ input: source, output: out });
    expect(r.layout === 'plain' && r.whyNotFused).toContain('no decoder layers found');
    const prompt = [151643, 9707, 11, 1879];
    const [built, prepared] = [await greedyRunOfPack(reference, 'model.onnx', prompt, 3), await greedyRunOfPack(out, 'model.onnx', prompt, 3)];
    expect(prepared.logits).toEqual(built.logits);
    expect(prepared.hidden).toEqual(built.hidden);
  });

  test('--dtype names a hub file that is not there: refused before anything is written', async () => {
    const hub = layOutHubDownload(work, 'q4-only-hub', { from: hubExport('stories260k-3l-hf'), files: ['model_q4.onnx'] });
    const output = join(work, 'q4-only-int8');
    await expect(preparePack({ input: hub, output, dtype: 'int8' })).rejects.toMatchObject({
      code: 'FAILED_PRECONDITION',
      message: expect.stringContaining(
        '--dtype int8: the fused layout cannot be built (no model.onnx or model_fp16.onnx to rebuild (only model_q4.onnx)), and',
      ),
    });
    expect(existsSync(output)).toBe(false);
    expect(partials()).toEqual([]);
  });
});

describe('what is missing is named with where it comes from; nothing is left at --out', () => {
  const from = hubExport('stories260k-3l-hf');
  const download = "download it from the model's hub repository, the same revision as the ONNX files";
  const cases: [string, (dir: string) => string, string, string][] = [
    [
      'no tokenizer.json',
      (d) => layOutHubDownload(d, 'hub', { from, without: ['tokenizer.json'] }),
      'NOT_FOUND',
      `no tokenizer.json in ${'HUB'}: ${download}; the edge and the shim turn text into ids with it`,
    ],
    [
      'no tokenizer_config.json',
      (d) => layOutHubDownload(d, 'hub', { from, without: ['tokenizer_config.json'] }),
      'NOT_FOUND',
      `no tokenizer_config.json in HUB: ${download}`,
    ],
    [
      'no config.json',
      (d) => layOutHubDownload(d, 'hub', { from, without: ['config.json'] }),
      'NOT_FOUND',
      `no config.json in HUB: ${download} (it sits at the top of the repository, beside onnx/)`,
    ],
    [
      'no ONNX file',
      (d) => layOutHubDownload(d, 'hub', { from, files: [] }),
      'NOT_FOUND',
      "no ONNX file in HUB or HUB/onnx: download the onnx/ folder of the model's hub repository",
    ],
    [
      'a Git LFS pointer instead of the model',
      (d) => lfsPointer(layOutHubDownload(d, 'hub', { from, files: ['model.onnx'] })),
      'NOT_FOUND',
      'HUB/onnx/model.onnx is a Git LFS pointer, not the file itself: fetch it',
    ],
    [
      'a model.onnx that is not ONNX',
      (d) => garbage(layOutHubDownload(d, 'hub', { from, files: ['model.onnx'] })),
      'INVALID_ARGUMENT',
      'HUB/onnx/model.onnx: not an ONNX model',
    ],
    [
      'an ONNX file that is no decoder',
      (d) => notADecoder(layOutHubDownload(d, 'hub', { from, files: [] })),
      'FAILED_PRECONDITION',
      "the edge runs none of HUB/onnx's ONNX files: model.onnx: HUB/onnx/model.onnx: not a decoder export (missing input_ids, logits)",
    ],
    [
      "another model's tokenizer",
      (d) =>
        layOutHubDownload(d, 'hub', {
          from: editedHub(d, 'small-vocab', { modelFrom: 'stories260k-3l-hf', config: (c) => (c.vocab_size = 256) }),
          files: ['model.onnx'],
        }),
      'INVALID_ARGUMENT',
      "HUB/tokenizer.json knows 512 tokens, more than config.json's vocab_size 256: it is another model's tokenizer",
    ],
  ];

  test.each(cases)('%s', async (_name, make, code, message) => {
    const dir = join(work, `missing-${readdirSync(work).length}`);
    mkdirSync(dir);
    const hub = make(dir);
    const output = join(dir, 'pack');
    await expect(preparePack({ input: hub, output })).rejects.toMatchObject({ code, message: expect.stringContaining(message.replaceAll('HUB', hub)) });
    expect(existsSync(output)).toBe(false);
    expect(readdirSync(dir).filter((f) => f !== 'hub' && f !== 'small-vocab')).toEqual([]);
  });

  test('everything missing at once: one error naming each file', async () => {
    const hub = join(work, 'empty-hub');
    mkdirSync(hub);
    const error = await preparePack({ input: hub, output: join(work, 'empty-pack') }).then(
      () => new Error('prepared'),
      (e: Error) => e,
    );
    expect(error.message.split('; no ').length).toBe(4);
    for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'ONNX file']) expect(error.message).toContain(`no ${f} in ${hub}`);
  });

  test('--out naming the hub folder or its onnx/ is refused and both stay as they were', async () => {
    const hub = layOutHubDownload(work, 'own-output-hub', { from, files: ['model.onnx'] });
    for (const output of [hub, join(hub, 'onnx')]) {
      await expect(preparePack({ input: hub, output })).rejects.toThrow(`--out ${output} holds the hub folder being read`);
    }
    expect(listing(join(hub, 'onnx'))).toEqual(['model.onnx']);
  });
});

describe("--cloud-only: the shim's pack for an HTTP backend", () => {
  test("a download without ONNX (as a large model's repository is): config, tokenizer files and chat template only; the shim starts on it with sglang and openai", async () => {
    const hub = layOutHubDownload(work, 'cloud-hub', { from: hubExport('stories260k-hf'), files: [], chatTemplate: TEMPLATE });
    const out = join(work, 'cloud-pack');
    const r = await preparePack({ input: hub, output: out, cloudOnly: true });
    expect(r.layout).toBe('cloud-only');
    expect(listing(out)).toEqual([
      'chat_template.jinja',
      'config.json',
      'generation_config.json',
      'pack-source.json',
      'tokenizer.json',
      'tokenizer_config.json',
      'written-by.json',
    ]);
    for (const backend of [
      ['--backend', 'sglang'],
      ['--backend', 'openai', '--openai-retokenize'],
    ]) {
      const config = parseShimConfig(
        [...backend, '--backend-url', 'http://127.0.0.1:9', '--model-pack', out, '--port', '0', '--host', '127.0.0.1', '--log-level', 'silent'],
        {},
      );
      const shim = await startShim(config);
      try {
        expect([shim.backend.info.vocabSize, shim.backend.info.maxContext]).toEqual([512, 512]);
      } finally {
        await shim.shutdown();
      }
    }
  });

  test('a download with ONNX files: they are left out; --dtype is refused', async () => {
    const hub = layOutHubDownload(work, 'cloud-hub-onnx', { from: hubExport('stories260k-3l-hf'), files: ['model.onnx'] });
    const r = await preparePack({ input: hub, output: join(work, 'cloud-pack-onnx'), cloudOnly: true });
    expect(r.leftOut).toEqual([{ file: 'model.onnx', reason: 'the HTTP backend runs the model' }]);
    expect(readdirSync(join(work, 'cloud-pack-onnx')).filter((f) => f.endsWith('.onnx'))).toEqual([]);
    await expect(preparePack({ input: hub, output: join(work, 'cloud-q4'), cloudOnly: true, dtype: 'q4' })).rejects.toThrow('--dtype applies to an edge pack');
  });
});

test('bun run models prepare: the summary and the edge command; a refusal on stderr with exit code 1', async () => {
  const run = async (args: string[]) => {
    const child = Bun.spawn(['bun', 'run', 'models', 'prepare', ...args], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe', timeout: 60_000 });
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    return { stdout, stderr, code };
  };
  const hub = layOutHubDownload(work, 'cli-hub', { from: hubExport('stories260k-3l-hf') });
  const out = join(work, 'cli-pack');
  const ok = await run([hub, '--out', out]);
  expect(ok.code).toBe(0);
  expect(ok.stdout).toContain(`wrote ${out} (fused layout) from ${join(hub, 'onnx', 'model.onnx')}`);
  expect(ok.stdout).toContain(
    'left out model_fp16.onnx, model_q4.onnx, model_quantized.onnx: plain graphs; the fused model.onnx, rebuilt from model.onnx, runs instead (--dtype q4|int8 quantizes it)',
  );
  // --router builtin: no router was trained for this pack, and the default (the demo's) is refused on it.
  expect(ok.stdout).toEndWith(
    `run the edge with it (the edge model's own top-1 probability as the router):\n  bun run edge -- --edge-model ${out} --router builtin\n` +
      `or train a router for it first, then pass --router DIR:\n  bun run router train --edge-model ${out} (--cloud-model PACK | --cloud HOST:PORT) --text FILE --out DIR\n`,
  );
  rmSync(join(hub, 'tokenizer.json'));
  const refused = await run([hub, '--out', join(work, 'cli-refused')]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(`no tokenizer.json in ${hub}: download it from the model's hub repository`);
  expect(existsSync(join(work, 'cli-refused'))).toBe(false);
  const usage = await run(['--help']);
  expect([usage.code, usage.stdout.includes('prepare HUB_FOLDER --out PACK [--dtype q4|int8] [--cloud-only]')]).toEqual([0, true]);
});

function lfsPointer(hub: string): string {
  writeFileSync(join(hub, 'onnx', 'model.onnx'), 'version https://git-lfs.github.com/spec/v1\noid sha256:bd1a8282c74bde6f\nsize 1378552\n');
  return hub;
}

function garbage(hub: string): string {
  writeFileSync(join(hub, 'onnx', 'model.onnx'), Buffer.from('<html>rate limited</html>'));
  return hub;
}

/** onnx/model.onnx holding y = x + 1: readable, but no decoder. */
function notADecoder(hub: string): string {
  const g = new GraphBuilder('not-a-decoder');
  const x = g.input('x', DataType.FLOAT, [1, 1, 8]);
  g.output(g.op('Add', [x, g.floats('one', [1], [1])]), 'y', DataType.FLOAT, [1, 1, 8]);
  writeModel(g.toModel(), join(hub, 'onnx', 'model.onnx'));
  return hub;
}
