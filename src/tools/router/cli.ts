/** `bun run router <command>`: train a router pack, or evaluate one on held-out text. */
import { integerFlag, numberFlag, parseFlags, requireFlag, runSubcommands, UsageError } from '../cli-support.ts';
import { evaluateRouter } from './evaluate-router.ts';
import { CLOUD_FLAGS, cloudSourceFlags } from '../cloud-flags.ts';
// A bar on a terminal, a line every few seconds in a log (CI): training and teacher forcing take a while.
import { progressFor } from '../lab/progress.ts';
import { DEFAULT_THRESHOLDS, formatRoutingCurve } from './routing-curve.ts';
import { FEATURE_GROUPS, type FeatureGroup } from '../../edge/routing/router-features.ts';
import { LABEL_RULES, ROLLOUT_LABEL_RULES, type LabelRule, type RolloutLabelRule } from './labels.ts';
import { HORIZON_TOKENS } from './horizon-gain.ts';
import {
  DEFAULT_HIDDEN_UNITS,
  DEFAULT_LABELS,
  DEFAULT_ROLLOUT_PROMPTS,
  DEFAULT_ROLLOUT_TOKENS,
  DEFAULT_ROLLOUT_WEIGHT,
  DEFAULT_EPOCHS,
  DEFAULT_ROUTER_LEARNING_RATE,
  DEFAULT_MEMBERS,
  DEFAULT_ROUNDS,
  TEXT_LOOP_COST_SHARE,
} from './train-router-options.ts';
import { DEFAULT_REPORT } from './held-out-report.ts';
import { formatTrainReport } from './train-report.ts';
import { trainRouter } from './train-router.ts';
import { join } from 'node:path';
import { readJsonFile } from '../../shared/model/model-pack.ts';

