/**
 * Private spans through the OpenAI-compatible API (issue #49), driven by the official `openai` client against a
 * real edge (startEdge, the trained router, a chat-capable copy of the demo edge pack) and a real shim whose
 * backend, the embedded cloud model, records the context of every step it computes: what the cloud received.
 * A marked name never appears in it, its placeholder does; `usage.cloud` counts what left (also in a stream's
 * usage chunk, and in Prometheus); the finishing choice's `cloud_text` is the text the cloud held; bad spans are
 * 400s that name the field.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import type { Backend } from '../src/cloud/backends/backend.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { DEFAULT_EDGE_CONFIG } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import type { CloudUsage } from '../src/edge/http/openai/openai-responses.ts';
import { DEMO } from '../src/shared/paths.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { makeChatPack } from './helpers/chat-pack.ts';
import { cloudPackDir, startTestShim } from './helpers/cloud-fixture.ts';

const KEY = 'edge-test-key';
const MODEL = 'stories260k-3l-chat';
/** Names no story of the cloud model's writes on its own: in what the cloud received, only the edge could have put them. */
const NAME = 'Zebulon';
const OTHER = 'Quirinus';

/** One step the cloud's backend computed: the whole context it was given, and the ids it returned. */
interface SeenStep {
  context: number[];
  ids: number[];
}

/** The embedded backend, keeping each step's context and reply in `seen`. */
function recordingBackend(inner: Backend, seen: SeenStep[]): Backend {
  return {
    info: inner.info,
    openSequence(id) {
      const sequence = inner.openSequence(id);
      return {
        async step(request) {
          const result = await sequence.step(request);
          seen.push({ context: [...request.context], ids: [...result.ids] });
          return result;
        },
        dispose: () => sequence.dispose(),
      };
    },
    close: () => inner.close(),
  };
}

let pack: Awaited<ReturnType<typeof makeChatPack>>;
let shim: ShimServer;
let edge: RunningEdge;
let client: OpenAI;
let tokenizer: TextTokenizer;
let base: string;
const seen: SeenStep[] = [];

beforeAll(async () => {
  pack = await makeChatPack();
  tokenizer = await TextTokenizer.fromPack(pack.dir);
  const backend = await EmbeddedBackend.load({ modelPack: await cloudPackDir(), maxLiveSequences: 8 });
  shim = await startTestShim({}, { backend: recordingBackend(backend, seen) });
  edge = await startEdge({
    ...DEFAULT_EDGE_CONFIG,
    host: '127.0.0.1',
    port: 0,
    grpcPort: -1,
    edgeModel: pack.dir,
    router: DEMO.routerPack,
    cloud: shim.address,
    accessToken: KEY,
    // Every routed position one plain step: the counts below are the steps the backend computed.
    speculate: 'off',
    logLevel: 'error',
  });
  base = edge.url.replace(/\/$/, '');
  client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await edge?.stop();
  await shim?.shutdown(1000);
  pack?.remove();
});

/** The steps the cloud computes while `run` runs. */
async function cloudSteps<T>(run: () => Promise<T>): Promise<{ result: T; steps: SeenStep[] }> {
  const from = seen.length;
  const result = await run();
  return { result, steps: seen.slice(from) };
}

/** Every context the cloud received, as text. */
function receivedTexts(steps: readonly SeenStep[]): string[] {
  return steps.map((s) => tokenizer.decode(s.context, { skipSpecialTokens: false }));
}

/** The text the cloud held after its last step: what `cloud_text` should say. */
function heldText(steps: readonly SeenStep[]): string {
  const last = steps.at(-1)!;
  return tokenizer.decode([...last.context, ...last.ids]);
}

/** `[start, end)` of the `nth` occurrence of `part` in `text`, in code points. */
function spanOf(text: string, part: string, nth = 0): [number, number] {
  let at = -1;
  for (let i = 0; i <= nth; i++) at = text.indexOf(part, at + 1);
  if (at < 0) throw new Error(`${part} is not in ${text}`);
  const start = Array.from(text.slice(0, at)).length;
  return [start, start + Array.from(part).length];
}

type Extra = { cloud_text: string };
type CloudUsed = { cloud: CloudUsage };

