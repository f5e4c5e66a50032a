/**
 * Everything one edge process serves with: the loaded engine (edge model, router, tokenizer, cloud
 * client), the cap on concurrent generations, the registry of running ones (so Stop can find them and
 * shutdown can end them), and the metrics. HTTP and gRPC entry points both call `start`, which checks the
 * request and returns the generation's id with its event stream.
 */
import { prepareConstraint } from './constraint/generation-constraint.ts';
import { randomUUID } from 'node:crypto';
import { AppError, isAppError } from '../shared/errors.ts';
import { silentLogger, type Logger } from '../shared/process/logger.ts';
import { BoxRouting } from './routing/box-routing.ts';
import { SpeculationPolicy } from './loop/speculation/speculation-policy.ts';
import type { CloudConnectionState } from './cloud/cloud-client.ts';
import { generate, promptIdsThatFit, type EdgeEngine, type GenerationEvent, type LoopRequest } from './loop/decoder-loop.ts';
import { EdgeMetrics } from './metrics/edge-metrics.ts';
import { logGeneration } from './metrics/generation-log.ts';
import { PrivateDetector } from './privacy/private-detect.ts';
import { privateValuesFor, tokenizerFoldsCase } from './privacy/private-request.ts';
import { parseGenerationRequest, type GenerationLimits, type RawGenerationRequest, type RouteBudget } from './request/generation-request.ts';
import { isVocabularyId } from '../shared/model/vocabulary-id.ts';

/**
 * What the runtime admits: the request limits, the generations at once, and the edge's routing budgets
 * (--route-*), which requests naming neither τ nor a budget get; none when omitted.
 */
export type RuntimeLimits = GenerationLimits & { maxConcurrent: number; defaultBudget?: RouteBudget };

export interface RunningGeneration {
  id: string;
  controller: AbortController;
  startedAt: number;
}

export class EdgeRuntime {
  readonly metrics = new EdgeMetrics();
  private readonly running = new Map<string, RunningGeneration>();
  private closing = false;

  /** The engine every generation of the box runs on, with the box-wide state the runtime made at start. */
  readonly engine: EdgeEngine & Required<Pick<EdgeEngine, 'routing'>>;

  constructor(
    parts: EdgeEngine,
    readonly limits: RuntimeLimits,
    private readonly log: Logger = silentLogger,
  ) {
    // Box-wide state, made once here and handed down: the routing state (budgets' spending, measured waits,
    // the cloud's load) and the speculation policy's running figures, kept across generations.
    const engine = (this.engine = {
      ...parts,
      routing: parts.routing ?? new BoxRouting(limits.defaultBudget),
      speculation: { ...parts.speculation, policy: parts.speculation?.policy ?? new SpeculationPolicy() },
      // Detecting nothing by default, but knowing the built-in kinds: a request may still ask for them.
      privateDetector: parts.privateDetector ?? PrivateDetector.create([], []),
      // A tokenizer that lowercases would hand the cloud "josé" for "José": values are then matched in any case.
      privateFoldCase: parts.privateFoldCase === true || tokenizerFoldsCase(parts.tokenizer),
    });
    this.metrics.describeExecutionProviders(engine.edgeModel.executionProviders);
    if (engine.promptCache) this.metrics.describePromptCache(engine.promptCache);
    this.metrics.describeCloud(() => this.cloudState());
    this.metrics.describeBatching(engine.scheduler?.stats);
    this.metrics.describeRouting(engine.routing);
  }

  /** Generations in progress (each holds an edge KV cache and maybe a cloud conversation). */
  get activeCount(): number {
    return this.running.size;
  }

  /**
   * Runs accepted but not yet started (a page run whose stream has yet to open). They hold no slot, but
   * shutdown waits for them too (bounded), so their stream gets the shutdown as its final event instead
   * of a refused connection. Their owner adds and deletes them.
   */
  readonly awaitingStart = new Set<string>();

  /** Nothing running and nothing about to: what a graceful shutdown waits for. */
  get idle(): boolean {
    return this.running.size === 0 && this.awaitingStart.size === 0;
  }

  cloudState(): CloudConnectionState | 'none' {
    return this.engine.cloud?.state() ?? 'none';
  }

  /** The cloud's state in words where it takes them (what differs, while `mismatch`). */
  cloudReason(): string | undefined {
    return this.engine.cloud?.stateReason?.();
  }

