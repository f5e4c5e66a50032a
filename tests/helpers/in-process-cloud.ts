/** The in-process cloud (the real cloud pack, no network) lives with the evaluation tool that uses it too. */
export { InProcessCloud } from '../../src/tools/eval/in-process-cloud.ts';
