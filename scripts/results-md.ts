/**
 * Renders docs/results.md from the data files under docs/results/ (the `--json` output of the commands
 * that measured each figure, with a first line naming the command, the date and the machine), so the
 * page's figures cannot drift from what the commands print. Fails, naming the file and the field, when a
 * data file lacks something the page shows; `--check` compares instead of writing (tests/results-md.test.ts).
 *
 * @example
 * ```sh
 * bun run results           # writes docs/results.md
 * bun run results --check   # exit status 1 when docs/results.md is not what the data renders
 * ```
 */
import { readFileSync, writeFileSync } from 'node:fs';
import {
  decodeBenchSection,
  decodePeerBenchSection,
  edgeBenchSection,
  latencyBenchSection,
  loadBenchSection,
  shimBenchSection,
} from './results/bench-sections.ts';
import { hasDataFile, readDataFile, type DataFile } from './results/data-file.ts';
import { chatEvalSection, routerEvalSection } from './results/chat-sections.ts';
import { choiceEvalSection, textEvalSection } from './results/eval-sections.ts';
import { constrainedChoiceSection, constraintBenchSection } from './results/constraint-sections.ts';
import { privateSpansSection } from './results/privacy-sections.ts';
import { routerTrainSection } from './results/router-train-section.ts';
import { latencyFloorSection } from './results/latency-floor-section.ts';
import { scoreFloodBenchSection, scoringBenchSection, throughShimEvalSection } from './results/shim-sections.ts';
import { RESULTS_DIR } from './record-result.ts';
import { CHAT_DEMO, DEMO, TRUNCATED_DEMO } from '../src/shared/paths.ts';

export const RESULTS_PAGE = 'docs/results.md';

const TINYSTORIES = '../shared/assets/datasets/tinystories/tinystories_excerpt_197k.txt';
const CHATS_HELDBACK = '../shared/assets/models/stories260K-chat/chats-heldback.jsonl';
const CHAT_PACKS =
  '--edge-model models/stories260k-chat-distilled-1l --cloud-model models/stories260k-chat --router models/router-stories260k-chat-distilled-1l';
const COMMONSENSEQA = '../shared/assets/datasets/commonsenseqa/commonsenseqa_200_samples.jsonl';

/** One measurement of the page: its data file, how it is shown, and the command that makes the file. */
interface Measurement {
  title: string;
  file: string;
  render: (file: DataFile) => string;
  /** The command to record it with; the page shows it where the file is missing. */
  command: string;
  /** A missing required file fails the rendering; a missing optional one is shown as not measured yet. */
  required: boolean;
}

interface PairSection {
  title: string;
  about: string;
  measurements: Measurement[];
}

const record = (file: string, command: string) => `bun run results:record ${file} -- ${command}`;

/** The demo router's default τ and the truncated pair's (router.json's default_threshold), read where the packs get them. */
const DEMO_TAU = DEMO.routerThreshold;
const TRUNCATED_TAU = TRUNCATED_DEMO.routerThreshold;
const TRUNCATED = '--edge-model models/stories260k-3l --router models/router-stories260k-3l';

