/**
 * The edge process's settings, parsed once (flags > EDGE_* variables > --config JSON file > defaults),
 * validated, frozen, and handed to every component. Nothing else in the edge reads `process.env`.
 *
 * @example
 * const config = parseEdgeConfig(['--cloud', 'none'], {});
 * config.cloud; // undefined: the edge runs alone
 */
import { loadOptions, optionsUsage, type OptionSpec } from '../shared/process/config-loader.ts';
import { AppError } from '../shared/errors.ts';
import { parseExecutionProviders } from '../shared/model/execution-providers.ts';
import { MODEL_THREADS, type ModelThread } from '../shared/model/model-session.ts';
import { SPECIAL_TOKENS_IN_MESSAGES, type SpecialTokensInMessages } from '../shared/text/chat-template.ts';
import { DEMO } from '../shared/paths.ts';
import { parsePrivateDetection, type OperatorPattern } from './privacy/private-detect.ts';
import { ROUTE_BUDGET_BOUNDS, type RouteBudget } from './request/generation-request.ts';

export interface EdgeConfig {
  /** Address the web page and HTTP API listen on (the LAN). */
  host: string;
  port: number;
  /** Port of the edge gRPC Generate service; -1 = off. */
  grpcPort: number;
  /** The edge model pack. */
  edgeModel: string;
  /** Which ONNX file of the pack runs (a hub folder holds model.onnx, model_fp16.onnx, model_q4.onnx, ...). */
  edgeModelFile: string;
  /** The router pack; undefined = the built-in top-1 probability scorer. */
  router: string | undefined;
  /** The cloud shim's host:port; undefined = the edge runs alone. */
  cloud: string | undefined;
  cloudToken: string | undefined;
  cloudTlsCa: string | undefined;
  cloudTlsCert: string | undefined;
  cloudTlsKey: string | undefined;
  /** Deadline of one routed step; past it the edge decides alone. */
  cloudDeadlineMs: number;
  /** Transport failures in a row that open the circuit to the cloud (a missed deadline opens it at once). */
  cloudFailureThreshold: number;
  /** Send the edge model's hidden state with routed steps: it leaves the device. */
  sendHiddenState: boolean;
  /**
   * The key of the HMAC that turns a request's `conversation` into the routing key the shim and SGLang read:
   * the caller's own text never leaves the box. Undefined: a random key made at start.
   */
  routingKeySecret: string | undefined;
  /** Match private values whatever their case ("ANN@EXAMPLE.ORG" is ann@example.org's), besides every Unicode and spacing form. */
  privateFoldCase: boolean;
  /**
   * What requests that do not say get for `speculate`: decode ahead while a routed token is on the network
   * (on), never (off), or where the measured hit rate, round trip and edge step say it pays (auto).
   */
  speculate: 'auto' | 'on' | 'off';
  /** When a joint generation opens its cloud conversation: with the request (eager), at the first routed token (lazy), or eager where it is likely to route (auto). */
  cloudPrefill: 'eager' | 'lazy' | 'auto';
  /**
   * The routing budgets of requests that name neither τ nor a budget (each unset by default): a target
   * share of generated tokens routed, cloud tokens per minute for the box, a wait per token in ms.
   */
  routeShare: number | undefined;
  routeTokensPerMinute: number | undefined;
  routeWaitMs: number | undefined;
  /** When set, the page and APIs require it. */
  accessToken: string | undefined;
  /** What special-token text inside a chat message becomes: plain text, or the special token (chat-template.ts). */
  chatSpecialTokens: SpecialTokensInMessages;
  /** A chat template (a Jinja file, or `chatml`) instead of the pack's own; undefined = the pack's. */
  chatTemplate: string | undefined;
  /** The model's name in the APIs (OpenAI's `model`, /v1/models); undefined = the edge pack's folder name. */
  servedModelName: string | undefined;
  maxConcurrent: number;
  /** Most running generations whose decode steps share one forward pass of the edge model; 1 = each alone. */
  maxBatch: number;
  /** Seconds an HTTP connection may stay silent: no request in progress, or an upload that stopped. */
  idleTimeout: number;
  /** HTTP requests in progress at once (event streams included); more get 503 and are closed. */
  maxOpenRequests: number;
  maxNewTokens: number;
  /** Megabytes of KV cache the prompt cache keeps for later generations with the same prompt head; 0 = off. */
  promptCacheMb: number;
  /** onnxruntime threads for the edge model; 0 = onnxruntime's choice. */
  threads: number;
  /** onnxruntime execution providers for the edge model, in order of preference, e.g. `cuda,cpu`. */
  executionProvider: string;
  /** Where the edge model's forward passes run: a worker thread of their own, or the JavaScript thread (blocked while they run). */
  modelThread: ModelThread;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /**
   * Private entities looked for in prompts, to be pseudonymised before anything goes to the cloud: the kinds
   * on for every request, and the operator's own kinds as linear-time patterns (src/edge/privacy).
   */
  privateDetection: PrivateDetection;
}

