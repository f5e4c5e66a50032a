/**
 * Subsets and concatenations of teacher-forced records: the validation split (by paragraph) and the
 * aggregation of on-policy rounds.
 *
 * @example
 * const validation = selectParagraphs(forced, (p) => p % 10 === 0);
 * const all = concatForced([forced, rollouts]);
 */
import type { TeacherForced } from './forced-records.ts';
import { ALL_EXTRA_WIDTH } from './feature-matrix.ts';

/** The given records (row indices), in that order. */
export function selectRows(forced: TeacherForced, rows: readonly number[]): TeacherForced {
  const h = forced.hiddenSize;
  const hidden = new Float32Array(rows.length * h);
  const previousHidden = new Float32Array(rows.length * h);
  const extra = new Float32Array(rows.length * ALL_EXTRA_WIDTH);
  rows.forEach((r, i) => {
    hidden.set(forced.hidden.subarray(r * h, (r + 1) * h), i * h);
    previousHidden.set(forced.previousHidden.subarray(r * h, (r + 1) * h), i * h);
    extra.set(forced.extra.subarray(r * ALL_EXTRA_WIDTH, (r + 1) * ALL_EXTRA_WIDTH), i * ALL_EXTRA_WIDTH);
  });
  return {
    hiddenSize: h,
    count: rows.length,
    hidden,
    previousHidden,
    extra,
    edgeCorrect: Uint8Array.from(rows, (r) => forced.edgeCorrect[r]!),
    cloudCorrect: Uint8Array.from(rows, (r) => forced.cloudCorrect[r]!),
    cloudProbOfEdgeTop1: Float32Array.from(rows, (r) => forced.cloudProbOfEdgeTop1[r]!),
    cloudTopProb: Float32Array.from(rows, (r) => forced.cloudTopProb[r]!),
    proposed: Int32Array.from(rows, (r) => forced.proposed[r]!),
    cloudTop: Int32Array.from(rows, (r) => forced.cloudTop[r]!),
    repeatsFourGram: Uint8Array.from(rows, (r) => forced.repeatsFourGram[r]!),
    cloudRepeatsFourGram: Uint8Array.from(rows, (r) => forced.cloudRepeatsFourGram[r]!),
    nextId: Int32Array.from(rows, (r) => forced.nextId[r]!),
    paragraph: Int32Array.from(rows, (r) => forced.paragraph[r]!),
    windowed: forced.windowed,
  };
}

/** The records whose paragraph satisfies `keep`, in their original order. */
export function selectParagraphs(forced: TeacherForced, keep: (paragraph: number) => boolean): TeacherForced {
  const rows: number[] = [];
  for (let i = 0; i < forced.count; i++) if (keep(forced.paragraph[i]!)) rows.push(i);
  return selectRows(forced, rows);
}

/** All records of `parts`, one after the other (their paragraph indices kept as they are). */
export function concatForced(parts: readonly TeacherForced[]): TeacherForced {
  const all: number[][] = parts.map((p) => Array.from({ length: p.count }, (_, i) => i));
  const picked = parts.map((p, k) => selectRows(p, all[k]!));
  const count = picked.reduce((s, p) => s + p.count, 0);
  const h = parts[0]!.hiddenSize;
  const out: TeacherForced = {
    hiddenSize: h,
    count,
    hidden: new Float32Array(count * h),
    previousHidden: new Float32Array(count * h),
    extra: new Float32Array(count * ALL_EXTRA_WIDTH),
    edgeCorrect: new Uint8Array(count),
    cloudCorrect: new Uint8Array(count),
    cloudProbOfEdgeTop1: new Float32Array(count),
    cloudTopProb: new Float32Array(count),
    proposed: new Int32Array(count),
    cloudTop: new Int32Array(count),
    repeatsFourGram: new Uint8Array(count),
    cloudRepeatsFourGram: new Uint8Array(count),
    nextId: new Int32Array(count),
    paragraph: new Int32Array(count),
    windowed: parts.reduce((s, p) => s + p.windowed, 0),
  };
  let at = 0;
  for (const p of picked) {
    out.hidden.set(p.hidden, at * h);
    out.previousHidden.set(p.previousHidden, at * h);
    out.extra.set(p.extra, at * ALL_EXTRA_WIDTH);
    out.edgeCorrect.set(p.edgeCorrect, at);
    out.cloudCorrect.set(p.cloudCorrect, at);
    out.cloudProbOfEdgeTop1.set(p.cloudProbOfEdgeTop1, at);
    out.cloudTopProb.set(p.cloudTopProb, at);
    out.proposed.set(p.proposed, at);
    out.cloudTop.set(p.cloudTop, at);
    out.repeatsFourGram.set(p.repeatsFourGram, at);
    out.cloudRepeatsFourGram.set(p.cloudRepeatsFourGram, at);
    out.nextId.set(p.nextId, at);
    out.paragraph.set(p.paragraph, at);
    at += p.count;
  }
  return out;
}
