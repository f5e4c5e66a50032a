/** The JSON that platform-report.ts writes for one architecture and compare-reports.ts reads. */

export interface DecodedRun {
  ids: number[];
  /** Per token: slm, llm or fallback (a routed token the cloud could not serve). */
  sources: string[];
}

/** One pack's teacher-forced measures over the TinyStories paragraphs, and its greedy continuation. */
export interface PackMeasures {
  argmaxes: number[];
  perplexity: number;
  greedy: number[];
}

export interface PlatformReport {
  /** `process.arch` of the Bun that ran it: x64 or arm64. */
  arch: string;
  bun: string;
  /** The execution providers onnxruntime-node offers on this platform (execution-providers.ts). */
  executionProviders: string[];
  smallOnly: DecodedRun;
  joint: DecodedRun;
  packs: Record<'fp32' | 'int8' | 'q4', PackMeasures>;
  seconds: number;
}