  /**
   * Validates `raw` (including that the prompt fits the edge model's context window), reserves a slot
   * (RESOURCE_EXHAUSTED when full) and returns a handle to run. Every refusal happens here, before any
   * event, so entry points answer it with a status (HTTP 4xx, a gRPC status) rather than a stream.
   * `promptIds` (see LoopRequest) replace encoding `raw.prompt`, which must still describe them.
   */
  start(raw: RawGenerationRequest, id: string = randomUUID(), promptIds?: readonly number[]) {
    const request = this.check(raw, promptIds);
    const handle: RunningGeneration = { id, controller: new AbortController(), startedAt: Date.now() };
    this.running.set(id, handle);
    this.metrics.active.set(this.running.size);
    const runtime = this;
    async function* events(signal?: AbortSignal): AsyncGenerator<GenerationEvent> {
      const onAbort = () => handle.controller.abort();
      signal?.addEventListener('abort', onAbort);
      let finished = false;
      try {
        // One id from the page to the shim's logs: the run's is the loop's and the cloud conversation's.
        for await (const event of generate(runtime.engine, request, handle.controller.signal, id)) {
          runtime.metrics.observe(event, request.mode);
          finished ||= event.type === 'done';
          // Stopped by shutdown, not by its client: end with the reason (UNAVAILABLE) rather than a `done`.
          const reason = handle.controller.signal.reason;
          if (event.type === 'done' && event.finishReason === 'cancelled' && isAppError(reason)) throw reason;
          yield event;
        }
      } catch (e) {
        if (!finished) runtime.metrics.requests.inc({ mode: request.mode, finish: 'error' });
        throw e;
      } finally {
        signal?.removeEventListener('abort', onAbort);
        runtime.release(id);
      }
    }
    return { id, request, events: (signal?: AbortSignal) => logGeneration(runtime.log, id, request, events(signal)) };
  }

  /**
   * `start`, once the request's constraint is compiled and found satisfiable (constraint/): the entry points'
   * way in, so that a refused schema or grammar is a status like every other refusal, never a broken stream.
   */
  async begin(raw: RawGenerationRequest, id: string = randomUUID(), promptIds?: readonly number[]): Promise<ReturnType<EdgeRuntime['start']>> {
    await this.prepare(this.check(raw, promptIds));
    return this.start(raw, id, promptIds);
  }

  /** Compiles a checked request's constraint (cached by content), counting a refusal in the metrics. */
  async prepare(request: LoopRequest): Promise<void> {
    try {
      await prepareConstraint(this.engine, request);
    } catch (e) {
      this.metrics.refused.inc({ code: isAppError(e) ? e.code : 'INTERNAL' });
      throw e;
    }
  }

  /**
   * Every check a request must pass before it takes a slot (a free slot included), without taking one;
   * throws the refusal, counted in the metrics. `start` runs it; the page also runs it alone, to answer a
   * form at once while taking the slot only when the run's stream opens.
   */
  check(raw: RawGenerationRequest, promptIds?: readonly number[]): LoopRequest {
    try {
      if (this.closing) throw new AppError('UNAVAILABLE', 'the edge is shutting down');
      // A request that names no threshold gets the router's own (router.json's default_threshold); one that
      // names neither τ nor a budget also gets the edge's --route-* budgets.
      const { defaultThreshold } = this.engine.router.info;
      const request: LoopRequest = parseGenerationRequest(raw, this.limits, defaultThreshold, this.engine.speculation?.byDefault, this.limits.defaultBudget);
      if (promptIds) {
        this.checkPromptIds(promptIds);
        request.promptIds = promptIds;
      }
      this.checkContextWindow(request);
      const privateValues = privateValuesFor(request, this.engine.privateDetector, { foldCase: this.engine.privateFoldCase });
      if (privateValues) request.privateValues = privateValues;
      if (this.running.size >= this.limits.maxConcurrent) {
        throw new AppError('RESOURCE_EXHAUSTED', `too many generations at once (limit ${this.limits.maxConcurrent}); try again shortly`);
      }
      return request;
    } catch (e) {
      this.metrics.refused.inc({ code: isAppError(e) ? e.code : 'INTERNAL' });
      throw e;
    }
  }

  /**
   * A prompt that fills the context window can never produce a token. The decoding loop checks the same
   * (its safety net), but only once the stream has started; tokenizing here once more costs little next
   * to the prefill, and the prompt is already within `maxPromptChars`.
   */
  private checkContextWindow(request: LoopRequest): void {
    promptIdsThatFit(this.engine, request);
  }

  /** Ids the edge model can be fed and the tokenizer can turn into text; at least one. */
  private checkPromptIds(ids: readonly number[]): void {
    const vocabSize = Math.min(this.engine.edgeModel.pack.vocabSize, this.engine.tokenizer.vocabSize);
    if (ids.length === 0) throw new AppError('INVALID_ARGUMENT', 'prompt must hold at least one token id');
    ids.forEach((id, i) => {
      if (!isVocabularyId(id, vocabSize)) {
        throw new AppError('INVALID_ARGUMENT', `prompt holds token id ${id} (index ${i}), outside the vocabulary [0, ${vocabSize})`);
      }
    });
  }

  /** Gives back a generation's slot, once its events end. */
  private release(id: string): void {
    if (this.running.delete(id)) this.metrics.active.set(this.running.size);
  }

  /** Stops a running generation; false when there is none with that id. */
  stop(id: string): boolean {
    const handle = this.running.get(id);
    handle?.controller.abort();
    return handle !== undefined;
  }

  /** Refuses new work and stops what is running (streams then end with their final event). */
  async shutdown(): Promise<void> {
    this.closing = true;
    const reason = new AppError('UNAVAILABLE', 'the edge is shutting down');
    for (const handle of this.running.values()) handle.controller.abort(reason);
    await this.engine.cloud?.close();
  }
}
