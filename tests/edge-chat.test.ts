/**
 * Chat on every entry point of a real edge (issue 48): a conversation over the JSON API and gRPC generates
 * from exactly the ids its template renders (the same tokens as the OpenAI chat endpoint and as the
 * rendered ids sent as a prompt); templates as exports ship them (`chat_template.jinja` beside the config,
 * `--chat-template FILE` or `chatml`); `--served-model-name`; `/tokenize` and `/detokenize` in llama.cpp's
 * and vLLM's shapes; and the bad input the issue lists, each a 400 / INVALID_ARGUMENT naming the problem,
 * with the next request served.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { DEFAULT_EDGE_CONFIG, type EdgeConfig } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import { EdgeGeneratorClient, type EdgeGeneratorClientType, type GenerateEvent__Output, type GenerateRequest } from '../src/edge/grpc/edge-proto.ts';
import { DEMO } from '../src/shared/paths.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { makeChatPack, TEST_CHAT_TEMPLATE } from './helpers/chat-pack.ts';

let pack: Awaited<ReturnType<typeof makeChatPack>>;
let edge: RunningEdge;
let client: EdgeGeneratorClientType;
let tokenizer: TextTokenizer;

async function startChatEdge(overrides: Partial<EdgeConfig>): Promise<RunningEdge> {
  return startEdge({
    ...DEFAULT_EDGE_CONFIG,
    host: '127.0.0.1',
    port: 0,
    grpcPort: 0,
    cloud: undefined,
    router: DEMO.routerPack,
    logLevel: 'error',
    ...overrides,
  });
}

beforeAll(async () => {
  pack = await makeChatPack();
  tokenizer = await TextTokenizer.fromPack(pack.dir);
  edge = await startChatEdge({ edgeModel: pack.dir, servedModelName: 'story-chat' });
  client = new EdgeGeneratorClient(`127.0.0.1:${edge.grpcPort}`, grpc.credentials.createInsecure());
}, 60_000);

afterAll(async () => {
  client?.close();
  await edge?.stop();
  pack?.remove();
});

const CONVERSATION = [
  { role: 'system', content: 'Tell stories.' },
  { role: 'user', content: 'A story about a cat.' },
];
const RENDERED = '<s>system: Tell stories.\nuser: A story about a cat.\nassistant:';

async function api(path: string, body: unknown, base = edge.url): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}${path.replace(/^\//, '')}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: res.status, text: await res.text() };
}

/** The ids of the token events of an SSE body from /api/generate. */
function tokenIds(sse: string): number[] {
  return [...sse.matchAll(/^event: token\ndata: (.*)$/gm)].map((m) => (JSON.parse(m[1]!) as { id: number }).id);
}

/** The generated text of an SSE body from /api/generate (its done event's). */
function doneText(sse: string): string {
  return (JSON.parse(sse.match(/^event: done\ndata: (.*)$/m)![1]!) as { text: string }).text;
}

function grpcGenerate(request: GenerateRequest, on = client): Promise<{ ids: number[]; error?: grpc.ServiceError }> {
  return new Promise((resolve) => {
    const ids: number[] = [];
    const call = on.Generate(request, { deadline: Date.now() + 30_000 });
    call.on('data', (e: GenerateEvent__Output) => e.token && ids.push(e.token.id));
    call.on('error', (error: grpc.ServiceError) => resolve({ ids, error }));
    call.on('end', () => resolve({ ids }));
  });
}

