/**
 * The command line of `bun run eval`, parsed and validated once into a frozen object.
 */
import { DEMO } from '../../shared/paths.ts';
import { parseDecimal } from '../../shared/number-text.ts';
import { integerFlag, numberFlag, parseFlags, UsageError } from '../cli-support.ts';
import { CLOUD_FLAGS, cloudSourceFlags } from '../cloud-flags.ts';
import type { ShimScorerOptions } from '../lab/cloud-scorer.ts';
import { DEFAULT_THRESHOLDS } from '../router/routing-curve.ts';
import { TEXT_SPLITS, type TextSplit } from '../lab/text-corpus.ts';
import { DEFAULT_SHARES } from '../lab/share-table.ts';
import { ENTITY_KINDS, SYNTHETIC_NAMES } from './synthetic-entities.ts';

/** Most entities per paragraph: one name each of SYNTHETIC_NAMES, with its email and phone number. */
const MAX_ENTITIES = SYNTHETIC_NAMES.length * ENTITY_KINDS.length;

export const EVAL_USAGE = `usage: bun run eval --dataset FILE [flags]

  The data set's format is recognised from the file: CommonsenseQA JSONL (the original nested layout or
  the flattened one) → multiple-choice accuracy from real generations; anything else → plain text,
  split into documents (--split) → teacher-forced next-token accuracy, and generated continuations:
  the cloud model's perplexity of them and their loops (rep4, stuck). Every threshold is compared with
  baselines that route the same share of tokens: at random, by the edge model's own top-1 probability,
  and (at the fixed shares) by its entropy. A text file that is not the router's training text (router.json
  records its sha256) is held out as a whole; the training text is read after --from-fraction.

  --edge-model PACK       edge model pack (default models/stories260k-distilled-1l) (old name: --slm)
  --cloud-model PACK      cloud model pack, run in process (default models/stories260k) (old name: --llm)
  --cloud HOST:PORT       the cloud as deployed: a running shim, whatever its backend (SGLang, OpenAI-compatible,
                          embedded), instead of --cloud-model; with --cloud-token T (or EDGE_CLOUD_TOKEN) and
                          --cloud-tls-ca PEM (--cloud-tls-cert, --cloud-tls-key: mutual TLS) as the edge takes them
  --edge-model-file F, --cloud-model-file F
                          the ONNX file of a pack to run, e.g. model_q4.onnx (default model.onnx)
                          (old names: --slm-file, --llm-file)
  --router DIR|builtin    trained router pack (default models/router-stories260k-distilled-1l); builtin = the edge
                          model's top-1 probability
  --chat-template F       CommonsenseQA through this chat template (a Jinja file, or chatml; the edge's
                          --chat-template) instead of the edge pack's own
  --constrain-answer      CommonsenseQA: hold each answer to the question's labels with a choice constraint, on
                          the edge's and the cloud's tokens (the exact-match setting; accuracy is exact match;
                          default: free text, the answer read out of it)
  --thresholds LIST       comma-separated thresholds in [0, 1] (default 0,0.1,...,1)
  --limit N               use the first N questions / held-out paragraphs (default all)
  --split MODE            text: auto (default; printed), endoftext (<|endoftext|> between documents),
                          blank-line (paragraphs), line (one document per line)
  --from-fraction F       the router's training text only: evaluate the documents after the first F
                          (default: the fraction the router was trained on); refused for other files
  --continuations N       text: how many of those paragraphs get a generated continuation (default 50)
  --prefix-tokens N       text: a continuation's prompt, in tokens (default 16)
  --max-new-tokens N      tokens generated per answer / continuation (default 16 / 64)
  --shares LIST           text: routed shares of the fixed-share tables (default 0.1,0.2,0.3,0.5; "none")
  --route-share LIST      text: share budgets driven over the teacher-forced positions in order (the edge's
                          ShareCut), beside fixed τ at the share they realize, and route spans 1, 2, 4 at
                          that share of cloud tokens (default 0.1; "none")
  --dump FILE.jsonl       text: write per-position router scores and correctness (a new file; --force replaces one)
  --calibration-runs N    most runs spent matching the top-1 baseline's routed share along generations,
                          per threshold (default 8)
  --private-entities N    text: what private spans cost instead of the sweep: N synthetic entities (names, emails,
                          phone numbers; seeded by --seed) put into each held-out paragraph, the same evaluation run
                          without and with pseudonyms at the router's own τ (or at --thresholds): teacher forcing
                          through the cloud conversation and --continuations generations from the paragraphs'
                          openings, and a leak check of what the cloud saw (docs/privacy-costs.md)
  --seed N                seed of the random baseline (default 0)
  --out DIR               write SVG plots to DIR (created when missing; --force replaces plots of the same --name)
  --force                 replace existing --dump and plot files (regular files only)
  --name NAME             file-name prefix of the plots (default: the data set's file name)
  --json                  print the results as one JSON object on the last line as well`;

