/**
 * A GGUF v3 file writer (the format llama.cpp loads), written from the spec in ggml's docs/gguf.md:
 * header (magic, version, tensor count, KV count), typed metadata key/values, tensor infos (name, dims
 * innermost first, ggml type, offset into the data section), then the tensor data, each tensor starting
 * on a multiple of the alignment (32 unless `general.alignment` says otherwise).
 */
import { closeSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';

/** GGUF metadata value types (gguf_type). */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/** The ggml tensor types this writer produces. */
export const GgmlType = { F32: 0, Q4_0: 2, Q8_0: 8 } as const;
export type GgmlTypeName = keyof typeof GgmlType;

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_ALIGNMENT = 32;

type ScalarType = 'uint8' | 'int8' | 'uint16' | 'int16' | 'uint32' | 'int32' | 'float32' | 'bool' | 'string' | 'uint64' | 'int64' | 'float64';
export type GgufValue =
  | { type: Exclude<ScalarType, 'string' | 'bool' | 'uint64' | 'int64'>; value: number }
  | { type: 'uint64' | 'int64'; value: bigint }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; itemType: 'string'; value: readonly string[] }
  | { type: 'array'; itemType: 'int32' | 'uint32' | 'float32'; value: ArrayLike<number> };

export interface GgufTensor {
  name: string;
  /** ggml order: the contiguous (innermost) dimension first. */
  dims: number[];
  type: GgmlTypeName;
  /** The tensor's bytes in its ggml type, made when the file is written so only one is in memory at a time. */
  data: () => Uint8Array;
}

const SCALAR_CODES: Record<ScalarType, number> = {
  uint8: GgufValueType.UINT8,
  int8: GgufValueType.INT8,
  uint16: GgufValueType.UINT16,
  int16: GgufValueType.INT16,
  uint32: GgufValueType.UINT32,
  int32: GgufValueType.INT32,
  float32: GgufValueType.FLOAT32,
  bool: GgufValueType.BOOL,
  string: GgufValueType.STRING,
  uint64: GgufValueType.UINT64,
  int64: GgufValueType.INT64,
  float64: GgufValueType.FLOAT64,
};

/** Little-endian bytes appended to a growing buffer. */
class ByteSink {
  private buffer = new Uint8Array(1 << 16);
  length = 0;

  private room(n: number): number {
    if (this.length + n > this.buffer.length) {
      const grown = new Uint8Array(Math.max(this.buffer.length * 2, this.length + n));
      grown.set(this.buffer.subarray(0, this.length));
      this.buffer = grown;
    }
    const at = this.length;
    this.length += n;
    return at;
  }
  // Each writer reserves its bytes before making its view: room() may replace the buffer.
  private at(n: number): DataView {
    const at = this.room(n);
    return new DataView(this.buffer.buffer, at, n);
  }
  u8(v: number) {
    this.at(1).setUint8(0, v);
  }
  i8(v: number) {
    this.at(1).setInt8(0, v);
  }
  u16(v: number) {
    this.at(2).setUint16(0, v, true);
  }
  i16(v: number) {
    this.at(2).setInt16(0, v, true);
  }
  u32(v: number) {
    this.at(4).setUint32(0, v, true);
  }
  i32(v: number) {
    this.at(4).setInt32(0, v, true);
  }
  f32(v: number) {
    this.at(4).setFloat32(0, v, true);
  }
  f64(v: number) {
    this.at(8).setFloat64(0, v, true);
  }
  u64(v: bigint | number) {
    this.at(8).setBigUint64(0, BigInt(v), true);
  }
  i64(v: bigint) {
    this.at(8).setBigInt64(0, v, true);
  }
  string(s: string) {
    const bytes = new TextEncoder().encode(s);
    this.u64(bytes.length);
    const at = this.room(bytes.length);
    this.buffer.set(bytes, at);
  }
  pad(alignment: number) {
    this.room((alignment - (this.length % alignment)) % alignment);
  }
  bytes(): Uint8Array {
    return this.buffer.subarray(0, this.length);
  }
}

