/**
 * The worker behind worker-session.ts: owns one onnxruntime session and runs its forward passes on this
 * thread, so the main thread's event loop keeps turning while a pass computes. Its module waits for
 * onnxruntime to load (ort.ts awaits at the top level), and a message posted before the handler below is
 * installed would be lost: so it says `ready` once the handler is there, and the main side sends nothing
 * before that. Failures go back as `failed` replies; the provider fallback's warnings as `log` messages.
 */
import { errorMessage, isAppError } from '../errors.ts';
import type { Logger, LogLevel } from '../process/logger.ts';
import { createSessionOn } from './execution-providers.ts';
import type { InferenceSession } from './ort.ts';
import { type SessionReply, type SessionRequest, tensorsFromWire, tensorsToWire, wireBuffers } from './session-worker-protocol.ts';

declare const self: Worker;
export {}; // a module: its `self` does not clash with other worker scripts'

let session: InferenceSession | undefined;

function reply(message: SessionReply, transfer: ArrayBuffer[] = []): void {
  self.postMessage(message, transfer);
}

const forward =
  (level: Exclude<LogLevel, 'silent'>) =>
  (message: string, fields?: Record<string, unknown>): void =>
    reply({ kind: 'log', level, message, ...(fields ? { fields } : {}) });
const log: Logger = { debug: forward('debug'), info: forward('info'), warn: forward('warn'), error: forward('error') };

function loaded(): InferenceSession {
  if (!session) throw new Error('the worker has no session loaded');
  return session;
}

async function answer(request: Exclude<SessionRequest, { kind: 'endProfiling' }>): Promise<void> {
  const { id } = request;
  if (request.kind === 'load') {
    const opened = await createSessionOn(request.model, request.options, request.providers, log);
    session = opened.session;
    const { inputNames, outputNames, inputMetadata, outputMetadata } = session;
    reply({ kind: 'loaded', id, inputNames, outputNames, inputMetadata, outputMetadata, executionProviders: opened.executionProviders });
  } else if (request.kind === 'run') {
    const feeds = tensorsFromWire(request.feeds);
    const out = await (request.fetches ? loaded().run(feeds, request.fetches) : loaded().run(feeds));
    const outputs = tensorsToWire(out);
    reply({ kind: 'ran', id, outputs }, wireBuffers(outputs));
  } else {
    await session?.release();
    session = undefined;
    reply({ kind: 'released', id });
  }
}

self.onmessage = async (event: MessageEvent<SessionRequest>) => {
  const request = event.data;
  if (request.kind === 'endProfiling') {
    try {
      loaded().endProfiling();
    } catch (e) {
      log.warn('onnxruntime could not write the profile', { error: errorMessage(e) });
    }
    return;
  }
  try {
    await answer(request);
  } catch (e) {
    reply({ kind: 'failed', id: request.id, message: errorMessage(e), ...(isAppError(e) ? { code: e.code } : {}) });
  }
};

reply({ kind: 'ready' });
