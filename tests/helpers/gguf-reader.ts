/**
 * A small GGUF v3 reader for tests: parses what src/tools/llama-cpp-peer/gguf-writer.ts writes (independently of
 * it, from the spec) and dequantizes Q8_0 / Q4_0 blocks the way ggml's dequantize_row_* do.
 */
export interface ReadGgufTensor {
  name: string;
  dims: number[];
  type: number;
  /** Relative to the data section. */
  offset: number;
}

export interface ReadGguf {
  magic: number;
  version: number;
  metadata: Map<string, { type: number; value: unknown }>;
  tensors: ReadGgufTensor[];
  /** Where the data section starts in the file. */
  dataStart: number;
  bytes: Uint8Array;
}

export function readGguf(bytes: Uint8Array, alignment = 32): ReadGguf {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const u32 = () => ((at += 4), view.getUint32(at - 4, true));
  const u64 = () => ((at += 8), Number(view.getBigUint64(at - 8, true)));
  const str = () => {
    const n = u64();
    at += n;
    return new TextDecoder().decode(bytes.subarray(at - n, at));
  };
  const scalar = (type: number): unknown => {
    switch (type) {
      case 0:
        return view.getUint8(at++);
      case 1:
        return view.getInt8(at++);
      case 2:
        return ((at += 2), view.getUint16(at - 2, true));
      case 3:
        return ((at += 2), view.getInt16(at - 2, true));
      case 4:
        return u32();
      case 5:
        return ((at += 4), view.getInt32(at - 4, true));
      case 6:
        return ((at += 4), view.getFloat32(at - 4, true));
      case 7:
        return view.getUint8(at++) === 1;
      case 8:
        return str();
      case 10:
        return ((at += 8), view.getBigUint64(at - 8, true));
      case 11:
        return ((at += 8), view.getBigInt64(at - 8, true));
      case 12:
        return ((at += 8), view.getFloat64(at - 8, true));
      default:
        throw new Error(`unknown GGUF value type ${type}`);
    }
  };
  const magic = u32();
  const version = u32();
  const tensorCount = u64();
  const kvCount = u64();
  const metadata = new Map<string, { type: number; value: unknown }>();
  for (let i = 0; i < kvCount; i++) {
    const key = str();
    const type = u32();
    if (type === 9) {
      const itemType = u32();
      const n = u64();
      metadata.set(key, { type, value: Array.from({ length: n }, () => scalar(itemType)) });
    } else metadata.set(key, { type, value: scalar(type) });
  }
  const tensors: ReadGgufTensor[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = str();
    const nDims = u32();
    const dims = Array.from({ length: nDims }, () => u64());
    tensors.push({ name, dims, type: u32(), offset: u64() });
  }
  const dataStart = Math.ceil(at / alignment) * alignment;
  return { magic, version, metadata, tensors, dataStart, bytes };
}

function half(h: number): number {
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  const sign = h & 0x8000 ? -1 : 1;
  return exp === 0 ? sign * mant * 2 ** -24 : sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Q8_0 blocks → floats: q * d. */
export function dequantizeQ8_0(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array((bytes.length / 34) * 32);
  for (let b = 0; b < bytes.length / 34; b++) {
    const d = half(view.getUint16(b * 34, true));
    for (let j = 0; j < 32; j++) out[b * 32 + j] = view.getInt8(b * 34 + 2 + j) * d;
  }
  return out;
}

/** Q4_0 blocks → floats: (q - 8) * d, low nibbles elements 0..15, high nibbles 16..31. */
export function dequantizeQ4_0(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array((bytes.length / 18) * 32);
  for (let b = 0; b < bytes.length / 18; b++) {
    const d = half(view.getUint16(b * 18, true));
    for (let j = 0; j < 16; j++) {
      const byte = bytes[b * 18 + 2 + j]!;
      out[b * 32 + j] = ((byte & 0xf) - 8) * d;
      out[b * 32 + j + 16] = ((byte >> 4) - 8) * d;
    }
  }
  return out;
}
