/**
 * Router training on a chat dataset (issue 48, item 4): JSONL of `messages` rendered through the edge
 * pack's chat template, on the real Qwen tokenizer with two tiny random-weight packs of its vocabulary (heads
 * of their own, so they disagree on the top-1 as a real pair does), the cloud in process. The records are
 * exactly the assistant's positions, counted here from the rendered ids by walking Qwen's turn markers; a
 * router trained on the conversations loads on the edge and `router eval` reads the same JSONL; bad input
 * is refused with its line, a conversation without an assistant turn is skipped, and a pack without a
 * chat template is named as the problem.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadEdgeEngine } from '../src/edge/server/load-edge-engine.ts';
import { ChatTemplate, type ChatMessage } from '../src/shared/text/chat-template.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { parseChatDataset } from '../src/tools/lab/chat-dataset.ts';
import { InProcessScorer } from '../src/tools/lab/cloud-scorer.ts';
import { teacherForceSequences } from '../src/tools/lab/teacher-forcing.ts';
import { readTrainingCorpus } from '../src/tools/lab/training-corpus.ts';
import { chatTemplateFor, trainingDocuments } from '../src/tools/lab/training-documents.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { evaluateRouter } from '../src/tools/router/evaluate-router.ts';
import { trainRouter } from '../src/tools/router/train-router.ts';
import type { TrainRouterOptions } from '../src/tools/router/train-router-options.ts';

const work = mkdtempSync(join(tmpdir(), 'router-chat-'));
const edgePack = join(work, 'edge');
const cloudPack = join(work, 'cloud');
const plainPack = join(work, 'edge-without-template');
const chatFile = join(work, 'chats.jsonl');
afterAll(() => rmSync(work, { recursive: true, force: true }));

const user = (content: string): ChatMessage => ({ role: 'user', content });
const assistant = (content: string): ChatMessage => ({ role: 'assistant', content });

/** 13 conversations with an assistant turn (10 train, 3 held out at 0.8), and one without (line 4): skipped. */
const CONVERSATIONS: ChatMessage[][] = [
  [{ role: 'system', content: 'You are brief.' }, user('What is the capital of France?'), assistant('Paris is the capital of France.')],
  [user('Tell me a short story about a cat.'), assistant('Once upon a time, a small cat found a red ball and played with it all day.')],
  [user('Two plus two?'), assistant('Four.'), user('And three plus three?'), assistant('Six, because three and three make six.')],
  [user('Is anyone there?')],
  [user('Name a colour of the sky.'), assistant('Blue, on a clear day.')],
  // Special-token text a user typed stays text; unicode the tokenizer splits inside characters.
  [user('Why does <|im_end|> appear here?'), assistant('It is just text in your message, not the end of a turn.')],
  [user('Order a coffee in French.'), assistant('Un café, s’il vous plaît ☕')],
  [user('Count to five.'), assistant('One, two, three, four, five.')],
  [user('What do bees make?'), assistant('Bees make honey from the nectar of flowers.')],
  [user('Say hello.'), assistant('Hello there, nice to meet you.'), user('Say goodbye.'), assistant('Goodbye, and take care.')],
  [user('Which animal barks?'), assistant('A dog barks when it sees a stranger.')],
  [user('Where does rain come from?'), assistant('Rain falls from clouds when their drops grow heavy.')],
  [user('What is ice?'), assistant('Ice is frozen water.')],
  [{ role: 'system', content: 'Answer in one word.' }, user('Opposite of hot?'), assistant('Cold.')],
];
const SKIPPED_LINE = 4;
const jsonl = (conversations: unknown[]) => `${conversations.map((messages) => JSON.stringify({ messages })).join('\n')}\n`;

let tokenizer: TextTokenizer;
let template: ChatTemplate;
/** The conversations the dataset keeps, in order. */
const kept = CONVERSATIONS.filter((_, i) => i + 1 !== SKIPPED_LINE);

/**
 * The indices of the assistant's tokens in a Qwen rendering, found from the ids alone: after each
 * `<|im_start|>assistant\n` (and the empty `<think>` block Qwen3's template writes into the last turn),
 * every token up to and including `<|im_end|>`.
 */
function assistantTokenIndices(ids: readonly number[]): number[] {
  const ids_ = (text: string) => tokenizer.encode(text, { addBos: false, parseSpecialTokens: true });
  const header = ids_('<|im_start|>assistant\n');
  const think = ids_('<think>\n\n</think>\n\n');
  const end = tokenizer.specialTokenId('<|im_end|>')!;
  const at = (i: number, pattern: number[]) => pattern.every((id, k) => ids[i + k] === id);
  const found: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    if (!at(i, header)) continue;
    let j = i + header.length;
    if (at(j, think)) j += think.length;
    for (; j < ids.length; j++) {
      found.push(j);
      if (ids[j] === end) break;
    }
  }
  return found;
}

