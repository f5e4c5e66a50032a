/**
 * Builds the demo pairs once (a no-op when up to date) so tests can use the real stories260K packs: DEMO
 * (the distilled 1-layer edge model), TRUNCATED_DEMO (the untrained 3-layer one) and CHAT_DEMO (the
 * chat-tuned pair `bun run start` serves) from src/shared/paths.ts.
 */
import { buildAllDemoPacks } from '../../src/tools/models/demo.ts';
import { DEMO } from '../../src/shared/paths.ts';

let ready: Promise<unknown> | undefined;

export async function ensureDemoPacks(): Promise<typeof DEMO> {
  ready ??= buildAllDemoPacks();
  await ready;
  return DEMO;
}

/** The first `count` paragraphs of the TinyStories excerpt (split on blank lines, trimmed). */
export async function tinyStoriesParagraphs(count?: number): Promise<string[]> {
  const text = await Bun.file(DEMO.tinyStories).text();
  const paragraphs = text
    .split(/\n\s*\n/)
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
  return count === undefined ? paragraphs : paragraphs.slice(0, count);
}