export interface PrivateDetection {
  kinds: readonly string[];
  patterns: readonly OperatorPattern[];
}

/** The settings as flags, EDGE_* variables and the file give them: privateDetection comes from two flags. */
interface EdgeOptions extends Omit<EdgeConfig, 'privateDetection'> {
  privateDetect: string;
  privatePattern: readonly string[];
}

const OPTIONS: Record<keyof EdgeOptions, OptionSpec> = {
  host: { kind: 'string', help: 'address the web page and HTTP API listen on' },
  port: { kind: 'int', min: 0, help: 'HTTP port (0 = any free port)' },
  grpcPort: { kind: 'int', min: 0, offValue: -1, help: 'port of the gRPC Generate service (0 = any free port, off = no gRPC service)' },
  edgeModel: { kind: 'string', oldKey: 'slm', help: 'edge model pack folder' },
  edgeModelFile: { kind: 'string', oldKey: 'slmFile', help: 'ONNX file of the pack to run, e.g. model_q4.onnx (a hub folder holds several variants)' },
  router: {
    kind: 'string',
    help: "router pack folder (refused when trained for another edge model), or 'builtin' for the edge model's top-1 probability (fits any)",
  },
  cloud: { kind: 'string', help: "cloud shim host:port, or 'none' to run the edge alone" },
  cloudToken: { kind: 'string', help: 'bearer token sent to the shim (prefer EDGE_CLOUD_TOKEN or the config file)' },
  cloudTlsCa: { kind: 'string', help: 'CA certificate (PEM) that signed the shim certificate; turns TLS on' },
  cloudTlsCert: { kind: 'string', help: 'client certificate (PEM) for mutual TLS' },
  cloudTlsKey: { kind: 'string', help: 'client key (PEM) for mutual TLS' },
  cloudDeadlineMs: { kind: 'int', min: 1, help: 'deadline of one routed step; past it the edge decides alone' },
  cloudFailureThreshold: {
    kind: 'int',
    min: 1,
    help: 'failed cloud attempts in a row before the edge stops trying for a while (a missed deadline counts as all)',
  },
  sendHiddenState: { kind: 'bool', help: "send the edge model's hidden state with routed steps (it leaves the device)" },
  routingKeySecret: {
    kind: 'string',
    help: "key of the HMAC that turns a request's conversation into the routing key the shim and its backend see (the caller's text never leaves the box); default: random at start; edges that share conversations behind one gateway set the same one",
  },
  privateFoldCase: { kind: 'bool', help: "match private values in any letter case too (always on when the edge model's tokenizer lowercases)" },
  speculate: {
    kind: 'enum',
    values: ['auto', 'on', 'off'],
    help: "default of requests' speculate: decode ahead from the edge's guess while a routed token is on the network (the same tokens either way); auto does it where the measured hit rate and round trip say the time saved is above the edge's thrown-away steps",
  },
  cloudPrefill: {
    kind: 'enum',
    values: ['eager', 'lazy', 'auto'],
    help: "when a joint generation opens its cloud conversation: eager sends the prompt with the request, so the cloud prefills while the edge does; lazy at the first routed token; auto eagerly where the generation is likely to route (its budget, τ, the conversation's earlier turns, the box's recent router scores); the same tokens either way",
  },
  routeShare: {
    kind: 'number',
    min: 0,
    help: 'target share of generated tokens routed to the cloud, in (0, 1]: the cut on the router scores moves to hold it, for requests that name neither threshold nor a budget',
  },
  routeTokensPerMinute: {
    kind: 'int',
    min: 1,
    help: 'most cloud tokens this box spends per minute over all generations, for requests that name neither threshold nor a budget',
  },
  routeWaitMs: {
    kind: 'int',
    min: 1,
    help: 'most milliseconds a token may wait for the cloud: the cut falls as the round trip or the cloud load grows, for requests that name neither threshold nor a budget',
  },
  accessToken: { kind: 'string', help: 'require this token for the page and APIs (bearer header, cookie or ?token=)' },
  chatSpecialTokens: {
    kind: 'enum',
    values: SPECIAL_TOKENS_IN_MESSAGES,
    help: "what special-token text such as <|im_end|> inside a chat message becomes: text (ordinary characters, so a message cannot forge a turn) or parse (the special token, as transformers' apply_chat_template does; for trusted clients only)",
  },
  chatTemplate: {
    kind: 'string',
    help: "the chat template: a Jinja file, or chatml (default: the pack's chat_template.jinja or its tokenizer_config.json's chat_template)",
  },
  servedModelName: { kind: 'string', help: "the model's name in the APIs (OpenAI's model, /v1/models) (default: the edge pack's folder name)" },
  maxConcurrent: { kind: 'int', min: 1, help: 'generations running at once; more are refused' },
  maxBatch: {
    kind: 'int',
    min: 1,
    help: 'most running generations whose decode steps share one forward pass of the edge model (1 = each step alone); the same tokens as alone, except that a plain-layout pack with int8 arithmetic (q4, int8) may flip a near-tie (docs/operations.md)',
  },
  idleTimeout: {
    kind: 'int',
    min: 1,
    help: 'seconds an HTTP connection may stay silent (an idle keep-alive connection, closed; an upload that stopped sending, 408); never cuts a running stream or a progressing upload (partial headers are cut by Bun itself after about 10 s)',
  },
  maxOpenRequests: { kind: 'int', min: 1, help: 'HTTP requests in progress at once, streams included; more get 503 and their connection is closed' },
  maxNewTokens: { kind: 'int', min: 1, help: 'largest max_new_tokens a request may ask for' },
  promptCacheMb: {
    kind: 'int',
    min: 0,
    help: "megabytes of KV cache kept from finished and running generations, so a prompt that starts like an earlier one (a chat's next turn, a fixed system prompt) prefills only the rest; least recently used dropped first; 0 = off. The default holds about 10,000 tokens of Qwen2.5-0.5B's fp32 cache (24 KB a token), ten 1,000-token chats, beside its 2 GB of weights on an 8 GB board",
  },
  threads: { kind: 'int', min: 0, help: 'onnxruntime threads for the edge model (0 = default)' },
  executionProvider: {
    kind: 'string',
    help: 'onnxruntime execution providers for the edge model in order of preference, e.g. coreml,cpu or cuda,cpu (ending in cpu = fall back to it)',
  },
  modelThread: {
    kind: 'enum',
    values: MODEL_THREADS,
    help: "where the edge model's forward passes run: worker (a thread of their own, so cloud replies and HTTP/gRPC requests are served during a pass; a fused-layout pack without new_key_values.* stays on main) or main (the JavaScript thread, blocked while a pass runs)",
  },
  logLevel: { kind: 'enum', values: ['debug', 'info', 'warn', 'error'], help: 'log verbosity' },
  privateDetect: {
    kind: 'string',
    valueName: 'KINDS',
    help: 'private entities to find in every prompt, to be pseudonymised before anything goes to the cloud: a comma list of email, phone, card, iban, ip, or all, or none (a request may name more kinds; --private-pattern kinds are always on); docs/privacy-detection.md',
  },
  privatePattern: {
    kind: 'list',
    valueName: 'KIND=REGEX',
    help: 'an operator kind of private entity and a pattern for it, e.g. employee_id=EMP-\\d{6}; run by a linear-time engine (RE2: no backreferences or lookaround), so a pattern cannot hang the box; KIND is lowercase [a-z][a-z0-9_]{0,15}; repeat the flag for more (EDGE_PRIVATE_PATTERN: one a line; file: an array)',
  },
};

