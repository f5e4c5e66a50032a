/**
 * The float32 values of an initializer, wherever the file keeps them: `raw_data`, `float_data`, or an
 * external data file (read by offset, one tensor at a time, so a 2 GB model is never in memory whole).
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, normalize, sep } from 'node:path';
import { TensorProto_DataLocation, type TensorProto } from 'onnx-buf';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { DataType } from '../../shared/model/onnx-graph.ts';

export function initializerFloats(t: TensorProto, modelPath: string): Float32Array {
  if (t.dataType !== DataType.FLOAT) throw new AppError('INVALID_ARGUMENT', `${modelPath}: ${t.name} is not float32`);
  const count = t.dims.reduce((a, d) => a * Number(d), 1);
  if (t.dataLocation === TensorProto_DataLocation.EXTERNAL) return externalFloats(t, modelPath, count);
  if (t.rawData.byteLength) {
    if (t.rawData.byteLength !== count * 4)
      throw new AppError('INVALID_ARGUMENT', `${modelPath}: ${t.name} holds ${t.rawData.byteLength} bytes for ${count} floats`);
    // A copy: raw_data may be a view into the file (Buffer.slice does not copy) at any alignment.
    return new Float32Array(new Uint8Array(t.rawData).buffer);
  }
  if (t.floatData.length !== count) throw new AppError('INVALID_ARGUMENT', `${modelPath}: ${t.name} holds ${t.floatData.length} floats, expected ${count}`);
  return Float32Array.from(t.floatData);
}

function externalFloats(t: TensorProto, modelPath: string, count: number): Float32Array {
  const out = new Float32Array(count);
  readExternal(t, modelPath, new Uint8Array(out.buffer));
  return out;
}

/**
 * Moves an external tensor's bytes into `raw_data` (in place), so that a model written elsewhere no
 * longer points into the data file of the model it was read from.
 */
export function loadExternalData(t: TensorProto, modelPath: string): void {
  if (t.dataLocation !== TensorProto_DataLocation.EXTERNAL) return;
  const length = t.externalData.find((e) => e.key === 'length')?.value;
  if (length === undefined) throw new AppError('INVALID_ARGUMENT', `${modelPath}: external tensor ${t.name} has no length`);
  const bytes = new Uint8Array(Number(length));
  readExternal(t, modelPath, bytes);
  t.rawData = bytes;
  t.dataLocation = TensorProto_DataLocation.DEFAULT;
  t.externalData = [];
}

function readExternal(t: TensorProto, modelPath: string, bytes: Uint8Array): void {
  const entry = (key: string) => t.externalData.find((e) => e.key === key)?.value;
  const location = entry('location');
  if (!location) throw new AppError('INVALID_ARGUMENT', `${modelPath}: external tensor ${t.name} has no location`);
  const offset = Number(entry('offset') ?? 0);
  // onnxruntime's rule: data beside the model or below it, and a file (a FIFO would never end).
  if (isAbsolute(location) || normalize(location).split(sep)[0] === '..') {
    throw new AppError('INVALID_ARGUMENT', `${modelPath}: external data location ${location} is outside the model's folder`);
  }
  const file = join(dirname(modelPath), location);
  let fd: number;
  try {
    if (!statSync(file).isFile()) throw new Error('not a regular file');
    fd = openSync(file, 'r');
  } catch (e) {
    throw new AppError('NOT_FOUND', `${modelPath}: external data ${location} cannot be read (${errorMessage(e)})`);
  }
  try {
    for (let done = 0; done < bytes.byteLength; ) {
      const n = readSync(fd, bytes, done, bytes.byteLength - done, offset + done);
      if (n === 0) throw new AppError('INVALID_ARGUMENT', `${modelPath}: ${location} ends inside ${t.name}`);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
}