describe('a conversation on every entry point', () => {
  test("the JSON API, gRPC and the OpenAI API generate from the template's ids: the same tokens as those ids sent as a prompt", async () => {
    const ids = tokenizer.encode(RENDERED, { addBos: false, parseSpecialTokens: true });
    const settings = { max_new_tokens: 10, mode: 'small_only' };
    const byPrompt = await fetch(`${edge.url}v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'story-chat', prompt: ids, max_tokens: 10, temperature: 0, routing_mode: 'small_only' }),
      headers: { 'content-type': 'application/json' },
    });
    const reference = (await byPrompt.json()) as { choices: { text: string }[] };
    const json = await api('/api/generate', { messages: CONVERSATION, ...settings });
    expect(json.status).toBe(200);
    const jsonIds = tokenIds(json.text);
    expect(jsonIds).toHaveLength(10);
    expect(doneText(json.text)).toBe(reference.choices[0]!.text);
    const viaGrpc = await grpcGenerate({ messages: CONVERSATION, maxNewTokens: 10, mode: 'small_only' });
    expect(viaGrpc.error).toBeUndefined();
    expect(viaGrpc.ids).toEqual(jsonIds);
    const openai = (await (
      await fetch(`${edge.url}v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ model: 'story-chat', messages: CONVERSATION, max_completion_tokens: 10, temperature: 0, routing_mode: 'small_only' }),
        headers: { 'content-type': 'application/json' },
      })
    ).json()) as { model: string; choices: { message: { content: string } }[] };
    expect(openai.model).toBe('story-chat');
    expect(openai.choices[0]!.message.content).toBe(reference.choices[0]!.text);
  }, 60_000);

  test('/v1/models names the served model and its context length', async () => {
    const models = (await (await fetch(`${edge.url}v1/models`)).json()) as { data: { id: string; max_model_len: number }[] };
    expect(models.data).toEqual([expect.objectContaining({ id: 'story-chat', max_model_len: 512 })]);
  });

  test("/tokenize and /detokenize in llama.cpp's and vLLM's shapes", async () => {
    const text = 'Once upon a time';
    const asPrompt = [1, ...tokenizer.encode(text, { addBos: false, parseSpecialTokens: false })];
    // Each shape with its server's default: vLLM's prompt gets the BOS, llama.cpp's content only with add_special (tokenize-routes.test.ts).
    expect(JSON.parse((await api('/tokenize', { prompt: text })).text)).toEqual({ tokens: asPrompt, count: asPrompt.length, max_model_len: 512 });
    expect(JSON.parse((await api('/tokenize', { content: text, add_special: true })).text).tokens).toEqual(asPrompt);
    expect(JSON.parse((await api('/tokenize', { prompt: text, add_special_tokens: false })).text).tokens).toEqual(asPrompt.slice(1));
    const chatIds = tokenizer.encode(RENDERED, { addBos: false, parseSpecialTokens: true });
    expect(JSON.parse((await api('/tokenize', { messages: CONVERSATION })).text).tokens).toEqual(chatIds);
    expect(JSON.parse((await api('/detokenize', { tokens: asPrompt.slice(1) })).text)).toEqual({ content: text, prompt: text });
  });
});

describe('bad input: a 400 / INVALID_ARGUMENT naming the problem, and the next request served', () => {
  test('over the JSON API and gRPC', async () => {
    const long = Array.from({ length: 80 }, () => ({ role: 'user', content: 'Once upon a time there was a dog' }));
    const cases: [string, Record<string, unknown>, string][] = [
      ['messages and prompt together', { messages: CONVERSATION, prompt: 'x' }, 'give either prompt or messages, not both'],
      ['an empty conversation', { messages: [] }, 'messages must be a non-empty list of {role, content}'],
      [
        'a role nobody knows',
        { messages: [{ role: 'narrator', content: 'x' }] },
        'messages[0].role must be one of system, developer, user, assistant, got "narrator"',
      ],
      ['content that is not text', { messages: [{ role: 'user', content: 7 }] }, 'messages[0].content must be a string, got 7'],
      ['a conversation past the context window', { messages: long }, "the edge model's context window is 512"],
    ];
    for (const [name, body, message] of cases) {
      const json = await api('/api/generate', body);
      const error = (JSON.parse(json.text) as { error: { message: string } }).error.message;
      expect({ name, status: json.status, error }).toEqual({ name, status: 400, error: expect.stringContaining(message) });
      const request: GenerateRequest = { ...(body as GenerateRequest), maxNewTokens: 2 };
      if (typeof (body.messages as { content: unknown }[] | undefined)?.[0]?.content === 'number') continue; // the proto types content as a string
      const viaGrpc = await grpcGenerate(request);
      // proto3 cannot tell an empty list from none: over gRPC an empty conversation is a request without a prompt.
      const grpcMessage = (body.messages as unknown[]).length === 0 ? 'prompt must not be empty' : message;
      expect({ name, code: viaGrpc.error?.code, details: viaGrpc.error?.details }).toEqual({
        name,
        code: grpc.status.INVALID_ARGUMENT,
        details: expect.stringContaining(grpcMessage),
      });
    }
    expect(tokenIds((await api('/api/generate', { messages: CONVERSATION, max_new_tokens: 3, mode: 'small_only' })).text)).toHaveLength(3);
  }, 60_000);

  test('a template that refuses a role, one that throws, and a model without a template', async () => {
    const refusing = await makeChatPack(
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('system messages are not supported') }}{% endif %}{{ m.content }}{% endfor %}",
    );
    const throwing = await makeChatPack('{{ messages[0].content.nope() }}');
    const refusingEdge = await startChatEdge({ edgeModel: refusing.dir, grpcPort: -1 });
    const throwingEdge = await startChatEdge({ edgeModel: throwing.dir, grpcPort: -1 });
    const plainEdge = await startChatEdge({ edgeModel: DEMO.edgePack, grpcPort: -1 });
    try {
      const refused = await api('/api/generate', { messages: CONVERSATION }, refusingEdge.url);
      expect(refused.status).toBe(400);
      expect(refused.text).toContain("the model's chat template refused these messages: system messages are not supported");
      const thrown = await api('/api/generate', { messages: [{ role: 'user', content: 'x' }] }, throwingEdge.url);
      expect(thrown.status).toBe(400);
      expect(thrown.text).toContain("the model's chat template refused these messages");
      const none = await api('/api/generate', { messages: CONVERSATION }, plainEdge.url);
      expect(none.status).toBe(400);
      expect(none.text).toContain('has no chat template');
      // Each still serves a prompt.
      for (const e of [refusingEdge, throwingEdge, plainEdge])
        expect(tokenIds((await api('/api/generate', { prompt: 'Once', max_new_tokens: 2, mode: 'small_only' }, e.url)).text)).toHaveLength(2);
    } finally {
      await Promise.all([refusingEdge.stop(), throwingEdge.stop(), plainEdge.stop()]);
      refusing.remove();
      throwing.remove();
    }
  }, 60_000);
});

