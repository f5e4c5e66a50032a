/**
 * Tool calls through the official `openai` client against a real edge over HTTP (startEdge on loopback),
 * on a random-weight Qwen pack with the real Qwen tokenizer and its chat template, which renders tools
 * and writes calls as `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`. The edge routes to a real
 * shim whose cloud is another random Qwen pack (joint mode, routed tokens among the call's) and runs
 * small_only too. `tool_choice` required and a named function: every one of many seeded generations at
 * temperature 1 is a call whose arguments parse and validate against the function's parameter schema,
 * streamed and not; `auto`: free text or calls, and any call valid; `none`: no call. The stream's pieces add
 * up to the calls the whole response gives for the same seed.
 *
 * TOOL_CASES sets the number of seeded generations of the validity test (default keeps the file short on two cores).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import type { ChatCompletionCreateParamsNonStreaming, ChatCompletionMessageFunctionToolCall, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { interceptSteps } from '../src/edge/cloud/cloud-client.ts';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { EdgeRuntime } from '../src/edge/edge-runtime.ts';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { DEFAULT_LIMITS } from '../src/edge/request/generation-request.ts';
import { loadRouter } from '../src/edge/routing/router.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { startTestShim } from './helpers/cloud-fixture.ts';
import { schemaProblems } from './helpers/schema-check.ts';

const work = mkdtempSync(join(tmpdir(), 'tool-calls-'));
const CASES = Number(process.env.TOOL_CASES ?? 12);

const WEATHER = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 8 }, unit: { type: 'string', enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const ADD = {
  type: 'object',
  properties: { a: { type: 'integer', minimum: 0, maximum: 99 }, b: { type: 'integer', minimum: 0, maximum: 99 } },
  required: ['a', 'b'],
  additionalProperties: false,
};
/** `<tool_call>` in the Qwen vocabulary: the token a tool-trained Qwen opens a call with. */
const TOOL_CALL_TOKEN = 151657;
const SCHEMAS: Record<string, Record<string, unknown>> = { get_weather: WEATHER, add: ADD };
const TOOLS: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: WEATHER } },
  { type: 'function', function: { name: 'add', description: 'Adds two numbers', parameters: ADD } },
];

/** How each generation runs: joint through the shim (the threshold routes part of the tokens) and the edge alone. */
const LEGS = [
  { name: 'joint', fields: { routing_mode: 'joint', routing_threshold: 0.5 } },
  { name: 'small_only', fields: { routing_mode: 'small_only' } },
];

let shim: ShimServer;
let edge: RunningEdge;
let client: OpenAI;
let model: string;

beforeAll(async () => {
  const [edgePack, cloudPack] = [join(work, 'edge'), join(work, 'cloud')];
  await writeRandomPack({ preset: 'tiny-qwen2', out: edgePack, seed: 31, hiddenStatesOutput: true });
  await writeRandomPack({ preset: 'tiny-qwen2', out: cloudPack, seed: 32, hiddenStatesOutput: true });
  shim = await startTestShim({ modelPack: cloudPack });
  const flags = ['--host', '127.0.0.1', '--port', '0', '--grpc-port', '0', '--log-level', 'error', '--max-concurrent', '2'];
  edge = await startEdge(parseEdgeConfig([...flags, '--edge-model', edgePack, '--router', 'builtin', '--cloud', shim.address], {}));
  client = new OpenAI({ apiKey: 'unused', baseURL: `${edge.url}/v1`, maxRetries: 0 });
  model = (await client.models.list()).data[0]!.id;
}, 180_000);

afterAll(async () => {
  await edge?.stop();
  await shim?.shutdown();
  rmSync(work, { recursive: true, force: true });
});

/** Problems of one call: a known function, arguments that parse as JSON and validate against its parameters. */
function callProblems(call: { function: { name: string; arguments: string } }, only?: string): string[] {
  const schema = SCHEMAS[call.function.name];
  if (!schema || (only && call.function.name !== only)) return [`called ${JSON.stringify(call.function.name)}`];
  try {
    return schemaProblems(schema, JSON.parse(call.function.arguments));
  } catch {
    return [`arguments not JSON: ${JSON.stringify(call.function.arguments)}`];
  }
}