const USAGE = `usage: bun run router <command> [flags]

  train --edge-model PACK (--cloud-model PACK | --cloud HOST:PORT) --text FILE --out DIR [--force] [--edge-model-file F] [--cloud-model-file F] [--train-fraction 0.8] [--seed 0] [--epochs 60] [--hidden-units 64]
        [--members 3] [--learning-rate 0.0003]
        [--labels citer|divergence|gain|cloud-gain|mixed-gain|cloud-nll|mixed-nll|loop-nll|loop-guard-nll|loop-averse-nll|loop-neutral-nll]
        [--rollout-labels divergence|cloud-gain|cloud-nll|loop-nll|loop-guard-nll|loop-averse-nll|loop-neutral-nll|horizon-nll|horizon-loop-nll|horizon-loop-guard-nll (horizon-loop-guard-nll for text, horizon-nll for chat)] [--features hidden,previous_hidden,logit_stats,repetition,position,token,loop (all but loop for chat)] [--rounds 3]
        [--rollout-prompts 64] [--rollout-tokens 64] [--rollout-weight ${DEFAULT_ROLLOUT_WEIGHT}] [--horizon-tokens 4] [--loop-cost NATS (horizon-nll: default ${TEXT_LOOP_COST_SHARE} of the median route gain for text, 0 for chat)] [--report-documents 256] [--report-prompts 128] [--report-loop-prompts 192] [--report-tokens 48] [--report-temperature 1] [--report-text FILE] [--json]
      teacher-force both packs over the first train-fraction of the text's paragraphs (blank-line
      separated), label each position (1 = keep the edge token, 0 = route; citer: route where only the
      cloud's top-1 is the true token; divergence: route where the cloud finds the edge's token less than
      half as likely as its own; gain / cloud-gain: a soft target, what routing gains in top-1 agreement
      with the text / with the cloud's distribution; cloud-nll: a soft target, what routing takes off the cloud's
      negative log-likelihood of the output; loop-nll: cloud-nll's, and route where the edge's token would repeat a
      4-gram already in the sequence while the cloud's top-1 differs; loop-guard-nll / loop-averse-nll / loop-neutral-nll:
      loop-nll's, and a target of 1 / 0.75 / 0.5 (keep, a loss, no gain) where the cloud's top-1 would repeat one and
      the edge's would not; horizon-nll (rollouts only): loop-averse-nll's, with the gain measured over the routed
      token and the edge's next --horizon-tokens greedy tokens after it, each loop step in a branch costing --loop-cost
      nats (by default ${TEXT_LOOP_COST_SHARE} of the median size of the gain where the first round's two top-1s differed: the
      pair's own scale); horizon-loop-nll: horizon-nll's gain, and
      the loop rules over both branches (a loss, 0.75, where the routed one repeats more 4-grams, route where it
      repeats fewer); horizon-loop-guard-nll: the same, keeping outright (1) where the routed one repeats more;
      mixed-gain, the default for the text: the mean of gain's and cloud-gain's, and the default
      threshold then routes as many validation positions as CITER's labels do) and train the MLP router; then --rounds
      on-policy rounds: generate from rollout-prompts training openings (greedy and sampled) with the current router, label those
      trajectories against the cloud (--rollout-labels: horizon-loop-guard-nll for text, horizon-nll for chat, by default), add them to the data and
      retrain (--rounds 0: teacher forcing only), each on-policy record weighing --rollout-weight against a
      teacher-forced one's 1; --members MLPs of --hidden-units each, with seeds seed,
      seed+1, …, are trained side by side and their logits averaged (one wider MLP in router.onnx);
      --edge-model-file / --cloud-model-file name the ONNX file of a pack (model.onnx by default; e.g. model_q4.onnx);
      a chat dataset (JSONL, one {"messages": [{"role", "content"}, ...]} per line) is rendered through the edge
      pack's chat template and split by conversation, with records at the assistant's tokens only and rollouts
      from the turns up to each user message; --out is a new or empty folder, or with --force a router pack
      these tools wrote (written-by.json in it); nothing else is ever replaced.
      At the end it reports on the held-out documents (stored in router.json as training.held_out_report): under
      teacher forcing the share of the edge→cloud gap recovered at 10/20/30% routed (the first --report-documents),
      and free-running from --report-prompts prompts (--report-tokens each, sampled at --report-temperature with one
      seed per prompt for every router; 0: greedy) the cloud's perplexity of the output and its rep4 at matched
      shares, for the trained router, the edge's top-1 probability (the built-in router, --router builtin), its
      entropy and random routing; when sampled, greedy runs of the router and of random routing (two streams
      pooled) from the first --report-loop-prompts prompts check for loops (rep4; 0: no check);
      --report-documents 0: no report, --report-prompts 0:
      teacher forcing only; --report-text FILE reports on that file (text or chat, held out as a whole) instead;
      --json ends the output with one line of JSON: the report, the training time and the training's figures
  eval --router DIR --text FILE [--edge-model PACK] [--cloud-model PACK | --cloud HOST:PORT] [--edge-model-file F] [--cloud-model-file F] [--train-fraction 0.8] [--json]
      routed ratio and next-token accuracy per threshold on the paragraphs (or a chat dataset's conversations,
      at the assistant's tokens) after the first train-fraction (the packs default to the ones router.json names)

  --chat-template FILE|chatml (train and eval): a chat dataset's template when the edge serves another than its
  pack's own (the edge's --chat-template), so the router learns the format the edge serves.

  --cloud HOST:PORT uses a running shim for the cloud model instead of a pack in this process, whatever its
  backend (SGLang, an OpenAI-compatible server, embedded): teacher forcing through its Score call, on-policy
  rollouts through the real decoding loop routing to it; --cloud-token T (or EDGE_CLOUD_TOKEN) and
  --cloud-tls-ca PEM (--cloud-tls-cert and --cloud-tls-key for mutual TLS) as the edge takes them. The shim needs --model-pack (its tokenizer proves the pair shares one).

  --edge-model, --cloud-model, --edge-model-file and --cloud-model-file were --slm, --llm, --slm-file and
  --llm-file (old names, still accepted)`;