describe('templates as exports ship them', () => {
  test('chat_template.jinja beside the config wins over tokenizer_config.json; --chat-template FILE and chatml override both', async () => {
    const jinja = await makeChatPack();
    writeFileSync(
      join(jinja.dir, 'chat_template.jinja'),
      '{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}',
    );
    const file = join(jinja.dir, 'other.jinja');
    writeFileSync(file, TEST_CHAT_TEMPLATE);
    const fromJinja = await startChatEdge({ edgeModel: jinja.dir, grpcPort: -1 });
    const fromFile = await startChatEdge({ edgeModel: jinja.dir, grpcPort: -1, chatTemplate: file });
    const chatml = await startChatEdge({ edgeModel: jinja.dir, grpcPort: -1, chatTemplate: 'chatml' });
    try {
      const rendered = async (e: RunningEdge) =>
        tokenizer.decode(JSON.parse((await api('/tokenize', { messages: [{ role: 'user', content: 'Hi' }] }, e.url)).text).tokens, {
          skipSpecialTokens: false,
        });
      expect(await rendered(fromJinja)).toBe('<s> [user] Hi\n[assistant]');
      expect(await rendered(fromFile)).toBe('<s> user: Hi\nassistant:');
      expect(await rendered(chatml)).toBe('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
      await expect(startChatEdge({ edgeModel: jinja.dir, grpcPort: -1, chatTemplate: join(jinja.dir, 'missing.jinja') })).rejects.toThrow('--chat-template');
    } finally {
      await Promise.all([fromJinja.stop(), fromFile.stop(), chatml.stop()]);
      rmSync(file, { force: true });
      jinja.remove();
    }
  }, 60_000);
});

describe('bun run client --chat', () => {
  test('a conversation in the terminal: each turn streams, /reset starts over, /exit ends; the second turn finds the first in the prompt cache', async () => {
    const child = Bun.spawn(
      [
        'bun',
        'src/tools/client.ts',
        '--chat',
        '--system',
        'Tell stories.',
        '--mode',
        'small_only',
        '--max-new-tokens',
        '4',
        '--address',
        `127.0.0.1:${edge.grpcPort}`,
      ],
      {
        stdin: 'pipe',
        stdout: 'pipe',
        stderr: 'pipe',
      },
    );
    child.stdin.write('A story about a cat.\nAnd then?\n/reset\nA story about a cat.\n/exit\n');
    await child.stdin.end();
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const turns = [...stdout.matchAll(/4 tokens, 0 routed \(0\.0%\), 0 fallback · prompt (\d+) tokens \((\d+) cached\)/g)].map((m) => ({
      prompt: Number(m[1]),
      cached: Number(m[2]),
    }));
    expect(turns).toHaveLength(3);
    // The second turn holds the first (its user message and reply): longer, and most of it cached.
    expect(turns[1]!.prompt).toBeGreaterThan(turns[0]!.prompt);
    expect(turns[1]!.cached).toBeGreaterThanOrEqual(turns[0]!.prompt - 1);
    // After /reset the conversation is the first one again.
    expect(turns[2]!.prompt).toBe(turns[0]!.prompt);
    expect(stdout).toContain('(new conversation)');
  }, 60_000);
});
