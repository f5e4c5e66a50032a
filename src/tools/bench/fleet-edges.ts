/**
 * The simulated edges of `bench fleet`. Each plays an edge box's decoding against the shim, one Route
 * stream per generation: it opens a session on a prompt window of real text, then decodes `genTokens`
 * tokens at the edge's pace, `tokenMs` per edge token. A token routes with probability `share` (a seeded
 * generator per edge and generation, so runs are comparable); a routed step asks the shim for `span`
 * tokens, carries the edge's tokens since the last step, and waits for the reply: the edge decodes
 * nothing meanwhile, as without speculation. Then the stream closes and the next generation opens a
 * fresh one, so sessions churn. With `tokenMs` 0 the edge is closed-loop: a step goes out as soon as
 * the previous reply is in.
 *
 * @example
 * const tally = new FleetTally();
 * await Promise.all(clients.map((client, i) => fleetEdge(client, corpus, i, { pace, seed: 1, measureFrom, deadline }, tally)));
 */
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import type { CloudStepRequest } from '../../edge/cloud/cloud-client.ts';
import type { GrpcCloudClient } from '../../edge/cloud/grpc-cloud-client.ts';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { promptWindow, type Corpus } from './load-workers.ts';
import { CloudGate } from '../../edge/cloud/cloud-gate.ts';

export interface EdgePace {
  /** Time of one edge token (0: closed loop, steps as fast as replies come). */
  tokenMs: number;
  /** Probability that a token is routed. */
  share: number;
  /** Tokens one routed step asks for. */
  span: number;
  /** Tokens per generation. */
  genTokens: number;
}

export interface FleetEdgeRun {
  pace: EdgePace;
  seed: number;
  /** Steps that start before this are warm-up: served, not counted. */
  measureFrom: number;
  /** No step starts after this; the generation in progress ends there (its stream closed). */
  deadline: number;
}

/** What the edges of one row measured. */
export class FleetTally {
  steps = 0;
  generations = 0;
  errors = 0;
  /** Round trip of each counted step, and that minus the backend time the shim reported for it. */
  readonly roundTripMs: number[] = [];
  readonly addedMs: number[] = [];
  /** The shim's own time per counted step as it reports it (StepResult.shim_ms): no network, no client. */
  readonly shimMs: number[] = [];
  /** Over counted steps: prompt tokens the backend had cached, and context tokens sent. */
  cachedTokens = 0;
  contextTokens = 0;
  /** The same over the steps after each generation's first (whose prompt no cache has seen yet). */
  followUpCachedTokens = 0;
  followUpContextTokens = 0;
  readonly messages = new Set<string>();

  fail(e: unknown): void {
    this.errors++;
    if (this.messages.size < 5) this.messages.add(errorMessage(e));
  }
}

/** Routed steps per second that `edges` edges would send if every reply were instant. */
export function offeredStepsPerS(edges: number, pace: EdgePace): number | null {
  if (pace.tokenMs === 0) return null;
  // Per routed step: `span` cloud tokens and, on average, span × (1 − share) / share edge tokens.
  const edgeMsPerStep = ((pace.span * (1 - pace.share)) / pace.share) * pace.tokenMs;
  return (edges * 1000) / edgeMsPerStep;
}

/** A simulated edge's routed step: greedy, `pace.span` tokens at most, within the generation's length. */
export function simulatedStep(
  context: number[],
  sources: TokenSource[],
  produced: number,
  pace: EdgePace,
  at: { score: number; cut: number },
): CloudStepRequest {
  const maxTokens = Math.min(pace.span, pace.genTokens - produced);
  return {
    context,
    sources,
    tokenIndex: produced,
    maxTokens,
    temperature: 0,
    topP: 1,
    stopTokenIds: [],
    routerScore: at.score,
    threshold: at.cut,
    topLogprobs: 0,
  };
}

export function sleepUntil(time: number): Promise<void> | undefined {
  const wait = time - performance.now();
  return wait > 0 ? Bun.sleep(wait) : undefined;
}

/** One edge: generations back to back until the deadline; stops at its first error. */
export async function fleetEdge(client: GrpcCloudClient, corpus: Corpus, index: number, run: FleetEdgeRun, tally: FleetTally): Promise<void> {
  const { pace, deadline, measureFrom } = run;
  // Edges that start together would step together: each starts somewhere in its first step's interval.
  const interval = pace.tokenMs * (pace.span / pace.share);
  await sleepUntil(performance.now() + seededRandom(run.seed * 7919 + index)() * Math.min(interval, 1_000));
  for (let g = 0; performance.now() < deadline; g++) {
    const random = seededRandom((run.seed * 1_000_003 + index) * 8191 + g);
    const window = promptWindow(corpus, index, g, pace.genTokens);
    const { context } = window;
    const sources: TokenSource[] = context.map(() => 'prompt');
    let edgeAt = window.next;
    const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: `fleet-${index}-${g}` });
    try {
      let produced = 0;
      let steps = 0;
      let due = performance.now();
      while (produced < pace.genTokens) {
        if (random() >= pace.share) {
          context.push(corpus.ids[edgeAt++]!);
          sources.push('slm');
          produced++;
          due += pace.tokenMs;
          continue;
        }
        await sleepUntil(due);
        const started = performance.now();
        if (started >= deadline) break;
        const reply = await conversation.next(simulatedStep(context, sources, produced, pace, { score: 0.2, cut: 0.5 }));
        const finished = performance.now();
        if (reply.tokens.length === 0) throw new AppError('INTERNAL', 'a routed step returned no token');
        if (started >= measureFrom) {
          tally.steps++;
          tally.roundTripMs.push(finished - started);
          tally.addedMs.push(finished - started - reply.backendMs);
          tally.shimMs.push(reply.shimMs);
          tally.cachedTokens += reply.cachedTokens;
          tally.contextTokens += context.length;
          if (steps > 0) {
            tally.followUpCachedTokens += reply.cachedTokens;
            tally.followUpContextTokens += context.length;
          }
        }
        steps++;
        for (const id of reply.tokens) {
          context.push(id);
          sources.push('llm');
        }
        produced += reply.tokens.length;
        due = finished;
      }
      await sleepUntil(Math.min(due, deadline));
      if (produced >= pace.genTokens) tally.generations++;
    } catch (e) {
      tally.fail(e);
      return;
    } finally {
      await conversation.close();
    }
  }
}