function labelRuleFlag(raw: string | undefined): LabelRule {
  if (raw === undefined) return DEFAULT_LABELS;
  if (!(LABEL_RULES as readonly string[]).includes(raw)) throw new UsageError(`--labels must be one of ${LABEL_RULES.join(', ')}, got ${JSON.stringify(raw)}`);
  return raw as LabelRule;
}

function rolloutLabelRuleFlag(raw: string): RolloutLabelRule {
  if (!(ROLLOUT_LABEL_RULES as readonly string[]).includes(raw)) {
    throw new UsageError(`--rollout-labels must be one of ${ROLLOUT_LABEL_RULES.join(', ')}, got ${JSON.stringify(raw)}`);
  }
  return raw as RolloutLabelRule;
}

/** The groups given, or undefined: the trainer picks the defaults for the dataset's kind (defaultFeatures). */
function featuresFlag(raw: string | undefined): FeatureGroup[] | undefined {
  if (raw === undefined) return undefined;
  const groups = raw.split(',').map((g) => g.trim());
  if (groups.some((g) => !(FEATURE_GROUPS as readonly string[]).includes(g)) || !groups.includes('hidden')) {
    throw new UsageError(`--features must be a comma-separated list of ${FEATURE_GROUPS.join(', ')} including hidden, got ${JSON.stringify(raw)}`);
  }
  return FEATURE_GROUPS.filter((g) => groups.includes(g));
}

async function trainCommand(args: string[]): Promise<void> {
  const { values } = parseFlags(args, {
    'edge-model': { type: 'string' },
    ...CLOUD_FLAGS,
    'edge-model-file': { type: 'string' },
    text: { type: 'string' },
    'chat-template': { type: 'string' },
    out: { type: 'string' },
    'train-fraction': { type: 'string' },
    seed: { type: 'string' },
    epochs: { type: 'string' },
    'hidden-units': { type: 'string' },
    members: { type: 'string' },
    'learning-rate': { type: 'string' },
    labels: { type: 'string' },
    'rollout-labels': { type: 'string' },
    features: { type: 'string' },
    rounds: { type: 'string' },
    'rollout-prompts': { type: 'string' },
    'rollout-tokens': { type: 'string' },
    'rollout-weight': { type: 'string' },
    'horizon-tokens': { type: 'string' },
    'loop-cost': { type: 'string' },
    force: { type: 'boolean' },
    'report-documents': { type: 'string' },
    'report-loop-prompts': { type: 'string' },
    'report-prompts': { type: 'string' },
    'report-tokens': { type: 'string' },
    'report-text': { type: 'string' },
    'report-temperature': { type: 'string' },
    json: { type: 'boolean' },
  });
  const cloud = cloudSourceFlags(values, process.env);
  const report = await trainRouter(
    {
      edgeModel: requireFlag(values, 'edge-model'),
      ...('shim' in cloud ? { cloud: cloud.shim } : { cloudModel: cloud.pack as string, cloudModelFile: cloud.file }),
      edgeModelFile: values['edge-model-file'],
      text: requireFlag(values, 'text'),
      ...(values['chat-template'] ? { chatTemplate: values['chat-template'] } : {}),
      out: requireFlag(values, 'out'),
      trainFraction: numberFlag(values, 'train-fraction', 0.8)!,
      seed: integerFlag(values, 'seed', 0)!,
      maxEpochs: integerFlag(values, 'epochs', DEFAULT_EPOCHS)!,
      hiddenUnits: integerFlag(values, 'hidden-units', DEFAULT_HIDDEN_UNITS)!,
      members: integerFlag(values, 'members', DEFAULT_MEMBERS, [1, 16])!,
      learningRate: numberFlag(values, 'learning-rate', DEFAULT_ROUTER_LEARNING_RATE)!,
      labels: labelRuleFlag(values.labels),
      // Absent stays absent: the trainer picks the default for the dataset's kind (defaultRolloutLabels).
      ...(values['rollout-labels'] === undefined ? {} : { rolloutLabels: rolloutLabelRuleFlag(values['rollout-labels']) }),
      features: featuresFlag(values.features),
      rounds: integerFlag(values, 'rounds', DEFAULT_ROUNDS, [0, 10])!,
      rolloutPrompts: integerFlag(values, 'rollout-prompts', DEFAULT_ROLLOUT_PROMPTS, [1, 100_000])!,
      rolloutTokens: integerFlag(values, 'rollout-tokens', DEFAULT_ROLLOUT_TOKENS, [1, 4096])!,
      rolloutWeight: numberFlag(values, 'rollout-weight', DEFAULT_ROLLOUT_WEIGHT)!,
      // Absent stays absent: a horizon length given with a rollout rule that reads none is an error, not ignored.
      ...(values['horizon-tokens'] === undefined ? {} : { horizonTokens: integerFlag(values, 'horizon-tokens', HORIZON_TOKENS, [0, 64])! }),
      ...(values['loop-cost'] === undefined ? {} : { loopCost: numberFlag(values, 'loop-cost')! }),
      force: values.force === true,
      report: {
        ...DEFAULT_REPORT,
        documents: integerFlag(values, 'report-documents', DEFAULT_REPORT.documents, [0, 100_000])!,
        prompts: integerFlag(values, 'report-prompts', DEFAULT_REPORT.prompts, [0, 100_000])!,
        loopPrompts: integerFlag(values, 'report-loop-prompts', DEFAULT_REPORT.loopPrompts)!,
        maxNewTokens: integerFlag(values, 'report-tokens', DEFAULT_REPORT.maxNewTokens, [1, 4096])!,
        temperature: numberFlag(values, 'report-temperature', DEFAULT_REPORT.temperature)!,
        ...(values['report-text'] ? { text: values['report-text'] } : {}),
      },
    },
    progressFor(process.stderr),
  );
  console.log(formatTrainReport(report));
  console.log(`wrote ${report.out}`);
  // One line a results file can keep (scripts/record-result.ts): what router.json holds, and the time it took.
  if (values.json) {
    // CPU seconds beside the wall clock: on a shared machine the second says how long a run took to compute.
    const cpu = process.cpuUsage();
    console.log(
      JSON.stringify({ ...(readJsonFile(join(report.out, 'router.json')) as object), seconds: report.seconds, cpu_seconds: (cpu.user + cpu.system) / 1e6 }),
    );
  }
}