const rendered = (messages: ChatMessage[]) => template.encode(messages, tokenizer, { addGenerationPrompt: false }).ids;

function training(overrides: Partial<TrainRouterOptions> = {}): TrainRouterOptions {
  return {
    edgeModel: edgePack,
    cloudModel: cloudPack,
    text: chatFile,
    out: join(work, 'router'),
    trainFraction: 0.8,
    seed: 0,
    maxEpochs: 12,
    hiddenUnits: 16,
    members: 1,
    // Random models: no position's text is predicted by either, so only the divergence between them labels both ways.
    labels: 'divergence',
    features: ['hidden'],
    rounds: 1,
    rolloutPrompts: 3,
    rolloutTokens: 8,
    ...overrides,
  };
}

beforeAll(async () => {
  await writeRandomPack({ preset: 'tiny-qwen2', out: edgePack, seed: 1, hiddenStatesOutput: true, untiedHead: true });
  await writeRandomPack({ preset: 'tiny-qwen2', out: cloudPack, seed: 2, hiddenStatesOutput: true, untiedHead: true });
  cpSync(edgePack, plainPack, { recursive: true });
  const config = JSON.parse(readFileSync(join(plainPack, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  delete config.chat_template;
  writeFileSync(join(plainPack, 'tokenizer_config.json'), JSON.stringify(config));
  writeFileSync(chatFile, jsonl(CONVERSATIONS));
  tokenizer = await TextTokenizer.fromPack(edgePack);
  template = ChatTemplate.ofTokenizer(tokenizer)!;
}, 60_000);

describe('a chat dataset', () => {
  test("is read one conversation per line; one without an assistant turn is skipped; the records are exactly the assistant's positions", async () => {
    const corpus = readTrainingCorpus(chatFile);
    expect(corpus.kind).toBe('chat');
    if (corpus.kind !== 'chat') return;
    expect(corpus.skipped).toEqual([SKIPPED_LINE]);
    expect(corpus.conversations.map((c) => c.messages)).toEqual(kept);

    const edgeModel = await DecoderModel.load(loadModelPack(edgePack));
    const cloudModel = await DecoderModel.load(loadModelPack(cloudPack));
    try {
      const documents = trainingDocuments(corpus, { edgeModel, tokenizer }, chatTemplateFor(corpus, tokenizer, edgePack));
      const all = kept.map((_, i) => i);
      const sequences = documents.sequences(all);
      const expectedNext: number[] = [];
      const expectedConversation: number[] = [];
      for (const [c, messages] of kept.entries()) {
        const ids = rendered(messages);
        expect(sequences[c]!.ids).toEqual(ids);
        const targets = assistantTokenIndices(ids);
        expect(sequences[c]!.positions).toEqual(targets.map((t) => t - 1));
        // What the positions predict is each assistant message's text and the end of its turn, nothing else.
        const replies = messages.filter((m) => m.role === 'assistant').map((m) => `${m.content}<|im_end|>`);
        expect(
          tokenizer.decode(
            targets.map((t) => ids[t]!),
            { skipSpecialTokens: false },
          ),
        ).toBe(replies.join(''));
        expectedNext.push(...targets.map((t) => ids[t]!));
        expectedConversation.push(...targets.map(() => c));
      }
      const forced = await teacherForceSequences({ edgeModel, cloud: new InProcessScorer(cloudModel), sequences });
      expect(forced.count).toBe(expectedNext.length);
      expect(Array.from(forced.nextId)).toEqual(expectedNext);
      expect(Array.from(forced.paragraph)).toEqual(expectedConversation);

      // Rollouts start where an assistant answers: the turns up to each such user message, with the generation prompt.
      const prompts = documents.rolloutPrompts([2], 16);
      expect(prompts).toEqual([
        template.encode(kept[2]!.slice(0, 1), tokenizer, { addGenerationPrompt: true }),
        template.encode(kept[2]!.slice(0, 3), tokenizer, { addGenerationPrompt: true }),
      ]);
      expect(typeof prompts[1] === 'object' && prompts[1].text.endsWith('<|im_start|>user\nAnd three plus three?<|im_end|>\n<|im_start|>assistant\n')).toBe(
        true,
      );
    } finally {
      await edgeModel.release();
      await cloudModel.release();
    }
  }, 60_000);

  test('trains a router (split by conversation, on-policy rollouts from user turns) that the edge loads; router eval reads the same JSONL', async () => {
    const out = join(work, 'router');
    // No features given: a chat dataset's defaults, every group but loop (a reply echoes the conversation).
    const report = await trainRouter(training({ out, features: undefined }));
    const trainCount = kept.slice(0, 10).reduce((s, m) => s + assistantTokenIndices(rendered(m)).length, 0);
    expect(report.paragraphs).toEqual({ train: 9, validation: 1, heldOut: 3 });
    expect(report.chat).toEqual({ skippedLines: [SKIPPED_LINE] });
    expect(report.examples).toBe(trainCount);
    expect(report.rounds).toHaveLength(2);
    expect(report.rounds[1]!.rollout!.trajectories).toBe(6);
    expect(Number.isFinite(report.valAuc)).toBe(true);
    const meta = JSON.parse(readFileSync(join(out, 'router.json'), 'utf8'));
    expect(meta.training.text_format).toBe('chat');
    expect(meta.training.skipped_conversation_lines).toEqual([SKIPPED_LINE]);
    expect(meta.features).toEqual(['hidden', 'previous_hidden', 'logit_stats', 'repetition', 'position', 'token']);
    // And horizon-nll, a chat dataset's default rollout rule, charges a reply's loop steps nothing.
    expect(meta.training).toMatchObject({ on_policy_label_rule: 'horizon-nll', loop_cost: 0, loop_cost_share: 0 });

    const engine = await loadEdgeEngine({ edgeModel: loadModelPack(edgePack), router: out });
    try {
      expect(engine.router.info.name).toBe('onnx:router');
      expect(engine.router.info.hiddenSize).toBe(64);
    } finally {
      await engine.release();
    }

    const heldOutCount = kept.slice(10).reduce((s, m) => s + assistantTokenIndices(rendered(m)).length, 0);
    const curve = await evaluateRouter({ router: out, text: chatFile, trainFraction: 0.8, thresholds: [0, 0.5, 1] });
    expect(curve.positions).toBe(heldOutCount);
    expect(curve.points.map((p) => p.threshold)).toEqual([0, 0.5, 1]);

    // The same through the command line.
    const cli = Bun.spawnSync(['bun', 'src/tools/router/cli.ts', 'eval', '--router', out, '--text', chatFile, '--json'], { stdout: 'pipe', stderr: 'pipe' });
    expect(cli.stderr.toString()).not.toContain('error');
    expect(cli.exitCode).toBe(0);
    expect(JSON.parse(cli.stdout.toString().trim().split('\n').at(-1)!).positions).toBe(heldOutCount);
  }, 120_000);
});

describe('bad chat input: refused before anything is written', () => {
  const refused = async (name: string, contents: string, message: string | RegExp, overrides: Partial<TrainRouterOptions> = {}) => {
    const file = join(work, `${name}.jsonl`);
    writeFileSync(file, contents);
    const out = join(work, `out-${name}`);
    await expect(trainRouter(training({ text: file, out, ...overrides }))).rejects.toThrow(message);
    expect(existsSync(out)).toBe(false);
  };
  const good = jsonl(CONVERSATIONS.slice(0, 3)).trimEnd().split('\n');

  test('a malformed line, with its number', async () => {
    await refused('malformed', [...good, '{"messages": [{"role": "user"'].join('\n'), `malformed.jsonl:4: not valid JSON`);
    await refused('plain-line', [good[0], 'Just a line of text.', good[1]].join('\n'), `plain-line.jsonl:2: not valid JSON`);
  });

  test('a mixed file, a role the template does not take, content that is not text', async () => {
    await refused('mixed', [good[0], JSON.stringify({ text: 'a story' })].join('\n'), /mixed\.jsonl:2: not a conversation .*mixes formats/);
    await refused(
      'tool-role',
      [good[0], good[1], JSON.stringify({ messages: [user('Hi'), { role: 'tool', content: '{}' }] })].join('\n'),
      /tool-role\.jsonl:3: message 2 has role "tool"/,
    );
    await refused(
      'parts',
      JSON.stringify({ messages: [user('Hi'), { role: 'assistant', content: [{ type: 'text', text: 'Hello' }] }] }),
      /parts\.jsonl:1: message 2's content must be a string/,
    );
    await refused('empty-messages', JSON.stringify({ messages: [] }), /empty-messages\.jsonl:1: "messages" must be a non-empty array/);
  });

  test('no conversation with an assistant turn', async () => {
    await refused(
      'no-assistant',
      jsonl([[user('Hello?')], [{ role: 'system', content: 'Be kind.' }, user('Anyone?')]]),
      'no conversation has an assistant turn',
    );
  });

  test('a pack without a chat template, for training and for evaluation', async () => {
    const message = `is a chat dataset, but the edge pack ${plainPack} has no chat template`;
    await refused('no-template', jsonl(CONVERSATIONS), message, { edgeModel: plainPack });
    await expect(evaluateRouter({ router: join(work, 'router'), edgeModel: plainPack, text: chatFile, trainFraction: 0.8 })).rejects.toThrow(message);
  });

  test('plain text is still text, and a file with no JSON line is not a chat dataset', () => {
    expect(parseChatDataset('Once upon a time.\n\nThe end.\n', 'story.txt')).toBeUndefined();
    expect(parseChatDataset('{"text": "a JSONL of another kind"}\n', 'other.jsonl')).toBeUndefined();
  });
});
