/**
 * The two sums behind the router's logit statistics, Σ exp(x − max) and Σ exp(x − max)·(x − max), over
 * one row of logits, computed by onnxruntime. At a 151,936-token vocabulary the exponentials are
 * nearly all of a router call's cost: JavaScript's Math.exp takes them one at a time, onnxruntime's
 * vectorized Exp several at once. The graph is built in memory (no file to ship or keep in step), and
 * the caller passes the row's maximum, which it has from the pass that finds the top two logits anyway.
 *
 * @example
 * const sums = await LogitSums.create();
 * const { z, weighted } = await sums.compute(logits, max); // entropy = log z − weighted / z
 */
import { toBinary } from '@bufbuild/protobuf';
import { ModelProtoSchema } from 'onnx-buf';
import { DataType, GraphBuilder } from '../../shared/model/onnx-graph.ts';
import { ort, type InferenceSession } from '../../shared/model/ort.ts';
import { runSession } from '../../shared/model/run-session.ts';

/** Rows at least this long go to onnxruntime; shorter ones cost less in JavaScript than a session run's fixed cost (the demo's 512-id rows by far). */
export const ONNX_SUMS_MIN_LENGTH = 8192;

/** logits [1, n], max [1, 1] → z [1], weighted [1]. */
function logitSumsGraph(): Uint8Array {
  const g = new GraphBuilder('logit-sums');
  const logits = g.input('logits', DataType.FLOAT, [1, 'vocab']);
  const max = g.input('max', DataType.FLOAT, [1, 1]);
  const shifted = g.op('Sub', [logits, max]);
  const exps = g.op('Exp', [shifted]);
  g.output(g.op('ReduceSum', [exps, g.ints('sum_axes', [1])], { keepdims: 0 }), 'z', DataType.FLOAT, [1]);
  g.output(g.op('ReduceSum', [g.op('Mul', [exps, shifted]), g.ints('weighted_sum_axes', [1])], { keepdims: 0 }), 'weighted', DataType.FLOAT, [1]);
  return toBinary(ModelProtoSchema, g.toModel());
}

export class LogitSums {
  private constructor(private readonly session: InferenceSession) {}

  static async create(): Promise<LogitSums> {
    return new LogitSums(await ort.InferenceSession.create(logitSumsGraph(), { intraOpNumThreads: 1, interOpNumThreads: 1 }));
  }

  async compute(logits: Float32Array, max: number): Promise<{ z: number; weighted: number }> {
    const out = await runSession(this.session, {
      logits: new ort.Tensor('float32', logits, [1, logits.length]),
      max: new ort.Tensor('float32', Float32Array.of(max), [1, 1]),
    });
    try {
      return { z: (out.z!.data as Float32Array)[0]!, weighted: (out.weighted!.data as Float32Array)[0]! };
    } finally {
      out.z!.dispose();
      out.weighted!.dispose();
    }
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
