/** Well-known locations, relative to the project's root folder. */
import { join, resolve } from 'node:path';

export const PROJECT_ROOT = resolve(import.meta.dir, '..', '..');
/** Where `bun run models demo` puts the demo packs (git-ignored). */
export const MODELS_DIR = join(PROJECT_ROOT, 'models');
/** The shared, read-only assets (checkpoint, data sets) that sit beside the project. */
export const ASSETS_DIR = resolve(PROJECT_ROOT, '..', 'shared', 'assets');

export const DEMO = {
  checkpoint: join(ASSETS_DIR, 'models', 'stories260K', 'stories260K.bin'),
  tokenizer: join(ASSETS_DIR, 'models', 'stories260K', 'tok512.bin'),
  tinyStories: join(ASSETS_DIR, 'datasets', 'tinystories', 'tinystories_excerpt_197k.txt'),
  cloudPack: join(MODELS_DIR, 'stories260k'),
  edgePack: join(MODELS_DIR, 'stories260k-3l'),
  routerPack: join(MODELS_DIR, 'router-stories260k-3l'),
  edgeLayers: 3,
} as const;
