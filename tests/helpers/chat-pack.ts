/**
 * A chat-capable copy of the demo edge pack: the same model and tokenizer in a temporary folder, with a
 * small `chat_template` added to its tokenizer_config.json (the demo packs have none).
 *
 * @example
 * const pack = await makeChatPack();
 * try { ... pack.dir ... } finally { pack.remove(); }
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureDemoPacks } from './demo-packs.ts';

/** Role-prefixed turns after the BOS token, ending with the assistant's header. */
export const TEST_CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{{ message.role + ': ' + message.content + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}";

export async function makeChatPack(template = TEST_CHAT_TEMPLATE): Promise<{ dir: string; remove(): void }> {
  const demo = await ensureDemoPacks();
  const root = mkdtempSync(join(tmpdir(), 'chat-pack-'));
  const dir = join(root, 'stories260k-3l-chat');
  // dereference: a pack folder that is a symlink is copied, not linked (writing through it would change the pack).
  cpSync(demo.edgePack, dir, { recursive: true, dereference: true });
  const configPath = join(dir, 'tokenizer_config.json');
  const config = JSON.parse(readFileSync(configPath, 'utf8')) as Record<string, unknown>;
  writeFileSync(configPath, JSON.stringify({ ...config, chat_template: template }, null, 2));
  return { dir, remove: () => rmSync(root, { recursive: true, force: true }) };
}
