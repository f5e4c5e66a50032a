/**
 * What left the box for one generation: every message its cloud conversation wrote, counted as it went
 * on the wire (token ids, serialized bytes, hidden-state bytes), and what the shim held of the generation
 * at the end (the ids sent and the ids the cloud returned: the text the cloud saw). The privacy layer adds
 * the placeholders it used and the positions it kept home. Filled by the conversation, read once by the
 * generation's `done` metrics; nothing here is sent anywhere.
 *
 * @example
 * const disclosure = new CloudDisclosure();
 * disclosure.sent([{ step: { offset: 12, ids: [407] } }]);
 * disclosure.report().tokensSent; // 1
 */
import type { RouteRequest } from '../../shared/grpc/proto.ts';
import { serializeRouteRequest } from '../../shared/grpc/proto.ts';

/** Bytes of one float of a hidden state on the wire (`repeated float`). */
const FLOAT_BYTES = 4;

export interface DisclosureReport {
  /** Token ids sent: each stream's whole context at its opening, then each step's and extend's new ids. */
  tokensSent: number;
  /** Serialized bytes of every message sent (the protobuf messages; gRPC and HTTP/2 framing not counted). */
  bytesSent: number;
  /** Bytes of edge hidden states among them: 0 unless the edge sends them (--send-hidden-state). */
  hiddenStateBytes: number;
  /** Steps written, and streams opened (each opening sends the whole context again). */
  steps: number;
  streams: number;
  /** Distinct placeholders the cloud read instead of private values. */
  placeholders: number;
  /** Routed positions the edge decided itself because a private value was under way there. */
  withheldSteps: number;
  /** Steps the gate stopped on their way out because they would have disclosed a private value (cloud-gate.ts). */
  gateBlockedSteps: number;
  /** Milliseconds spent translating to and from placeholders (0 without private values): what privacy costs the box. */
  pseudonymMs: number;
}

export class CloudDisclosure {
  private tokens = 0;
  private bytes = 0;
  private hiddenBytes = 0;
  private steps = 0;
  private streams = 0;
  /** The placeholders used, by text. */
  readonly placeholders = new Set<string>();
  withheldSteps = 0;
  gateBlockedSteps = 0;
  pseudonymMs = 0;
  /** What the shim holds of the generation: the ids it was sent and the ids it returned, as of the last answer. */
  cloudContext: readonly number[] = [];

  /** Counts messages as they are written to the cloud. */
  sent(messages: readonly RouteRequest[]): void {
    for (const message of messages) {
      this.bytes += serializeRouteRequest(message).length;
      if (message.open) {
        this.streams++;
        this.tokens += message.open.contextIds?.length ?? 0;
      }
      if (message.step) {
        this.steps++;
        this.tokens += message.step.ids?.length ?? 0;
        this.hiddenBytes += (message.step.slmHiddenState?.length ?? 0) * FLOAT_BYTES;
      }
      // Sent between steps: the ids the next step would otherwise have carried.
      if (message.extend) this.tokens += message.extend.ids?.length ?? 0;
    }
  }

  /** The shim's context after an answered step. */
  holds(ids: readonly number[]): void {
    this.cloudContext = ids;
  }

  report(): DisclosureReport {
    return {
      tokensSent: this.tokens,
      bytesSent: this.bytes,
      hiddenStateBytes: this.hiddenBytes,
      steps: this.steps,
      streams: this.streams,
      placeholders: this.placeholders.size,
      withheldSteps: this.withheldSteps,
      gateBlockedSteps: this.gateBlockedSteps,
      pseudonymMs: this.pseudonymMs,
    };
  }
}
