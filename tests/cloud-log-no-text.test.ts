/**
 * The shim's log carries no request content by default: a shim logging at debug (every step, every failure) is
 * driven through steps of a distinctive prompt, a bad step (an id outside the vocabulary) and a backend whose
 * error body echoes the prompt, and nothing of the prompt (its words, its ids, the reply's text) is in the log,
 * while the edge still gets the whole error message. `--log-text` lets the content in, for debugging.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { parseShimConfig, SHIM_USAGE, type ShimConfig } from '../src/cloud/config.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import type { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { createLogger } from '../src/shared/process/logger.ts';
import type { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { FakeSglang, type FakeSglangOptions } from './helpers/cloud-fake-sglang.ts';
import { EdgeContext, loadCloudModel, startTestShim } from './helpers/cloud-fixture.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';

/** Words no log line has a reason to hold. */
const PROMPT = 'Zebulon whispered marmalade secrets to the harpsichord';
const WORDS = PROMPT.split(' ').filter((w) => w.length > 3);
/** An id no vocabulary of the demo packs holds: a bad step's. */
const BAD_ID = 987_654;

let model: DecoderModel;
let tokenizer: TextTokenizer;
let promptIds: number[];

beforeAll(async () => {
  ({ model, tokenizer } = await loadCloudModel());
  promptIds = tokenizer.encode(PROMPT, { addBos: true, parseSpecialTokens: false });
}, 30_000);
afterAll(() => model.release());

interface Run {
  /** The shim's log, every line at debug. */
  log: string;
  lines: Record<string, unknown>[];
  /** The error each failed step gave the edge. */
  errors: string[];
  /** The text of the replies the edge got. */
  replies: string[];
}

/**
 * A shim (embedded, or over a fake SGLang with `sglang`) logging at debug, and one conversation of `steps` steps
 * on the prompt, then a step holding `BAD_ID` when `badStep`.
 */
async function runShim(shimOptions: Partial<ShimConfig>, options: { steps: number; badStep?: boolean; sglang?: FakeSglangOptions }): Promise<Run> {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const log = createLogger('shim', 'debug', (line) => {
    raw.push(line);
    lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  const fake = options.sglang ? new FakeSglang(model, tokenizer, options.sglang) : undefined;
  const shim = await startTestShim({ ...(fake ? { backend: 'sglang', backendUrl: fake.url } : {}), ...shimOptions }, { log });
  const client = new GrpcCloudClient({ address: shim.address, stepTimeoutMs: 10_000 });
  const errors: string[] = [];
  const replies: string[] = [];
  try {
    const edge = new EdgeContext(promptIds);
    const conversation = client.openConversation({ gate: CloudGate.OPEN, requestId: 'no-text' });
    for (let i = 0; i < options.steps; i++) {
      try {
        const reply = await conversation.next(edge.step({ maxTokens: 3 }));
        replies.push(reply.text);
        edge.push(reply.tokens, 'llm');
      } catch (e) {
        errors.push((e as Error).message);
        break;
      }
    }
    if (options.badStep) {
      edge.push([BAD_ID], 'slm');
      await conversation.next(edge.step()).catch((e: Error) => errors.push(e.message));
    }
    await conversation.close();
  } finally {
    await client.close();
    await shim.shutdown();
    await fake?.stop();
  }
  return { log: raw.join(''), lines, errors, replies };
}

/** Nothing of the prompt or its replies in `log`: no word, no id list, no reply text. */
function expectNoContent(run: Run): void {
  for (const word of WORDS) expect(run.log).not.toContain(word);
  expect(run.log).not.toContain(String(BAD_ID));
  expect(run.log).not.toContain(promptIds.slice(1, 4).join(','));
  for (const reply of run.replies) for (const word of reply.split(/\W+/).filter((w) => w.length > 3)) expect(run.log).not.toContain(word);
}

describe('by default', () => {
  test("steps and a bad step: sizes and codes in the log, the id only in the edge's error", async () => {
    const run = await runShim({}, { steps: 2, badStep: true });
    expect(run.replies).toHaveLength(2);
    expect(run.replies.join('')).not.toBe('');
    expectNoContent(run);
    const steps = run.lines.filter((l) => l.msg === 'step');
    expect(steps.map((s) => [s.delta, s.returned])).toEqual([
      [0, 3],
      [0, 3],
    ]);
    expect(steps.every((s) => !('deltaIds' in s) && !('text' in s))).toBe(true);
    const failed = run.lines.find((l) => l.msg === 'session failed')!;
    expect(failed).toMatchObject({ code: 'INVALID_ARGUMENT', error: 'the step holds a token id (index 0) outside the vocabulary [0, 512)' });
    // The edge that sent the step is told which id.
    expect(run.errors).toEqual([expect.stringContaining(`the step holds token id ${BAD_ID} (index 0), outside the vocabulary [0, 512)`)]);
  });

  test("a backend error body that echoes the prompt: its length in the log, its words only in the edge's error", async () => {
    const body = { error: { message: `cannot serve the prompt "${PROMPT}"` } };
    const run = await runShim({}, { steps: 1, sglang: { httpError: { status: 500, body } } });
    expectNoContent(run);
    const failed = run.lines.find((l) => l.msg === 'session failed')!;
    expect(failed).toMatchObject({ level: 'error', code: 'INTERNAL', error: `sglang: HTTP 500 (a message of ${body.error.message.length} characters)` });
    expect(run.errors).toEqual([expect.stringContaining(`sglang: HTTP 500: ${body.error.message}`)]);
  });
});

describe('--log-text', () => {
  test("lets the steps' ids and text and what errors quote into the log", async () => {
    const run = await runShim({ logText: true }, { steps: 2, badStep: true });
    const steps = run.lines.filter((l) => l.msg === 'step');
    expect(steps).toHaveLength(2);
    expect(steps.map((s) => s.text)).toEqual(run.replies);
    expect(steps.every((s) => Array.isArray(s.returnedIds) && (s.returnedIds as number[]).length === 3)).toBe(true);
    expect(run.lines.find((l) => l.msg === 'session failed')!.error).toContain(`token id ${BAD_ID}`);

    const body = { error: { message: `cannot serve the prompt "${PROMPT}"` } };
    const echoed = await runShim({ logText: true }, { steps: 1, sglang: { httpError: { status: 500, body } } });
    expect(echoed.log).toContain(PROMPT);
  });

  test('is a flag, off by default, in the usage', () => {
    expect(parseShimConfig([], {}).logText).toBe(false);
    expect(parseShimConfig(['--log-text'], {}).logText).toBe(true);
    expect(parseShimConfig([], { SHIM_LOG_TEXT: 'true' }).logText).toBe(true);
    expect(SHIM_USAGE).toContain('--log-text');
  });
});
