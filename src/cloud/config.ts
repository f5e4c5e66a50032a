/**
 * The shim's configuration, parsed once from (lowest to highest precedence) defaults, an optional JSON
 * file, `SHIM_*` environment variables and command-line flags into one frozen, validated object that is
 * handed to every component. Nothing else in the shim reads `process.env`.
 *
 * Every option has one spelling per source, derived from its key: key `backendUrl` is `--backend-url`,
 * `SHIM_BACKEND_URL`, and `"backendUrl"` in the JSON file (`--config FILE` / `SHIM_CONFIG`).
 *
 * @example
 * const config = parseShimConfig(process.argv.slice(2), process.env);
 * config.backend; // 'embedded'
 */
import { relative } from 'node:path';
import { loadOptions, optionsUsage, type OptionSpec } from '../shared/process/config-loader.ts';
import { AppError } from '../shared/errors.ts';
import { parseExecutionProviders } from '../shared/model/execution-providers.ts';
import { MODEL_THREADS, type ModelThread } from '../shared/model/model-session.ts';
import { DEMO, PROJECT_ROOT } from '../shared/paths.ts';

export type BackendKind = 'embedded' | 'sglang' | 'openai';

export interface ShimConfig {
  host: string;
  port: number;
  backend: BackendKind;
  /** The embedded backend's model pack; for every backend the tokenizer that turns ids into reply text. */
  modelPack: string | undefined;
  /** Which ONNX file of the pack the embedded backend runs (a hub folder holds several variants). */
  modelFile: string;
  /** onnxruntime threads per forward pass (embedded); 0 = onnxruntime's choice. */
  threads: number;
  /** onnxruntime execution providers of the embedded backend, in order of preference, e.g. `cuda,cpu`. */
  executionProvider: string;
  /** Where the embedded model's forward passes run: a worker thread of their own, or the JavaScript thread (blocked while they run). */
  modelThread: ModelThread;
  /** KV caches the embedded backend keeps; the least recently used session beyond it is re-prefilled later. */
  maxLiveSequences: number;
  /** Megabytes of KV the embedded backend keeps from ended sessions for new ones whose context starts alike; 0 = off. */
  prefixCacheMb: number;
  /** Most sessions whose steps share one forward pass of the embedded model; 1 = each alone. */
  maxBatch: number;
  /** Most context tokens a step may append and still share a pass of the embedded model (plain-layout packs); 1 = one-token steps only. */
  batchAppendTokens: number;
  /** Base URL of the SGLang or OpenAI-compatible server. */
  backendUrl: string | undefined;
  /** `model` field of OpenAI-compatible requests. */
  backendModel: string;
  /** Bearer token the shim sends to the backend server. */
  backendApiKey: string | undefined;
  /** Upper bound of one backend call; the edge's own step deadline lowers it per session. */
  backendTimeoutMs: number;
  /** Retries of a backend call that failed to connect (never after a response started). */
  backendRetries: number;
  /** Ask HTTP backends for streaming replies (`data:` lines) instead of one JSON body. */
  backendStream: boolean;
  /** Vocabulary size for validating ids with HTTP backends (the model pack's when absent). */
  vocabSize: number | undefined;
  /** Context window for HTTP backends (the model pack's when absent). */
  maxContext: number | undefined;
  /** OpenAI backend: when the server returns text only, re-tokenize it with the pack's tokenizer (lossy). */
  openaiRetokenize: boolean;
  maxSessions: number;
  /** Total context tokens over all sessions. */
  maxContextTokens: number;
  sessionIdleMs: number;
  /** Most tokens one step may ask for. */
  maxSpanTokens: number;
  /** Most alternatives per token one session may ask for. */
  maxTopLogprobs: number;
  /**
   * Most backend calls at once over all sessions; further steps wait in arrival order, and one that would miss
   * its deadline is refused as overloaded (step-admission.ts). 0 = the backend's default (`maxInflightStepsFor`).
   */
  maxInflightSteps: number;
  /** gRPC message size limit, both directions. */
  maxMessageBytes: number;
  /** When set, every CloudRouter call must carry `authorization: Bearer <token>`. */
  authToken: string | undefined;
  /** TLS: certificate and key of the server; with `tlsClientCa`, clients must present a certificate (mTLS). */
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  tlsClientCa: string | undefined;
  /** How long SIGTERM waits for streams to finish before cutting them. */
  shutdownGraceMs: number;
  logLevel: 'silent' | 'error' | 'info' | 'debug';
  /**
   * Lets the log carry request content: the token ids and text of each step at debug, and what error
   * messages quote (a backend's error body, a malformed reply). Off, the log has lengths, counts and codes only.
   */
  logText: boolean;
}

/** The default of --max-inflight-steps for HTTP backends: the default --max-sessions, one step in flight per session. */
export const HTTP_BACKEND_INFLIGHT_STEPS = 64;

