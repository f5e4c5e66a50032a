/**
 * Prefill ahead: in joint mode the generation's cloud conversation may open as soon as the request is
 * accepted, with the prompt, so that the shim prefills it while the edge prefills and decodes, instead of at
 * the first routed token, which would then wait for the cloud's prefill too. The conversation is the one the
 * loop's routed steps use (GenerationCloud.conversation: privacy and the gate apply alike). The tokens the
 * edge decides then follow between steps as it decides them (`sendDecidedAhead`, proto `extend`), so that
 * the first routed step sends only its own and finds the rest computed. Tokens are the same either way: the open carries
 * context and settings only, and the cloud's cache holds what a lazy open would have computed.
 *
 * The edge's --cloud-prefill says when: `lazy` at the first routed token (as before), `eager` always in joint
 * mode, `auto` when the generation is likely to route (`prefillsAhead`, a pure function of what is known when
 * the request is accepted: its budget, τ, the conversation's earlier turns, the box's recent router scores).
 * The router's scores on the prompt itself come too late to help: the last prompt position's score is the
 * first routing decision, which opens the conversation at once when it routes.
 *
 * @example
 * sendPromptAhead(state);        // before the edge's prefill
 * // ... the generation ...
 * rememberTurn(state);           // the conversation's next turn reads whether this one routed
 */
import type { CloudConnectionState } from '../cloud/cloud-client.ts';
import type { Mode } from '../request/generation-request.ts';
import type { CloudPrefillMode } from './edge-engine.ts';
import type { GenerationState } from './generation-state.ts';

export type { CloudPrefillMode } from './edge-engine.ts';
export const CLOUD_PREFILL_MODES: readonly CloudPrefillMode[] = ['eager', 'lazy', 'auto'];

/** What `auto` decides from, all known when the request is accepted. */
export interface PrefillInputs {
  setting: CloudPrefillMode;
  mode: Mode;
  /** A stream opens ahead only while the cloud takes steps (idle, connecting, ready): never as the breaker's probe. */
  cloudState: CloudConnectionState;
  threshold: number;
  routeShare?: number;
  routeTokensPerMinute?: number;
  maxNewTokens: number;
  /** Whether the conversation's earlier turns routed any token; undefined when none is known. */
  earlierTurnsRouted: boolean | undefined;
  /** Share of the box's recent router scores below τ; undefined before any. */
  lowScoreShare: number | undefined;
}

/** States in which a step would be sent now (not refused, not waiting on the breaker's probe). */
const TAKES_STEPS: ReadonlySet<CloudConnectionState> = new Set(['idle', 'connecting', 'ready']);

/**
 * Whether the generation opens its cloud conversation ahead. `auto`, in order: a budget that routes a share or
 * a token rate will route; τ ≥ 1 routes every position and τ ≤ 0 none; the conversation's earlier turns say
 * what this one is likely to do; else the box's recent scores at this τ, where at least one routed token is
 * expected over the answer's length; with nothing known (a fresh box), it opens.
 *
 * @example
 * prefillsAhead({ ...inputs, setting: 'auto', earlierTurnsRouted: false }); // false
 */
export function prefillsAhead(inputs: PrefillInputs): boolean {
  const { setting, mode, cloudState, threshold } = inputs;
  if (setting === 'lazy' || mode !== 'joint' || !TAKES_STEPS.has(cloudState)) return false;
  if (setting === 'eager') return true;
  if ((inputs.routeShare ?? 0) > 0 || (inputs.routeTokensPerMinute ?? 0) > 0) return true;
  if (threshold >= 1) return true;
  if (threshold <= 0) return false;
  if (inputs.earlierTurnsRouted !== undefined) return inputs.earlierTurnsRouted;
  if (inputs.lowScoreShare !== undefined) return inputs.lowScoreShare * inputs.maxNewTokens >= 1;
  return true;
}

/** `auto`'s inputs for this generation. */
export function prefillInputs(state: GenerationState): PrefillInputs {
  const { engine, request, routing } = state;
  const settings = engine.cloudPrefill;
  return {
    setting: settings?.mode ?? 'lazy',
    mode: request.mode,
    cloudState: engine.cloud?.state() ?? 'unavailable',
    threshold: request.threshold,
    routeShare: request.routeShare,
    routeTokensPerMinute: request.routeTokensPerMinute,
    maxNewTokens: request.maxNewTokens,
    earlierTurnsRouted: settings?.turns?.get(request.conversation),
    lowScoreShare: routing.scores.shareBelow(request.threshold) ?? undefined,
  };
}

/** Opens the generation's conversation with its prompt when the setting says so; true when it did. */
export function sendPromptAhead(state: GenerationState): boolean {
  if (!prefillsAhead(prefillInputs(state))) return false;
  return state.cloud.sendAhead(state.stepRequest(state.context, state.sources, { tokenIndex: 0, maxTokens: 1, score: null }));
}

/**
 * Sends the tokens the edge decided ahead of the next routed step, when the prompt went ahead
 * (GenerationCloud.extendAhead): called once they are in the context, before the edge's forward pass over
 * them, so that the shim computes them while the edge does.
 */
export function sendDecidedAhead(state: GenerationState): void {
  // Nothing goes ahead of a step that will not come: the answer ends here. (A prompt sent ahead means joint mode.)
  if (state.endBeforeStep() !== undefined) return;
  state.cloud.extendAhead(() => state.stepRequest(state.context, state.sources, { tokenIndex: state.metrics.tokens, maxTokens: 1, score: null }));
}

/** Records whether this turn of a named conversation routed, for `auto` on its next turn. */
export function rememberTurn(state: GenerationState): void {
  const { conversation } = state.request;
  const turns = state.engine.cloudPrefill?.turns;
  if (conversation !== undefined && turns && state.request.mode === 'joint') turns.remember(conversation, state.metrics.routed + state.metrics.fallback > 0);
}
