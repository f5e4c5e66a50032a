/**
 * HTTP plumbing shared by the `sglang` and `openai` backends: JSON POSTs with limited retries (only when
 * the connection failed before any reply: refused or reset; a completion request has no side effect but its
 * compute, so a repeat is safe; any HTTP reply, even an error, is the server's answer and is not retried), error bodies in every shape SGLang, vLLM and
 * FastAPI produce turned into AppErrors (QuotingErrors: the server's words may echo the request, so the shim's
 * log gets their length only; quoting-error.ts), and `data:` event streams read as parsed JSON objects.
 * Cancellation is the request's AbortSignal: aborting closes the HTTP connection, which is also how
 * SGLang learns that a request was abandoned.
 */
import { AppError, errorMessage } from '../../shared/errors.ts';
import { abortReason } from '../../shared/grpc/stream.ts';
import { isRecord } from '../../shared/is-record.ts';
import { ROUTING_KEY_HEADER } from '../../shared/contract/routing-key.ts';
import { QuotingError } from '../quoting-error.ts';

export interface HttpBackendClientOptions {
  /** `sglang` or `openai`: prefixes every error message. */
  name: string;
  baseUrl: string;
  apiKey: string | undefined;
  /** Retries after a failed connection attempt. */
  retries: number;
}

export class HttpBackendClient {
  private readonly base: string;

  constructor(readonly options: HttpBackendClientOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '');
  }

  /**
   * POSTs `body` as JSON; resolves with a 2xx response, rejects with an AppError otherwise. `routingKey`
   * goes out as the `X-SMG-Routing-Key` header, by which SGLang's model gateway keeps requests on one worker.
   */
  async post(path: string, body: unknown, signal: AbortSignal, routingKey?: string): Promise<Response> {
    const headers = this.headers(routingKey);
    const payload = JSON.stringify(body);
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) throw abortReason(signal);
      let response: Response;
      try {
        response = await fetch(`${this.base}${path}`, { method: 'POST', headers, body: payload, signal });
      } catch (e) {
        if (signal.aborted) throw abortReason(signal);
        if (attempt >= this.options.retries) {
          throw new AppError('UNAVAILABLE', `${this.options.name}: cannot reach ${this.base}${path}: ${errorMessage(e)}`, { cause: e });
        }
        await sleep(50 * 2 ** attempt, signal);
        continue;
      }
      if (response.ok) return response;
      const text = await response.text().catch(() => '');
      throw httpBackendError(this.options.name, response.status, text);
    }
  }

  /** POST with its own short deadline that never throws: resolves whether the server answered 2xx. */
  async postBestEffort(path: string, body: unknown, timeoutMs: number, routingKey?: string): Promise<boolean> {
    try {
      const response = await fetch(`${this.base}${path}`, {
        method: 'POST',
        headers: this.headers(routingKey),
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      await response.body?.cancel();
      return response.ok;
    } catch {
      return false;
    }
  }

  private headers(routingKey: string | undefined): Record<string, string> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    if (routingKey) headers[ROUTING_KEY_HEADER] = routingKey;
    return headers;
  }

  /** Reads a JSON body, naming the backend when it is not JSON. */
  async json(response: Response, signal: AbortSignal): Promise<unknown> {
    let text: string;
    try {
      text = await response.text();
    } catch (e) {
      if (signal.aborted) throw abortReason(signal);
      throw new AppError('UNAVAILABLE', `${this.options.name}: connection lost while reading the reply: ${errorMessage(e)}`, { cause: e });
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new QuotingError(
        'INTERNAL',
        `${this.options.name}: reply is not JSON: ${text.slice(0, 200)}`,
        `${this.options.name}: reply is not JSON (${text.length} characters)`,
      );
    }
  }

  /**
   * The `data:` payloads of an event stream, parsed, until `data: [DONE]`. A payload of the form
   * `{"error": ...}` (how SGLang and vLLM report a failure once the status line has been sent) is thrown.
   */
  async *events(response: Response, signal: AbortSignal): AsyncGenerator<Record<string, unknown>> {
    if (!response.body) throw new AppError('INTERNAL', `${this.options.name}: streaming reply without a body`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let data: string[] = [];
    try {
      while (true) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (e) {
          if (signal.aborted) throw abortReason(signal);
          throw new AppError('UNAVAILABLE', `${this.options.name}: stream broken: ${errorMessage(e)}`, { cause: e });
        }
        if (chunk.done) break;
        buffer += chunk.value;
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline).replace(/\r$/, '');
          buffer = buffer.slice(newline + 1);
          if (line.startsWith('data:')) {
            data.push(line.slice(5).replace(/^ /, ''));
            continue;
          }
          if (line !== '' || data.length === 0) continue; // comments, other fields
          const payload = data.join('\n');
          data = [];
          if (payload.trim() === '[DONE]') return;
          yield this.parseEvent(payload);
        }
      }
      if (data.length && data.join('\n').trim() !== '[DONE]') yield this.parseEvent(data.join('\n'));
      throw new AppError('UNAVAILABLE', `${this.options.name}: event stream ended without data: [DONE]`);
    } finally {
      await reader.cancel().catch(() => {});
    }
  }

  private parseEvent(payload: string): Record<string, unknown> {
    let event: unknown;
    try {
      event = JSON.parse(payload);
    } catch {
      throw new QuotingError(
        'INTERNAL',
        `${this.options.name}: event is not JSON: ${payload.slice(0, 200)}`,
        `${this.options.name}: event is not JSON (${payload.length} characters)`,
      );
    }
    if (!isRecord(event))
      throw new QuotingError(
        'INTERNAL',
        `${this.options.name}: event is not an object: ${payload.slice(0, 200)}`,
        `${this.options.name}: event is not an object (${payload.length} characters)`,
      );
    if ('error' in event && event.error !== null && event.error !== undefined) {
      const message = errorBodyMessage(event) ?? payload.slice(0, 200);
      // The same failure as a 400 before streaming: a context the model cannot take is OUT_OF_RANGE there too.
      // The server's words may quote the request (a validation error echoing the prompt): the log gets their length.
      throw new QuotingError(
        isContextLengthMessage(message) ? 'OUT_OF_RANGE' : 'INTERNAL',
        `${this.options.name}: error while streaming: ${message}`,
        `${this.options.name}: error while streaming (a message of ${message.length} characters)`,
      );
    }
    return event;
  }
}

