/**
 * Runs once before the test files: builds the demo packs (models/stories260k, models/stories260k-3l and the
 * trained router) if they are missing or stale, so no single test's time limit has to cover that.
 */
import { buildDemoPacks } from '../src/tools/models/demo.ts';

await buildDemoPacks(undefined, (line) => console.error(`[preload] ${line}`));