const OPTIONS: Record<keyof ShimConfig, OptionSpec> = {
  host: { kind: 'string', help: 'address to listen on' },
  port: { kind: 'int', min: 0, help: 'port (0 = any free port)' },
  backend: { kind: 'enum', values: ['embedded', 'sglang', 'openai'], help: 'where tokens come from' },
  modelPack: {
    kind: 'string',
    // Its default depends on --backend (validateShimConfig fills it in), so the usage cannot read it from DEFAULT_SHIM_CONFIG.
    help: `model pack folder (embedded model; tokenizer for reply text) (default ${relative(PROJECT_ROOT, DEMO.cloudPack)}, the demo cloud pack, with --backend embedded; none with sglang or openai)`,
  },
  modelFile: { kind: 'string', help: 'ONNX file of the pack the embedded backend runs, e.g. model_fp16.onnx' },
  threads: { kind: 'int', min: 0, help: 'onnxruntime threads per forward pass (0 = default)' },
  executionProvider: {
    kind: 'string',
    help: 'onnxruntime execution providers of the embedded backend in order of preference, e.g. cuda,cpu (ending in cpu = fall back to it)',
  },
  modelThread: {
    kind: 'enum',
    values: MODEL_THREADS,
    help: "where the embedded model's forward passes run: worker (a thread of their own, so the shim serves its gRPC calls during a pass; a fused-layout pack without new_key_values.* stays on main) or main (the JavaScript thread, blocked while a pass runs)",
  },
  maxLiveSequences: { kind: 'int', min: 1, help: 'KV caches the embedded backend keeps' },
  prefixCacheMb: {
    kind: 'int',
    min: 0,
    help: "megabytes of KV cache the embedded backend keeps from ended sessions, so a new session whose context starts like an earlier one (a chat's next turn, a shared system prompt) prefills only the rest; 0 = off",
  },
  maxBatch: { kind: 'int', min: 1, help: 'most sessions whose one-token steps share one forward pass of the embedded model (1 = each alone)' },
  batchAppendTokens: {
    kind: 'int',
    min: 1,
    help: "most context tokens a step may append (the edge's tokens since its last routed one) and still share a forward pass of the embedded model with other sessions' steps, each row padded to the longest; plain-layout packs only (1 = one-token steps only)",
  },
  backendUrl: { kind: 'string', help: 'base URL of the SGLang / OpenAI-compatible server' },
  backendModel: { kind: 'string', help: 'model name sent to OpenAI-compatible servers' },
  backendApiKey: { kind: 'string', help: 'bearer token for the backend server' },
  backendTimeoutMs: { kind: 'int', min: 1, help: 'upper bound of one backend call' },
  backendRetries: { kind: 'int', min: 0, help: 'retries after connection errors' },
  backendStream: { kind: 'bool', help: 'use streaming backend replies' },
  vocabSize: { kind: 'int', min: 1, help: 'vocabulary size for id validation (HTTP backends)' },
  maxContext: { kind: 'int', min: 1, help: 'context window (HTTP backends)' },
  openaiRetokenize: { kind: 'bool', help: 're-tokenize text-only OpenAI replies (lossy)' },
  maxSessions: { kind: 'int', min: 1, help: 'concurrent sessions' },
  maxContextTokens: { kind: 'int', min: 1, help: 'context tokens over all sessions' },
  sessionIdleMs: { kind: 'int', min: 1, help: 'idle time after which a session expires' },
  maxSpanTokens: { kind: 'int', min: 1, help: 'most tokens one step may ask for' },
  maxTopLogprobs: { kind: 'int', min: 0, help: 'most alternatives per token' },
  maxInflightSteps: {
    kind: 'int',
    min: 0,
    help: `most backend calls at once over all sessions; more steps wait in order, and one that would miss its deadline is answered "overloaded" at once. 0 = the backend's default: embedded, --max-batch (one forward pass runs at a time, so a step beyond a pass would wait for the next one inside the batcher, where it cannot be refused); sglang/openai, ${HTTP_BACKEND_INFLIGHT_STEPS} (their servers batch many requests per pass and the shim cannot know their capacity: set the measured one)`,
  },
  maxMessageBytes: { kind: 'int', min: 1024, help: 'gRPC message size limit' },
  authToken: { kind: 'string', help: 'required bearer token (prefer SHIM_AUTH_TOKEN or the config file)' },
  tlsCert: { kind: 'string', help: 'server certificate (PEM)' },
  tlsKey: { kind: 'string', help: 'server key (PEM)' },
  tlsClientCa: { kind: 'string', help: 'CA for client certificates: enables mutual TLS' },
  shutdownGraceMs: { kind: 'int', min: 0, help: 'grace period on SIGTERM' },
  logLevel: { kind: 'enum', values: ['silent', 'error', 'info', 'debug'], help: 'log verbosity' },
  logText: {
    kind: 'bool',
    help: "write request content in the log, for debugging: each step's token ids and reply text (at debug) and what error messages quote (a backend's error body, a malformed reply, an id outside the vocabulary). Off, the log holds lengths, counts and codes only, never a prompt's text or ids",
  },
};