const PAIRS: PairSection[] = [
  {
    title: 'The chat pair: chat-tuned 1-layer edge model → chat-tuned 5-layer stories260K',
    about:
      'What `bun run start` serves: the edge model `models/stories260k-chat-distilled-1l` and the cloud model `models/stories260k-chat`, ' +
      'the story pair fine-tuned to answer story requests in a plain-text chat format (`User: …` / `Assistant: …</s>`; ' +
      '`../shared/assets/models/stories260K-chat/README.md` says how), and the router `models/router-stories260k-chat-distilled-1l`, ' +
      "trained by `bun run models demo` on the first tenth of the pair's training conversations (records at the assistant's tokens, " +
      `rollouts from the user turns; [router-training.md](router-training.md#chat-datasets)), default τ ${CHAT_DEMO.routerThreshold}. Measured on the ` +
      '140 held-back conversations, none of whose stories is in a training conversation.',
    measurements: [
      {
        title: 'Routing quality on held-back conversations',
        file: 'chat-eval-heldback',
        render: (f) => chatEvalSection(f, { defaultThreshold: CHAT_DEMO.routerThreshold }),
        command: `bun run eval --dataset ${CHATS_HELDBACK} ${CHAT_PACKS} --thresholds 0,0.5,0.7,0.8,0.9,1 --json`,
        required: true,
      },
      {
        title: 'The routing curve (router eval)',
        file: 'chat-router-eval-heldback',
        render: routerEvalSection,
        command: `bun run router eval --router models/router-stories260k-chat-distilled-1l --text ${CHATS_HELDBACK} --train-fraction 0 --json`,
        required: true,
      },
    ],
  },
  {
    title: 'The demo pair: distilled 1-layer edge model → 5-layer stories260K',
    about:
      'The story pair (`bun run start -- --pair stories`), what the tests and the benchmarks use by default: the edge model `models/stories260k-distilled-1l`, a ' +
      '1-layer student distilled from the 5-layer stories260K model; the cloud model `models/stories260k`, the whole 5-layer model; ' +
      'the router `models/router-stories260k-distilled-1l`, trained by `bun run models demo` on the first 80% of the TinyStories ' +
      `excerpt's paragraphs ([router-training.md](router-training.md)), default τ ${DEMO_TAU}.`,
    measurements: [
      {
        title: 'Routing quality on held-out TinyStories paragraphs',
        file: 'demo-eval-tinystories',
        render: (f) => textEvalSection(f, { plots: 'demo-tinystories', defaultThreshold: DEMO_TAU }),
        command: `bun run eval --dataset ${TINYSTORIES} --calibration-runs 3 --out docs/plots --name demo-tinystories --force --json`,
        required: true,
      },
      {
        title: 'Routing quality on CommonsenseQA',
        file: 'demo-eval-commonsenseqa',
        render: (f) => choiceEvalSection(f, { plots: 'demo-commonsenseqa' }),
        command: `bun run eval --dataset ${COMMONSENSEQA} --calibration-runs 3 --out docs/plots --name demo-commonsenseqa --force --json`,
        required: true,
      },
      {
        title: 'CommonsenseQA with the answer held to the letters',
        file: 'demo-eval-commonsenseqa-letter',
        render: constrainedChoiceSection,
        command: `bun run eval --dataset ${COMMONSENSEQA} --constrain-answer --calibration-runs 3 --json`,
        required: false,
      },
      {
        title: 'What private spans cost',
        file: 'demo-eval-private-spans',
        render: privateSpansSection,
        command: `bun run eval --dataset ${TINYSTORIES} --private-entities 3 --json`,
        required: false,
      },
      {
        title: '`router train` with its defaults: the held-out report against --router builtin',
        file: 'router-train-demo',
        render: routerTrainSection,
        command: `bun run router train --edge-model models/stories260k-distilled-1l --cloud-model models/stories260k --text ${TINYSTORIES} --out /tmp/router-runs/after-demo --json`,
        required: false,
      },
      { title: 'The edge ↔ cloud hop', file: 'demo-bench-shim', render: shimBenchSection, command: 'bun run bench shim --json', required: true },
      { title: 'Routing cost on the edge', file: 'demo-bench-edge', render: edgeBenchSection, command: 'bun run bench edge --json', required: true },
      {
        title: 'The shim under sustained load, and its memory',
        file: 'demo-bench-load',
        render: loadBenchSection,
        command: 'bun run bench load --json',
        required: true,
      },
      {
        title: 'Latency over a 170 ms round trip',
        file: 'demo-bench-latency',
        render: latencyBenchSection,
        command: 'bun run bench latency --prompts 4 --max-new-tokens 48 --thresholds 0.6,0.7,0.8 --speculate off,on --json',
        required: false,
      },
      {
        title: "The latency floor at 24 new tokens: where a joint answer's extra time goes, with and without the prompt sent ahead",
        file: 'demo-bench-latency-floor-24',
        render: latencyFloorSection,
        command:
          'bun run bench latency --prompts 3 --max-new-tokens 24 --rtt-ms 170 --router uniform --thresholds 0.1 --speculate off,on --cloud-prefill lazy,eager ' +
          '--edge-model models/stories260k-distilled-1l --cloud-model models/stories260k-distilled-1l --edge-cpus 0 --shim-cpus 1 --threads 1 --json',
        required: false,
      },
      {
        title: "The latency floor at 128 new tokens: where a joint answer's extra time goes, with and without the prompt sent ahead",
        file: 'demo-bench-latency-floor-128',
        render: latencyFloorSection,
        command:
          'bun run bench latency --prompts 3 --max-new-tokens 128 --rtt-ms 170 --router uniform --thresholds 0.1 --speculate off,on --cloud-prefill lazy,eager ' +
          '--edge-model models/stories260k-distilled-1l --cloud-model models/stories260k-distilled-1l --edge-cpus 0 --shim-cpus 1 --threads 1 --json',
        required: false,
      },
    ],
  },
  {
    title: 'The truncated pair: stories260k-3l → stories260k',
    about:
      'A bigger quality gap over the same cloud model: the edge model `models/stories260k-3l` is the first 3 of the 5 layers with ' +
      `no training, with its router \`models/router-stories260k-3l\` (built by \`bun run models demo\` too), default τ ${TRUNCATED_TAU}.`,
    measurements: [
      {
        title: 'Routing quality on held-out TinyStories paragraphs',
        file: 'truncated-eval-tinystories',
        render: (f) => textEvalSection(f, { plots: 'truncated-tinystories', defaultThreshold: TRUNCATED_TAU }),
        command: `bun run eval --dataset ${TINYSTORIES} ${TRUNCATED} --calibration-runs 3 --out docs/plots --name truncated-tinystories --force --json`,
        required: true,
      },
      {
        title: 'Routing quality on CommonsenseQA',
        file: 'truncated-eval-commonsenseqa',
        render: (f) => choiceEvalSection(f, { plots: 'truncated-commonsenseqa' }),
        command: `bun run eval --dataset ${COMMONSENSEQA} ${TRUNCATED} --calibration-runs 3 --out docs/plots --name truncated-commonsenseqa --force --json`,
        required: true,
      },
    ],
  },
  {
    title: 'The tools through a running shim',
    about:
      'Router training, `router eval`, `eval` and the latency bench take the cloud as a running shim (`--cloud HOST:PORT`), whatever its ' +
      'backend, as well as a pack in process ([bring-your-own-pair.md](bring-your-own-pair.md)). The demo pair both ways: what teacher ' +
      'forcing costs through the Score call, and one evaluation run twice, the second through `bun run shim` on loopback.',
    measurements: [
      {
        title: 'Teacher forcing through the Score call',
        file: 'demo-bench-scoring',
        render: scoringBenchSection,
        command: 'bun run bench scoring --json',
        required: false,
      },
      {
        title: 'Routed steps while a tool scores through the same shim',
        file: 'demo-bench-score-flood',
        render: scoreFloodBenchSection,
        command: 'bun run bench score-flood --json',
        required: false,
      },
      {
        title: 'The same evaluation in process and through a shim',
        file: 'demo-eval-tinystories-through-shim-200',
        render: (f) => throughShimEvalSection(f, 'demo-eval-tinystories-in-process-200', RESULTS_DIR),
        command: `bun run eval --dataset ${TINYSTORIES} --limit 200 --continuations 20 --calibration-runs 2 --cloud 127.0.0.1:50599 --json (beside bun run shim --port 50599; and the same without --cloud, saved as demo-eval-tinystories-in-process-200)`,
        required: false,
      },
    ],
  },
  {
    title: 'The Qwen2.5-0.5B shape',
    about:
      'A random-weight model of the real Qwen2.5-0.5B shape (24 layers, hidden size 896, vocabulary 151,936, 1.84 GiB of float32 ' +
      'weights), built once under `models/bench/` by the first command that needs it, with a random-weight router. The weights are ' +
      "random, so only timings mean anything here: what routing and the KV cache cost next to a real edge model's decode step.",
    measurements: [
      {
        title: 'Edge decode speed',
        file: 'qwen2.5-0.5b-bench-decode',
        render: decodeBenchSection,
        command: 'bun run bench decode --preset qwen2.5-0.5b --json',
        required: false,
      },
      {
        title: 'Decode speed against llama.cpp',
        file: 'qwen2.5-0.5b-bench-decode-llama-cpp',
        render: decodePeerBenchSection,
        command: 'bun run bench decode --preset qwen2.5-0.5b --layout fused --dtype fp32,int8,q4 --peer llama.cpp --rounds 6 --json',
        required: false,
      },
      {
        title: 'Routing cost on the edge',
        file: 'qwen2.5-0.5b-bench-edge',
        render: edgeBenchSection,
        command: 'bun run bench edge --preset qwen2.5-0.5b --json',
        required: false,
      },
      {
        title: 'What a JSON schema costs the edge',
        file: 'qwen2.5-0.5b-bench-constraint',
        render: constraintBenchSection,
        command: 'bun run bench constraint --preset qwen2.5-0.5b --json',
        required: false,
      },
      {
        title: 'Latency over a 170 ms round trip, the cloud model on the other core',
        file: 'qwen2.5-0.5b-bench-latency',
        render: latencyBenchSection,
        command:
          'bun run bench latency --edge-model models/bench/qwen2.5-0.5b --router uniform --cloud-model models/bench/qwen2.5-0.5b --edge-cpus 0 ' +
          '--shim-cpus 1 --threads 1 --prompts 4 --max-new-tokens 64 --thresholds 0.15,0.4 --speculate off,on --json',
        required: false,
      },
      ...[24, 128].map((tokens) => ({
        title: `The latency floor at ${tokens} new tokens, with and without the prompt sent ahead`,
        file: `qwen2.5-0.5b-bench-latency-floor-${tokens}`,
        render: latencyFloorSection,
        command:
          `bun run bench latency --prompts 3 --max-new-tokens ${tokens} --rtt-ms 170 --router uniform --thresholds 0.1 --speculate off,on ` +
          '--cloud-prefill lazy,eager --edge-model models/bench/qwen2.5-0.5b --cloud-model models/bench/qwen2.5-0.5b --edge-cpus 0 --shim-cpus 1 ' +
          '--threads 1 --json',
        required: false,
      })),
      {
        title: 'The latency floor at 24 new tokens with the forward passes on the JavaScript thread (`--model-thread main`), for comparison',
        file: 'qwen2.5-0.5b-bench-latency-floor-24-main-thread',
        render: latencyFloorSection,
        command:
          'bun run bench latency --prompts 3 --max-new-tokens 24 --rtt-ms 170 --router uniform --thresholds 0.1 --speculate off,on ' +
          '--cloud-prefill lazy,eager --edge-model models/bench/qwen2.5-0.5b --cloud-model models/bench/qwen2.5-0.5b --edge-cpus 0 --shim-cpus 1 ' +
          '--threads 1 --model-thread main --json',
        required: false,
      },
    ],
  },
];

