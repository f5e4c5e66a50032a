/**
 * The pseudonymised conversation against a scripted cloud that writes what a large instruct model would:
 * placeholders over several tokens, which come back to the loop as the values' tokens (as many as the step
 * allows); what the scripted cloud receives never holds a value; conditional steps, withheld positions, a
 * shim context the edge's no longer extends and hidden states each follow the rule the file states. Then
 * one generation through the loop, where the user reads the value and the edge's cache holds it.
 */
import { beforeAll, describe, expect, test } from 'bun:test';
import type { CloudClient, CloudConversation, CloudStepReply, CloudStepRequest } from '../src/edge/cloud/cloud-client.ts';
import { CloudDisclosure } from '../src/edge/cloud/cloud-disclosure.ts';
import { generate, type DoneEvent, type LoopRequest, type TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { encodeContinuation } from '../src/edge/privacy/encode-continuation.ts';
import { PrivateValues } from '../src/edge/privacy/private-values.ts';
import { PseudonymisedConversation } from '../src/edge/privacy/pseudonymised-conversation.ts';
import { Pseudonymiser } from '../src/edge/privacy/pseudonymiser.ts';
import { parseGenerationRequest } from '../src/edge/request/generation-request.ts';
import { TopProbabilityScorer } from '../src/edge/routing/router.ts';
import type { TokenSource } from '../src/shared/contract/contract-vocabulary.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

let tokenizer: TextTokenizer;
let edgePack: string;
beforeAll(async () => {
  edgePack = (await ensureDemoPacks()).edgePack;
  tokenizer = await TextTokenizer.fromPack(edgePack);
});

/** A cloud that writes `script`'s tokens in order, `maxTokens` at a time, and keeps what it was asked. */
class ScriptedCloud implements CloudConversation {
  readonly asked: CloudStepRequest[] = [];
  constructor(private readonly script: number[]) {}
  async next(request: CloudStepRequest): Promise<CloudStepReply> {
    this.asked.push(request);
    const tokens = this.script.splice(0, request.maxTokens);
    return {
      tokens,
      text: tokenizer.decode(tokens),
      logprobs: tokens.map(() => -0.5),
      topAlternatives: tokens.map(() => []),
      cachedTokens: 0,
      backendMs: 1,
      shimMs: 1,
    };
  }
  async close(): Promise<void> {}
}

const VALUES = () =>
  PrivateValues.of(
    [
      { text: 'Zenobia', kind: 'name' },
      { text: 'zen@x.org', kind: 'email' },
    ],
    '',
  );
const sources = (n: number): TokenSource[] => Array.from({ length: n }, () => 'prompt');
function step(context: number[], extra: Partial<CloudStepRequest> = {}): CloudStepRequest {
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
    ...extra,
  };
}
function conversationOver(script: number[], disclosure = new CloudDisclosure()) {
  const clouds: ScriptedCloud[] = [];
  const open = () => {
    const cloud = new ScriptedCloud(script);
    clouds.push(cloud);
    return cloud;
  };
  return { conversation: new PseudonymisedConversation(open, new Pseudonymiser(tokenizer, VALUES()), disclosure), clouds, disclosure };
}