async function scrape(): Promise<Map<string, number>> {
  const text = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${KEY}` } })).text();
  return new Map(
    text
      .split('\n')
      .filter((l) => /^edge_(cloud|private)_\w+_total /.test(l))
      .map((l) => [l.split(' ')[0]!, Number(l.split(' ')[1])]),
  );
}

describe('completions', () => {
  const prompt = `Once upon a time, ${NAME} had a red ball. ${NAME} liked to play with ${OTHER}.`;

  test('a marked name never reaches the cloud, its placeholder does; usage.cloud and cloud_text say what left', async () => {
    const before = await scrape();
    const { result: reply, steps } = await cloudSteps(() =>
      client.completions.create({
        model: MODEL,
        prompt,
        max_tokens: 10,
        temperature: 0,
        routing_mode: 'llm_only',
        // The first mention marked: the second is the same value, hidden as well. OTHER is marked as a kind-less span.
        private_spans: [[...spanOf(prompt, NAME), 'name'], { start: spanOf(prompt, OTHER)[0], end: spanOf(prompt, OTHER)[1] }],
      } as OpenAI.CompletionCreateParamsNonStreaming),
    );
    const received = receivedTexts(steps);
    expect(steps.length).toBeGreaterThanOrEqual(10);
    for (const text of received) {
      expect(text).not.toContain(NAME);
      expect(text).not.toContain(OTHER);
    }
    expect(received[0]).toContain('Once upon a time, [NAME_1] had a red ball. [NAME_1] liked to play with [PRIVATE_1].');

    const cloud = (reply.usage as unknown as CloudUsed).cloud;
    expect(cloud).toMatchObject({ placeholders: 2, hidden_state_bytes: 0, withheld_steps: 0, streams: 1, steps: steps.length });
    // The opening carries the whole pseudonymised prompt; after it, every token is the cloud's own, which the shim holds.
    expect(cloud.tokens_sent).toBe(steps[0]!.context.length);
    expect(cloud.bytes_sent).toBeGreaterThan(cloud.tokens_sent);
    expect(reply.usage).toMatchObject({ completion_tokens: 10, routed_tokens: 10, fallback_tokens: 0 });
    const cloudText = (reply.choices[0] as unknown as Extra).cloud_text;
    expect(cloudText).toBe(heldText(steps));
    expect(cloudText).not.toContain(NAME);

    // Prometheus adds each generation's figures.
    const after = await scrape();
    const added = (name: string) => after.get(name)! - (before.get(name) ?? 0);
    expect(added('edge_private_placeholders_total')).toBe(2);
    expect(added('edge_cloud_tokens_sent_total')).toBe(cloud.tokens_sent);
    expect(added('edge_cloud_bytes_sent_total')).toBe(cloud.bytes_sent);
    expect(added('edge_cloud_hidden_state_bytes_total')).toBe(0);
    expect(added('edge_private_withheld_steps_total')).toBe(0);
  });

  test('nothing routed: usage.cloud all zero, cloud_text empty', async () => {
    const { result: reply, steps } = await cloudSteps(() =>
      client.completions.create({
        model: MODEL,
        prompt,
        max_tokens: 4,
        temperature: 0,
        routing_mode: 'small_only',
        private_spans: [spanOf(prompt, NAME)],
      } as OpenAI.CompletionCreateParamsNonStreaming),
    );
    expect(steps).toHaveLength(0);
    expect((reply.usage as unknown as CloudUsed).cloud).toEqual({
      tokens_sent: 0,
      bytes_sent: 0,
      hidden_state_bytes: 0,
      steps: 0,
      streams: 0,
      placeholders: 0,
      withheld_steps: 0,
      gate_blocked_steps: 0,
      pseudonym_ms: 0,
    });
    expect((reply.choices[0] as unknown as Extra).cloud_text).toBe('');
  });

  test('a stream: the finishing chunk carries cloud_text, the usage chunk usage.cloud', async () => {
    const { result: chunks, steps } = await cloudSteps(async () => {
      const stream = await client.completions.create({
        model: MODEL,
        prompt,
        max_tokens: 6,
        temperature: 0,
        routing_mode: 'llm_only',
        stream: true,
        stream_options: { include_usage: true },
        private_spans: [[...spanOf(prompt, NAME), 'name']],
      } as OpenAI.CompletionCreateParamsStreaming);
      const all: OpenAI.Completion[] = [];
      for await (const chunk of stream) all.push(chunk);
      return all;
    });
    for (const text of receivedTexts(steps)) expect(text).not.toContain(NAME);
    const finish = chunks.at(-2)!.choices[0]!;
    expect(finish.finish_reason).toBe('length');
    expect((finish as unknown as Extra).cloud_text).toBe(heldText(steps));
    expect(chunks.slice(0, -2).every((c) => !('cloud_text' in c.choices[0]!))).toBe(true);
    expect((chunks.at(-1)!.usage as unknown as CloudUsed).cloud).toMatchObject({ placeholders: 1, streams: 1, steps: steps.length });
  });
});

describe('chat completions', () => {
  test('each message marks its own content; text parts are counted as the parts joined with newlines', async () => {
    const user = `My name is ${NAME}. Tell me a story.`;
    const parts = [
      { type: 'text' as const, text: 'Hello.' },
      { type: 'text' as const, text: `I play with ${OTHER}.` },
    ];
    const joined = parts.map((p) => p.text).join('\n');
    const messages = [
      { role: 'system', content: 'Tell stories.' },
      { role: 'user', content: user, private_spans: [[...spanOf(user, NAME), 'name']] },
      { role: 'assistant', content: parts, private_spans: [{ ...{ start: spanOf(joined, OTHER)[0], end: spanOf(joined, OTHER)[1] }, kind: 'name' }] },
      { role: 'user', content: `Where is ${NAME}?` },
    ];
    const { result: reply, steps } = await cloudSteps(() =>
      client.chat.completions.create({
        model: MODEL,
        messages,
        max_completion_tokens: 8,
        temperature: 0,
        routing_mode: 'llm_only',
      } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming),
    );
    const received = receivedTexts(steps);
    for (const text of received) {
      expect(text).not.toContain(NAME);
      expect(text).not.toContain(OTHER);
    }
    // The last message marks nothing, yet its mention is the same value: hidden too.
    expect(received[0]).toContain(
      'user: My name is [NAME_1]. Tell me a story.\nassistant: Hello.\nI play with [NAME_2].\nuser: Where is [NAME_1]?\nassistant:',
    );
    expect((reply.usage as unknown as CloudUsed).cloud).toMatchObject({ placeholders: 2, streams: 1, steps: steps.length });
    expect((reply.choices[0] as unknown as Extra).cloud_text).toBe(heldText(steps));
  });

  test('a stream with include_usage: usage.cloud in its last chunk', async () => {
    const user = `A story about ${NAME} and a dog.`;
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: user, private_spans: [spanOf(user, NAME)] }],
      max_tokens: 5,
      temperature: 0,
      routing_mode: 'llm_only',
      stream: true,
      stream_options: { include_usage: true },
    } as unknown as OpenAI.ChatCompletionCreateParamsStreaming);
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect((chunks.at(-1)!.usage as unknown as CloudUsed).cloud).toMatchObject({ placeholders: 1, streams: 1, withheld_steps: 0 });
    expect((chunks.at(-2)!.choices[0] as unknown as Extra).cloud_text).toContain(`A story about [PRIVATE_1] and a dog.`);
  });
});

describe('refusals', () => {
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: InstanceType<typeof OpenAI.APIError>) => ({ status: e.status, error: e.error }),
    );
  const invalid = (param: string, message: unknown) => ({ status: 400, error: { message, type: 'invalid_request_error', param, code: null } });
  const complete = (extra: Record<string, unknown>) =>
    failure(client.completions.create({ model: MODEL, prompt: 'Hi Ann.', max_tokens: 2, ...extra } as OpenAI.CompletionCreateParamsNonStreaming));
  const chat = (body: Record<string, unknown>) =>
    failure(client.chat.completions.create({ model: MODEL, max_tokens: 2, ...body } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming));

  test('bad spans are 400s that name the field', async () => {
    expect(await complete({ private_spans: [[3, 99]] })).toEqual(
      invalid('private_spans', "private_spans[0] = [3, 99) is not a non-empty range inside the text's 7 code points"),
    );
    expect(await complete({ private_spans: 'Ann' })).toEqual(
      invalid('private_spans', 'private_spans must be a list of [start, end] code-point ranges, got "Ann"'),
    );
    expect(await complete({ private_spans: [[3, 6, 'Name']] })).toEqual(
      invalid('private_spans', 'private_spans[0]: kind must be lowercase letters, digits and _ (at most 16, a letter first), got "Name"'),
    );
    expect(
      await complete({
        private_spans: [
          [3, 6],
          [4, 6],
        ],
      }),
    ).toEqual(invalid('private_spans', expect.stringContaining('private_spans[1] = [4, 6) overlaps or comes before the span before it')));
    expect(await complete({ prompt: [1, 403], private_spans: [[0, 1]] })).toEqual(
      invalid('private_spans', expect.stringContaining('a prompt of token ids has no text of yours to point into')),
    );
    expect(await chat({ messages: [{ role: 'user', content: 'Hi Ann.', private_spans: [[3, 9]] }] })).toEqual(
      invalid('messages[0].private_spans', "messages[0].private_spans[0] = [3, 9) is not a non-empty range inside the text's 7 code points"),
    );
    expect(await chat({ messages: [{ role: 'user', content: 'Hi Ann.' }], private_spans: [[3, 6]] })).toEqual(
      invalid('private_spans', 'on chat completions, mark private spans in each message (messages[i].private_spans), not in the request'),
    );
  });

  test('private_detect: a list of kind names, which the edge checks against its detector', async () => {
    expect(await complete({ private_detect: 5 })).toEqual(
      invalid('private_detect', 'private_detect must be a list of detector kinds such as "email" or "phone", got 5'),
    );
    expect(await complete({ private_detect: ['no such kind'] })).toEqual({
      status: 400,
      error: { message: expect.stringContaining('private_detect must be at most 16 kind names'), type: 'invalid_request_error', param: null, code: null },
    });
    expect(await complete({ private_detect: ['nonesuch'] })).toEqual({
      status: 400,
      error: {
        message: expect.stringContaining('private_detect names "nonesuch", which this edge does not detect'),
        type: 'invalid_request_error',
        param: null,
        code: null,
      },
    });
  });
});
