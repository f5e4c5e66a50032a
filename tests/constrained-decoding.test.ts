/**
 * Constrained decoding held on every token, whichever model chose it: seeded generations at temperature 1
 * on a random-weight Qwen pack (whose own outputs are almost never valid JSON) through a real shim on
 * loopback whose cloud is another random Qwen pack, in joint mode with routed tokens among them (route
 * spans 1 and 4, speculation asked for), llm_only and small_only. Every output must parse and validate
 * against its schema, regex, grammar or choice; the cloud tokens the mask replaced are counted and reported.
 *
 * CONSTRAINED_CASES sets the number of generations (a multiple of the legs × constraints); the default keeps
 * the file near half a minute on two cores. The full run (CONSTRAINED_CASES=500) is recorded in docs/api.md.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GrpcCloudClient } from '../src/edge/cloud/grpc-cloud-client.ts';
import { EdgeRuntime } from '../src/edge/edge-runtime.ts';
import type { DoneEvent, GenerationEvent } from '../src/edge/loop/decoder-loop.ts';
import { DEFAULT_LIMITS, type RawGenerationRequest } from '../src/edge/request/generation-request.ts';
import { loadRouter, type Router } from '../src/edge/routing/router.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import OpenAI from 'openai';
import { createEdgeApp } from '../src/edge/http/app.tsx';
import { startTestShim } from './helpers/cloud-fixture.ts';
import { schemaProblems } from './helpers/schema-check.ts';

const work = mkdtempSync(join(tmpdir(), 'constrained-'));
const CASES = Number(process.env.CONSTRAINED_CASES ?? 25);

const PERSON = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 6 }, age: { type: 'integer', minimum: 0, maximum: 120 }, ok: { type: 'boolean' } },
  required: ['name', 'age', 'ok'],
  additionalProperties: false,
};
const TAGS = {
  type: 'object',
  properties: { tags: { type: 'array', items: { type: 'string', enum: ['red', 'green', 'blue'] }, maxItems: 3 }, level: { enum: ['low', 'high'] } },
  required: ['tags', 'level'],
  additionalProperties: false,
};
/** A GBNF grammar as llama.cpp writes one (rule names with dashes, bounded repetition), and the same language as a JS regex. */
const SUM_GRAMMAR = 'root ::= "(" small-num ("+" small-num){0,3} ")"\nsmall-num ::= [1-9] [0-9]?';
const SUM_LANGUAGE = /^\(([1-9][0-9]?)(\+[1-9][0-9]?){0,3}\)$/;
const CHOICES = ['A', 'B', 'C', 'D', 'E'];

interface Constraint {
  name: string;
  fields: RawGenerationRequest;
  problems(text: string): string[];
}

function jsonProblems(schema: Record<string, unknown>, text: string): string[] {
  try {
    return schemaProblems(schema, JSON.parse(text));
  } catch {
    return [`not JSON: ${JSON.stringify(text)}`];
  }
}

const CONSTRAINTS: Constraint[] = [
  { name: 'person schema', fields: { constraint: { jsonSchema: PERSON } }, problems: (t) => jsonProblems(PERSON, t) },
  { name: 'tags schema', fields: { constraint: { jsonSchema: TAGS } }, problems: (t) => jsonProblems(TAGS, t) },
  {
    name: 'regex',
    fields: { constraint: { regex: '[0-9]{3}-[a-z]{2,4}' } },
    problems: (t) => (/^[0-9]{3}-[a-z]{2,4}$/.test(t) ? [] : [`${JSON.stringify(t)} does not match`]),
  },
  {
    name: 'gbnf grammar',
    fields: { constraint: { grammar: SUM_GRAMMAR } },
    problems: (t) => (SUM_LANGUAGE.test(t) ? [] : [`${JSON.stringify(t)} is not in the grammar`]),
  },
  { name: 'choice', fields: { constraint: { choice: CHOICES } }, problems: (t) => (CHOICES.includes(t) ? [] : [`${JSON.stringify(t)} is no choice`]) },
];

/** How each generation runs: the threshold routes part of the tokens (the built-in router scores a random model low). */
const LEGS: { name: string; fields: RawGenerationRequest }[] = [
  { name: 'joint span 1', fields: { mode: 'joint', threshold: 0.5, routeSpan: 1 } },
  { name: 'joint span 4', fields: { mode: 'joint', threshold: 0.5, routeSpan: 4 } },
  { name: 'joint speculate', fields: { mode: 'joint', threshold: 0.5, routeSpan: 1, speculate: true } },
  { name: 'llm_only', fields: { mode: 'llm_only' } },
  { name: 'small_only', fields: { mode: 'small_only' } },
];

let shim: ShimServer;
let cloud: GrpcCloudClient;
let edgeModel: DecoderModel;
let router: Router;
let runtime: EdgeRuntime;

beforeAll(async () => {
  const [edgePack, cloudPack] = [join(work, 'edge'), join(work, 'cloud')];
  await writeRandomPack({ preset: 'tiny-qwen2', out: edgePack, seed: 21, hiddenStatesOutput: true });
  await writeRandomPack({ preset: 'tiny-qwen2', out: cloudPack, seed: 22, hiddenStatesOutput: true });
  shim = await startTestShim({ modelPack: cloudPack });
  cloud = new GrpcCloudClient({ address: shim.address });
  edgeModel = await DecoderModel.load(loadModelPack(edgePack));
  router = await loadRouter(undefined);
  runtime = new EdgeRuntime({ edgeModel, router, tokenizer: await TextTokenizer.fromPack(edgePack), cloud }, { ...DEFAULT_LIMITS, maxConcurrent: 4 });
}, 180_000);

