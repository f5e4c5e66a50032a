/**
 * What private spans cost (`bun run eval --private-entities N`, issue 49 "What it costs"), on the real demo
 * pair and a few held-out TinyStories paragraphs: the entities are put in deterministically, the report has
 * both runs with the figures the issue asks for, the run without pseudonyms sends the entities (so the leak
 * check sees what it looks for) and the run with them sends none, and the evaluation through a shim gives the
 * in-process figures (timings aside).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { DEMO } from '../src/shared/paths.ts';
import { UsageError } from '../src/tools/cli-support.ts';
import { parseEvalOptions } from '../src/tools/eval/eval-options.ts';
import { formatMarkdown, toJson, type EvalReport } from '../src/tools/eval/eval-report.ts';
import type { PrivateSpansResult } from '../src/tools/eval/private-spans-eval.ts';
import { runEvaluation } from '../src/tools/eval/run-evaluation.ts';
import { insertEntities, SYNTHETIC_NAMES } from '../src/tools/eval/synthetic-entities.ts';
import { startTestShim } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const ARGS = ['--dataset', DEMO.tinyStories, '--limit', '6', '--continuations', '3', '--max-new-tokens', '24', '--private-entities', '3'];

let shim: ShimServer;
let local: EvalReport;
let remote: EvalReport;

const privacy = (report: EvalReport) => report.result as PrivateSpansResult;

beforeAll(async () => {
  await ensureDemoPacks();
  shim = await startTestShim();
  local = await runEvaluation(parseEvalOptions(ARGS));
  remote = await runEvaluation(parseEvalOptions([...ARGS, '--cloud', shim.address]));
}, 240_000);

afterAll(async () => {
  await shim?.shutdown();
});

describe('synthetic entities', () => {
  const story = 'One day, a girl named Lily went to the park. Lily saw a big dog. "Hi!" said Lily.';

  test('the same paragraph, count and seed give the same text; another seed other entities', () => {
    expect(insertEntities(story, 5, 7)).toEqual(insertEntities(story, 5, 7));
    expect(insertEntities(story, 5, 8).entities).not.toEqual(insertEntities(story, 5, 7).entities);
  });

  test("the story's own character becomes the first name everywhere; the rest are sentences after its introduction, all in the prompt", () => {
    const { text, prompt, entities } = insertEntities(story, 4, 1);
    expect(entities.map((e) => e.kind)).toEqual(['name', 'email', 'phone', 'name']);
    const [name, email, phone, friend] = entities.map((e) => e.text);
    expect(text).not.toContain('Lily');
    expect(text.split(name!).length - 1).toBe(6); // the story's three mentions, the email's, the phone's, the friend's
    expect(text).toBe(
      `One day, a girl named ${name} went to the park. ${name}'s email was ${email}. ${name}'s phone number was ${phone}. ${friend} was ${name}'s friend. ${name} saw a big dog. "Hi!" said ${name}.`,
    );
    expect(prompt).toBe(text.slice(0, text.indexOf(` ${name} saw`)));
    expect(email).toMatch(new RegExp(`^${name!.toLowerCase()}\\.[a-z]+@example\\.(org|com|net)$`));
    expect(phone).toMatch(/^555-\d{3}-\d{4}$/);
    expect(SYNTHETIC_NAMES).toContain(name as (typeof SYNTHETIC_NAMES)[number]);
  });

  test('a story that names nobody gets the name in a sentence of its own, after its first sentence', () => {
    const { text, prompt, entities } = insertEntities('The sun was hot. The cat slept.', 1, 3);
    expect(text).toBe(`The sun was hot. ${entities[0]!.text} lived next door. The cat slept.`);
    expect(prompt).toBe(`The sun was hot. ${entities[0]!.text} lived next door.`);
  });
});

describe('the flags', () => {
  test("--private-entities N at the router's own τ, or at --thresholds; flags of the sweep refused beside it", () => {
    expect(parseEvalOptions(ARGS).privateSpans).toEqual({ entities: 3, thresholds: undefined });
    expect(parseEvalOptions([...ARGS, '--thresholds', '0.7,0.5']).privateSpans).toEqual({ entities: 3, thresholds: [0.5, 0.7] });
    expect(parseEvalOptions(['--dataset', 'x.txt']).privateSpans).toBeUndefined();
    expect(() => parseEvalOptions([...ARGS, '--out', 'plots'])).toThrow(UsageError);
    expect(() => parseEvalOptions(['--dataset', 'x.txt', '--private-entities', '0'])).toThrow(UsageError);
  });
});

describe('the evaluation', () => {
  test('both runs at the demo router τ, the same routing under teacher forcing; only the run with pseudonyms reads placeholders or keeps positions home', () => {
    const r = privacy(local);
    expect(r.kind).toBe('private-spans');
    expect(r.paragraphs + r.skippedParagraphs).toBe(6);
    expect(r.entities).toBe(3 * r.paragraphs);
    expect(r.runs.map((run) => [run.threshold, run.pseudonyms])).toEqual([
      [DEMO.routerThreshold, false],
      [DEMO.routerThreshold, true],
    ]);
    const [plain, pseudonymised] = r.runs;
    expect(pseudonymised!.teacherForcing.routed).toBe(plain!.teacherForcing.routed);
    expect(plain!.teacherForcing.routed).toBeGreaterThan(0);
    expect([plain!.teacherForcing.withheld, plain!.teacherForcing.placeholders, plain!.generation.withheldSteps, plain!.generation.placeholders]).toEqual([
      0, 0, 0, 0,
    ]);
    expect(pseudonymised!.teacherForcing.placeholders).toBeGreaterThan(0);
    expect(pseudonymised!.teacherForcing.withheld).toBeGreaterThan(0);
    expect(pseudonymised!.generation.placeholders).toBeGreaterThan(0);
    const forcing = pseudonymised!.teacherForcing;
    expect(forcing.cloudShare).toBeCloseTo((forcing.routed - forcing.withheld) / r.positions, 12);
    for (const run of r.runs) {
      expect(run.teacherForcing.gapRecovered).toBeCloseTo(
        (run.teacherForcing.accuracy - r.smallOnlyAccuracy) / (r.largeOnlyAccuracy - r.smallOnlyAccuracy),
        12,
      );
      expect(run.generation.prompts).toBe(3);
      expect(run.generation.msPerToken).toBeGreaterThan(0);
      expect(run.generation.tokensSent).toBeGreaterThan(0);
    }
  });

  test('the cloud never sees an inserted entity with pseudonyms, and sees them without', () => {
    const r = privacy(local);
    expect(r.leakCheck).toMatchObject({ passed: true, contextLeaks: 0, cloudTextLeaks: 0, cloudTextsChecked: 3 });
    expect(r.leakCheck.contextsChecked).toBeGreaterThan(0);
    expect(r.leakCheck.plainContextsWithEntities).toBeGreaterThan(0);
    expect(r.runs[1]!.generation.cloudTextsWithEntities).toBe(0);
    expect(r.runs[0]!.generation.cloudTextsWithEntities).toBeGreaterThan(0);
    const example = r.example!;
    expect(example.cloudText).toContain('[NAME_1]');
    for (const entity of example.entities) expect(example.cloudText).not.toContain(entity.text);
  });

  test('through a shim: the same figures as in process, timings aside', () => {
    const untimed = (report: EvalReport) => {
      const { leakCheck, runs, example, ...rest } = privacy(report);
      return {
        leakCheck,
        example,
        ...rest,
        runs: runs.map(({ generation: { msPerToken: _m, cloudMsPerToken: _c, msBetweenTokens: _b, pseudonymMsPerToken: _p, ...generation }, ...run }) => ({
          ...run,
          generation,
        })),
      };
    };
    expect(privacy(remote).leakCheck.passed).toBe(true);
    expect(untimed(remote)).toEqual(untimed(local));
  });

  test('the JSON object (snake_case) and the printed tables', () => {
    const json = toJson(local) as { evaluation: string; runs: Record<string, Record<string, unknown>>[]; leak_check: Record<string, unknown> };
    expect(json.evaluation).toBe('private-spans');
    expect(Object.keys(json.runs[0]!.teacher_forcing!)).toEqual([
      'routed',
      'routed_share',
      'withheld',
      'cloud_share',
      'accuracy',
      'gap_recovered',
      'placeholders',
    ]);
    expect(json.runs[1]!.generation).toMatchObject({ withheld_steps: expect.any(Number), tokens_sent: expect.any(Number), ms_per_token: expect.any(Number) });
    expect(json.leak_check.passed).toBe(true);
    const markdown = formatMarkdown(local);
    expect(markdown).toContain('| … gap recovered |');
    expect(markdown).toContain('Leak check: passed.');
  });
});
