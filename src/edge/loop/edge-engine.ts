/**
 * What one generation runs on: the edge model, its router and tokenizer, the cloud when there is one, and
 * the settings of decoding ahead (speculation). Also the prompt's encoding, shared by the loop and the
 * entry points that count prompt tokens.
 */
import { AppError } from '../../shared/errors.ts';
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import type { TextDetector } from '../privacy/private-request.ts';
import type { PrivateValues } from '../privacy/private-values.ts';
import type { PrefixCache } from '../../shared/model/prefix-cache.ts';
import type { DecodeScheduler } from '../../shared/model/scheduler/decode-scheduler.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import type { BoxRouting } from '../routing/box-routing.ts';
import type { CloudClient } from '../cloud/cloud-client.ts';
import type { GenerationRequest } from '../request/generation-request.ts';
import type { Router } from '../routing/router.ts';
import type { RoutingStatusSource } from '../routing/routing-status.ts';
import type { SpeculationPolicy } from './speculation/speculation-policy.ts';
import type { RoutedTurns } from './routed-turns.ts';

/**
 * How the edge decodes ahead while a routed step is on the network (requests with `speculate`). Every
 * field has a default, so `{}` (or no settings at all) is the usual edge.
 *
 * @example
 * const engine: EdgeEngine = { edgeModel, router, tokenizer, cloud, speculation: { byDefault: 'auto', depth: 8 } };
 */
export interface SpeculationSettings {
  /**
   * What a request that does not say gets for `speculate` (the edge's --speculate setting): on, off, or
   * `auto`, decided at each routed position by `policy`; off when omitted.
   */
  byDefault?: boolean | 'auto';
  /** The running figures `auto` decides from, kept across generations; made on the first generation that needs it. */
  policy?: SpeculationPolicy;
  /** Most tokens decoded ahead past one routed position; 16 when omitted. */
  depth?: number;
  /**
   * While speculating, send the step of a second routed position at once as a conditional step (it assumes
   * the first step returns the guess) instead of waiting for the first reply; on when omitted.
   */
  conditionalSteps?: boolean;
}

export const DEFAULT_SPECULATION_DEPTH = 16;

/** When a joint generation opens its cloud conversation (the edge's --cloud-prefill; cloud-prefill.ts). */
export type CloudPrefillMode = 'eager' | 'lazy' | 'auto';

export interface CloudPrefillSettings {
  mode: CloudPrefillMode;
  /** Whether each recent conversation's last turn routed, which `auto` reads; absent: not known. */
  turns?: RoutedTurns;
}

export interface EdgeEngine {
  edgeModel: DecoderModel;
  /** Runs the generations' appends on `edgeModel` in shared passes (decode-scheduler.ts); absent: each runs alone. */
  scheduler?: DecodeScheduler;
  router: Router;
  tokenizer: TextTokenizer;
  /** Absent when the edge runs without a cloud: routed tokens then fall back to the edge model. */
  cloud?: CloudClient;
  /** Send the edge model's hidden state with routed steps (off by default: large and private). */
  sendHiddenState?: boolean;
  speculation?: SpeculationSettings;
  /** When the cloud conversation opens: absent, at the first routed token (`lazy`). */
  cloudPrefill?: CloudPrefillSettings;
  /**
   * KV caches of earlier generations (over `edgeModel`), which a new one whose prompt starts the same way
   * starts from; absent: every prompt is prefilled whole.
   */
  promptCache?: PrefixCache;
  /** Finds private entities in prompts (--private-detect); absent: only what requests mark is private. */
  privateDetector?: TextDetector;
  /** How private values are matched: in any letter case too (--private-fold-case, or a tokenizer that lowercases). */
  privateFoldCase?: boolean;
  /**
   * Routing state shared by the box's generations: budgets' spending, measured waits, the cloud's load
   * (box-routing.ts). Made on the first generation when absent.
   */
  routing?: BoxRouting;
}

/** The prompt's token ids as the loop feeds them: BOS first only when both the pack and its tokenizer have one (Qwen's has none). */
export function encodePrompt(engine: Pick<EdgeEngine, 'edgeModel' | 'tokenizer'>, prompt: string): number[] {
  const addBos = engine.edgeModel.pack.bosTokenId !== undefined && engine.tokenizer.bosId !== undefined;
  return engine.tokenizer.encode(prompt, { addBos, parseSpecialTokens: false });
}

/**
 * A request as the loop runs it. `promptIds`, when the caller has them (a chat prompt its template
 * rendered and encoded with special tokens, or a prompt sent as token ids), are fed as they are instead
 * of encoding `prompt`, which then only describes them.
 */
export type LoopRequest = GenerationRequest & {
  promptIds?: readonly number[];
  /** The request's private values (privacy/private-request.ts); absent: nothing is private. */
  privateValues?: PrivateValues;
};

/** The ids a request's generation starts from. */
export function promptIdsOf(engine: Pick<EdgeEngine, 'edgeModel' | 'tokenizer'>, request: LoopRequest): number[] {
  return request.promptIds ? [...request.promptIds] : encodePrompt(engine, request.prompt);
}

/**
 * The ids a request's generation starts from, refused (INVALID_ARGUMENT) when they fill the edge model's
 * context window: such a prompt can never produce a token. The one rule for the runtime's check before a
 * stream starts and the loop's own.
 */
export function promptIdsThatFit(engine: Pick<EdgeEngine, 'edgeModel' | 'tokenizer'>, request: LoopRequest): number[] {
  const ids = promptIdsOf(engine, request);
  const window = engine.edgeModel.pack.maxPositions;
  if (ids.length >= window)
    throw new AppError('INVALID_ARGUMENT', `prompt is ${ids.length} tokens; the edge model's context window is ${window} (including generated tokens)`);
  return ids;
}
