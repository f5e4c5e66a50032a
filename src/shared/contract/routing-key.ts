/**
 * The routing key: the string that keeps a generation's cloud steps (and a chat's turns, when the caller
 * names a conversation) on one worker of a cloud with several. The edge takes it from the request's
 * `conversation` (OpenAI's `prompt_cache_key`) and sends it in `open.routing_key`; the shim passes it on to
 * SGLang as the `X-SMG-Routing-Key` header, which the model gateway's `consistent_hashing` and `manual`
 * policies hash to pick the worker. Because it ends up in an HTTP header value, it is printable ASCII only:
 * a control character could split the header, and a gateway reads a non-ASCII value as no key at all.
 *
 * @example
 * routingKeyProblem('chat-42', 'conversation', CONVERSATION_MAX_CHARS); // undefined: fine
 * routingKeyProblem('a\nb', 'conversation', CONVERSATION_MAX_CHARS);
 * // 'conversation must be printable ASCII (a header value); character 1 is U+000A'
 */

/** The longest conversation a caller may name. */
export const CONVERSATION_MAX_CHARS = 128;

/** The longest routing key the shim takes (a request id may serve as one, and those go up to 200). */
export const ROUTING_KEY_MAX_CHARS = 200;

/** The HTTP header SGLang's model gateway reads the key from. */
export const ROUTING_KEY_HEADER = 'X-SMG-Routing-Key';

/** Space to tilde: what an HTTP header value can carry unencoded, the same on every proxy. */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/**
 * What is wrong with `key` as a routing key, in words naming `field`; undefined when it is fine. Empty is
 * wrong: a caller that names a conversation must name one.
 */
export function routingKeyProblem(key: string, field: string, maxChars: number): string | undefined {
  if (key.length === 0) return `${field} must not be empty`;
  if (key.length > maxChars) return `${field} is ${key.length} characters; the limit is ${maxChars}`;
  let at = 0;
  for (const c of key) {
    if (!PRINTABLE_ASCII.test(c)) {
      const code = c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
      return `${field} must be printable ASCII (a header value); character ${at} is U+${code}`;
    }
    at++;
  }
  return undefined;
}