export const DEFAULT_EDGE_CONFIG: Readonly<EdgeConfig> = Object.freeze({
  host: '0.0.0.0',
  port: 8080,
  grpcPort: 50061,
  edgeModel: DEMO.edgePack,
  edgeModelFile: 'model.onnx',
  router: DEMO.routerPack,
  cloud: '127.0.0.1:50051',
  cloudToken: undefined,
  cloudTlsCa: undefined,
  cloudTlsCert: undefined,
  cloudTlsKey: undefined,
  cloudDeadlineMs: 5000,
  cloudFailureThreshold: 3,
  sendHiddenState: false,
  routingKeySecret: undefined,
  privateFoldCase: false,
  // Auto: decoding ahead gains where the edge's guesses at routed positions hit and only wastes edge steps
  // where they miss, as on the demo pair, so each box decides from the hit rate it sees (speculation-policy.ts).
  speculate: 'auto',
  // Lazy: nothing leaves the box before a token routes (what privacy.md and the record of what left promise
  // by default); eager and auto trade that for a first routed token without the cloud's prefill.
  cloudPrefill: 'lazy',
  // Unset: a request that names nothing is routed at the router's default τ, as before budgets existed.
  routeShare: undefined,
  routeTokensPerMinute: undefined,
  routeWaitMs: undefined,
  accessToken: undefined,
  // Text: whoever can reach the box's chat must not be able to write the system's turns.
  chatSpecialTokens: 'text',
  chatTemplate: undefined,
  servedModelName: undefined,
  maxConcurrent: 8,
  // As many as may run: a step of 8 rows costs little more than one where reading the weights bounds it.
  maxBatch: 8,
  // Long enough for a phone on a weak Wi-Fi to finish sending, short enough that a crowd of silent
  // connections goes away before it matters; browsers open a new keep-alive connection when needed.
  idleTimeout: 30,
  // The page and API use a handful each; far below the process's file descriptor limit.
  maxOpenRequests: 256,
  maxNewTokens: 1024,
  // See the help: ten 1,000-token Qwen2.5-0.5B chats; a small share of an 8 GB board next to the model.
  promptCacheMb: 256,
  threads: 0,
  executionProvider: 'cpu',
  // Worker: a pass of a Qwen2.5-0.5B-sized model would otherwise hold every reply and request until it ends.
  modelThread: 'worker',
  logLevel: 'info',
  // None: finding entities in text is the operator's choice, and what it finds is theirs to decide.
  privateDetection: Object.freeze({ kinds: Object.freeze([]), patterns: Object.freeze([]) }),
} satisfies EdgeConfig);