afterAll(async () => {
  await runtime?.shutdown();
  await cloud?.close();
  await shim?.shutdown();
  await router?.release();
  await edgeModel?.release();
  rmSync(work, { recursive: true, force: true });
});

async function run(raw: RawGenerationRequest): Promise<{ done: DoneEvent; sources: string[] }> {
  const events: GenerationEvent[] = [];
  for await (const event of (await runtime.begin(raw)).events()) events.push(event);
  const done = events.at(-1) as DoneEvent;
  return { done, sources: events.flatMap((e) => (e.type === 'token' ? [e.source] : [])) };
}

test(
  `${CASES} seeded generations at temperature 1 all validate, with routed tokens the mask held`,
  async () => {
    const invalid: string[] = [];
    const totals = { generations: 0, tokens: 0, routed: 0, replaced: 0, fallbacks: 0, spanDropped: 0, fallbackSource: 0 };
    const perLeg = new Map<string, number>();
    const legMs = new Map<string, number>();
    for (let i = 0; i < CASES; i++) {
      const leg = LEGS[i % LEGS.length]!;
      const constraint = CONSTRAINTS[Math.floor(i / LEGS.length) % CONSTRAINTS.length]!;
      const t = performance.now();
      const { done, sources } = await run({ prompt: `Answer ${i}:`, temperature: 1, seed: 1000 + i, maxNewTokens: 96, ...leg.fields, ...constraint.fields });
      const problems = constraint.problems(done.text);
      if (problems.length > 0 || done.finishReason !== 'eos')
        invalid.push(`${leg.name} / ${constraint.name} / seed ${1000 + i} (${done.finishReason}): ${problems.join('; ')} ${JSON.stringify(done.text)}`);
      totals.generations++;
      totals.tokens += done.metrics.tokens;
      totals.routed += done.metrics.routed;
      totals.fallbackSource += sources.filter((s) => s === 'fallback').length;
      totals.replaced += done.metrics.constraint!.cloudTokensReplaced;
      totals.fallbacks += done.metrics.constraint!.constrainedFallbacks;
      totals.spanDropped += done.metrics.constraint!.spanTokensDropped;
      perLeg.set(leg.name, (perLeg.get(leg.name) ?? 0) + done.metrics.routed);
      legMs.set(`${leg.name}/${constraint.name}`, Math.round((legMs.get(`${leg.name}/${constraint.name}`) ?? 0) + performance.now() - t));
    }
    console.log(
      `constrained decoding: ${JSON.stringify(totals)}; routed per leg ${JSON.stringify(Object.fromEntries(perLeg))} ms ${JSON.stringify(Object.fromEntries(legMs))}`,
    );
    expect(invalid).toEqual([]);
    // The mask did hold cloud tokens: some were routed, and some of those the grammar had to replace.
    expect(perLeg.get('joint span 1')!).toBeGreaterThan(0);
    expect(perLeg.get('joint span 4')!).toBeGreaterThan(0);
    expect(perLeg.get('llm_only')!).toBeGreaterThan(0);
    expect(perLeg.get('small_only')).toBe(0);
    expect(totals.replaced).toBeGreaterThan(0);
    expect(totals.fallbackSource).toBe(0);
  },
  Math.max(600_000, CASES * 4_000),
);

test('the OpenAI client gets JSON of its schema (response_format) and one of its choices (structured_outputs); the JSON API a regex', async () => {
  const app = createEdgeApp(runtime, { maxBodyBytes: 1 << 20 });
  const client = new OpenAI({
    apiKey: 'unused',
    baseURL: 'http://edge.test/v1',
    maxRetries: 0,
    fetch: async (input, init) => app.fetch(new Request(input as string, init)),
  });
  const model = (await client.models.list()).data[0]!.id;
  const person = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Who?' }],
    temperature: 1,
    seed: 5,
    max_tokens: 96,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } },
  });
  const text = person.choices[0]!.message.content!;
  expect(Object.keys((person.usage as unknown as { constraint: object }).constraint)).toEqual([
    'cloud_tokens_replaced',
    'constrained_fallbacks',
    'span_tokens_dropped',
  ]);
  expect(jsonProblems(PERSON, text)).toEqual([]);
  const picked = await client.completions.create({
    model,
    prompt: 'Pick:',
    temperature: 1,
    seed: 6,
    max_tokens: 8,
    structured_outputs: { choice: CHOICES },
  } as never);
  expect(CHOICES).toContain((picked as { choices: { text: string }[] }).choices[0]!.text);
  const res = await app.request('/api/generate', {
    method: 'POST',
    body: JSON.stringify({ prompt: 'Code:', temperature: 1, seed: 7, max_new_tokens: 32, regex: '[0-9]{3}-[a-z]{2,4}' }),
    headers: { 'content-type': 'application/json' },
  });
  const done = JSON.parse(
    (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .at(-1)!
      .slice(5),
  ) as { text: string; finish_reason: string };
  expect(done.text).toMatch(/^[0-9]{3}-[a-z]{2,4}$/);
});
