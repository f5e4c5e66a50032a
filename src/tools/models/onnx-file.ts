/**
 * Reading and writing ONNX model files, with weights optionally kept as external data
 * (`model.onnx_data`, tensors referenced by offset) so that models above protobuf's 2 GB limit work.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { ModelProtoSchema, TensorProto_DataLocation, type ModelProto } from 'onnx-buf';
import { AppError, errorMessage } from '../../shared/errors.ts';

/** Tensors at least this large go to the external data file when one is written. */
const EXTERNAL_THRESHOLD_BYTES = 1024;
/** Page alignment lets onnxruntime map the weights instead of copying them. */
const EXTERNAL_ALIGNMENT = 4096;

export function readModel(path: string): ModelProto {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new AppError('NOT_FOUND', `${path}: cannot read (${errorMessage(e)})`);
  }
  let model: ModelProto;
  try {
    model = fromBinary(ModelProtoSchema, bytes);
  } catch (e) {
    throw new AppError('INVALID_ARGUMENT', `${path}: not an ONNX model (${errorMessage(e)})`);
  }
  if (!model.graph || model.graph.node.length === 0 || model.opsetImport.length === 0) {
    throw new AppError('INVALID_ARGUMENT', `${path}: not an ONNX model (no graph or no opset)`);
  }
  return model;
}

/** Names of the external data files a model refers to, relative to its folder. */
export function externalDataFiles(model: ModelProto): string[] {
  const files = new Set<string>();
  for (const t of model.graph?.initializer ?? []) {
    if (t.dataLocation !== TensorProto_DataLocation.EXTERNAL) continue;
    const location = t.externalData.find((e) => e.key === 'location')?.value;
    if (location) files.add(location);
  }
  return [...files];
}

/**
 * Writes `model` to `path`. With `externalData`, every initializer of 1 KiB or more moves to
 * `<basename>_data` beside it (the model object is not modified).
 */
export function writeModel(model: ModelProto, path: string, options: { externalData?: boolean } = {}): void {
  if (!options.externalData) {
    writeWhole(path, toBinary(ModelProtoSchema, model));
    return;
  }
  const dataName = `${basename(path)}_data`;
  const fd = openSync(join(dirname(path), dataName), 'w');
  const graph = model.graph!;
  const original = graph.initializer;
  try {
    let offset = 0;
    graph.initializer = original.map((t) => {
      if (t.rawData.byteLength < EXTERNAL_THRESHOLD_BYTES) return t;
      const padding = (EXTERNAL_ALIGNMENT - (offset % EXTERNAL_ALIGNMENT)) % EXTERNAL_ALIGNMENT;
      if (padding) offset += writeSync(fd, new Uint8Array(padding), 0, padding, offset);
      const start = offset;
      for (let done = 0; done < t.rawData.byteLength; ) {
        done += writeSync(fd, t.rawData, done, t.rawData.byteLength - done, start + done);
      }
      offset += t.rawData.byteLength;
      return {
        ...t,
        rawData: new Uint8Array(0),
        dataLocation: TensorProto_DataLocation.EXTERNAL,
        externalData: [
          { $typeName: 'onnx.StringStringEntryProto', key: 'location', value: dataName },
          { $typeName: 'onnx.StringStringEntryProto', key: 'offset', value: String(start) },
          { $typeName: 'onnx.StringStringEntryProto', key: 'length', value: String(t.rawData.byteLength) },
        ],
      };
    });
    writeWhole(path, toBinary(ModelProtoSchema, model));
  } finally {
    graph.initializer = original;
    closeSync(fd);
  }
}

function writeWhole(path: string, bytes: Uint8Array): void {
  const fd = openSync(path, 'w');
  try {
    for (let done = 0; done < bytes.byteLength; ) done += writeSync(fd, bytes, done);
  } finally {
    closeSync(fd);
  }
}
