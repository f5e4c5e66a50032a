/**
 * The options of a decoder graph build, apart from the builders (decoder-graph.ts, decoder-graph-fused.ts,
 * decoder-graph-attention.ts), which all read them: one place every builder imports, none of them another.
 */

/** How decode steps attend in the fused layout (decoder-graph-attention.ts says what each costs). */
export type DecodeAttention = 'gqa' | 'matmul';

export interface DecoderGraphOptions {
  /**
   * How the LM head is written: `matmul` multiplies by a `[hidden, vocab]` matrix; `gemm` uses
   * `Gemm(transB=1)` directly on the `[vocab, hidden]` embedding, so a tied head stores its weights once.
   */
  head: 'matmul' | 'gemm';
  /** Adds the `hidden_states` output. Off only to make models like third-party exports. */
  hiddenStatesOutput: boolean;
  /**
   * `plain` (the default): standard ONNX ops, a KV cache that grows by a Concat per step.
   * `fused`: onnxruntime's contrib ops (decoder-graph-fused.ts) over a preallocated KV buffer.
   */
  layout?: DecoderLayout;
  /**
   * Fused layout: how decode steps (one new position per row) attend. `gqa` (the default):
   * GroupQueryAttention, as prefills. `matmul`: standard ops on the KV buffer in place, where
   * GroupQueryAttention copies the cache first (decoder-graph-attention.ts); faster from a few hundred
   * cached positions; the graph then returns the cache as `new_key_values.*` only.
   */
  decodeAttention?: DecodeAttention;
  /** Fused layout: adds the `new_key_values.*` outputs (decoder-graph-fused.ts); on unless false. Off only to build the older graph. */
  newKeyValuesOutputs?: boolean;
}

export type DecoderLayout = 'plain' | 'fused';
export const DECODER_LAYOUTS: readonly DecoderLayout[] = ['plain', 'fused'];
