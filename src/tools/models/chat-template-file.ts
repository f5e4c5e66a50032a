/**
 * transformers saves a chat template as `chat_template.jinja` beside tokenizer_config.json, and when it
 * loads a tokenizer it takes that file ahead of tokenizer_config.json's own `chat_template` field. The
 * project's tokenizer reads the field only (TextTokenizer.fromPack), so a pack made from such a download
 * gets the file's text written into the field, and the edge's chat endpoint finds the template.
 *
 * @example
 * if (embedChatTemplate('models/qwen')) console.log('chat_template.jinja written into tokenizer_config.json');
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readJsonFile } from '../../shared/model-pack.ts';

export const CHAT_TEMPLATE_FILE = 'chat_template.jinja';

/** Writes the pack's chat_template.jinja into its tokenizer_config.json; true when the field changed. */
export function embedChatTemplate(packDir: string): boolean {
  const file = join(packDir, CHAT_TEMPLATE_FILE);
  if (!existsSync(file)) return false;
  const configPath = join(packDir, 'tokenizer_config.json');
  const config = readJsonFile(configPath) as Record<string, unknown>;
  const template = readFileSync(file, 'utf8');
  if (config.chat_template === template) return false;
  writeFileSync(configPath, `${JSON.stringify({ ...config, chat_template: template }, null, 2)}\n`);
  return true;
}