function request(i: number, choice: ChatCompletionCreateParamsNonStreaming['tool_choice'], leg: (typeof LEGS)[number]) {
  return {
    model,
    messages: [{ role: 'user' as const, content: `Question ${i}: what is the weather, or 2 + 3?` }],
    tools: TOOLS,
    tool_choice: choice,
    // Parallel calls on every fourth: a random model chains calls for as long as it draws the separator, so those get more room.
    parallel_tool_calls: i % 4 === 0,
    temperature: 1,
    seed: 2000 + i,
    max_tokens: i % 4 === 0 ? 480 : 160,
    ...leg.fields,
  } as ChatCompletionCreateParamsNonStreaming;
}

/** The stream's calls as a client assembles them from `delta.tool_calls`, with the finish reason and routed count. */
function streamed(params: ChatCompletionCreateParamsNonStreaming) {
  return streamedWith(client, params);
}

async function streamedWith(client: OpenAI, params: ChatCompletionCreateParamsNonStreaming) {
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const calls: ChatCompletionMessageFunctionToolCall[] = [];
  let content = '';
  let finish: string | null = null;
  let routed = 0;
  let firstChunks = 0;
  for await (const chunk of stream) {
    if (chunk.usage) routed = (chunk.usage as unknown as { routed_tokens: number }).routed_tokens;
    const choice = chunk.choices[0];
    if (!choice) continue;
    content += choice.delta.content ?? '';
    for (const delta of choice.delta.tool_calls ?? []) {
      if (delta.id) {
        firstChunks++;
        expect(delta.index).toBe(calls.length);
        expect(delta.function?.arguments).toBe('');
        calls.push({ id: delta.id, type: 'function', function: { name: delta.function!.name!, arguments: '' } });
      } else calls[delta.index]!.function.arguments += delta.function?.arguments ?? '';
    }
    finish = choice.finish_reason ?? finish;
  }
  expect(firstChunks).toBe(calls.length);
  return { calls, content, finish, routed };
}

test(
  `required and a named function: ${CASES} seeded generations at temperature 1 are valid calls, streamed and not, joint and small_only`,
  async () => {
    const invalid: string[] = [];
    const routed = { joint: 0, small_only: 0 } as Record<string, number>;
    let calls = 0;
    for (let i = 0; i < CASES; i++) {
      const leg = LEGS[i % LEGS.length]!;
      const named = Math.floor(i / LEGS.length) % 2 === 1 ? 'add' : undefined;
      const choice = named ? ({ type: 'function', function: { name: named } } as const) : 'required';
      const params = request(i, choice, leg);
      const where = `${leg.name} / ${named ?? 'required'} / seed ${params.seed}`;
      const whole = await client.chat.completions.create(params);
      const message = whole.choices[0]!.message;
      const problems = (message.tool_calls ?? []).flatMap((c) => callProblems(c as ChatCompletionMessageFunctionToolCall, named));
      if (whole.choices[0]!.finish_reason !== 'tool_calls' || !message.tool_calls?.length || message.content !== null || problems.length > 0)
        invalid.push(`${where} (${whole.choices[0]!.finish_reason}): ${problems.join('; ')} ${JSON.stringify(message)}`);
      if (!params.parallel_tool_calls && (message.tool_calls?.length ?? 0) > 1)
        invalid.push(`${where}: ${message.tool_calls!.length} calls without parallel calls`);
      routed[leg.name]! += (whole.usage as unknown as { routed_tokens: number }).routed_tokens;
      calls += message.tool_calls?.length ?? 0;
      // The same seed streamed: the same calls, piece by piece.
      const stream = await streamed(params);
      expect(stream.finish).toBe(whole.choices[0]!.finish_reason);
      expect(stream.calls.map((c) => c.function)).toEqual((message.tool_calls ?? []).map((c) => (c as ChatCompletionMessageFunctionToolCall).function));
      expect(stream.content).toBe('');
    }
    console.log(`tool calls: ${CASES} generations, ${calls} calls, routed tokens ${JSON.stringify(routed)}`);
    expect(invalid).toEqual([]);
    expect(routed.joint!).toBeGreaterThan(0);
    expect(routed.small_only).toBe(0);
  },
  Math.max(300_000, CASES * 30_000),
);

