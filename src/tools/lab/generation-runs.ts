/**
 * Real generations through the decoding loop for the evaluation and the router's on-policy rounds: joint
 * mode, one prompt after another, with whatever router is being measured or trained and the cloud in
 * process or behind a shim (tool-cloud.ts). Also the cloud model's perplexity of what was generated.
 *
 * @example
 * const run = await generateAll({ edgeModel, tokenizer, cloud }, router, prompts, { threshold: 0.5, maxNewTokens: 48, temperature: 0, seed: 0 });
 * console.log(run.routed / run.tokens, (await cloudPerplexity(cloudModel, run.items)).perplexity);
 */
import type { CloudClient } from '../../edge/cloud/cloud-client.ts';
import type { RawConstraint } from '../../edge/constraint/constraint-spec.ts';
import { prepareConstraint } from '../../edge/constraint/generation-constraint.ts';
import type { ConstraintCounts } from '../../edge/constraint/token-constraint.ts';
import { encodePrompt, generate, type LoopRequest, type TokenEvent } from '../../edge/loop/decoder-loop.ts';
import type { FinishReason } from '../../edge/loop/generation-events.ts';
import { DEFAULT_LIMITS, parseGenerationRequest, type GenerationLimits } from '../../edge/request/generation-request.ts';
import type { Router } from '../../edge/routing/router.ts';
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import type { CloudScorer } from './cloud-scorer.ts';
import { repeatEnds } from '../../edge/routing/router-features.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';

/** The edge model, its tokenizer, and the cloud the loop routes to. */
export interface EvalEdge {
  edgeModel: DecoderModel;
  tokenizer: TextTokenizer;
  cloud: CloudClient;
}

export interface GeneratedItem {
  /** The ids the loop encoded the prompt to (BOS included when the pack has one), or a chat prompt's own. */
  promptIds: number[];
  /** Every id the loop emitted (EOS excluded; the token that completed a stop string included). */
  ids: number[];
  text: string;
  routed: number;
  /** How the generation ended: `eos` where the model ended it (a stop id), else at a stop string, the cap or the window. */
  finishReason: FinishReason;
}

export interface GenerationRun {
  items: GeneratedItem[];
  tokens: number;
  routed: number;
  /** Routed tokens / generated tokens over all prompts (0 when nothing was generated). */
  routedRatio: number;
  /** What the prompts' constraints changed, summed over them (absent when no prompt had one). */
  constraint?: ConstraintCounts;
}

export interface GenerationSettings {
  threshold: number;
  maxNewTokens: number;
  stop?: string[];
  /** 0 (the default) decodes greedily; above 0 samples, with `seed` plus the prompt's index as the seed. */
  temperature?: number;
  seed?: number;
  /** Per prompt, by index: the constraint its output is held to (the request's `constraint` fields); none where absent. */
  constraints?: readonly (RawConstraint | undefined)[];
  /**
   * Prompts generated at once (default 1). Each prompt's output depends on nothing but its own prompt, seed
   * and router, so any number of lanes gives the same items; a router that draws from a stream of its own
   * (the random baseline) must then be given per prompt (RouterFor).
   */
  lanes?: number;
}

/** The router every prompt uses, or one per prompt (by index), for routers whose decisions draw from a stream of their own. */
export type RouterFor = Router | ((prompt: number) => Router);

/**
 * Text to continue, encoded as the loop encodes a prompt; or a chat prompt its template rendered and
 * encoded (`ChatTemplate.encode`), whose ids are fed as they are (the text only describes them).
 */
export type Prompt = string | { text: string; ids: readonly number[] };

export function promptIdsOf(edge: Pick<EvalEdge, 'edgeModel' | 'tokenizer'>, prompt: Prompt): number[] {
  return typeof prompt === 'string' ? encodePrompt(edge, prompt) : [...prompt.ids];
}

/** A chat prompt is as long as its conversation: the edge model's window bounds it, not the HTTP API's length limit. */
const ID_PROMPT_LIMITS: GenerationLimits = { ...DEFAULT_LIMITS, maxPromptChars: Number.POSITIVE_INFINITY };

/**
 * Generates a continuation of every prompt at one threshold with `router`, `settings.lanes` prompts at a
 * time: while one prompt's step waits for onnxruntime's thread, another prompt's JS work can run.
 */
export async function generateAll(
  edge: EvalEdge,
  router: RouterFor,
  prompts: readonly Prompt[],
  settings: GenerationSettings,
  signal?: AbortSignal,
): Promise<GenerationRun> {
  const outcomes: { item: GeneratedItem; constraint?: ConstraintCounts }[] = new Array(prompts.length);
  // The first failure stops every lane (the others end at their next step, cancelled), and it is the one thrown.
  const stop = new AbortController();
  const stopWith = signal ? AbortSignal.any([signal, stop.signal]) : stop.signal;
  let failure: { error: unknown } | undefined;
  let next = 0;
  const lane = async () => {
    try {
      while (next < prompts.length && !stopWith.aborted) {
        const index = next++;
        outcomes[index] = await generateOne(edge, typeof router === 'function' ? router(index) : router, prompts[index]!, index, settings, stopWith);
      }
    } catch (error) {
      failure ??= { error };
      stop.abort();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(settings.lanes ?? 1, prompts.length)) }, lane));
  if (failure) throw failure.error;
  if (stopWith.aborted) throw new AppError('CANCELLED', 'evaluation cancelled');
  let tokens = 0;
  let routed = 0;
  let constraint: ConstraintCounts | undefined;
  for (const outcome of outcomes) {
    tokens += outcome.item.ids.length;
    routed += outcome.item.routed;
    if (outcome.constraint) constraint = addCounts(constraint, outcome.constraint);
  }
  const items = outcomes.map((o) => o.item);
  return { items, tokens, routed, routedRatio: tokens ? routed / tokens : 0, ...(constraint ? { constraint } : {}) };
}

