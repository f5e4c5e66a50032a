/**
 * Why a routed token fell back, in words a user of the page understands. grpc-js reports transport
 * failures in its own terms ("No connection established. Last error: Error: connect ECONNREFUSED
 * 10.0.0.5:50051. Resolution note: ", "Name resolution failed for target dns:gpu-box:50051", "Connection
 * dropped"); those become "cloud unreachable (connection refused)" and the like. Messages the shim wrote
 * itself (its final `end`) and the breaker's refusals are plain already and pass through, prefixed where
 * the prefix says who refused.
 *
 * @example
 * plainCloudReason(new AppError('UNAVAILABLE', 'No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:50051. Resolution note: '));
 * // 'cloud unreachable (connection refused)'
 */
import { AppError } from '../../shared/errors.ts';

/** Socket errors → what they mean for reaching the cloud; a TLS failure keeps the reason a user can act on. */
const SOCKET_ERRORS: [RegExp, (match: RegExpExecArray) => string][] = [
  [/ECONNREFUSED/, () => 'connection refused'],
  [/ETIMEDOUT|timed? ?out/i, () => 'connection timed out'],
  [/EHOSTUNREACH|ENETUNREACH/, () => 'no route to the host'],
  [/ECONNRESET|EPIPE|socket hang up|disconnected/i, () => 'connection reset'],
  [/ENOTFOUND|EAI_AGAIN/, () => 'host name not found'],
  [/CERTIFICATE_REQUIRED/, () => 'TLS handshake failed: TLSV1_ALERT_CERTIFICATE_REQUIRED, the shim requires a client certificate'],
  // OpenSSL's "error:1000045c:SSL routines:OPENSSL_internal:REASON".
  [/^error:[0-9a-f]+:SSL routines:[^:]*:(\w+)/i, (m) => `TLS handshake failed: ${m[1]}`],
  [/certificate|self[- ]signed|SSL|TLS|handshake/i, (m) => `TLS handshake failed: ${m.input}`],
  [/^Failed to connect$/, () => 'connection failed'],
];

function socketReason(raw: string): string {
  // grpc-js stamps each connection error with the time it happened: noise in a tooltip.
  const error = raw.replace(/\s*\(\d{4}-\d\d-\d\dT[\d:.]+Z\)$/, '');
  for (const [pattern, meaning] of SOCKET_ERRORS) {
    const match = pattern.exec(error);
    if (match) return meaning(match);
  }
  return error;
}

export function plainCloudReason(error: AppError): string {
  const message = error.message.trim();
  const noConnection = /^No connection established\. Last error: (?:\w*Error: )?(.*?)(?:\.? Resolution note:.*)?$/s.exec(message);
  if (noConnection) return `cloud unreachable (${socketReason(noConnection[1]!.trim())})`;
  const resolution = /^Name resolution failed for target (?:dns:)?(.*)$/.exec(message);
  if (resolution) return `cloud unreachable (host name not found: ${resolution[1]})`;
  if (/^(Connection dropped|Connection closed|Received RST_STREAM|read ECONNRESET|Call ended without)/.test(message))
    return 'cloud connection lost during the step';
  const tooLarge = /^Received message larger than max \((\d+) vs\.? (\d+)\)/.exec(message);
  if (tooLarge) return `cloud reply of ${tooLarge[1]} bytes is over this edge's message limit of ${tooLarge[2]}`;
  if (error.code === 'UNAUTHENTICATED') return `cloud refused the token (${message})`;
  // The shim's own deadline on its model is the edge's step deadline (or lower): to the user it is the same wait.
  const backendDeadline = /^the backend did not answer within (\d+) ms$/.exec(message);
  if (backendDeadline) return `cloud did not answer within ${backendDeadline[1]} ms`;
  if (error.code === 'DEADLINE_EXCEEDED' && /^Deadline exceeded/i.test(message)) return 'cloud did not answer before the stream deadline';
  return message;
}

/** `error` with its message in plain words (same code; the original as the cause), or `error` itself when already plain. */
export function withPlainReason(error: AppError): AppError {
  const reason = plainCloudReason(error);
  return reason === error.message ? error : new AppError(error.code, reason, { cause: error });
}
