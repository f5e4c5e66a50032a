/**
 * The about box's view of the router the edge serves: its name, its default τ and, for a trained pack,
 * the held-out report `router train` stored in router.json (`training.held_out_report`). A pack written
 * before the report existed, or a report of another shape, shows none rather than failing the page.
 *
 * @example
 * routerAbout(runtime.engine.router.info); // { name: 'onnx:router-…', defaultThreshold: 0.8, report: { beatsTop1: true, … } }
 */
import type { RouterInfo } from '../routing/router.ts';
import type { ViewFreeRun, ViewHeldOutReport, ViewRouterAbout } from '../../../views/view-model.ts';

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
/** JSON writes NaN as null: a figure that could not be measured. */
const num = (v: unknown): number => (typeof v === 'number' ? v : NaN);

function freeRun(v: unknown): ViewFreeRun {
  const r = isObject(v) ? v : {};
  return { routedShare: num(r.routed_share), pplCloud: num(r.ppl_cloud), rep4: num(r.rep4) };
}

function heldOutReport(v: unknown): ViewHeldOutReport | undefined {
  if (!isObject(v) || typeof v.verdict !== 'string' || typeof v.beats_top1 !== 'boolean' || !Array.isArray(v.teacher_forced) || !isObject(v.free_running))
    return undefined;
  const free = v.free_running;
  const loopRows = (Array.isArray(free.greedy_loop_check) ? free.greedy_loop_check : []).filter(isObject);
  return {
    noun: typeof v.noun === 'string' ? v.noun : 'document',
    documents: num(v.documents),
    positions: num(v.positions),
    teacherForced: v.teacher_forced
      .filter(isObject)
      .map((row) => ({ share: num(row.share), router: num(row.router), top1: num(row.top1), entropy: num(row.entropy), random: num(row.random) })),
    freeRunning: {
      prompts: num(free.prompts),
      maxNewTokens: num(free.max_new_tokens),
      // A report written before sampling has no temperature: it was greedy.
      temperature: typeof free.temperature === 'number' ? free.temperature : 0,
      greedyLoopCheck: loopRows.map((row) => ({ share: num(row.share), router: freeRun(row.router), random: freeRun(row.random) })),
      greedyLoopPrompts: loopRows[0] && isObject(loopRows[0].router) && typeof loopRows[0].router.outputs === 'number' ? loopRows[0].router.outputs : 0,
      atShare: (Array.isArray(free.at_share) ? free.at_share : []).filter(isObject).map((row) => ({
        share: num(row.share),
        router: freeRun(row.router),
        top1: freeRun(row.top1),
        entropy: freeRun(row.entropy),
        random: freeRun(row.random),
      })),
    },
    beatsTop1: v.beats_top1,
    verdict: v.verdict,
  };
}

export function routerAbout(info: RouterInfo): ViewRouterAbout {
  const report = heldOutReport(info.training?.held_out_report);
  return { name: info.name, defaultThreshold: info.defaultThreshold, ...(report ? { report } : {}) };
}