describe('a pseudonymised conversation', () => {
  test('a placeholder written over several tokens is asked for token by token and comes back as the value, whole where there is room', async () => {
    const placeholder = encodeContinuation(tokenizer, '[NAME_1]');
    expect(placeholder.length).toBeGreaterThan(3);
    const context = tokenizer.encode('Zenobia said hello to', { addBos: true });
    const { conversation, clouds, disclosure } = conversationOver([...placeholder, ...encodeContinuation(tokenizer, ' and')]);
    const reply = await conversation.next(step(context, { maxTokens: 1, room: 20, hiddenState: new Float32Array(4) }));
    // The whole placeholder was read before anything came back, and the value goes whole.
    expect(clouds[0]!.asked.length).toBe(placeholder.length);
    expect(reply).toMatchObject({ pastSpan: true, tokens: encodeContinuation(tokenizer, 'Zenobia'), text: 'Zenobia' });
    for (const asked of clouds[0]!.asked) {
      expect(tokenizer.decode(asked.context)).not.toContain('Zenobia');
      expect(asked.hiddenState).toBeUndefined();
    }
    expect(tokenizer.decode(clouds[0]!.asked[0]!.context)).toBe('[NAME_1] said hello to');
    expect([...disclosure.placeholders]).toEqual(['[NAME_1]']);

    // Without room for all of it, the step's own bound holds.
    const cut = await conversationOver([...placeholder]).conversation.next(step(context, { maxTokens: 2, room: 2 }));
    expect(cut.tokens).toEqual(encodeContinuation(tokenizer, 'Zenobia').slice(0, 2));
    expect(cut.logprobs.every(Number.isNaN)).toBe(true);
  });

  test("after a restored value the cloud context goes on extending the shim's, in the cloud's own spelling: one conversation underneath", async () => {
    // Spelled the cloud's way: the N as its byte token, which the edge's tokenizer never writes for an N.
    const written = [...encodeContinuation(tokenizer, ' ['), tokenizer.tokenToId('<0x4E>')!, ...encodeContinuation(tokenizer, 'AME_1].')];
    expect(written).not.toEqual(encodeContinuation(tokenizer, ' [NAME_1].'));
    const { conversation, clouds } = conversationOver([...written, 301]);
    const context = tokenizer.encode('Zenobia said hello to', { addBos: true });
    const first = await conversation.next(step(context, { maxTokens: written.length, room: 20 }));
    expect(tokenizer.decode([...context, ...first.tokens])).toBe('Zenobia said hello to Zenobia.');
    const next = await conversation.next(step([...context, ...first.tokens, 300]));
    expect(next.tokens).toEqual([301]);
    expect(clouds.length).toBe(1);
    const asked = clouds[0]!.asked.at(-1)!.context;
    expect(asked.slice(-written.length - 1)).toEqual([...written, 300]);
  });

  test('a bracket that turns out to be no placeholder comes back as the cloud wrote it', async () => {
    const written = encodeContinuation(tokenizer, ' [cat]');
    const { conversation } = conversationOver([...written]);
    const context = tokenizer.encode('The', { addBos: true });
    const reply = await conversation.next(step(context, { maxTokens: 8 }));
    expect(reply.tokens).toEqual(written);
    expect(reply.logprobs).toEqual(written.map(() => -0.5));
  });

  test('a context ending inside a value is withheld without asking the cloud', async () => {
    const { conversation, clouds, disclosure } = conversationOver([300]);
    const reply = await conversation.next(step(tokenizer.encode('Zenobia met Zen', { addBos: true })));
    expect(reply).toMatchObject({ withheld: true, tokens: [] });
    expect(clouds.length).toBe(0);
    expect(disclosure.withheldSteps).toBe(1);
  });

  test('a conditional step waits for the step it assumes: sent as a plain step when the assumption held, skipped otherwise', async () => {
    const context = tokenizer.encode('The dog', { addBos: true });
    const { conversation, clouds } = conversationOver([301, 302, 303]);
    const first = conversation.next(step(context));
    const right = conversation.next(step([...context, 301, 350], { conditional: true }));
    expect((await first).tokens).toEqual([301]);
    expect(await right).toMatchObject({ tokens: [302] });
    expect(clouds[0]!.asked.map((r) => r.conditional)).toEqual([false, false]);
    const third = conversation.next(step([...context, 301, 350, 302]));
    const wrong = conversation.next(step([...context, 301, 350, 302, 351, 5], { conditional: true }));
    expect((await third).tokens).toEqual([303]);
    expect(await wrong).toMatchObject({ skipped: true });
  });

  test('a failed step fails (the loop falls back), a conditional step behind it comes back skipped, and the next step is served', async () => {
    const context = tokenizer.encode('The dog', { addBos: true });
    const { conversation, clouds } = conversationOver([301, 302]);
    const first = conversation.next(step(context, { maxTokens: 1 }));
    clouds[0]!.next = async () => {
      throw new Error('the cloud is down');
    };
    await expect(first).resolves.toMatchObject({ tokens: [301] });
    const failed = conversation.next(step([...context, 301]));
    const behind = conversation.next(step([...context, 301, 350, 351], { conditional: true }));
    await expect(failed).rejects.toThrow('the cloud is down');
    expect(await behind).toMatchObject({ skipped: true });
    clouds[0]!.next = ScriptedCloud.prototype.next;
    expect((await conversation.next(step([...context, 301, 350]))).tokens).toEqual([302]);
  });

  test('a cloud context that no longer extends what the shim holds opens a new conversation underneath', async () => {
    const { conversation, clouds } = conversationOver([400, 401]);
    await conversation.next(step(tokenizer.encode('The dog ran', { addBos: true })));
    await conversation.next(step(tokenizer.encode('A cat sat', { addBos: true })));
    expect(clouds.length).toBe(2);
  });
});

describe('through the decoding loop', () => {
  test('the cloud writes a placeholder; the user reads the value, the edge feeds it, and the cloud never sees it', async () => {
    const edge = await DecoderModel.load(loadModelPack(edgePack));
    try {
      const asked: number[][] = [];
      const placeholder = encodeContinuation(tokenizer, ' [NAME_1]');
      const script = [...placeholder, ...encodeContinuation(tokenizer, ' went home')];
      const cloud: CloudClient = {
        openConversation: () => {
          const scripted = new ScriptedCloud(script);
          return { next: (r) => (asked.push([...r.context]), scripted.next(r)), close: () => scripted.close() };
        },
        state: () => 'ready',
        close: async () => {},
      };
      const engine = { edgeModel: edge, router: new TopProbabilityScorer(), tokenizer, cloud };
      const prompt = 'Once there was a girl named Zenobia. One day,';
      const request: LoopRequest = parseGenerationRequest({
        prompt,
        mode: 'llm_only',
        maxNewTokens: 12,
        privateSpans: [[prompt.indexOf('Zenobia'), prompt.indexOf('Zenobia') + 7, 'name']],
      });
      request.privateValues = PrivateValues.of(request.privateTexts!, prompt);
      const tokens: TokenEvent[] = [];
      let done: DoneEvent | undefined;
      for await (const e of generate(engine, request))
        if (e.type === 'token') tokens.push(e);
        else done = e;
      expect(done!.text).toStartWith(' Zenobia went');
      // The cloud's space, then the value in its placeholder's place: all cloud tokens, in the edge's cache too.
      expect(tokens.slice(0, 3).map((t) => t.source)).toEqual(['llm', 'llm', 'llm']);
      expect(done!.cloudText).toContain('[NAME_1]');
      for (const context of asked) expect(tokenizer.decode(context)).not.toContain('Zenobia');
    } finally {
      await edge.release();
    }
  });
});
