/**
 * `bun run eval --dump FILE.jsonl`: one JSON line per teacher-forced position, for looking at where the
 * router is right and wrong. The file appears whole or not at all.
 *
 * @example
 * await writeDump('positions.jsonl', dumpRows(forced, scores));
 * // {"paragraph":0,"next_id":403,"router_score":0.41,"top1":0.38,"entropy":2.1,"slm_correct":0,"llm_correct":1,"route_label":0}
 */
import { writeFileSync } from 'node:fs';
import { writeFileAtomically } from '../models/atomic-output.ts';
import { ALL_EXTRA_WIDTH } from '../lab/feature-matrix.ts';
import { divergenceLabel } from '../router/labels.ts';
import type { TeacherForced } from '../lab/forced-records.ts';

export interface DumpRow {
  paragraph: number;
  next_id: number;
  router_score: number;
  top1: number;
  entropy: number;
  slm_correct: number;
  llm_correct: number;
  /** The divergence label (0 = the cloud would rather say something else). */
  route_label: number;
}

export function dumpRows(forced: TeacherForced, scores: ArrayLike<number>): DumpRow[] {
  return Array.from({ length: forced.count }, (_, i) => ({
    paragraph: forced.paragraph[i]!,
    next_id: forced.nextId[i]!,
    router_score: scores[i]!,
    top1: forced.extra[i * ALL_EXTRA_WIDTH + 1]!,
    entropy: forced.extra[i * ALL_EXTRA_WIDTH]!,
    slm_correct: forced.edgeCorrect[i]!,
    llm_correct: forced.cloudCorrect[i]!,
    route_label: divergenceLabel(forced.cloudProbOfEdgeTop1[i]!, forced.cloudTopProb[i]!),
  }));
}

export async function writeDump(path: string, rows: readonly DumpRow[], force = false): Promise<void> {
  await writeFileAtomically(path, { tool: 'eval --dump', force }, (temp) => {
    writeFileSync(temp, rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
    return [];
  });
}
