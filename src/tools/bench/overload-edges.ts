/**
 * The simulated edges of `bench fleet --overload`: like fleet-edges.ts, each plays an edge box decoding at
 * its pace against the shim, but it decides each position as the real edge does, with the real routing cut
 * (src/edge/routing/routing-cut.ts) over a router score drawn uniformly (seeded), and with the real edge's answers
 * to a cloud that cannot keep up: a step the shim refuses as overloaded, or that fails (deadline, broken
 * stream, open circuit), is decided on the edge (the text's next token) and decoding goes on. Each edge is
 * its own box: its own BoxRouting (budgets' state), its own gRPC client and breaker.
 *
 * A routed position's wait is from sending the step to its reply, refusal or failure: what the edge's user
 * waits for that token. A step past a wait budget is `late`: the edge gave up on it by its own budget and
 * decided the token (the breaker does not count it). A generation fails when one of its routed steps ended
 * in any other error (the edges' own deadline, a broken stream, an open circuit): what a user of today's
 * edge sees as the cloud failing.
 *
 * @example
 * const tally = new OverloadTally();
 * await Promise.all(clients.map((client, i) => overloadEdge(client, corpus, i, { pace, policy, seed: 1, measureFrom, deadline }, tally)));
 */
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import { BoxRouting } from '../../edge/routing/box-routing.ts';
import type { GrpcCloudClient } from '../../edge/cloud/grpc-cloud-client.ts';
import { RoutingCut } from '../../edge/routing/routing-cut.ts';
import { errorMessage, isAppError } from '../../shared/errors.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { simulatedStep, sleepUntil, type EdgePace } from './fleet-edges.ts';
import { promptWindow, type Corpus } from './load-workers.ts';
import { CloudGate } from '../../edge/cloud/cloud-gate.ts';

/** How the simulated edges route: τ = the pace's share of uniform scores, optionally under a wait budget. */
export interface OverloadPolicy {
  name: 'threshold' | 'wait-budget';
  /** The wait budget (ms), for `wait-budget`. */
  waitMs?: number;
}

export interface OverloadEdgeRun {
  pace: EdgePace;
  policy: OverloadPolicy;
  seed: number;
  /** Positions decided before this are warm-up: not counted. */
  measureFrom: number;
  deadline: number;
}

/** What the edges of one overload row measured. */
export class OverloadTally {
  /** Per routed position: its wait, in ms. */
  readonly waitMs: number[] = [];
  served = 0;
  overloaded = 0;
  late = 0;
  failed = 0;
  generations = 0;
  failedGenerations = 0;
  /** Per edge: tokens decided and tokens the cloud returned (realized share per edge). */
  readonly perEdge = new Map<number, { tokens: number; cloud: number }>();
  readonly messages = new Set<string>();

  count(edge: number, tokens: number, cloud: number): void {
    const e = this.perEdge.get(edge) ?? { tokens: 0, cloud: 0 };
    e.tokens += tokens;
    e.cloud += cloud;
    this.perEdge.set(edge, e);
  }
}

/** One edge: generations back to back until the deadline, never stopping for the cloud. */
export async function overloadEdge(client: GrpcCloudClient, corpus: Corpus, index: number, run: OverloadEdgeRun, tally: OverloadTally): Promise<void> {
  const { pace, policy, deadline, measureFrom } = run;
  const box = new BoxRouting();
  const scores = seededRandom(run.seed * 7919 + index);
  // Edges that start together would step together: each starts somewhere in its first second.
  await Bun.sleep(scores() * 1_000);
  for (let g = 0; performance.now() < deadline; g++) {
    const window = promptWindow(corpus, index, g, pace.genTokens);
    const { context } = window;
    const sources: TokenSource[] = context.map(() => 'prompt');
    let edgeAt = window.next;
    const cut = RoutingCut.for({ threshold: pace.share, ...(policy.waitMs === undefined ? {} : { routeWaitMs: policy.waitMs }) }, box);
    const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: `overload-${index}-${g}`, stepTimeoutMs: cut.waitMs });
    let failedHere = false;
    let measured = false;
    // As the edge's generation does (generation-state.ts): a wait budget's box measures the round trip before its first decision.
    if (cut.waitMs !== undefined) await box.measureFirst(client);
    try {
      let due = performance.now();
      // An edge token takes `tokenMs`; the edge only sleeps before a routed step (fleet-edges.ts does the same).
      for (let produced = 0; produced < pace.genTokens && due < deadline; ) {
        const score = scores();
        if (cut.waitMs !== undefined) box.probeIfDue(cut.waitMs, client);
        const decision = cut.decide(score);
        cut.record(score, decision.routed, decision);
        const counted = due >= measureFrom;
        measured ||= counted;
        if (!decision.routed) {
          context.push(corpus.ids[edgeAt++]!);
          sources.push('slm');
          produced++;
          if (counted) tally.count(index, 1, 0);
          due += pace.tokenMs;
          continue;
        }
        await sleepUntil(due);
        const started = performance.now();
        let ids: number[] = [];
        let outcome: 'served' | 'overloaded' | 'late' | 'failed' = 'served';
        let load;
        try {
          const reply = await conversation.next(simulatedStep(context, sources, produced, pace, { score, cut: decision.cut }));
          load = reply.load;
          if (reply.overloaded) outcome = 'overloaded';
          else ids = reply.tokens;
        } catch (e) {
          outcome = policy.waitMs !== undefined && isAppError(e) && e.code === 'DEADLINE_EXCEEDED' ? 'late' : 'failed';
          if (outcome === 'failed' && tally.messages.size < 5) tally.messages.add(errorMessage(e));
        }
        const waitMs = performance.now() - started;
        cut.observeStep({ waitMs, overloaded: outcome === 'overloaded', failed: outcome === 'failed' || outcome === 'late', load });
        if (outcome === 'failed') failedHere = true;
        if (counted) {
          tally.waitMs.push(waitMs);
          tally[outcome]++;
        }
        const cloud = ids.length > 0;
        if (!cloud) ids = [corpus.ids[edgeAt++]!];
        for (const id of ids) {
          context.push(id);
          sources.push(cloud ? 'llm' : 'fallback');
        }
        produced += ids.length;
        if (counted) tally.count(index, ids.length, cloud ? ids.length : 0);
        due = performance.now();
      }
      await sleepUntil(Math.min(due, deadline));
      if (measured) {
        tally.generations++;
        if (failedHere) tally.failedGenerations++;
      }
    } finally {
      await conversation.close();
    }
  }
}
