/**
 * Reads onnxruntime's profile (the Chrome-trace JSON that `enableProfiling` writes) into what one
 * decode step costs: nodes run, time per op type, the share outside the matrix products and between
 * kernels, and the bytes the step copies from the KV cache's `past` into its `present`.
 *
 * @example
 * const summary = summarizeDecodeProfile(JSON.parse(readFileSync(file, 'utf8')), [100, 101, 102]);
 * summary.perStep.nodes; // kernels run per decode step
 */

/** One event of the profile file; only the fields read here. */
export interface ProfileEvent {
  cat: string;
  name: string;
  /** Start and duration in microseconds. */
  ts: number;
  dur: number;
  args?: { op_name?: string; output_size?: string; input_type_shape?: Record<string, number[]>[] };
}

/** Op types that multiply by a weight matrix: the work a decode step cannot avoid. */
export const MATRIX_OPS = new Set(['MatMul', 'Gemm', 'MatMulNBits', 'MatMulInteger', 'MatMulIntegerToFloat', 'DynamicQuantizeMatMul', 'FusedMatMul', 'QGemm']);

export interface OpTypeCost {
  op: string;
  /** Nodes of this type per step. */
  nodes: number;
  /** Kernel time per step, microseconds (mean over the steps). */
  us: number;
}

export interface DecodeProfileSummary {
  /** Decode runs the figures average over. */
  steps: number;
  perStep: {
    nodes: number;
    /** The session run, from onnxruntime's `model_run` event, microseconds. */
    runUs: number;
    /** All kernels together. */
    kernelUs: number;
    /** Kernels of `MATRIX_OPS`. */
    matrixUs: number;
    /** Bytes written by the Concats that append this step's K/V to the past cache (a full copy of it). */
    kvCopyBytes: number;
    /**
     * Bytes of the outputs onnxruntime-node copied into new JavaScript buffers (logits, hidden states and
     * the present KV cache); not in the profile, filled in by whoever ran the steps.
     */
    outputBytes?: number;
  };
  /** Most expensive first. */
  byOpType: OpTypeCost[];
  /** (kernels − matrix kernels) / run: the step spent in small ops. */
  nonMatrixShare: number;
  /** (run − kernels) / run: the step spent between kernels (scheduling, allocation, input binding). */
  betweenKernelsShare: number;
}

const KERNEL_SUFFIX = '_kernel_time';
const CONTROL_FLOW_OPS = new Set(['If', 'Loop', 'Scan']);

/**
 * Summarises the decode runs of a profile. `pastLengths[i]` is the number of cached tokens when the
 * i-th of the profile's last `pastLengths.length` runs started; earlier runs (the prefill) are skipped.
 */
export function summarizeDecodeProfile(events: readonly ProfileEvent[], pastLengths: readonly number[]): DecodeProfileSummary {
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').sort((a, b) => a.ts - b.ts);
  if (runs.length < pastLengths.length || pastLengths.length === 0) {
    throw new Error(`the profile holds ${runs.length} runs; expected at least ${Math.max(1, pastLengths.length)} decode runs`);
  }
  const decodeRuns = runs.slice(runs.length - pastLengths.length);
  const kernels = events.filter((e) => e.cat === 'Node' && e.name.endsWith(KERNEL_SUFFIX));
  const ops = new Map<string, { nodes: number; us: number }>();
  let nodes = 0;
  let runUs = 0;
  let kernelUs = 0;
  let matrixUs = 0;
  let kvCopyBytes = 0;
  decodeRuns.forEach((run, i) => {
    runUs += run.dur;
    for (const k of kernels) {
      if (k.ts < run.ts || k.ts > run.ts + run.dur) continue;
      const op = k.args?.op_name ?? k.name.slice(0, -KERNEL_SUFFIX.length);
      // An If's time is that of the branch it ran, whose nodes are counted themselves.
      if (CONTROL_FLOW_OPS.has(op)) continue;
      const cost = ops.get(op) ?? { nodes: 0, us: 0 };
      cost.nodes++;
      cost.us += k.dur;
      ops.set(op, cost);
      nodes++;
      kernelUs += k.dur;
      if (MATRIX_OPS.has(op)) matrixUs += k.dur;
      if (op === 'Concat' && appendsToPast(k, pastLengths[i]!)) kvCopyBytes += Number(k.args?.output_size ?? 0);
    }
  });
  const n = decodeRuns.length;
  const byOpType = [...ops].map(([op, c]) => ({ op, nodes: c.nodes / n, us: c.us / n })).sort((a, b) => b.us - a.us || a.op.localeCompare(b.op));
  return {
    steps: n,
    perStep: { nodes: nodes / n, runUs: runUs / n, kernelUs: kernelUs / n, matrixUs: matrixUs / n, kvCopyBytes: kvCopyBytes / n },
    byOpType,
    nonMatrixShare: runUs > 0 ? (kernelUs - matrixUs) / runUs : 0,
    betweenKernelsShare: runUs > 0 ? Math.max(0, runUs - kernelUs) / runUs : 0,
  };
}

/** A Concat whose first input is a 4-D cache of `past` positions on axis 2: `present = Concat(past, new)`. */
function appendsToPast(kernel: ProfileEvent, past: number): boolean {
  const [first, second] = (kernel.args?.input_type_shape ?? []).map((input) => Object.values(input)[0]);
  // [batch, heads, past, head_dim] and [batch, heads, new, head_dim]: a cache grown along its positions.
  const sameRows = first && second && first.length === 4 && second.length === 4 && [0, 1, 3].every((axis) => first[axis] === second[axis]);
  return past > 0 && sameRows === true && first![2] === past;
}

/** The summary as text lines, op types most expensive first (the top `topOps`). */
export function formatDecodeProfile(s: DecodeProfileSummary, topOps = 16): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const p = s.perStep;
  const shown = s.byOpType.slice(0, topOps);
  const width = Math.max(18, ...shown.map((o) => o.op.length));
  return [
    `profile of ${s.steps} decode steps (onnxruntime's profiler; times under the profiler, per step):`,
    `nodes run: ${p.nodes.toFixed(0)}; run ${(p.runUs / 1000).toFixed(2)} ms, kernels ${(p.kernelUs / 1000).toFixed(2)} ms, matrix products ${(p.matrixUs / 1000).toFixed(2)} ms`,
    `outside the matrix products: ${pct(s.nonMatrixShare)} of the run; between kernels: ${pct(s.betweenKernelsShare)}`,
    `KV cache copied past → present: ${(p.kvCopyBytes / 2 ** 10).toFixed(1)} KiB per step` +
      (p.outputBytes === undefined ? '' : `; outputs copied out by onnxruntime-node: ${(p.outputBytes / 2 ** 10).toFixed(1)} KiB per step`),
    `${'op type'.padEnd(width)} nodes   ms/step   share of kernels`,
    ...shown.map(
      (o) => `${o.op.padEnd(width)} ${o.nodes.toFixed(0).padStart(5)} ${(o.us / 1000).toFixed(3).padStart(9)}   ${pct(p.kernelUs > 0 ? o.us / p.kernelUs : 0)}`,
    ),
  ].join('\n');
}
