import { expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeQwen2Gguf } from '../src/tools/llama-cpp-peer/gguf-qwen2.ts';
import { ensurePeerGgufs } from '../src/tools/llama-cpp-peer/llama-cpp-peer.ts';
import { PRESETS, qwenTokenizerFiles, randomWeights } from '../src/tools/models/random-model.ts';
import { dequantizeQ4_0, readGguf } from './helpers/gguf-reader.ts';

const spec = PRESETS['tiny-qwen2']!;
const weights = randomWeights(spec, 0);
const { tokenizerJson } = qwenTokenizerFiles();

function convert(type: 'F32' | 'Q4_0') {
  const dir = mkdtempSync(join(tmpdir(), 'gguf-qwen2-'));
  try {
    const path = join(dir, 'tiny.gguf');
    writeQwen2Gguf(path, spec, weights, type, tokenizerJson);
    return readGguf(new Uint8Array(readFileSync(path)));
  } finally {
    rmSync(dir, { recursive: true });
  }
}

test('the tiny Qwen2 pack as GGUF: llama.cpp tensor names, ggml shapes, matrices in the asked type and the rest F32', () => {
  const file = convert('Q4_0');
  const layer = (i: number) => [
    [`blk.${i}.attn_norm.weight`, [64], 0],
    [`blk.${i}.attn_q.weight`, [64, 64], 2],
    [`blk.${i}.attn_k.weight`, [64, 32], 2],
    [`blk.${i}.attn_v.weight`, [64, 32], 2],
    [`blk.${i}.attn_q.bias`, [64], 0],
    [`blk.${i}.attn_k.bias`, [32], 0],
    [`blk.${i}.attn_v.bias`, [32], 0],
    [`blk.${i}.attn_output.weight`, [64, 64], 2],
    [`blk.${i}.ffn_norm.weight`, [64], 0],
    [`blk.${i}.ffn_gate.weight`, [64, 128], 2],
    [`blk.${i}.ffn_up.weight`, [64, 128], 2],
    [`blk.${i}.ffn_down.weight`, [128, 64], 2],
  ];
  // Tied embeddings: no output.weight, llama.cpp reuses token_embd.
  expect(file.tensors.map((t) => [t.name, t.dims, t.type])).toEqual([
    ['token_embd.weight', [64, 151936], 2],
    ...layer(0),
    ...layer(1),
    ['output_norm.weight', [64], 0],
  ]);
  for (const t of file.tensors) expect(t.offset % 32).toBe(0);
  const meta = (key: string) => file.metadata.get(key)?.value;
  expect(meta('general.architecture')).toBe('qwen2');
  expect(meta('general.file_type')).toBe(2);
  expect([meta('qwen2.block_count'), meta('qwen2.context_length'), meta('qwen2.embedding_length'), meta('qwen2.feed_forward_length')]).toEqual([
    2, 2048, 64, 128,
  ]);
  expect([meta('qwen2.attention.head_count'), meta('qwen2.attention.head_count_kv')]).toEqual([4, 2]);
  expect(meta('qwen2.rope.freq_base')).toBe(1000000);
  expect(meta('qwen2.attention.layer_norm_rms_epsilon')).toBe(Math.fround(1e-6));
  expect([meta('tokenizer.ggml.model'), meta('tokenizer.ggml.pre')]).toEqual(['gpt2', 'qwen2']);
  const tokens = meta('tokenizer.ggml.tokens') as string[];
  const types = meta('tokenizer.ggml.token_type') as number[];
  expect(tokens.length).toBe(151936);
  expect(types.length).toBe(151936);
  expect([tokens[0], types[0]]).toEqual(['!', 1]);
  expect([tokens[151643], types[151643]]).toEqual(['<|endoftext|>', 3]);
  expect([tokens[151645], types[151645]]).toEqual(['<|im_end|>', 3]);
  expect([tokens[151935], types[151935]]).toEqual(['[PAD151935]', 4]);
  const merges = meta('tokenizer.ggml.merges') as string[];
  expect(merges[0]).toBe('Ġ Ġ');
  expect(merges.length).toBe((tokenizerJson as { model: { merges: unknown[] } }).model.merges.length);
  expect(meta('tokenizer.ggml.eos_token_id')).toBe(151645);
});

