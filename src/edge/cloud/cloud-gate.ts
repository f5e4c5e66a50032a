/**
 * The one check on everything that leaves the box for the cloud. A Route stream writes only
 * `PassedMessages`, and only a gate makes them: whatever the layers above did (the pseudonymiser, the
 * loop, speculation), every open and step message goes through `pass` on its way out. A generation without
 * private values has the open gate, which passes everything at no cost; one with private values has a gate
 * that decodes the context the shim would hold after the messages and looks in it for every value in every
 * form a tokenizer could make of it (privacy/outbound-scan.ts). A hit is not sent: the step is withheld and
 * the edge decides the position, and the record of what left counts it (`gateBlockedSteps`).
 *
 * @example
 * const passed = gate.pass(shim.open(request, id, timeout, key), request.context);
 * if (passed) live.send(passed, { reused: false });
 */
import type { RouteRequest } from '../../shared/grpc/proto.ts';

declare const passedBrand: unique symbol;
/** Messages a gate let through: the only kind a Route stream writes. */
export type PassedMessages = readonly RouteRequest[] & { readonly [passedBrand]: true };

/** What a guarding gate looks for: the privacy layer's scan of what would leave. */
export interface OutboundScan {
  /** The kind of a private value the shim's context would disclose if it became `ids`, or undefined. */
  disclosedByContext(ids: readonly number[]): string | undefined;
  /** The kind of a private value `text` (a request id, a routing key) discloses, or undefined. */
  disclosedByText(text: string): string | undefined;
}

export class CloudGate {
  /** The gate of a generation without private values: everything passes, nothing is decoded. */
  static readonly OPEN = new CloudGate(undefined);

  /** A gate that lets nothing through that `scan` finds a private value in. */
  static guarding(scan: OutboundScan): CloudGate {
    return new CloudGate(scan);
  }

  private constructor(private readonly scan: OutboundScan | undefined) {}

  /**
   * `messages` as passed when nothing in them discloses a private value, with `contextAfter` the whole
   * context the shim holds once they are read; undefined when something would.
   */
  pass(messages: readonly RouteRequest[], contextAfter: readonly number[]): PassedMessages | undefined {
    const scan = this.scan;
    if (scan && (messages.some((m) => discloses(m, scan)) || scan.disclosedByContext(contextAfter) !== undefined)) return undefined;
    return messages as PassedMessages;
  }
}

/** What a message carries besides token ids that could name a value: its ids and a hidden state, computed from the real text. */
function discloses(message: RouteRequest, scan: OutboundScan): boolean {
  if (message.open) return [message.open.requestId, message.open.routingKey].some((text) => text && scan.disclosedByText(text) !== undefined);
  return (message.step?.slmHiddenState?.length ?? 0) > 0;
}
