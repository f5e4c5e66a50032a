/**
 * The CommonsenseQA evaluation through a pack's chat template (issue 48, item 4), on the real Qwen tokenizer
 * and a tiny random-weight pack of its vocabulary: each question is one user message rendered with the
 * generation prompt (its ids as the template gives them), the generation ends with the assistant's turn and
 * the answer is the reply's first standalone letter. A pack without a template keeps the plain prompt.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CloudClient, CloudStepReply, CloudStepRequest } from '../src/edge/cloud/cloud-client.ts';
import { ChatTemplate } from '../src/shared/text/chat-template.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { choicePrompts, evaluateChoices } from '../src/tools/eval/choice-eval.ts';
import { parseEvalOptions } from '../src/tools/eval/eval-options.ts';
import { formatMarkdown, toJson } from '../src/tools/eval/eval-report.ts';
import { buildChoiceMessage, buildChoicePrompt, CHOICE_STOP, extractAnswer, extractChatAnswer, toQuestion } from '../src/tools/eval/multiple-choice.ts';
import { runEvaluation } from '../src/tools/eval/run-evaluation.ts';
import { TopProbabilityRouter } from '../src/tools/lab/baseline-routers.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';
import { nestedRows, toJsonl } from './helpers/eval-commonsenseqa.ts';

const work = mkdtempSync(join(tmpdir(), 'eval-chat-'));
const pack = join(work, 'tiny-qwen2');
afterAll(() => rmSync(work, { recursive: true, force: true }));

const rows = await nestedRows(2);
const questions = rows.map((r, i) => toQuestion(r, `csqa:${i + 1}`));
const program = questions[0]!; // answer E
const promotion = questions[1]!; // answer B

let tokenizer: TextTokenizer;
let template: ChatTemplate;

beforeAll(async () => {
  await writeRandomPack({ preset: 'tiny-qwen2', out: pack, seed: 3, hiddenStatesOutput: true });
  tokenizer = await TextTokenizer.fromPack(pack);
  template = ChatTemplate.ofTokenizer(tokenizer)!;
}, 60_000);

describe('the CommonsenseQA prompt through a chat template', () => {
  test('one user message: the question and choices lines and an instruction, rendered with the generation prompt', () => {
    const message =
      'Question: The program kept getting errors, the amateur end user began to what?\n' +
      'Choices: A. get mad B. compile C. debug D. write code E. get frustrated\n' +
      'Answer with the letter of the correct choice (A, B, C, D or E).';
    expect(buildChoiceMessage(program)).toBe(message);
    const asked = choicePrompts({ tokenizer }, questions);
    expect(asked.format).toBe('chat-template');
    expect(asked.stop).toEqual([]);
    const first = asked.prompts[0] as { text: string; ids: number[] };
    expect(first.text).toBe(template.render([{ role: 'user', content: message }], { addGenerationPrompt: true }));
    expect(first.text).toBe(`<|im_start|>user\n${message}<|im_end|>\n<|im_start|>assistant\n`);
    // Special tokens only where the template wrote them: the turn markers, as their ids.
    const special = (text: string) => tokenizer.specialTokenId(text)!;
    expect(first.ids.filter((id) => tokenizer.isSpecialId(id))).toEqual([special('<|im_start|>'), special('<|im_end|>'), special('<|im_start|>')]);
    expect(first.ids).toEqual(tokenizer.encode(first.text, { addBos: false, parseSpecialTokens: true }));
    expect(first.ids.slice(-3)).toEqual(tokenizer.encode('<|im_start|>assistant\n', { addBos: false, parseSpecialTokens: true }));
  });

  test("a pack without a template keeps today's prompt, stop and parsing", async () => {
    const demo = await ensureDemoPacks();
    const asked = choicePrompts({ tokenizer: await TextTokenizer.fromPack(demo.edgePack) }, questions);
    expect(asked.format).toBe('plain');
    expect(asked.prompts).toEqual(questions.map(buildChoicePrompt));
    expect(asked.stop).toEqual(CHOICE_STOP);
    expect(asked.extract).toBe(extractAnswer);
    expect(asked.extract(' They would get Frustrated', program.choices)).toBe('E');
  }, 60_000);

  test("the answer is the reply's first standalone letter, after any reasoning", () => {
    const answer = (output: string) => extractChatAnswer(output, program.choices);
    expect(answer('B')).toBe('B');
    expect(answer('The answer is (C).')).toBe('C');
    expect(answer('E) get frustrated, not B')).toBe('E');
    expect(answer('<think>\nA or B? Surely D.\n</think>\n\nE')).toBe('E');
    expect(answer('<think>\nA or B, still thinking')).toBeNull();
    // Choice text alone is not a letter; a lower-case "a" or letters inside words are none either.
    expect(answer('get frustrated')).toBeNull();
    expect(answer('a debugger, ABC')).toBeNull();
  });
});

/**
 * A cloud that answers `letter` as the assistant's first token and then ends the turn, recording the
 * contexts it was asked with.
 */
