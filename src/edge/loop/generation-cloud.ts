/**
 * One generation's side of the cloud: its conversation, opened once on first use (the first routed step, or
 * the prompt sent ahead: cloud-prefill.ts) and closed when the generation ends, with what it disclosed and
 * its private values' translator. GenerationState owns one; nothing else opens or closes the conversation.
 *
 * @example
 * const cloud = new GenerationCloud(engine, request, signal, requestId, cut.waitMs);
 * const reply = await cloud.conversation().next(stepRequest);
 * await cloud.close();
 */
import { AppError } from '../../shared/errors.ts';
import type { CloudConversation, CloudStepRequest } from '../cloud/cloud-client.ts';
import { CloudDisclosure } from '../cloud/cloud-disclosure.ts';
import { openConversation } from '../privacy/pseudonymised-conversation.ts';
import { Pseudonymiser } from '../privacy/pseudonymiser.ts';
import type { EdgeEngine, LoopRequest } from './edge-engine.ts';

export class GenerationCloud {
  /** What this generation sends the cloud, counted as it goes (the `done` event's record of what left). */
  readonly disclosure = new CloudDisclosure();
  /** The generation's private values' translator, when it has any: the cloud then sees only their placeholders. */
  readonly privacy: Pseudonymiser | undefined;
  private opened: CloudConversation | undefined;
  /** The prompt went ahead (cloud-prefill.ts): the tokens the edge decides follow it between steps. */
  private ahead = false;

  constructor(
    private readonly engine: EdgeEngine,
    private readonly request: LoopRequest,
    private readonly signal: AbortSignal | undefined,
    private readonly requestId: string,
    /** Each step's deadline when a wait budget sets one shorter than the client's. */
    private readonly stepTimeoutMs: number | undefined,
  ) {
    this.privacy = request.privateValues ? new Pseudonymiser(engine.tokenizer, request.privateValues) : undefined;
  }

  /** The generation's cloud conversation, opened at the first call; with private values, through the pseudonymiser. */
  conversation(): CloudConversation {
    if (this.opened) return this.opened;
    const cloud = this.engine.cloud;
    if (!cloud) throw new AppError('UNAVAILABLE', 'no cloud is configured');
    const options = {
      requestId: this.requestId,
      routingKey: this.request.conversation,
      signal: this.signal,
      stepTimeoutMs: this.stepTimeoutMs,
      disclosure: this.disclosure,
    };
    this.opened = openConversation(cloud, options, this.privacy);
    return this.opened;
  }

  /** Opens the conversation with `request.context` ahead of any step (CloudConversation.prefill); false when it cannot. */
  sendAhead(request: CloudStepRequest): boolean {
    const conversation = this.conversation();
    if (!conversation.prefill) return false;
    conversation.prefill(request);
    this.ahead = true;
    return true;
  }

  /**
   * After the prompt went ahead, sends what the edge decided since (CloudConversation.extend), so that the
   * shim computes it before the next routed step instead of during it. Without a prompt sent ahead nothing is
   * sent between steps, and `request` is not even built: --cloud-prefill lazy keeps the conversation as it was.
   */
  extendAhead(request: () => CloudStepRequest): void {
    if (this.ahead) this.opened?.extend?.(request());
  }

  /** Whether the edge has a cloud at all: without one a routed position is the edge's, with nothing sent. */
  get available(): boolean {
    return this.engine.cloud !== undefined;
  }

  /** Whether the conversation is open: a conditional step joins a conversation, it never opens one. */
  get isOpen(): boolean {
    return this.opened !== undefined;
  }

  /** What the cloud saw of this generation: the text of the context the shim held at the end (placeholders, not values). */
  cloudText(): string {
    const ids = this.disclosure.cloudContext;
    return ids.length === 0 ? '' : this.engine.tokenizer.decode(ids);
  }

  /** Ends the conversation, if one was opened; a failure to close costs nothing the generation still needs. */
  async close(): Promise<void> {
    await this.opened?.close().catch(() => {});
  }
}
