/**
 * `bun run eval` on a chat dataset (issue 57, item 3), through the command line on the chat pair: teacher
 * forcing on exactly the assistant's tokens (the records router training learns from), the recovered gap at
 * fixed shares, and free-running replies to the last user turn from τ = 0 (the edge alone) to τ = 1 (every
 * token routed), with the share of replies the model ended itself and the requested words mentioned. The
 * requested words are read from the requests as the chat pair's own measurement lists them (its provenance
 * metadata, all 140 held-back requests). A pack without a chat template is named as the problem.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChatTemplate } from '../src/shared/text/chat-template.ts';
import { CHAT_DEMO, DEMO } from '../src/shared/paths.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { parseChatDataset } from '../src/tools/lab/chat-dataset.ts';
import { assistantPositions } from '../src/tools/lab/chat-turns.ts';
import { mentions, requestedWords } from '../src/tools/eval/requested-words.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const work = mkdtempSync(join(tmpdir(), 'eval-chat-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('what a request asks the reply to mention', () => {
  test("the words of every held-back request, as the chat pair's provenance lists them", () => {
    const lines = readFileSync(join(CHAT_DEMO.chatDir, 'provenance', 'heldback-meta.jsonl'), 'utf8')
      .trim()
      .split('\n');
    expect(lines).toHaveLength(140);
    for (const line of lines) {
      const meta = JSON.parse(line) as { messages: { role: string; content: string }[]; requested: string[][] };
      const request = meta.messages.findLast((m) => m.role === 'user')!.content;
      expect({ request, words: requestedWords(request) }).toEqual({ request, words: meta.requested.at(-1)! });
    }
  });

  test('a whole word in any case, also with a plural -s or -es', () => {
    expect(requestedWords('One more, about a house, please.')).toEqual(['house']);
    expect(requestedWords('Tell me a story that has the words ball and successful in it.')).toEqual(['ball', 'successful']);
    expect(requestedWords('Tell me a short story.')).toEqual([]);
    expect(mentions('The Dogs ran home.', 'dog')).toBe(true);
    expect(mentions('Two boxes.', 'box')).toBe(true);
    expect(mentions('He dogged her.', 'dog')).toBe(false);
    expect(mentions('A hotdog.', 'dog')).toBe(false);
  });
});

const evalCli = (...args: string[]) => {
  const r = Bun.spawnSync(['bun', 'src/tools/eval/cli.ts', ...args], { stdout: 'pipe', stderr: 'pipe' });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
};

describe('bun run eval on a chat dataset', () => {
  test('teacher forcing on the assistant tokens, shares against the baselines, replies from the edge alone to the cloud alone', async () => {
    await ensureDemoPacks();
    const heldBack = readFileSync(CHAT_DEMO.heldBack, 'utf8').trim().split('\n');
    // Two single requests and one two-exchange conversation (the file's last 30).
    const file = join(work, 'three.jsonl');
    writeFileSync(file, `${[heldBack[0], heldBack[1], heldBack.at(-1)].join('\n')}\n`);
    const conversations = parseChatDataset(readFileSync(file, 'utf8'), file)!.conversations;
    const tokenizer = await TextTokenizer.fromPack(CHAT_DEMO.edgePack);
    const template = ChatTemplate.ofTokenizer(tokenizer)!;
    const positions = conversations.reduce(
      (s, c) => s + assistantPositions(template, tokenizer, new Set(tokenizer.eosIds), c.messages, 'test').positions.length,
      0,
    );
    const words = conversations.map((c) => requestedWords(c.messages.findLast((m) => m.role === 'user')!.content));

    const packs = ['--edge-model', CHAT_DEMO.edgePack, '--cloud-model', CHAT_DEMO.cloudPack, '--router', CHAT_DEMO.routerPack];
    const r = evalCli('--dataset', file, ...packs, '--thresholds', '0,1', '--shares', '0.3', '--max-new-tokens', '24', '--json');
    expect(r.stderr).not.toContain('error');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('| τ | routed | ended by the model | all requested words | requested words | mean tokens |');
    const json = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    expect(json).toMatchObject({
      format: 'chat',
      selection: "conversations 1–3 of 3 (not the router's training text: held out as a whole)",
      conversations: 3,
      positions,
    });
    expect(json.teacher_forcing.points.map((p: { routed_ratio: number }) => p.routed_ratio)).toEqual([0, 1]);
    expect(json.teacher_forcing.points[0].quality).toBe(json.small_only_accuracy);
    expect(json.teacher_forcing.points[1].quality).toBe(json.large_only_accuracy);
    expect(json.teacher_forcing.at_share).toHaveLength(1);
    expect(json.teacher_forcing.at_share[0]).toMatchObject({ share: 0.3, routed: Math.floor(0.3 * positions) });
    expect(json.replies).toMatchObject({
      count: 3,
      max_new_tokens: 24,
      requests_naming_words: words.filter((w) => w.length).length,
      requested_words: words.flat().length,
    });
    const [edgeAlone, cloudAlone] = json.replies.points;
    expect([edgeAlone.routed_share, cloudAlone.routed_share]).toEqual([0, 1]);
    // 24 tokens are too few for a story: no reply ends before the cap.
    expect([edgeAlone.ended_by_model, edgeAlone.mean_reply_tokens]).toEqual([0, 24]);
    expect(edgeAlone.examples).toHaveLength(2);
  }, 120_000);

  test('a pack without a chat template is named as the problem', async () => {
    await ensureDemoPacks();
    const r = evalCli('--dataset', CHAT_DEMO.heldBack, '--limit', '1');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`is a chat dataset, but the edge pack ${DEMO.edgePack} has no chat template`);
  }, 60_000);
});
