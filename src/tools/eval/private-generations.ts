/**
 * Generations from stories with synthetic entities, without and with pseudonyms: the same prompts, the same
 * router and τ, the loop as the edge runs it; with pseudonyms the request marks the entities private
 * (`privateTexts`, resolved into `privateValues` as EdgeRuntime.check does). The two runs of a prompt go one
 * after the other, in alternating order, so a machine's load drifting over the run weighs on both alike.
 * Every figure comes from the generations' `done` events: tokens routed, what left (metrics.cloud) and how
 * long a token took; the cloud model's perplexity of the outputs is scored after.
 *
 * @example
 * const [plain, pseudonymised] = await privateGenerations({ edge, router, scorer, stories, threshold: 0.8, maxNewTokens: 64 });
 * pseudonymised.placeholders; pseudonymised.withheldSteps; pseudonymised.msPerToken;
 */
import { generate, encodePrompt, type LoopRequest } from '../../edge/loop/decoder-loop.ts';
import type { DoneEvent, TokenEvent } from '../../edge/loop/generation-events.ts';
import { privateValuesFor } from '../../edge/privacy/private-request.ts';
import { parseGenerationRequest } from '../../edge/request/generation-request.ts';
import type { Router } from '../../edge/routing/router.ts';
import { AppError } from '../../shared/errors.ts';
import type { CloudScorer } from '../lab/cloud-scorer.ts';
import { cloudPerplexity, type EvalEdge, type GeneratedItem } from '../lab/generation-runs.ts';
import type { ProgressReporter } from '../lab/progress.ts';
import type { StoryWithEntities } from './synthetic-entities.ts';

/** The generations of one run (one τ, with or without pseudonyms) over every prompt. */
export interface GenerationPrivacyRun {
  prompts: number;
  tokens: number;
  /** Tokens the cloud decided, and their share of the tokens. */
  routed: number;
  routedShare: number;
  /** Routed positions the edge decided because a private value was under way there. */
  withheldSteps: number;
  /** Distinct placeholders the cloud read, summed over the generations. */
  placeholders: number;
  /** What left the box (metrics.cloud, summed): token ids, serialized bytes, steps, streams opened. */
  tokensSent: number;
  bytesSent: number;
  steps: number;
  streams: number;
  /** Wall time of a generation (prompt included) per generated token, and the part spent on cloud steps. */
  msPerToken: number;
  cloudMsPerToken: number;
  /**
   * Wall time between tokens after the first (cloud waits and placeholder translation included): the time a
   * reader waits per token once the answer streams. The target with pseudonyms: within 5% of without.
   */
  msBetweenTokens: number;
  /** Of it, the time spent translating to and from placeholders (metrics.cloud.pseudonymMs), per token. */
  pseudonymMsPerToken: number;
  /** The cloud model's perplexity of the generated tokens. */
  cloudPerplexity: number;
  /** Generations whose cloud text (`done.cloudText`) holds an inserted entity's text. */
  cloudTextsWithEntities: number;
}

export interface PrivateGeneration {
  story: StoryWithEntities;
  pseudonyms: boolean;
  ids: number[];
  done: DoneEvent;
}

export interface GenerationOptions {
  edge: EvalEdge;
  router: Router;
  scorer: CloudScorer;
  stories: readonly StoryWithEntities[];
  threshold: number;
  maxNewTokens: number;
  /** Told each story and run before its generation's steps go out (the leak check reads the contexts sent). */
  onStory?: (story: StoryWithEntities, pseudonyms: boolean) => void;
  /** Every generation once done, for the checks and examples. */
  onGeneration?: (generation: PrivateGeneration) => void;
  progress?: ProgressReporter;
}

