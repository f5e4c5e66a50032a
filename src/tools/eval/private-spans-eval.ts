/**
 * What private spans cost (`bun run eval --private-entities N`): held-out stories with N synthetic entities
 * each (synthetic-entities.ts), evaluated twice at each τ, without and with pseudonyms; the text is the
 * same both times, only the privacy differs.
 *
 * 1. Teacher forcing through the cloud conversation (private-forcing.ts): share routed, routed positions
 *    the privacy kept home, accuracy and the recovered fraction of the edge→cloud gap.
 * 2. Generations from the stories' openings, entities included (private-generations.ts): share routed,
 *    withheld steps, placeholders, what left the box, time per token, the cloud's perplexity of the output.
 *
 * And the leak check: every context a pseudonymised run sends the cloud, and every generation's cloud text,
 * is searched for the inserted entities' text; the runs without pseudonyms are searched too, to show the
 * check finds what it looks for.
 *
 * @example
 * const result = await evaluatePrivateSpans({ edge, scorer, router, routerPack, paragraphs, entities: 3, thresholds: [0.8], seed: 0, continuations: 20, maxNewTokens: 64 });
 * result.leakCheck.passed; result.runs[1].teacherForcing.gapRecovered;
 */
import { interceptSteps } from '../../edge/cloud/cloud-client.ts';
import { encodePrompt } from '../../edge/loop/edge-engine.ts';
import type { PrivateText } from '../../edge/privacy/private-values.ts';
import type { Router } from '../../edge/routing/router.ts';
import { AppError } from '../../shared/errors.ts';
import type { CloudScorer } from '../lab/cloud-scorer.ts';
import { ALL_EXTRA_WIDTH } from '../lab/feature-matrix.ts';
import type { TeacherForced } from '../lab/forced-records.ts';
import type { EvalEdge } from '../lab/generation-runs.ts';
import type { ProgressReporter } from '../lab/progress.ts';
import { teacherForce } from '../lab/teacher-forcing.ts';
import { scoreWithRouterPack } from '../router/batch-scorer.ts';
import { MAX_SCORE } from '../router/mlp.ts';
import { forceThroughCloud, type ForcedPrivacyRun } from './private-forcing.ts';
import { privateGenerations, type GenerationPrivacyRun } from './private-generations.ts';
import { insertEntities, type StoryWithEntities } from './synthetic-entities.ts';

export interface PrivateSpansOptions {
  edge: EvalEdge;
  scorer: CloudScorer;
  router: Router;
  /** The trained router's pack, scored in batches under teacher forcing; absent = the built-in top-1 scorer. */
  routerPack?: string;
  paragraphs: readonly string[];
  /** Synthetic entities per paragraph. */
  entities: number;
  thresholds: readonly number[];
  /** Seeds the entities (each paragraph's from this and its index). */
  seed: number;
  /** How many stories get a generated continuation (the first ones). */
  continuations: number;
  maxNewTokens: number;
  progress?: ProgressReporter;
}

export interface PrivacyRun {
  threshold: number;
  pseudonyms: boolean;
  teacherForcing: ForcedPrivacyRun;
  generation: GenerationPrivacyRun & { identicalOutputs: number };
}

export interface LeakCheck {
  /** No context a pseudonymised run sent, and no cloud text of its generations, holds an inserted entity. */
  passed: boolean;
  /** Contexts sent to the cloud by the pseudonymised runs (steps of every conversation), and those holding an entity's text. */
  contextsChecked: number;
  contextLeaks: number;
  /** Generations' cloud texts (`done.cloudText`) of the pseudonymised runs, and those holding an entity's text. */
  cloudTextsChecked: number;
  cloudTextLeaks: number;
  /** Contexts of the runs without pseudonyms holding an entity's text: the check finds what it looks for. */
  plainContextsWithEntities: number;
}

export interface PrivateSpansResult {
  kind: 'private-spans';
  entitiesPerParagraph: number;
  /** Stories evaluated, and held-out paragraphs left out for being longer than the context window with their entities. */
  paragraphs: number;
  skippedParagraphs: number;
  positions: number;
  /** Entities inserted, over all stories. */
  entities: number;
  smallOnlyAccuracy: number;
  largeOnlyAccuracy: number;
  continuations: number;
  maxNewTokens: number;
  runs: PrivacyRun[];
  leakCheck: LeakCheck;
  /** The first generated story: its prompt, its entities, and what the cloud saw of its pseudonymised generation at the first τ. */
  example: { prompt: string; entities: PrivateText[]; cloudText: string } | null;
}

/** Each paragraph's own seed, from the run's and its index. */
export function storySeed(seed: number, index: number): number {
  return (Math.imul(seed, 0x9e3779b1) + index) >>> 0;
}

/** The held-out paragraphs with their entities, those that fit the shorter context window. */
export function storiesWithEntities(
  edge: Pick<EvalEdge, 'edgeModel' | 'tokenizer'>,
  paragraphs: readonly string[],
  entities: number,
  seed: number,
  window: number,
) {
  const stories: StoryWithEntities[] = [];
  let skipped = 0;
  for (const [i, paragraph] of paragraphs.entries()) {
    const story = insertEntities(paragraph, entities, storySeed(seed, i));
    if (encodePrompt(edge, story.text).length > window) skipped++;
    else stories.push(story);
  }
  return { stories, skipped };
}