const { privateDetection: _parsedFromFlags, ...DEFAULTS_BESIDE_PRIVATE_DETECTION } = DEFAULT_EDGE_CONFIG;
const DEFAULT_EDGE_OPTIONS: Readonly<EdgeOptions> = Object.freeze({ ...DEFAULTS_BESIDE_PRIVATE_DETECTION, privateDetect: 'none', privatePattern: [] });

const ENV_PREFIX = 'EDGE_';

export const EDGE_USAGE = optionsUsage(OPTIONS, DEFAULT_EDGE_OPTIONS, ENV_PREFIX, 'bun run edge');

export function parseEdgeConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): Readonly<EdgeConfig> {
  return validateEdgeConfig(loadOptions<EdgeOptions>(OPTIONS, DEFAULT_EDGE_OPTIONS, argv, env, ENV_PREFIX));
}

/** Cross-field checks; maps the 'builtin' and 'none' words to absent; returns the config frozen. */
function validateEdgeConfig(options: EdgeOptions): Readonly<EdgeConfig> {
  const { privateDetect, privatePattern, ...config } = options;
  const fail = (message: string) => {
    throw new AppError('INVALID_ARGUMENT', message);
  };
  if (config.port > 65535 || config.grpcPort > 65535) fail('ports must be ≤ 65535');
  // Bun's own limit for Bun.serve's idleTimeout.
  if (config.idleTimeout > 255) fail(`--idle-timeout must be ≤ 255 seconds, got ${config.idleTimeout}`);
  if (Boolean(config.cloudTlsCert) !== Boolean(config.cloudTlsKey)) fail('mutual TLS needs both --cloud-tls-cert and --cloud-tls-key');
  const cloud = config.cloud === 'none' ? undefined : config.cloud;
  if (!/^[^/\\]+\.onnx$/.test(config.edgeModelFile)) fail(`--edge-model-file must be a .onnx file name inside the pack folder, got ${config.edgeModelFile}`);
  if (cloud !== undefined && !/^\S+:\d+$/.test(cloud)) fail(`--cloud must be host:port or 'none', got ${cloud}`);
  if (config.routeShare !== undefined && (config.routeShare <= 0 || config.routeShare > 1)) fail(`--route-share must be in (0, 1], got ${config.routeShare}`);
  // The request fields' own bounds, so a default is one a request could give.
  const { maxTokensPerMinute, maxWaitMs } = ROUTE_BUDGET_BOUNDS;
  if (config.routeTokensPerMinute !== undefined && config.routeTokensPerMinute > maxTokensPerMinute) {
    fail(`--route-tokens-per-minute must be ≤ ${maxTokensPerMinute}, got ${config.routeTokensPerMinute}`);
  }
  if (config.routeWaitMs !== undefined && config.routeWaitMs > maxWaitMs) fail(`--route-wait-ms must be ≤ ${maxWaitMs}, got ${config.routeWaitMs}`);
  if (config.servedModelName !== undefined && !/^[\x21-\x7e]{1,128}$/.test(config.servedModelName)) {
    fail(`--served-model-name must be 1 to 128 printable ASCII characters without spaces, got ${JSON.stringify(config.servedModelName)}`);
  }
  const executionProvider = parseExecutionProviders(config.executionProvider).join(',');
  const { kinds, patterns } = parsePrivateDetection(privateDetect, privatePattern);
  const privateDetection = Object.freeze({ kinds: Object.freeze(kinds), patterns: Object.freeze(patterns.map((pattern) => Object.freeze(pattern))) });
  return Object.freeze({ ...config, cloud, executionProvider, router: config.router === 'builtin' ? undefined : config.router, privateDetection });
}

/**
 * The settings' routing budgets, only those set: the defaults of requests that name neither τ nor a budget.
 *
 * @example
 * routeBudgetOf(parseEdgeConfig(['--route-share', '0.1'], {})); // { routeShare: 0.1 }
 */
export function routeBudgetOf(config: Pick<EdgeConfig, 'routeShare' | 'routeTokensPerMinute' | 'routeWaitMs'>): RouteBudget {
  const { routeShare, routeTokensPerMinute, routeWaitMs } = config;
  return {
    ...(routeShare === undefined ? {} : { routeShare }),
    ...(routeTokensPerMinute === undefined ? {} : { routeTokensPerMinute }),
    ...(routeWaitMs === undefined ? {} : { routeWaitMs }),
  };
}
