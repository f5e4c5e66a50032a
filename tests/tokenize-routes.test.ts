/**
 * `/tokenize` and `/detokenize` of a real edge (issue 54, item 6) follow llama.cpp's server and vLLM: special-token
 * text is read as the special token (llama.cpp's `parse_special`, on by default; Hugging Face's encoding behind
 * vLLM), so a chat a client renders itself counts as the chat endpoints count it; BOS with each shape's own
 * default (`content`: llama.cpp's `add_special`, off; `prompt`: vLLM's `add_special_tokens`, on). Every refusal
 * is JSON, `model` is checked as the OpenAI routes check it, and a lone surrogate is refused as /api/generate
 * refuses it. On the tiny-qwen2 random pack (Qwen's tokenizer and chat template) and the demo pack (BOS `<s>`).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EdgeChat } from '../src/edge/chat/edge-chat.ts';
import type { ChatMessage } from '../src/shared/text/chat-template.ts';
import { DEFAULT_EDGE_CONFIG, type EdgeConfig } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const TOKEN = 'tokenize-test-token';
let dir: string;
let qwen: RunningEdge;
let qwenTokenizer: TextTokenizer;
let demo: RunningEdge;
let demoTokenizer: TextTokenizer;

function start(overrides: Partial<EdgeConfig>): Promise<RunningEdge> {
  return startEdge({ ...DEFAULT_EDGE_CONFIG, host: '127.0.0.1', port: 0, grpcPort: -1, cloud: undefined, router: undefined, logLevel: 'error', ...overrides });
}

beforeAll(async () => {
  const packs = await ensureDemoPacks();
  dir = mkdtempSync(join(tmpdir(), 'tokenize-routes-'));
  const qwenPack = join(dir, 'tiny-qwen2');
  await writeRandomPack({ preset: 'tiny-qwen2', out: qwenPack, seed: 3, hiddenStatesOutput: false });
  qwenTokenizer = await TextTokenizer.fromPack(qwenPack);
  qwen = await start({ edgeModel: qwenPack, servedModelName: 'tiny-qwen' });
  demoTokenizer = await TextTokenizer.fromPack(packs.edgePack);
  demo = await start({ edgeModel: packs.edgePack, accessToken: TOKEN });
}, 60_000);

afterAll(async () => {
  await qwen?.stop();
  await demo?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Reply {
  status: number;
  type: string;
  json: Record<string, unknown>;
}

/** A POST with a JSON body (a string is sent as it is); the demo edge's requests carry its token unless `token` is false. */
async function post(edge: RunningEdge, path: string, body: unknown, token = true): Promise<Reply> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token && edge === demo) headers.authorization = `Bearer ${TOKEN}`;
  const res = await fetch(`${edge.url}${path}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: res.status, type: res.headers.get('content-type') ?? '', json: (await res.json()) as Record<string, unknown> };
}

const tokensOf = async (edge: RunningEdge, body: unknown) => {
  const reply = await post(edge, 'tokenize', body);
  expect(reply.status).toBe(200);
  return reply.json.tokens as number[];
};

describe('special-token text, as llama.cpp and vLLM read it', () => {
  const TURN = '<|im_start|>user\nHello!<|im_end|>';

  test("the issue's turn is six tokens, its markers the special ids; parse_special false reads them as text", async () => {
    const special = qwenTokenizer.specialTokens;
    const ids = [
      special.get('<|im_start|>')!,
      ...qwenTokenizer.encode('user\nHello!', { addBos: false, parseSpecialTokens: false }),
      special.get('<|im_end|>')!,
    ];
    expect(ids).toHaveLength(6);
    expect((await post(qwen, 'tokenize', { content: TURN })).json).toEqual({ tokens: ids, count: 6, max_model_len: expect.any(Number) });
    // vLLM's shape: Hugging Face's encoding, and Qwen's tokenizer adds no BOS.
    expect(await tokensOf(qwen, { prompt: TURN })).toEqual(ids);
    const asText = await tokensOf(qwen, { content: TURN, parse_special: false });
    expect(asText).toEqual(qwenTokenizer.encode(TURN, { addBos: false, parseSpecialTokens: false }));
    expect(asText.length).toBeGreaterThan(6);
    expect(asText).not.toContain(special.get('<|im_start|>'));
  });

  test('a chat the client renders itself counts as the chat endpoints count it', async () => {
    const conversation: ChatMessage[] = [
      { role: 'system', content: 'You tell short stories.' },
      { role: 'user', content: 'Hello!' },
    ];
    const rendered = EdgeChat.load(qwenTokenizer, { modelName: 'tiny-qwen' }).prompt(conversation);
    const viaMessages = await tokensOf(qwen, { messages: conversation });
    expect(viaMessages).toEqual(rendered.ids);
    expect(await tokensOf(qwen, { content: rendered.text })).toEqual(viaMessages);
    expect(await tokensOf(qwen, { prompt: rendered.text })).toEqual(viaMessages);
    // vLLM's default for a conversation passes; asking for more is refused, naming why.
    expect(await tokensOf(qwen, { messages: conversation, add_special_tokens: false })).toEqual(viaMessages);
    const refused = await post(qwen, 'tokenize', { messages: conversation, add_special_tokens: true });
    expect(refused.status).toBe(400);
    expect((refused.json.error as { message: string }).message).toStartWith('add_special_tokens is for text (content or prompt)');
  });

  test('BOS: llama.cpp adds it when asked (add_special), vLLM unless told not to (add_special_tokens); </s> is the EOS id unless parse_special is false', async () => {
    const text = 'Once upon a time';
    const plain = demoTokenizer.encode(text, { addBos: false, parseSpecialTokens: false });
    expect(await tokensOf(demo, { content: text })).toEqual(plain);
    expect(await tokensOf(demo, { content: text, add_special: true })).toEqual([1, ...plain]);
    expect((await post(demo, 'tokenize', { prompt: text })).json).toEqual({ tokens: [1, ...plain], count: plain.length + 1, max_model_len: 512 });
    expect(await tokensOf(demo, { prompt: text, add_special_tokens: false })).toEqual(plain);
    expect(await tokensOf(demo, { content: `${text}</s>` })).toEqual([...plain, 2]);
    const asText = await tokensOf(demo, { content: `${text}</s>`, parse_special: false });
    expect(asText).toEqual(demoTokenizer.encode(`${text}</s>`, { addBos: false, parseSpecialTokens: false }));
    expect(asText).not.toContain(2);
    // /detokenize gives the text back, special tokens included.
    expect((await post(demo, 'detokenize', { tokens: [1, ...plain, 2] })).json).toEqual({ content: `<s> ${text}</s>`, prompt: `<s> ${text}</s>` });
  });
});

describe('refusals: JSON, as the other APIs answer', () => {
  test('each a 4xx JSON error naming the problem; an unknown model a 404 naming the served one', async () => {
    const cases: [string, string, unknown, number, string][] = [
      ['not JSON', 'tokenize', '{"content": ', 400, 'request body must be a JSON object'],
      ['an unknown field', 'tokenize', { content: 'x', with_pieces: true }, 400, 'unknown field "with_pieces"'],
      ['neither text nor messages', 'tokenize', {}, 400, 'give exactly one of content, prompt (text) or messages (a conversation)'],
      ['a flag that is not a boolean', 'tokenize', { content: 'x', parse_special: 'yes' }, 400, 'parse_special must be true or false, got "yes"'],
      [
        'two names that disagree',
        'tokenize',
        { content: 'x', add_special: true, add_special_tokens: false },
        400,
        'add_special and add_special_tokens name the same option',
      ],
      ['another model', 'tokenize', { model: 'gpt-4', content: 'x' }, 404, 'the model "gpt-4" does not exist on this edge; it serves tiny-qwen'],
      ['a model that is not a string', 'tokenize', { model: 7, content: 'x' }, 400, 'model must be a string, got 7'],
      ['another model, detokenizing', 'detokenize', { model: 'gpt-4', tokens: [1] }, 404, 'the model "gpt-4" does not exist on this edge; it serves tiny-qwen'],
      ['ids outside the vocabulary', 'detokenize', { tokens: [10_000_000] }, 400, 'token id 10000000 is not in the vocabulary'],
      ['a lone surrogate', 'tokenize', { content: 'Once \ud800 upon' }, 400, 'content is not valid Unicode text (it holds a lone surrogate)'],
      [
        'a lone surrogate in a message',
        'tokenize',
        { messages: [{ role: 'user', content: '\udfff' }] },
        400,
        'messages is not valid Unicode text (it holds a lone surrogate)',
      ],
    ];
    for (const [name, path, body, status, message] of cases) {
      const reply = await post(qwen, path, body);
      const error = reply.json.error as { code: string; message: string };
      expect({ name, status: reply.status, type: reply.type, message: error.message }).toEqual({
        name,
        status,
        type: 'application/json',
        message: expect.stringContaining(message),
      });
    }
    // The served name passes.
    expect((await post(qwen, 'tokenize', { model: 'tiny-qwen', content: 'Hi' })).status).toBe(200);
  });

  test('a lone surrogate is refused with the check /api/generate uses', async () => {
    const tokenize = await post(demo, 'tokenize', { prompt: '\ud800' });
    const generate = await fetch(`${demo.url}api/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ prompt: '\ud800', mode: 'small_only' }),
    });
    expect(generate.status).toBe(400);
    const generateMessage = ((await generate.json()) as { error: { message: string } }).error.message;
    expect(generateMessage).toBe('prompt is not valid Unicode text (it holds a lone surrogate)');
    expect({ status: tokenize.status, error: tokenize.json.error }).toEqual({ status: 400, error: { code: 'INVALID_ARGUMENT', message: generateMessage } });
  });

  test('without the token, past the body limit, and on a path that is not there: JSON too', async () => {
    const unauthenticated = await post(demo, 'tokenize', { content: 'x' }, false);
    expect({ status: unauthenticated.status, type: unauthenticated.type, code: (unauthenticated.json.error as { code: string }).code }).toEqual({
      status: 401,
      type: 'application/json',
      code: 'UNAUTHENTICATED',
    });
    const tooLarge = await post(demo, 'detokenize', { tokens: Array.from({ length: 150_000 }, () => 1) });
    expect({ status: tooLarge.status, type: tooLarge.type }).toEqual({ status: 413, type: 'application/json' });
    expect((tooLarge.json.error as { message: string }).message).toBe('request body is larger than 262144 bytes');
    const get = await fetch(`${qwen.url}tokenize`);
    expect({ status: get.status, type: get.headers.get('content-type') }).toEqual({ status: 404, type: 'application/json' });
  });
});