test('auto: text comes back as content; none: no call and no tools in the prompt', async () => {
  for (let i = 0; i < 4; i++) {
    const params = { ...request(100 + i, 'auto', LEGS[i % LEGS.length]!), max_tokens: 24 };
    const whole = await client.chat.completions.create(params);
    const { message, finish_reason } = whole.choices[0]!;
    // A random model almost never writes the one token that opens a call: its text is content.
    for (const call of message.tool_calls ?? []) expect(callProblems(call as ChatCompletionMessageFunctionToolCall)).toEqual([]);
    expect(finish_reason).toMatch(message.tool_calls?.length ? 'tool_calls' : /^(stop|length)$/);
    const stream = await streamed(params);
    expect(stream.calls.map((c) => c.function)).toEqual((message.tool_calls ?? []).map((c) => (c as ChatCompletionMessageFunctionToolCall).function));
    expect(stream.content === '' ? null : stream.content).toBe(message.content);
  }
  const none = await client.chat.completions.create({ ...request(200, 'none', LEGS[1]!), max_tokens: 8 });
  expect(none.choices[0]!.message.tool_calls).toBeUndefined();
  expect(none.choices[0]!.finish_reason).not.toBe('tool_calls');
  const withTools = await client.chat.completions.create({ ...request(200, 'required', LEGS[1]!), max_tokens: 8 });
  // The tools are rendered into the system turn: the prompt is longer with them than with none.
  expect(withTools.usage!.prompt_tokens).toBeGreaterThan(none.usage!.prompt_tokens + 50);
}, 300_000);

test('auto: a cloud that opens a call gets a valid one, its arguments written under the mask, streamed and not', async () => {
  // The same edge model in process behind a real HTTP server, its shim's first answer replaced by the token that opens a call.
  const edgeModel = await DecoderModel.load(loadModelPack(join(work, 'edge')));
  const router = await loadRouter(undefined);
  const cloud = new GrpcCloudClient({ address: shim.address });
  const opening = interceptSteps(cloud, async (step, next) => {
    const reply = await next(step);
    return step.tokenIndex > 0 ? reply : { ...reply, tokens: [TOOL_CALL_TOKEN], logprobs: [0], topAlternatives: [[{ id: TOOL_CALL_TOKEN, logprob: 0 }]] };
  });
  const tokenizer = await TextTokenizer.fromPack(join(work, 'edge'));
  const runtime = new EdgeRuntime({ edgeModel, router, tokenizer, cloud: opening }, { ...DEFAULT_LIMITS, maxConcurrent: 2 });
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: createEdgeApp(runtime, { maxBodyBytes: 1 << 20 }).fetch });
  try {
    const local = new OpenAI({ apiKey: 'unused', baseURL: `http://127.0.0.1:${server.port}/v1`, maxRetries: 0 });
    const localModel = (await local.models.list()).data[0]!.id;
    let routed = 0;
    for (let i = 0; i < 4; i++) {
      // One call: with parallel calls, free text may follow it, which a random model runs to the token limit.
      const params = {
        ...request(400 + i, 'auto', LEGS[0]!),
        model: localModel,
        routing_mode: 'llm_only',
        parallel_tool_calls: false,
      } as ChatCompletionCreateParamsNonStreaming;
      const whole = await local.chat.completions.create(params);
      const { message, finish_reason } = whole.choices[0]!;
      expect(finish_reason).toBe('tool_calls');
      expect(message.tool_calls!.length).toBeGreaterThan(0);
      for (const call of message.tool_calls!) expect(callProblems(call as ChatCompletionMessageFunctionToolCall)).toEqual([]);
      routed += (whole.usage as unknown as { routed_tokens: number }).routed_tokens;
      const stream = await streamedWith(local, params);
      expect(stream.calls.map((c) => c.function)).toEqual(message.tool_calls!.map((c) => (c as ChatCompletionMessageFunctionToolCall).function));
      expect(stream.finish).toBe('tool_calls');
    }
    expect(routed).toBeGreaterThan(0);
  } finally {
    await server.stop(true);
    await runtime.shutdown();
    await cloud.close();
    await router.release();
    await edgeModel.release();
  }
}, 300_000);

test('a conversation with a call and its result renders, and the reply may call again', async () => {
  const first = await client.chat.completions.create(request(300, { type: 'function', function: { name: 'get_weather' } }, LEGS[1]!));
  const call = first.choices[0]!.message.tool_calls![0]! as ChatCompletionMessageFunctionToolCall;
  const second = await client.chat.completions.create({
    ...request(301, 'required', LEGS[0]!),
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' },
    ],
  });
  for (const c of second.choices[0]!.message.tool_calls!) expect(callProblems(c as ChatCompletionMessageFunctionToolCall)).toEqual([]);
  expect(second.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens);
});