export const DEFAULT_SHIM_CONFIG: Readonly<ShimConfig> = Object.freeze({
  host: '127.0.0.1',
  port: 50051,
  backend: 'embedded',
  modelPack: undefined,
  modelFile: 'model.onnx',
  threads: 0,
  executionProvider: 'cpu',
  // Worker: new sessions, cancellations and health checks are not held behind a running pass.
  modelThread: 'worker',
  maxLiveSequences: 32,
  // A cloud host has memory to spare next to its model; 512 MB is half a GB of reuse at any model size.
  prefixCacheMb: 512,
  maxBatch: 8,
  batchAppendTokens: 16,
  backendUrl: undefined,
  backendModel: 'default',
  backendApiKey: undefined,
  backendTimeoutMs: 30_000,
  backendRetries: 2,
  backendStream: false,
  vocabSize: undefined,
  maxContext: undefined,
  openaiRetokenize: false,
  maxSessions: 64,
  maxContextTokens: 1 << 20,
  sessionIdleMs: 5 * 60_000,
  maxSpanTokens: 64,
  maxTopLogprobs: 20,
  maxInflightSteps: 0,
  maxMessageBytes: 4 << 20,
  authToken: undefined,
  tlsCert: undefined,
  tlsKey: undefined,
  tlsClientCa: undefined,
  shutdownGraceMs: 5_000,
  logLevel: 'info',
  logText: false,
} satisfies ShimConfig);

const ENV_PREFIX = 'SHIM_';

export const SHIM_USAGE = optionsUsage(OPTIONS, DEFAULT_SHIM_CONFIG, ENV_PREFIX, 'bun run shim');

/**
 * Parses flags, environment and the optional config file into a frozen ShimConfig; throws
 * AppError('INVALID_ARGUMENT') with a message naming the source for anything it cannot accept.
 */
export function parseShimConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): Readonly<ShimConfig> {
  return validateShimConfig(loadOptions<ShimConfig>(OPTIONS, DEFAULT_SHIM_CONFIG, argv, env, ENV_PREFIX));
}

/** Cross-field checks; returns the config frozen. Also for configs built in code (tests). */
export function validateShimConfig(config: ShimConfig): Readonly<ShimConfig> {
  const fail = (message: string) => {
    throw new AppError('INVALID_ARGUMENT', message);
  };
  if (config.backend !== 'embedded' && !config.backendUrl) fail(`backend ${config.backend} needs --backend-url`);
  if (config.backendUrl) {
    try {
      const url = new URL(config.backendUrl);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') fail(`--backend-url must be http(s), got ${config.backendUrl}`);
    } catch (e) {
      if (e instanceof AppError) throw e;
      fail(`--backend-url is not a URL: ${config.backendUrl}`);
    }
  }
  if (!/^[^/\\]+\.onnx$/.test(config.modelFile)) fail(`--model-file must be a .onnx file name inside the pack folder, got ${config.modelFile}`);
  if (config.openaiRetokenize && !config.modelPack) fail('--openai-retokenize needs --model-pack (its tokenizer)');
  if (Boolean(config.tlsCert) !== Boolean(config.tlsKey)) fail('TLS needs both --tls-cert and --tls-key');
  if (config.tlsClientCa && !config.tlsCert) fail('--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key');
  if (config.port > 65535) fail(`--port must be ≤ 65535, got ${config.port}`);
  const executionProvider = parseExecutionProviders(config.executionProvider).join(',');
  return Object.freeze({ ...config, executionProvider, modelPack: config.modelPack ?? (config.backend === 'embedded' ? DEMO.cloudPack : undefined) });
}

/** A config for code that builds one directly (tests, benchmarks): defaults, overrides, validation. */
export function shimConfig(overrides: Partial<ShimConfig> = {}): Readonly<ShimConfig> {
  return validateShimConfig({ ...DEFAULT_SHIM_CONFIG, ...overrides });
}

/**
 * The most backend calls the shim runs at once: `--max-inflight-steps`, or its backend's default when 0.
 *
 * @example
 * maxInflightStepsFor(shimConfig({ maxBatch: 8 })); // 8
 */
export function maxInflightStepsFor(config: Readonly<ShimConfig>): number {
  if (config.maxInflightSteps > 0) return config.maxInflightSteps;
  return config.backend === 'embedded' ? config.maxBatch : HTTP_BACKEND_INFLIGHT_STEPS;
}

/** The config with secrets masked, for the startup log line. */
export function describeShimConfig(config: Readonly<ShimConfig>): Record<string, unknown> {
  return { ...config, authToken: config.authToken ? '***' : undefined, backendApiKey: config.backendApiKey ? '***' : undefined };
}