export interface EvalOptions {
  dataset: string;
  edgeModel: string;
  cloudModel: string;
  /** A running shim to use instead of `cloudModel` (tool-cloud.ts). */
  cloud?: ShimScorerOptions;
  /** The questions' chat template when not the edge pack's own (the edge's --chat-template). */
  chatTemplate?: string;
  /** --constrain-answer: CommonsenseQA answered with one of the labels, held by a constraint (choice-eval.ts). */
  constrainAnswer: boolean;
  /** The packs' ONNX files (a hub folder holds several variants); `model.onnx` when omitted. */
  edgeModelFile?: string;
  cloudModelFile?: string;
  /** A router pack folder, or undefined for the built-in top-1 scorer. */
  routerPack: string | undefined;
  thresholds: readonly number[];
  limit: number | undefined;
  /** Undefined: the router's own training fraction (for its training text). */
  fromFraction: number | undefined;
  split: TextSplit;
  shares: readonly number[];
  /** Share budgets of the text eval's budget and span tables. */
  routeShares: readonly number[];
  dump: string | undefined;
  continuations: number;
  prefixTokens: number;
  /** Undefined: the default for the data set's kind. */
  maxNewTokens: number | undefined;
  calibrationRuns: number;
  /** Routed-share difference that ends the matching of a baseline early. */
  tolerance: number;
  seed: number;
  /**
   * --private-entities: the privacy cost evaluation (private-spans-eval.ts) instead of the sweep; its τ are
   * --thresholds when given, else (undefined) the router's own.
   */
  privateSpans?: { entities: number; thresholds: readonly number[] | undefined };
  out: string | undefined;
  name: string | undefined;
  json: boolean;
  /** --force: replace existing --dump and plot files (eval-outputs.ts). */
  force: boolean;
}

/** The share budget evaluated when none is given: 10% of tokens, the share docs/routing-budgets.md compares with fixed τ. */
export const DEFAULT_ROUTE_SHARES: readonly number[] = [0.1];

/** A chat reply's cap: room for the chat pair's whole stories (they end with </s> well before it). */
export const DEFAULT_MAX_NEW_TOKENS = { 'multiple-choice': 16, text: 64, chat: 300 } as const;

export function parseThresholds(raw: string): number[] {
  const numbers = raw.split(',').map((s) => parseDecimal(s.trim()) ?? Number.NaN);
  if (numbers.some((n) => !(n >= 0 && n <= 1))) {
    throw new UsageError(`--thresholds must be comma-separated numbers in [0, 1], got ${JSON.stringify(raw)}`);
  }
  return [...new Set(numbers)].sort((a, b) => a - b);
}

function parseShares(raw: string, flag = '--shares'): number[] {
  const numbers = raw.split(',').map((s) => parseDecimal(s.trim()) ?? Number.NaN);
  if (numbers.some((n) => !(n > 0 && n < 1))) {
    throw new UsageError(`${flag} must be comma-separated numbers in (0, 1), or none, got ${JSON.stringify(raw)}`);
  }
  return [...new Set(numbers)].sort((a, b) => a - b);
}