async function evalCommand(args: string[]): Promise<void> {
  const { values } = parseFlags(args, {
    router: { type: 'string' },
    'edge-model': { type: 'string' },
    ...CLOUD_FLAGS,
    'edge-model-file': { type: 'string' },
    text: { type: 'string' },
    'chat-template': { type: 'string' },
    'train-fraction': { type: 'string' },
    json: { type: 'boolean' },
  });
  // No fallback pack: router.json names the cloud pack a router was trained with.
  const cloud = values['cloud-model'] === undefined && values.cloud === undefined ? undefined : cloudSourceFlags(values, process.env);
  const curve = await evaluateRouter(
    {
      router: requireFlag(values, 'router'),
      edgeModel: values['edge-model'],
      ...(cloud === undefined
        ? { cloudModelFile: values['cloud-model-file'] }
        : 'shim' in cloud
          ? { cloud: cloud.shim }
          : { cloudModel: cloud.pack as string, cloudModelFile: cloud.file }),
      edgeModelFile: values['edge-model-file'],
      text: requireFlag(values, 'text'),
      ...(values['chat-template'] ? { chatTemplate: values['chat-template'] } : {}),
      trainFraction: numberFlag(values, 'train-fraction', 0.8)!,
      thresholds: DEFAULT_THRESHOLDS,
    },
    progressFor(process.stderr),
  );
  console.log(values.json ? JSON.stringify(curve) : formatRoutingCurve(curve));
}

await runSubcommands({ train: trainCommand, eval: evalCommand }, USAGE);
