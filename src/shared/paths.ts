/** Well-known locations, relative to the project's root folder. */
import { join, resolve } from 'node:path';

export const PROJECT_ROOT = resolve(import.meta.dir, '..', '..');
/** Where `bun run models demo` puts the demo packs (git-ignored). */
export const MODELS_DIR = join(PROJECT_ROOT, 'models');
/** The shared, read-only assets (checkpoint, data sets) that sit beside the project. */
export const ASSETS_DIR = resolve(PROJECT_ROOT, '..', 'shared', 'assets');

const STORIES_DIR = join(ASSETS_DIR, 'models', 'stories260K');
const STORIES_CHAT_DIR = join(ASSETS_DIR, 'models', 'stories260K-chat');

/**
 * The story pair, what the tests, the benchmarks and the tools use by default (`bun run start --pair stories`):
 * the 1-layer student distilled from stories260K on the edge (fluent on its own) and the whole 5-layer model
 * in the cloud. Plain text only: the packs have no chat template.
 * `checkpoint` is the cloud model's; `edgeLayers` is null because the edge checkpoint is used whole.
 */
export const DEMO = {
  checkpoint: join(STORIES_DIR, 'stories260K.bin'),
  edgeCheckpoint: join(STORIES_DIR, 'stories260K-distilled-1l.bin'),
  edgeLayers: null,
  tokenizer: join(STORIES_DIR, 'tok512.bin'),
  tinyStories: join(ASSETS_DIR, 'datasets', 'tinystories', 'tinystories_excerpt_197k.txt'),
  /** The router's training text: the TinyStories excerpt (its first `routerTrainFraction`). */
  routerText: join(ASSETS_DIR, 'datasets', 'tinystories', 'tinystories_excerpt_197k.txt'),
  routerTrainFraction: 0.8,
  /** A Jinja file written into both packs as chat_template.jinja; null: the packs have none. */
  chatTemplate: null,
  cloudPack: join(MODELS_DIR, 'stories260k'),
  edgePack: join(MODELS_DIR, 'stories260k-distilled-1l'),
  routerPack: join(MODELS_DIR, 'router-stories260k-distilled-1l'),
  /**
   * The router's default τ: chosen so that the page's first run (greedy, "Once upon a time", 64 tokens)
   * shows the cloud at work, where 0.7 leaves it nearly idle, and reads better than the edge alone; 0.9
   * loops more than the edge alone. What it routes and gains on held-out TinyStories paragraphs:
   * docs/results.md, "The demo pair", "Routing quality on held-out TinyStories paragraphs".
   */
  routerThreshold: 0.8,
} as const;

/**
 * The earlier demo pair, kept for a bigger quality gap: the first 3 layers of stories260K with no training
 * on the edge, the same cloud pack (docs/results.md, "The truncated pair"). `bun run models demo` builds it too.
 */
export const TRUNCATED_DEMO = {
  ...DEMO,
  edgeCheckpoint: DEMO.checkpoint,
  edgeLayers: 3,
  edgePack: join(MODELS_DIR, 'stories260k-3l'),
  routerPack: join(MODELS_DIR, 'router-stories260k-3l'),
  routerThreshold: 0.5,
} as const;

/**
 * The chat pair, what `bun run start` serves: the same two models fine-tuned to answer story requests in
 * a plain-text chat format (`User: …` / `Assistant: …</s>`; ../shared/assets/models/stories260K-chat/README.md
 * says how), both packs with its chat_template.jinja, and a router trained on its conversations (records
 * at the assistant's tokens, rollouts from the user turns). `chatDir` holds the conversations, training
 * (chats-train.jsonl) and held back (chats-heldback.jsonl, which no training conversation shares a story with).
 */
export const CHAT_DEMO = {
  ...DEMO,
  checkpoint: join(STORIES_CHAT_DIR, 'stories260K-chat.bin'),
  edgeCheckpoint: join(STORIES_CHAT_DIR, 'stories260K-chat-distilled-1l.bin'),
  chatDir: STORIES_CHAT_DIR,
  chatTemplate: join(STORIES_CHAT_DIR, 'chat_template.jinja'),
  heldBack: join(STORIES_CHAT_DIR, 'chats-heldback.jsonl'),
  /**
   * The first tenth of the 3,073 training conversations: about as many records as the story pair's router
   * learns from, so that the first start takes about as long (the rest of the file is left unused).
   */
  routerText: join(STORIES_CHAT_DIR, 'chats-train.jsonl'),
  routerTrainFraction: 0.1,
  cloudPack: join(MODELS_DIR, 'stories260k-chat'),
  edgePack: join(MODELS_DIR, 'stories260k-chat-distilled-1l'),
  routerPack: join(MODELS_DIR, 'router-stories260k-chat-distilled-1l'),
  /**
   * The story pair's τ, kept (the router is trained with the same labels, whose scores estimate P(keep)):
   * docs/results.md has what it routes on the held-back conversations, under teacher forcing and replying.
   */
  routerThreshold: 0.8,
} as const;