test('the conversion keeps the weights: ONNX [in, out] matrices become ggml rows of `in` values', () => {
  const file = convert('F32');
  expect(meta(file, 'general.file_type')).toBe(0);
  const floats = (name: string): Float32Array<ArrayBufferLike> => {
    const t = file.tensors.find((x) => x.name === name)!;
    const n = t.dims.reduce((a, b) => a * b, 1);
    return new Float32Array(file.bytes.slice(file.dataStart + t.offset, file.dataStart + t.offset + 4 * n).buffer);
  };
  const wk = weights.layers[1]!.wk; // [64 in, 32 out]
  const k = floats('blk.1.attn_k.weight'); // 32 rows of 64
  for (const [o, i] of [
    [0, 0],
    [0, 1],
    [5, 63],
    [31, 17],
  ] as const)
    expect(k[o * 64 + i]).toBe(wk[i * 32 + o]!);
  expect(floats('token_embd.weight')).toEqual(weights.embed);
  expect(floats('blk.0.attn_v.bias')).toEqual(weights.layers[0]!.bv!);
});

test('Q4_0 rows dequantize close to the fp32 weights they came from', () => {
  const file = convert('Q4_0');
  const t = file.tensors.find((x) => x.name === 'blk.0.ffn_down.weight')!; // 64 rows of 128
  const back = dequantizeQ4_0(file.bytes.slice(file.dataStart + t.offset, file.dataStart + t.offset + 64 * 4 * 18));
  const w = weights.layers[0]!.wDown; // [128 in, 64 out]
  let worst = 0;
  for (let o = 0; o < 64; o++) for (let i = 0; i < 128; i++) worst = Math.max(worst, Math.abs(back[o * 128 + i]! - w[i * 64 + o]!));
  // A step is at most 0.0346 / 8; an error is at most one step.
  expect(worst).toBeLessThan(0.0346 / 8 + 1e-6);
  expect(worst).toBeGreaterThan(0);
});

test('bench decode --peer: only llama.cpp, and only with --dtype', () => {
  const run = (...args: string[]) => Bun.spawnSync(['bun', 'src/tools/bench/cli.ts', 'decode', ...args], { stdout: 'pipe', stderr: 'pipe' });
  const unknown = run('--preset', 'tiny-qwen2', '--dtype', 'fp32', '--peer', 'ollama');
  expect(unknown.exitCode).not.toBe(0);
  expect(unknown.stderr.toString()).toContain('--peer: only llama.cpp is known, got "ollama"');
  const alone = run('--preset', 'tiny-qwen2', '--peer', 'llama.cpp');
  expect(alone.exitCode).not.toBe(0);
  expect(alone.stderr.toString()).toContain('--peer needs --dtype');
});

function meta(file: ReturnType<typeof readGguf>, key: string) {
  return file.metadata.get(key)?.value;
}

test('the peer GGUF files are written once per preset and type, and rewritten when their sidecar no longer matches', () => {
  const lines: string[] = [];
  const path = ensurePeerGgufs('tiny-qwen2', ['q4'], (l) => lines.push(l)).get('q4')!;
  expect(path).toEndWith('models/bench/tiny-qwen2-q4_0.gguf');
  expect(JSON.parse(readFileSync(`${path}.source.json`, 'utf8'))).toEqual({ tool: 'gguf', format: 1, preset: 'tiny-qwen2', seed: 0, type: 'Q4_0' });
  lines.length = 0;
  ensurePeerGgufs('tiny-qwen2', ['q4'], (l) => lines.push(l));
  expect(lines).toEqual([]);
  writeFileSync(`${path}.source.json`, '{}');
  ensurePeerGgufs('tiny-qwen2', ['q4'], (l) => lines.push(l));
  expect(lines).toEqual([`writing ${path} (Q4_0, once)`]);
  expect(readGguf(new Uint8Array(readFileSync(path))).tensors.length).toBe(26);
});