async function generateOne(
  edge: EvalEdge,
  router: Router,
  prompt: Prompt,
  index: number,
  settings: GenerationSettings,
  signal: AbortSignal,
): Promise<{ item: GeneratedItem; constraint?: ConstraintCounts }> {
  const parsed = parseGenerationRequest(
    {
      prompt: typeof prompt === 'string' ? prompt : prompt.text,
      mode: 'joint',
      threshold: settings.threshold,
      maxNewTokens: settings.maxNewTokens,
      temperature: settings.temperature ?? 0,
      ...(settings.temperature ? { seed: (settings.seed ?? 0) + index } : {}),
      stop: settings.stop ?? [],
      ...(settings.constraints?.[index] ? { constraint: settings.constraints[index] } : {}),
    },
    typeof prompt === 'string' ? DEFAULT_LIMITS : ID_PROMPT_LIMITS,
  );
  const request: LoopRequest = typeof prompt === 'string' ? parsed : { ...parsed, promptIds: prompt.ids };
  // As an entry point does: a constraint that cannot be compiled or met is refused before generating.
  await prepareConstraint({ edgeModel: edge.edgeModel, tokenizer: edge.tokenizer }, request);
  const events: TokenEvent[] = [];
  let text = '';
  let finishReason: FinishReason = 'length';
  let constraint: ConstraintCounts | undefined;
  for await (const event of generate({ edgeModel: edge.edgeModel, router, tokenizer: edge.tokenizer, cloud: edge.cloud }, request, signal)) {
    if (event.type === 'token') events.push(event);
    else {
      if (event.finishReason === 'cancelled') throw new AppError('CANCELLED', 'evaluation cancelled');
      // A tool must not quietly turn routed tokens into edge tokens: the figures would describe another system.
      if (event.metrics.fallback > 0) {
        const reason = events.find((e) => e.source === 'fallback')?.cloudError ?? 'no reason given';
        throw new AppError('UNAVAILABLE', `the cloud failed to serve a routed token (${reason})`);
      }
      text = event.text;
      finishReason = event.finishReason;
      if (event.metrics.constraint) constraint = event.metrics.constraint;
    }
  }
  const ids = events.map((e) => e.id);
  const routed = events.filter((e) => e.source === 'llm').length;
  return { item: { promptIds: promptIdsOf(edge, prompt), ids, text, routed, finishReason }, ...(constraint ? { constraint } : {}) };
}

function addCounts(sum: ConstraintCounts | undefined, counts: ConstraintCounts): ConstraintCounts {
  return {
    cloudTokensReplaced: (sum?.cloudTokensReplaced ?? 0) + counts.cloudTokensReplaced,
    constrainedFallbacks: (sum?.constrainedFallbacks ?? 0) + counts.constrainedFallbacks,
    spanTokensDropped: (sum?.spanTokensDropped ?? 0) + counts.spanTokensDropped,
  };
}

export interface Perplexity {
  /** exp(mean negative log-likelihood per generated token); NaN when nothing was generated. */
  perplexity: number;
  tokens: number;
  /**
   * The same over the generated tokens that do not end a repeated 4-gram (rep4's): a loop's tokens are the
   * ones the cloud finds most likely, so text that repeats itself more gets a lower perplexity for it.
   */
  freshPerplexity: number;
  freshTokens: number;
}

/** The cloud model's perplexity of the generated ids, each given its prompt and the ids before it. */
export async function cloudPerplexity(scorer: CloudScorer, items: readonly GeneratedItem[]): Promise<Perplexity> {
  let nll = 0;
  let tokens = 0;
  let freshNll = 0;
  let freshTokens = 0;
  for (const item of items) {
    if (item.ids.length === 0) continue;
    const all = [...item.promptIds, ...item.ids];
    // Generation stops at the edge's window, which may be longer than the cloud's: the last window's worth.
    const window = all.slice(Math.max(0, all.length - scorer.maxContext));
    const positions = await scorer.score(window);
    const promptInWindow = item.promptIds.length - (all.length - window.length);
    const repeats = repeatEnds(item.ids);
    for (let j = Math.max(1, promptInWindow); j < window.length; j++) {
      // Position j - 1 predicts the id at j.
      const tokenNll = -positions[j - 1]!.nextLogprob;
      nll += tokenNll;
      tokens++;
      if (repeats[j - promptInWindow] === 1) continue;
      freshNll += tokenNll;
      freshTokens++;
    }
  }
  return {
    perplexity: tokens ? Math.exp(nll / tokens) : NaN,
    tokens,
    freshPerplexity: freshTokens ? Math.exp(freshNll / freshTokens) : NaN,
    freshTokens,
  };
}
