/** Builds the demo packs once (a no-op when up to date) so tests can use the real stories260K pair. */
import { buildDemoPacks } from '../../src/tools/models/demo.ts';
import { DEMO } from '../../src/shared/paths.ts';

let ready: Promise<unknown> | undefined;

export async function ensureDemoPacks(): Promise<typeof DEMO> {
  ready ??= buildDemoPacks();
  await ready;
  return DEMO;
}

/** The first `count` paragraphs of the TinyStories excerpt (split on blank lines, trimmed). */
export async function tinyStoriesParagraphs(count?: number): Promise<string[]> {
  const text = await Bun.file(DEMO.tinyStories).text();
  const paragraphs = text.split(/\n\s*\n/).map((p) => p.trim()).filter((p) => p.length > 0);
  return count === undefined ? paragraphs : paragraphs.slice(0, count);
}