export function parseEvalOptions(args: string[], env: Readonly<Record<string, string | undefined>> = process.env): EvalOptions {
  const { values, positionals } = parseFlags(args, {
    dataset: { type: 'string' },
    'edge-model': { type: 'string' },
    ...CLOUD_FLAGS,
    'edge-model-file': { type: 'string' },
    router: { type: 'string' },
    'chat-template': { type: 'string' },
    'constrain-answer': { type: 'boolean' },
    thresholds: { type: 'string' },
    limit: { type: 'string' },
    'from-fraction': { type: 'string' },
    split: { type: 'string' },
    shares: { type: 'string' },
    'route-share': { type: 'string' },
    dump: { type: 'string' },
    continuations: { type: 'string' },
    'prefix-tokens': { type: 'string' },
    'max-new-tokens': { type: 'string' },
    'calibration-runs': { type: 'string' },
    seed: { type: 'string' },
    'private-entities': { type: 'string' },
    out: { type: 'string' },
    name: { type: 'string' },
    json: { type: 'boolean' },
    force: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  if (!values.dataset) throw new UsageError('--dataset is required');
  const fromFraction = numberFlag(values, 'from-fraction');
  if (fromFraction !== undefined && !(fromFraction >= 0 && fromFraction < 1)) {
    throw new UsageError(`--from-fraction must be in [0, 1), got ${JSON.stringify(values['from-fraction'])}`);
  }
  const split = values.split ?? 'auto';
  if (!(TEXT_SPLITS as readonly string[]).includes(split))
    throw new UsageError(`--split must be one of ${TEXT_SPLITS.join(', ')}, got ${JSON.stringify(split)}`);
  const shares = values.shares === undefined ? DEFAULT_SHARES : values.shares === 'none' ? [] : parseShares(values.shares);
  const routeShare = values['route-share'];
  const routeShares = routeShare === undefined ? DEFAULT_ROUTE_SHARES : routeShare === 'none' ? [] : parseShares(routeShare, '--route-share');
  const router = values.router ?? DEMO.routerPack;
  const cloud = cloudSourceFlags(values, env, DEMO.cloudPack);
  const thresholds = values.thresholds === undefined ? undefined : parseThresholds(values.thresholds);
  const privateEntities = integerFlag(values, 'private-entities', undefined, [1, MAX_ENTITIES]);
  if (privateEntities !== undefined) {
    // Flags of the sweep that this evaluation would silently ignore.
    const unused = ['shares', 'route-share', 'dump', 'prefix-tokens', 'calibration-runs', 'out'].filter(
      (flag) => values[flag as keyof typeof values] !== undefined,
    );
    if (unused.length) throw new UsageError(`--private-entities does not take ${unused.map((f) => `--${f}`).join(', ')}`);
  }
  return Object.freeze({
    dataset: values.dataset,
    edgeModel: values['edge-model'] ?? DEMO.edgePack,
    cloudModel: values['cloud-model'] ?? DEMO.cloudPack,
    ...('shim' in cloud ? { cloud: cloud.shim } : {}),
    ...(values['chat-template'] ? { chatTemplate: values['chat-template'] } : {}),
    constrainAnswer: values['constrain-answer'] ?? false,
    ...(values['edge-model-file'] ? { edgeModelFile: values['edge-model-file'] } : {}),
    ...(values['cloud-model-file'] ? { cloudModelFile: values['cloud-model-file'] } : {}),
    routerPack: router === 'builtin' ? undefined : router,
    thresholds: Object.freeze(thresholds ?? DEFAULT_THRESHOLDS),
    limit: values.limit === undefined ? undefined : integerFlag(values, 'limit', 0, [1, 2 ** 31 - 1])!,
    fromFraction,
    split: split as TextSplit,
    shares: Object.freeze([...shares]),
    routeShares: Object.freeze([...routeShares]),
    dump: values.dump,
    continuations: integerFlag(values, 'continuations', 50, [0, 2 ** 31 - 1])!,
    prefixTokens: integerFlag(values, 'prefix-tokens', 16, [1, 2 ** 31 - 1])!,
    maxNewTokens: values['max-new-tokens'] === undefined ? undefined : integerFlag(values, 'max-new-tokens', 0, [1, 1024])!,
    calibrationRuns: integerFlag(values, 'calibration-runs', 8, [1, 64])!,
    tolerance: 0.005,
    seed: integerFlag(values, 'seed', 0, [0, 2 ** 32 - 1])!,
    ...(privateEntities === undefined
      ? {}
      : { privateSpans: Object.freeze({ entities: privateEntities, thresholds: thresholds && Object.freeze(thresholds) }) }),
    out: values.out,
    name: values.name,
    json: values.json ?? false,
    force: values.force ?? false,
  });
}