const INTRO = `# Results

Every figure on this page is rendered by \`bun run results\` (\`scripts/results-md.ts\`) from the \`--json\` output
of the command shown above it, saved under [results/](results/) with the command, the date and the machine on its
first line; a test checks that this page is what the saved data renders. Superseded figures live in git history.

Quality figures (the \`bun run eval\` runs: held-out text, CommonsenseQA) do not depend on the machine. Timings do:
they were taken on a 2-core development machine without a GPU, **loaded by other jobs** (each run's load average is
under its command), so read them as ratios within one run. To measure one again and re-render the page:

\`\`\`sh
bun run results:record demo-bench-shim -- bun run bench shim --json   # runs it, saves docs/results/demo-bench-shim.jsonl
bun run results                                                       # writes docs/results.md
\`\`\`

How the evaluation works: every threshold τ is compared with baselines that route the same share of tokens, at
random and by the edge model's own top-1 probability (and, at fixed shares, by its entropy, with an oracle that
routes exactly where only the cloud model is right). A token is routed when the router's score is below τ, so
τ = 0 routes nothing and τ = 1 everything. The plots are in [plots/](plots/), named \`<pair>-<data set>-<metric>.svg\`.`;

function measurementMarkdown(m: Measurement, dir: string): string {
  if (hasDataFile(dir, m.file) || m.required) return `### ${m.title}\n\n${m.render(readDataFile(dir, m.file))}`;
  return `### ${m.title}\n\nNot measured yet. This command measures it and saves its data file:\n\n\`\`\`sh\n${record(m.file, m.command)}\n\`\`\``;
}

/** The whole page, from the data files in `dir`; throws when a required file or a shown field is missing. */
export function renderResultsPage(dir: string = RESULTS_DIR): string {
  const sections = PAIRS.map((pair) => [`## ${pair.title}`, pair.about, ...pair.measurements.map((m) => measurementMarkdown(m, dir))].join('\n\n'));
  return `${[INTRO, ...sections].join('\n\n')}\n`;
}

if (import.meta.main) {
  try {
    const page = renderResultsPage();
    if (process.argv.includes('--check')) {
      if (readFileSync(RESULTS_PAGE, 'utf8') !== page) throw new Error(`${RESULTS_PAGE} is not what the data renders: run bun run results`);
      console.log(`${RESULTS_PAGE} is up to date`);
    } else {
      writeFileSync(RESULTS_PAGE, page);
      console.log(`wrote ${RESULTS_PAGE}`);
    }
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