function writeScalar(sink: ByteSink, type: ScalarType, v: number | bigint | boolean | string): void {
  switch (type) {
    case 'uint8':
      return sink.u8(v as number);
    case 'int8':
      return sink.i8(v as number);
    case 'uint16':
      return sink.u16(v as number);
    case 'int16':
      return sink.i16(v as number);
    case 'uint32':
      return sink.u32(v as number);
    case 'int32':
      return sink.i32(v as number);
    case 'float32':
      return sink.f32(v as number);
    case 'float64':
      return sink.f64(v as number);
    case 'bool':
      return sink.u8(v ? 1 : 0);
    case 'string':
      return sink.string(v as string);
    case 'uint64':
      return sink.u64(v as bigint);
    case 'int64':
      return sink.i64(v as bigint);
  }
}

/** Bytes a tensor of `dims` takes in `type` (rows must be whole blocks for the block types). */
export function tensorByteLength(dims: readonly number[], type: GgmlTypeName): number {
  const count = dims.reduce((a, b) => a * b, 1);
  if (type === 'F32') return count * 4;
  if (dims[0]! % 32 !== 0) throw new Error(`${type} rows need a multiple of 32 values, got ${dims[0]}`);
  return (count / 32) * (type === 'Q8_0' ? 34 : 18);
}

/** Header, metadata and tensor infos, padded to the alignment: everything before the tensor data. */
export function ggufPreamble(metadata: ReadonlyMap<string, GgufValue>, tensors: readonly Pick<GgufTensor, 'name' | 'dims' | 'type'>[]): Uint8Array {
  const sink = new ByteSink();
  sink.u32(GGUF_MAGIC);
  sink.u32(GGUF_VERSION);
  sink.u64(tensors.length);
  sink.u64(metadata.size);
  for (const [key, v] of metadata) {
    sink.string(key);
    if (v.type === 'array') {
      sink.u32(GgufValueType.ARRAY);
      sink.u32(SCALAR_CODES[v.itemType]);
      sink.u64(v.value.length);
      for (let i = 0; i < v.value.length; i++) writeScalar(sink, v.itemType, v.value[i]!);
    } else {
      sink.u32(SCALAR_CODES[v.type]);
      writeScalar(sink, v.type, v.value);
    }
  }
  let offset = 0;
  for (const t of tensors) {
    sink.string(t.name);
    sink.u32(t.dims.length);
    for (const d of t.dims) sink.u64(d);
    sink.u32(GgmlType[t.type]);
    sink.u64(offset);
    offset += tensorByteLength(t.dims, t.type);
    offset += (GGUF_ALIGNMENT - (offset % GGUF_ALIGNMENT)) % GGUF_ALIGNMENT;
  }
  sink.pad(GGUF_ALIGNMENT);
  return sink.bytes();
}

/**
 * Writes a GGUF file: to `path.partial`, renamed into place once complete, so a failure never leaves a
 * half-written file under the final name.
 * @example
 * writeGguf('m.gguf', new Map([['general.architecture', { type: 'string', value: 'qwen2' }]]),
 *   [{ name: 'output_norm.weight', dims: [64], type: 'F32', data: () => new Uint8Array(ones.buffer) }]);
 */
export function writeGguf(path: string, metadata: ReadonlyMap<string, GgufValue>, tensors: readonly GgufTensor[]): void {
  const partial = `${path}.partial`;
  const fd = openSync(partial, 'w');
  try {
    writeAll(fd, ggufPreamble(metadata, tensors));
    const zeros = new Uint8Array(GGUF_ALIGNMENT);
    for (const t of tensors) {
      const bytes = t.data();
      const expected = tensorByteLength(t.dims, t.type);
      if (bytes.length !== expected) throw new Error(`tensor ${t.name}: ${bytes.length} bytes of data, its dims and type need ${expected}`);
      writeAll(fd, bytes);
      writeAll(fd, zeros.subarray(0, (GGUF_ALIGNMENT - (bytes.length % GGUF_ALIGNMENT)) % GGUF_ALIGNMENT));
    }
    closeSync(fd);
  } catch (error) {
    closeSync(fd);
    rmSync(partial, { force: true });
    throw error;
  }
  renameSync(partial, path);
}

function writeAll(fd: number, bytes: Uint8Array): void {
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
}