/** Searches what reaches the cloud for the current story's entities, as the runs go. */
class LeakWatch {
  story: StoryWithEntities | undefined;
  pseudonyms = false;
  readonly check: LeakCheck = { passed: true, contextsChecked: 0, contextLeaks: 0, cloudTextsChecked: 0, cloudTextLeaks: 0, plainContextsWithEntities: 0 };

  constructor(private readonly decode: (ids: readonly number[]) => string) {}

  holdsEntity(text: string, story: StoryWithEntities | undefined = this.story): boolean {
    return story?.entities.some((e) => text.includes(e.text)) ?? false;
  }

  context(ids: readonly number[]): void {
    const found = this.holdsEntity(this.decode(ids));
    if (!this.pseudonyms) this.check.plainContextsWithEntities += found ? 1 : 0;
    else {
      this.check.contextsChecked++;
      if (found) this.check.contextLeaks++;
    }
  }

  cloudText(text: string, story: StoryWithEntities): void {
    this.check.cloudTextsChecked++;
    if (this.holdsEntity(text, story)) this.check.cloudTextLeaks++;
  }

  result(): LeakCheck {
    return { ...this.check, passed: this.check.contextLeaks === 0 && this.check.cloudTextLeaks === 0 };
  }
}

export async function evaluatePrivateSpans(o: PrivateSpansOptions): Promise<PrivateSpansResult> {
  const { tokenizer, edgeModel } = o.edge;
  const window = Math.min(edgeModel.pack.maxPositions, o.scorer.maxContext);
  const { stories, skipped } = storiesWithEntities(o.edge, o.paragraphs, o.entities, o.seed, window);
  if (stories.length === 0) throw new AppError('INVALID_ARGUMENT', `no paragraph fits the context window (${window} tokens) with its entities`);
  const { progress } = o;
  let forced: TeacherForced;
  try {
    progress?.start('teacher forcing', stories.length);
    forced = await teacherForce({
      edgeModel,
      cloud: o.scorer,
      tokenizer,
      paragraphs: stories.map((s) => s.text),
      onParagraph: (done) => progress?.update(done),
    });
  } finally {
    progress?.stop();
  }
  const n = forced.count;
  const top1 = Float32Array.from({ length: n }, (_, i) => Math.min(forced.extra[i * ALL_EXTRA_WIDTH + 1]!, MAX_SCORE));
  const scores = o.routerPack ? await scoreWithRouterPack(o.routerPack, forced) : top1;
  let edgeRight = 0;
  let cloudRight = 0;
  for (let i = 0; i < n; i++) {
    edgeRight += forced.edgeCorrect[i]!;
    cloudRight += forced.cloudCorrect[i]!;
  }

  const watch = new LeakWatch((ids) => tokenizer.decode(ids));
  const cloud = interceptSteps(o.edge.cloud, (request, next) => {
    watch.context(request.context);
    return next(request);
  });
  const edge: EvalEdge = { ...o.edge, cloud };
  const onStory = (story: StoryWithEntities, pseudonyms: boolean) => {
    watch.story = story;
    watch.pseudonyms = pseudonyms;
  };
  const prompts = stories.slice(0, o.continuations);
  let example: PrivateSpansResult['example'] = null;
  const runs: PrivacyRun[] = [];
  for (const threshold of o.thresholds) {
    const forcedRuns: ForcedPrivacyRun[] = [];
    for (const pseudonyms of [false, true]) {
      try {
        progress?.start(`τ=${threshold} ${pseudonyms ? 'pseudonyms' : 'plain'}`, stories.length);
        forcedRuns.push(await forceThroughCloud({ edge, forced, scores, stories, threshold, pseudonyms, onStory: (s) => onStory(s, pseudonyms), progress }));
      } finally {
        progress?.stop();
      }
    }
    let generated: Awaited<ReturnType<typeof privateGenerations>>;
    try {
      progress?.start(`τ=${threshold} generating`, prompts.length);
      generated = await privateGenerations({
        edge,
        router: o.router,
        scorer: o.scorer,
        stories: prompts,
        threshold,
        maxNewTokens: o.maxNewTokens,
        onStory,
        onGeneration: (g) => {
          if (!g.pseudonyms) return;
          watch.cloudText(g.done.cloudText, g.story);
          if (!example && g.story === prompts[0]) example = { prompt: g.story.prompt, entities: g.story.entities, cloudText: g.done.cloudText };
        },
        progress,
      });
    } finally {
      progress?.stop();
    }
    for (const [i, pseudonyms] of [false, true].entries()) {
      runs.push({ threshold, pseudonyms, teacherForcing: forcedRuns[i]!, generation: { ...generated.runs[i]!, identicalOutputs: generated.identicalOutputs } });
    }
  }
  return {
    kind: 'private-spans',
    entitiesPerParagraph: o.entities,
    paragraphs: stories.length,
    skippedParagraphs: skipped,
    positions: n,
    entities: stories.reduce((s, story) => s + story.entities.length, 0),
    smallOnlyAccuracy: n ? edgeRight / n : NaN,
    largeOnlyAccuracy: n ? cloudRight / n : NaN,
    continuations: prompts.length,
    maxNewTokens: o.maxNewTokens,
    runs,
    leakCheck: watch.result(),
    example,
  };
}
