/**
 * What one CPU architecture computes with the product, as JSON, so that scripts/check-arm64.sh can run it
 * under the x86-64 Bun and under the arm64 Bun (qemu-user) and compare the two (compare-reports.ts):
 * - the demo pair through the real edge and shim servers on loopback: greedy `small_only`, and greedy `joint`
 *   with the trained router, where routed tokens cross gRPC to the shim's embedded cloud model;
 * - the cloud pack in fp32 and the int8 and q4 packs given with --quantized: teacher-forced next-token
 *   argmaxes and perplexity over the TinyStories paragraphs tests/quantize.test.ts uses, and greedy ids.
 *
 * @example
 * bun scripts/arm64/platform-report.ts --quantized /tmp/packs --out report-x64.json
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { shimConfig } from '../../src/cloud/config.ts';
import { startShim } from '../../src/cloud/shim-server.ts';
import { parseEdgeConfig } from '../../src/edge/config.ts';
import { startEdge } from '../../src/edge/server/edge-server.ts';
import { DecoderModel } from '../../src/shared/model/decoder-model.ts';
import { availableExecutionProviders } from '../../src/shared/model/execution-providers.ts';
import { silentLogger } from '../../src/shared/process/logger.ts';
import { loadModelPack } from '../../src/shared/model/model-pack.ts';
import { argmax } from '../../src/shared/model/logits.ts';
import { DEMO } from '../../src/shared/paths.ts';
import { TextTokenizer } from '../../src/shared/text/tokenizer.ts';
import { nextTokenFigures } from '../../src/tools/models/next-token-figures.ts';
import type { DecodedRun, PackMeasures, PlatformReport } from './report-types.ts';

const PROMPT = 'Once upon a time';
const MAX_NEW_TOKENS = 48;
/** Above the demo router's default τ, so that a joint run sends a fair share of its tokens to the shim. */
const JOINT_THRESHOLD = 0.9;
/** The paragraphs and their count are those of tests/quantize.test.ts. */
const PARAGRAPHS = 20;

/** One greedy generation through the edge's JSON SSE API; returns each token's id and source. */
async function decodeThroughEdge(url: string, mode: 'small_only' | 'joint'): Promise<DecodedRun> {
  const response = await fetch(new URL('/api/generate', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: PROMPT, mode, max_new_tokens: MAX_NEW_TOKENS, temperature: 0, threshold: JOINT_THRESHOLD }),
  });
  if (!response.ok) throw new Error(`/api/generate answered ${response.status}: ${await response.text()}`);
  const events = (await response.text())
    .split('\n\n')
    .map((block) => block.split('\n').find((l) => l.startsWith('data:')))
    .filter((line): line is string => line !== undefined)
    .map((line) => JSON.parse(line.slice(5)) as { type: string; id?: number; source?: string; message?: string });
  const failure = events.find((e) => e.type === 'error');
  if (failure) throw new Error(`${mode} generation failed: ${failure.message}`);
  const tokens = events.filter((e) => e.type === 'token');
  return { ids: tokens.map((e) => e.id!), sources: tokens.map((e) => e.source!) };
}

async function decodeDemoPair(): Promise<Record<'smallOnly' | 'joint', DecodedRun>> {
  const shim = await startShim(shimConfig({ host: '127.0.0.1', port: 0, modelPack: DEMO.cloudPack, logLevel: 'silent' }), { log: silentLogger });
  try {
    const edge = await startEdge(
      parseEdgeConfig(['--host', '127.0.0.1', '--port', '0', '--grpc-port', 'off', '--cloud', `127.0.0.1:${shim.port}`, '--cloud-deadline-ms', '60000'], {}),
      { log: silentLogger },
    );
    try {
      return { smallOnly: await decodeThroughEdge(edge.url, 'small_only'), joint: await decodeThroughEdge(edge.url, 'joint') };
    } finally {
      await edge.stop();
    }
  } finally {
    await shim.shutdown(0);
  }
}

async function measurePack(dir: string, paragraphs: string[], tokenizer: TextTokenizer): Promise<PackMeasures> {
  const model = await DecoderModel.load(loadModelPack(dir), { threads: 1 });
  try {
    const { argmaxes, perplexity } = await nextTokenFigures(model, tokenizer, paragraphs);
    const seq = model.newSequence();
    const greedy: number[] = [];
    let { logits } = await seq.append(tokenizer.encode(PROMPT, { addBos: true }));
    while (greedy.length < MAX_NEW_TOKENS) {
      greedy.push(argmax(logits));
      ({ logits } = await seq.append([greedy.at(-1)!]));
    }
    seq.dispose();
    return { argmaxes, perplexity, greedy };
  } finally {
    await model.release();
  }
}

const { values } = parseArgs({ options: { quantized: { type: 'string' }, out: { type: 'string' } } });
if (!values.quantized || !values.out) {
  console.error('usage: bun scripts/arm64/platform-report.ts --quantized DIR (holding int8/ and q4/ packs) --out FILE');
  process.exit(2);
}
const started = performance.now();
const tokenizer = await TextTokenizer.fromPack(DEMO.cloudPack);
const text = await Bun.file(DEMO.tinyStories).text();
const paragraphs = text
  .split(/\n\s*\n/)
  .map((p) => p.trim())
  .filter((p) => p.length > 0)
  .slice(0, PARAGRAPHS);
const pair = await decodeDemoPair();
const report: PlatformReport = {
  arch: process.arch,
  bun: Bun.version,
  executionProviders: availableExecutionProviders(),
  ...pair,
  packs: {
    fp32: await measurePack(DEMO.cloudPack, paragraphs, tokenizer),
    int8: await measurePack(join(values.quantized, 'int8'), paragraphs, tokenizer),
    q4: await measurePack(join(values.quantized, 'q4'), paragraphs, tokenizer),
  },
  seconds: (performance.now() - started) / 1000,
};
writeFileSync(values.out, JSON.stringify(report));
console.log(`${report.arch}: report written to ${values.out} in ${report.seconds.toFixed(1)} s`);