function answeringCloud(letter: string, contexts: number[][]): CloudClient {
  const answer = tokenizer.encode(letter, { addBos: false, parseSpecialTokens: false });
  const end = tokenizer.specialTokenId('<|im_end|>')!;
  return {
    openConversation: () => ({
      async next(request: CloudStepRequest): Promise<CloudStepReply> {
        contexts.push([...request.context]);
        const token = request.tokenIndex < answer.length ? answer[request.tokenIndex]! : end;
        return { tokens: [token], text: '', logprobs: [], topAlternatives: [], cachedTokens: 0, backendMs: 0, shimMs: 0 };
      },
      close: async () => {},
    }),
    state: () => 'ready',
    close: async () => {},
  };
}

describe('the evaluation through a chat template', () => {
  test('the template ids are the prompt; the generation ends at the end of the turn; the letter is read from the reply', async () => {
    const edgeModel = await DecoderModel.load(loadModelPack(pack));
    try {
      const contexts: number[][] = [];
      const result = await evaluateChoices({
        edge: { edgeModel, tokenizer, cloud: answeringCloud('B', contexts) },
        router: new TopProbabilityRouter(),
        questions,
        // τ = 1 routes every token: the cloud writes the reply.
        thresholds: [1],
        seed: 0,
        maxNewTokens: 8,
        calibrationRuns: 1,
        tolerance: 0.01,
      });
      expect(result.promptFormat).toBe('chat-template');
      const prompts = choicePrompts({ tokenizer }, questions).prompts as { text: string; ids: readonly number[] }[];
      // Each question's first routed step carries exactly its template ids.
      expect(contexts).toContainEqual([...prompts[0]!.ids]);
      expect(contexts).toContainEqual([...prompts[1]!.ids]);
      // One token each ("B"), then <|im_end|> ended the turn: 8 were allowed and no stop string was set.
      expect(result.points).toEqual([{ threshold: 1, routedRatio: 1, quality: 0.5, noAnswerRate: 0, tokens: 2, routed: 2, answers: ['B', 'B'] }]);
      expect(result.examples.map((e) => [e.output, e.extracted, e.answerKey])).toEqual([
        ['B', 'B', program.answerKey],
        ['B', 'B', promotion.answerKey],
      ]);
    } finally {
      await edgeModel.release();
    }
  }, 60_000);

  test('bun run eval on a templated pack: the report says how the questions were asked', async () => {
    const file = join(work, 'csqa.jsonl');
    writeFileSync(file, toJsonl(rows));
    const options = parseEvalOptions([
      '--dataset',
      file,
      '--edge-model',
      pack,
      '--cloud-model',
      pack,
      '--router',
      'builtin',
      '--thresholds',
      '0',
      '--max-new-tokens',
      '3',
      '--calibration-runs',
      '1',
    ]);
    const report = await runEvaluation(options);
    expect(report.result.kind).toBe('multiple-choice');
    expect(toJson(report).prompt_format).toBe('chat-template');
    expect(formatMarkdown(report)).toContain("2 questions, each a user message through the edge pack's chat template");
  }, 60_000);
});

describe("the edge's --chat-template in the tools", () => {
  test('CommonsenseQA asks through the named template where the pack has none; a chat dataset trains through it too', async () => {
    const demo = await ensureDemoPacks();
    const tokenizer = await TextTokenizer.fromPack(demo.edgePack);
    const question = questions[0]!;
    expect(choicePrompts({ tokenizer }, [question]).format).toBe('plain');
    const chatml = choicePrompts({ tokenizer }, [question], 'chatml');
    expect(chatml.format).toBe('chat-template');
    expect((chatml.prompts[0] as { text: string }).text).toBe(`<|im_start|>user\n${buildChoiceMessage(question)}<|im_end|>\n<|im_start|>assistant\n`);
    expect(parseEvalOptions(['--dataset', 'x.jsonl', '--chat-template', 'chatml'], {}).chatTemplate).toBe('chatml');

    const { chatTemplateFor } = await import('../src/tools/lab/training-documents.ts');
    const corpus = { kind: 'chat', path: 'chats.jsonl' } as Parameters<typeof chatTemplateFor>[0];
    expect(() => chatTemplateFor(corpus, tokenizer, demo.edgePack)).toThrow('has no chat template');
    expect(chatTemplateFor(corpus, tokenizer, demo.edgePack, 'chatml')!.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n',
    );
  });
});
