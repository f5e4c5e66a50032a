/**
 * The routing key the cloud reads, derived on the box: an HMAC of the caller's `conversation` (OpenAI's
 * `prompt_cache_key`) under a key that stays on the box. The shim and SGLang's gateway need only a key that
 * stays the same for one conversation, so they can keep it on one worker; the caller's text (often a user's
 * name, an email, a ticket number) never has to leave. Every key is hashed, with or without private values in
 * the generation: the key is a header, read by every proxy on the way, and whether it names someone is the
 * caller's business, which the box cannot check.
 *
 * @example
 * const keys = new RoutingKeyHash('box secret');
 * keys.of('ann@example.org'); // 'rk-…' (27 printable ASCII characters), the same for every generation of it
 */
import { createHmac, randomBytes } from 'node:crypto';

/** Sixteen bytes of the MAC: enough that two conversations of one box never share a worker by chance. */
const KEY_BYTES = 16;

export class RoutingKeyHash {
  private readonly secret: Buffer;

  /** `secret` undefined: a random one, so keys change when the edge restarts (one cold prefix per conversation). */
  constructor(secret: string | undefined) {
    this.secret = secret === undefined ? randomBytes(32) : Buffer.from(secret, 'utf8');
  }

  of(conversation: string): string {
    return `rk-${createHmac('sha256', this.secret).update(conversation, 'utf8').digest().subarray(0, KEY_BYTES).toString('base64url')}`;
  }
}
