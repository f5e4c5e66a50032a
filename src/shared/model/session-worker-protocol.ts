/**
 * The messages between a WorkerSession (worker-session.ts) and its worker (session-worker.ts), and how
 * tensors cross: as their type, dims and data. A structured clone of a typed array copies its whole
 * ArrayBuffer, so a view of part of a larger buffer is sliced to its own bytes first; outputs coming back
 * are transferred (their buffers move, no copy), each buffer once.
 *
 * @example
 * worker.postMessage({ kind: 'run', id, feeds: tensorsToWire(feeds) });
 * const outputs = tensorsFromWire(reply.outputs);
 */
import type { ErrorCode } from '../errors.ts';
import type { LogLevel } from '../process/logger.ts';
import { ort, type OrtTensor, type SessionOptions, type ValueMetadata } from './ort.ts';
import { feedable } from './float-tensors.ts';

export interface WireTensor {
  type: OrtTensor['type'];
  dims: readonly number[];
  data: OrtTensor['data'];
}

export type WireTensors = Record<string, WireTensor>;

/** What the main thread asks; every request carries an id its reply repeats (endProfiling has no reply). */
export type SessionRequest =
  | { kind: 'load'; id: number; model: string; options: SessionOptions; providers: readonly string[] }
  | { kind: 'run'; id: number; feeds: WireTensors; fetches?: readonly string[] }
  | { kind: 'endProfiling' }
  | { kind: 'release'; id: number };

export interface LoadedSession {
  inputNames: readonly string[];
  outputNames: readonly string[];
  inputMetadata: readonly ValueMetadata[];
  outputMetadata: readonly ValueMetadata[];
  executionProviders: readonly string[];
}

/** What the worker answers. `ready` comes once, when its handler is installed: nothing may be sent before. */
export type SessionReply =
  | { kind: 'ready' }
  | { kind: 'log'; level: Exclude<LogLevel, 'silent'>; message: string; fields?: Record<string, unknown> }
  | ({ kind: 'loaded'; id: number } & LoadedSession)
  | { kind: 'ran'; id: number; outputs: WireTensors }
  | { kind: 'released'; id: number }
  | { kind: 'failed'; id: number; message: string; code?: ErrorCode };

/** The tensors as they cross to the other thread: each view of part of a buffer sliced to its own. */
export function tensorsToWire(tensors: Readonly<Record<string, OrtTensor>>): WireTensors {
  const wire: WireTensors = {};
  for (const [name, tensor] of Object.entries(tensors)) wire[name] = { type: tensor.type, dims: tensor.dims, data: ownBytes(tensor.data) };
  return wire;
}

function ownBytes(data: OrtTensor['data']): OrtTensor['data'] {
  if (!ArrayBuffer.isView(data) || (data.byteOffset === 0 && data.byteLength === data.buffer.byteLength)) return data;
  return data.slice();
}

/** The buffers behind `wire`'s tensors, each once: a transfer list names a buffer at most once. */
export function wireBuffers(wire: WireTensors): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  for (const { data } of Object.values(wire)) if (ArrayBuffer.isView(data) && data.buffer instanceof ArrayBuffer) buffers.add(data.buffer);
  return [...buffers];
}

/**
 * The tensors rebuilt on this thread. A float16 tensor is made feedable (float-tensors.ts): onnxruntime-common
 * turns the `Uint16Array` bits that crossed into a `Float16Array`, whose contents Bun's N-API cannot hand to
 * onnxruntime, so a float16 cache fed back on the worker would read as empty.
 */
export function tensorsFromWire(wire: WireTensors): Record<string, OrtTensor> {
  const tensors: Record<string, OrtTensor> = {};
  for (const [name, { type, dims, data }] of Object.entries(wire)) tensors[name] = feedable(new ort.Tensor(type, data, dims));
  return tensors;
}
