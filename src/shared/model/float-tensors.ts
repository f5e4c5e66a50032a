/**
 * Float32 and float16 tensors as a decoder export declares them. onnxruntime-common hands float16 data
 * out as a `Float16Array` where the runtime has one (Bun, recent Node) and as raw `Uint16Array` bits
 * elsewhere, so both are read here; everything after the decoder's boundary (router, sampling) sees
 * float32 only, converted once per step.
 *
 * @example
 * const logits = toFloat32(out.logits); // Float32Array whatever the export's logits type
 */
import { ort, type OrtTensor } from './ort.ts';

export type FloatType = 'float32' | 'float16';
export type IndexType = 'int32' | 'int64';

/** A tensor with no elements (e.g. an empty KV cache `[1, heads, 0, headDim]`) of the declared type. */
export function emptyTensor(type: FloatType, dims: readonly number[]): OrtTensor {
  if (type === 'float32') return new ort.Tensor('float32', new Float32Array(0), dims);
  return feedable(new ort.Tensor('float16', new Uint16Array(0), dims));
}

/**
 * Makes a float16 tensor (an output fed back as the next step's input) readable by onnxruntime-node's
 * native binding. onnxruntime-common stores float16 data as a `Float16Array` wherever one exists, and
 * Bun's N-API does not report a `Float16Array`'s contents to native code: the run fails with "not enough
 * space: expected 320, got 0". The tensor's `data` is therefore shadowed by a `Uint16Array` view of the
 * same memory (no copy, no conversion: the cache stays float16). Other tensors are returned as they are.
 */
export function feedable(tensor: OrtTensor): OrtTensor {
  const data = tensor.data;
  if (typeof Float16Array !== 'undefined' && data instanceof Float16Array) {
    Object.defineProperty(tensor, 'data', { value: new Uint16Array(data.buffer, data.byteOffset, data.length), configurable: true });
  }
  return tensor;
}

/**
 * Integer ids, a mask or positions as `int32` or `int64`, whichever the input declares; `value(i)` computes
 * element i when given (a mask of ones, positions from an offset) so no intermediate array is built.
 */
export function indexTensor(type: IndexType, values: ArrayLike<number>, dims: readonly number[], value: (i: number) => number = (i) => values[i]!): OrtTensor {
  const n = values.length;
  if (type === 'int32') {
    const data = new Int32Array(n);
    for (let i = 0; i < n; i++) data[i] = value(i);
    return new ort.Tensor('int32', data, dims);
  }
  const data = new BigInt64Array(n);
  for (let i = 0; i < n; i++) data[i] = BigInt(value(i));
  return new ort.Tensor('int64', data, dims);
}

/** Elements [from, to) of a float32 or float16 tensor as a float32 copy. */
export function float32Rows(tensor: OrtTensor, from: number, to: number): Float32Array {
  const data = tensor.data;
  if (data instanceof Float32Array) return data.slice(from, to);
  if (typeof Float16Array !== 'undefined' && data instanceof Float16Array) return new Float32Array(data.subarray(from, to));
  if (tensor.type === 'float16' && data instanceof Uint16Array) return halfBitsToFloat32(data.subarray(from, to));
  throw new TypeError(`expected a float32 or float16 tensor, got ${tensor.type}`);
}

/**
 * Elements [from, to) of a logits tensor `[batch, positions, vocab]` as float32. Where it holds at most
 * two positions a row (decode steps, a head that keeps the last two), float32 data comes as a view: copying
 * a row of Qwen's vocabulary (608 KB) into fresh memory faults its pages in on every step, a share of a
 * batched pass at the 0.5B shape worth saving. Where it holds every position of a long prompt, a copy: a
 * view would keep all of it alive.
 */
export function logitRows(tensor: OrtTensor, from: number, to: number): Float32Array {
  return tensor.data instanceof Float32Array && tensor.dims[1]! <= 2 ? tensor.data.subarray(from, to) : float32Rows(tensor, from, to);
}

/** The tensor's data as float32: a view of float32 data, a converted copy of float16 data. */
export function toFloat32(tensor: OrtTensor): Float32Array {
  const data = tensor.data;
  if (data instanceof Float32Array) return data;
  if (typeof Float16Array !== 'undefined' && data instanceof Float16Array) return new Float32Array(data);
  if (tensor.type === 'float16' && data instanceof Uint16Array) return halfBitsToFloat32(data);
  throw new TypeError(`expected a float32 or float16 tensor, got ${tensor.type}`);
}

/** IEEE 754 binary16 bit patterns → float32 values (subnormals, infinities and NaN included). */
export function halfBitsToFloat32(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) {
    const h = bits[i]!;
    const sign = h & 0x8000 ? -1 : 1;
    const exponent = (h >> 10) & 0x1f;
    const fraction = h & 0x3ff;
    if (exponent === 0) out[i] = sign * fraction * 2 ** -24;
    else if (exponent === 0x1f) out[i] = fraction ? NaN : sign * Infinity;
    else out[i] = sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
  }
  return out;
}