/**
 * An HTTP error reply → AppError. Bodies: `{"error":{"message"}}` (SGLang ValueError, vLLM), flat
 * `{"object":"error","message",...}` (SGLang schema errors, overload), FastAPI `{"detail":[...]}` or
 * `{"detail":"..."}`, or plain text.
 */
export function httpBackendError(name: string, status: number, bodyText: string): QuotingError {
  let message: string | undefined;
  try {
    message = errorBodyMessage(JSON.parse(bodyText));
  } catch {
    message = undefined;
  }
  message ??= bodyText.trim().slice(0, 300) || '(empty body)';
  return new QuotingError(
    httpStatusCode(status, message),
    `${name}: HTTP ${status}: ${message}`,
    `${name}: HTTP ${status} (a message of ${message.length} characters)`,
  );
}

/** How SGLang and vLLM word a context that exceeds the model's window. */
function isContextLengthMessage(message: string): boolean {
  return /context length|longer than|too long|maximum context/i.test(message);
}

function httpStatusCode(status: number, message: string): AppError['code'] {
  if (status === 400 && isContextLengthMessage(message)) return 'OUT_OF_RANGE';
  if (status === 400 || status === 413 || status === 422) return 'INVALID_ARGUMENT';
  // The backend refusing the shim's own credentials or path is a deployment problem, not the edge's.
  if (status === 401 || status === 403 || status === 404 || status === 405) return 'FAILED_PRECONDITION';
  if (status === 408 || status === 504) return 'DEADLINE_EXCEEDED';
  if (status === 429) return 'RESOURCE_EXHAUSTED';
  if (status === 502 || status === 503) return 'UNAVAILABLE';
  return 'INTERNAL';
}

export function errorBodyMessage(body: unknown): string | undefined {
  if (!isRecord(body)) return typeof body === 'string' ? body : undefined;
  const error = body.error;
  if (isRecord(error) && typeof error.message === 'string') return error.message;
  if (typeof error === 'string') return error;
  if (typeof body.message === 'string') return body.message;
  const detail = body.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((d) => (isRecord(d) ? `${Array.isArray(d.loc) ? d.loc.join('.') + ': ' : ''}${String(d.msg ?? JSON.stringify(d))}` : String(d)))
      .join('; ');
  }
  return undefined;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
