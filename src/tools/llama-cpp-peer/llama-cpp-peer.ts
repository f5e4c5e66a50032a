/**
 * `bench decode --peer llama.cpp`: the same random weights as GGUF (F32, Q8_0, Q4_0), decoded by llama.cpp
 * through node-llama-cpp under node, with our thread count, prompt and step counts, in rounds alternating
 * with ours (bench/decode-peer.ts). node-llama-cpp is a
 * benchmark-only peer, not a dependency: it is installed on first use into a cache folder (a large download),
 * and its prebuilt CPU binary is loaded (`build: "never"`), so nothing is compiled here.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { AppError } from '../../shared/errors.ts';
import { MODELS_DIR } from '../../shared/paths.ts';
import { PRESETS, qwenTokenizerFiles, randomWeights } from '../models/random-model.ts';
import type { BenchDtype } from '../bench/decode-packs.ts';
import { LineProcess } from '../bench/line-process.ts';
import { writeQwen2Gguf } from './gguf-qwen2.ts';
import type { GgmlTypeName } from './gguf-writer.ts';

/** Pinned so that every run times the same llama.cpp. */
export const NODE_LLAMA_CPP_VERSION = '3.22.1';
/** Raised when what gguf-qwen2.ts writes changes, so that files written before are rewritten. */
const GGUF_FORMAT = 1;
export const NODE_LLAMA_CPP_DIR = join(homedir(), '.cache', 'edge-token-router', 'node-llama-cpp');

/** Our weight type → llama.cpp's at the same bit width. */
export const PEER_TYPES: Record<BenchDtype, GgmlTypeName> = { fp32: 'F32', int8: 'Q8_0', q4: 'Q4_0' };

export interface PeerResult {
  dtype: 'f32' | 'q8_0' | 'q4_0';
  ms_per_token: number;
  ms_per_token_p90: number;
  /** The fastest step. */
  min_ms_per_token: number;
  tokens_per_second: number;
  /** Prompt evaluation plus the first token. */
  prefill_ms: number;
  threads: number;
  gguf: string;
  /** Each round's median, in the order the rounds ran. */
  rounds_ms_per_token: number[];
}

export interface LlamaCppDecodeOptions {
  gguf: string;
  threads: number;
  promptIds: number[];
  /** Warm-up and measured steps that will be asked for: the context holds the prompt and them. */
  plannedSteps: number;
  log: (line: string) => void;
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) =>
      d
        .split('\n')
        .filter(Boolean)
        .forEach((l) => log(`  ${l}`)),
    );
    child.on('error', (e) =>
      reject(new AppError('FAILED_PRECONDITION', `could not start ${command} (the llama.cpp peer needs node and npm on PATH): ${e.message}`)),
    );
    child.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new AppError('INTERNAL', `${command} ${args[0]} exited with ${code}: ${out.trim().split('\n').at(-1) ?? ''}`)),
    );
  });
}

/** node-llama-cpp in the cache folder, installed with npm the first time. */
export async function ensureNodeLlamaCpp(log: (line: string) => void): Promise<string> {
  if (!existsSync(join(NODE_LLAMA_CPP_DIR, 'node_modules', 'node-llama-cpp', 'package.json'))) {
    mkdirSync(NODE_LLAMA_CPP_DIR, { recursive: true });
    log(`installing node-llama-cpp@${NODE_LLAMA_CPP_VERSION} into ${NODE_LLAMA_CPP_DIR} (once, about 700 MB)`);
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefix', NODE_LLAMA_CPP_DIR, `node-llama-cpp@${NODE_LLAMA_CPP_VERSION}`], process.env, log);
  }
  return NODE_LLAMA_CPP_DIR;
}

/** The preset's seed-0 random weights (those of its bench pack) as GGUF files, written once per type. */
export function ensurePeerGgufs(preset: string, dtypes: BenchDtype[], log: (line: string) => void): Map<BenchDtype, string> {
  const spec = PRESETS[preset];
  if (!spec) throw new AppError('INVALID_ARGUMENT', `unknown preset ${preset}`);
  const paths = new Map(dtypes.map((d) => [d, join(MODELS_DIR, 'bench', `${preset}-${PEER_TYPES[d].toLowerCase()}.gguf`)] as const));
  // A file is reused only while its sidecar records the same source and writer format.
  const source = (d: BenchDtype) => JSON.stringify({ tool: 'gguf', format: GGUF_FORMAT, preset, seed: 0, type: PEER_TYPES[d] });
  const upToDate = (d: BenchDtype) =>
    existsSync(paths.get(d)!) && existsSync(`${paths.get(d)}.source.json`) && readFileSync(`${paths.get(d)}.source.json`, 'utf8') === source(d);
  const missing = dtypes.filter((d) => !upToDate(d));
  if (missing.length) {
    mkdirSync(join(MODELS_DIR, 'bench'), { recursive: true });
    const weights = randomWeights(spec, 0);
    const { tokenizerJson } = qwenTokenizerFiles();
    for (const d of missing) {
      log(`writing ${paths.get(d)} (${PEER_TYPES[d]}, once)`);
      writeQwen2Gguf(paths.get(d)!, spec, weights, PEER_TYPES[d], tokenizerJson);
      writeFileSync(`${paths.get(d)}.source.json`, source(d));
    }
  }
  return paths;
}

/**
 * llama.cpp loaded on one GGUF in a node child process, the prompt evaluated, waiting for the rounds that
 * `bench decode --peer` alternates with ours (llama-cpp-runner.mjs, over line-process.ts's protocol).
 * @example
 * const { helper, ready } = await startLlamaCppDecode({ gguf, threads: 2, promptIds, plannedSteps: 36, log });
 * const { stepsMs } = await helper.request<{ stepsMs: number[] }>({ type: 'round', steps: 8 });
 */
export async function startLlamaCppDecode(o: LlamaCppDecodeOptions): Promise<{ helper: LineProcess; ready: { prefillMs: number; threads: number } }> {
  const dir = await ensureNodeLlamaCpp(o.log);
  const request = { modelPath: o.gguf, threads: o.threads, promptIds: o.promptIds, plannedSteps: o.plannedSteps };
  const { helper, ready } = await LineProcess.start({
    command: ['node', join(import.meta.dir, 'llama-cpp-runner.mjs'), JSON.stringify(request)],
    name: `llama.cpp on ${o.gguf}`,
    env: { ...process.env, NODE_LLAMA_CPP_DIR: dir },
    log: o.log,
  });
  return { helper, ready: { prefillMs: Number(ready.prefillMs), threads: Number(ready.threads) } };
}
