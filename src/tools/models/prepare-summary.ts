/** What `models prepare` prints: the layout chosen and why, the files, and the command that runs the pack. */
import { basename } from 'node:path';
import { DEFAULT_MODEL_FILE } from '../../shared/model/model-pack.ts';
import { formatExposeResult } from './expose-hidden.ts';
import { formatOptimizeResult } from './optimize.ts';
import type { PrepareResult } from './prepare.ts';
import type { LeftOut } from './prepare-layouts.ts';

export function formatPrepareResult(r: PrepareResult): string {
  const lines: string[] = [];
  if (r.layout === 'fused') {
    lines.push(formatOptimizeResult(r.optimized, r.output));
    if (r.quantized)
      lines.push(`  quantized as ${r.quantized.dtype}: ${r.quantized.quantized} MatMul(s), ${(r.quantized.weightBytes / 2 ** 20).toFixed(1)} MiB of weights`);
  } else if (r.layout === 'plain') {
    lines.push(
      `wrote ${r.output} (plain layout: the hub's files as they come, hidden_states exposed in each)`,
      `  not rebuilt in the fused layout: ${r.whyNotFused}`,
    );
    for (const e of r.exposed) lines.push(`  ${formatExposeResult(e, basename(e.output))}`);
  } else {
    lines.push(`wrote ${r.output} (the shim's pack for an HTTP backend: config and tokenizer files, no ONNX)`);
    lines.push(`  vocabulary: config.json's vocab_size ${String(r.vocabSize ?? 'not given')}, the tokenizer's ${r.tokenizerVocabSize} tokens`);
  }
  if (r.layout !== 'fused') lines.push(`  copied ${r.copied.join(', ')}`);
  lines.push(...leftOutLines(r.leftOut));
  if (r.layout === 'cloud-only') {
    lines.push('run the shim with it (or --backend openai):', `  bun run shim -- --backend sglang --backend-url http://HOST:PORT --model-pack ${r.output}`);
  } else {
    const file = r.layout === 'plain' && r.runFile !== DEFAULT_MODEL_FILE ? ` --edge-model-file ${r.runFile}` : '';
    // No router was trained for a pack just made, and the edge refuses one trained for another model (the
    // default is the demo's): the built-in scorer fits any edge model.
    lines.push(
      "run the edge with it (the edge model's own top-1 probability as the router):",
      `  bun run edge -- --edge-model ${r.output}${file} --router builtin`,
      'or train a router for it first, then pass --router DIR:',
      `  bun run router train --edge-model ${r.output}${file} (--cloud-model PACK | --cloud HOST:PORT) --text FILE --out DIR`,
    );
  }
  return lines.join('\n');
}

/** One line per reason, files that share it together. */
function leftOutLines(leftOut: readonly LeftOut[]): string[] {
  const byReason = new Map<string, string[]>();
  for (const { file, reason } of leftOut) byReason.set(reason, [...(byReason.get(reason) ?? []), file]);
  return [...byReason].map(([reason, files]) => `  left out ${files.join(', ')}: ${reason}`);
}
