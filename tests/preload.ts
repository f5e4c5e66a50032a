/**
 * Runs once before the test files: builds both demo pairs (models/stories260k, the distilled 1-layer edge
 * pack and the truncated 3-layer one, and their routers) if they are missing or stale, so no single
 * test's time limit has to cover that.
 */
import { buildAllDemoPacks } from '../src/tools/models/demo.ts';

await buildAllDemoPacks((line) => console.error(`[preload] ${line}`));