async function generateOne(o: GenerationOptions, story: StoryWithEntities, pseudonyms: boolean): Promise<PrivateGeneration> {
  const request: LoopRequest = parseGenerationRequest({
    prompt: story.prompt,
    mode: 'joint',
    threshold: o.threshold,
    maxNewTokens: o.maxNewTokens,
    temperature: 0,
    stop: [],
    ...(pseudonyms ? { privateTexts: story.entities } : {}),
  });
  // What EdgeRuntime.check does for a served request; a box detector would add what it finds (none here).
  if (pseudonyms) request.privateValues = privateValuesFor(request, undefined);
  const { edgeModel, tokenizer, cloud } = o.edge;
  o.onStory?.(story, pseudonyms);
  const events: TokenEvent[] = [];
  for await (const event of generate({ edgeModel, router: o.router, tokenizer, cloud }, request)) {
    if (event.type === 'token') {
      events.push(event);
      continue;
    }
    if (event.finishReason === 'cancelled') throw new AppError('CANCELLED', 'evaluation cancelled');
    if (event.metrics.fallback > 0) {
      const reason = events.find((e) => e.source === 'fallback')?.cloudError ?? 'no reason given';
      throw new AppError('UNAVAILABLE', `the cloud failed to serve a routed token (${reason})`);
    }
    return { story, pseudonyms, ids: events.map((e) => e.id), done: event };
  }
  throw new AppError('INTERNAL', 'a generation ended without its done event');
}

function summary(o: GenerationOptions, generations: readonly PrivateGeneration[], perplexity: number): GenerationPrivacyRun {
  const sum = (f: (g: PrivateGeneration) => number) => generations.reduce((s, g) => s + f(g), 0);
  const tokens = sum((g) => g.done.metrics.tokens);
  const routed = sum((g) => g.done.metrics.routed);
  const perToken = (ms: number) => (tokens ? ms / tokens : NaN);
  return {
    prompts: generations.length,
    tokens,
    routed,
    routedShare: tokens ? routed / tokens : 0,
    withheldSteps: sum((g) => g.done.metrics.cloud.withheldSteps),
    placeholders: sum((g) => g.done.metrics.cloud.placeholders),
    tokensSent: sum((g) => g.done.metrics.cloud.tokensSent),
    bytesSent: sum((g) => g.done.metrics.cloud.bytesSent),
    steps: sum((g) => g.done.metrics.cloud.steps),
    streams: sum((g) => g.done.metrics.cloud.streams),
    msPerToken: perToken(sum((g) => g.done.metrics.totalMs)),
    cloudMsPerToken: perToken(sum((g) => g.done.metrics.cloudMs)),
    msBetweenTokens:
      sum((g) => g.done.metrics.totalMs - g.done.metrics.ttftMs) /
      Math.max(
        1,
        sum((g) => Math.max(0, g.done.metrics.tokens - 1)),
      ),
    pseudonymMsPerToken: perToken(sum((g) => g.done.metrics.cloud.pseudonymMs)),
    cloudPerplexity: perplexity,
    cloudTextsWithEntities: generations.filter((g) => g.story.entities.some((e) => g.done.cloudText.includes(e.text))).length,
  };
}

/** Both runs at one τ: `[without pseudonyms, with pseudonyms]`, and how many prompts gave the same tokens either way. */
export async function privateGenerations(o: GenerationOptions): Promise<{ runs: [GenerationPrivacyRun, GenerationPrivacyRun]; identicalOutputs: number }> {
  const plain: PrivateGeneration[] = [];
  const pseudonymised: PrivateGeneration[] = [];
  for (const [i, story] of o.stories.entries()) {
    for (const pseudonyms of i % 2 === 0 ? [false, true] : [true, false]) {
      const generation = await generateOne(o, story, pseudonyms);
      (pseudonyms ? pseudonymised : plain).push(generation);
      o.onGeneration?.(generation);
    }
    o.progress?.update(i + 1);
  }
  const perplexity = async (generations: readonly PrivateGeneration[]) => {
    const items: GeneratedItem[] = generations.map((g) => ({
      promptIds: encodePrompt(o.edge, g.story.prompt),
      ids: g.ids,
      text: g.done.text,
      routed: g.done.metrics.routed,
      finishReason: g.done.finishReason,
    }));
    return (await cloudPerplexity(o.scorer, items)).perplexity;
  };
  const identicalOutputs = plain.filter((g, i) => g.ids.join() === pseudonymised[i]!.ids.join()).length;
  return {
    runs: [summary(o, plain, await perplexity(plain)), summary(o, pseudonymised, await perplexity(pseudonymised))],
    identicalOutputs,
  };
}
