/**
 * The built-in kinds of private entity and the detector of each. Each detector reads ASCII-folded text
 * (detection-text.ts); findBuiltIn folds and maps the spans back to the text as typed.
 *
 * @example
 * BUILT_IN_DETECTORS.email('alice@example.com'); // [{ start: 0, end: 17 }]
 * findBuiltIn('phone', foldForDetection('tel +٤٤ ٢٠ ٧٩٤٦ ٠٩٥٨')); // [{ start: 4, end: 20 }]
 */
import type { TextSpan } from '../linear-pattern.ts';
import { findCards } from './card.ts';
import { findEmails } from './email.ts';
import type { DetectionText } from './detection-text.ts';
import { findIbans } from './iban.ts';
import { findIps } from './ip.ts';
import { findPhones } from './phone.ts';

export const BUILT_IN_KINDS = ['email', 'phone', 'card', 'iban', 'ip'] as const;
export type BuiltInKind = (typeof BUILT_IN_KINDS)[number];

export const BUILT_IN_DETECTORS: Readonly<Record<BuiltInKind, (text: string) => TextSpan[]>> = {
  email: findEmails,
  phone: findPhones,
  card: findCards,
  iban: findIbans,
  ip: findIps,
};

/** The entities of one kind in a folded text, as spans of the text as typed. */
export function findBuiltIn(kind: BuiltInKind, folded: DetectionText): TextSpan[] {
  return BUILT_IN_DETECTORS[kind](folded.text).map((span) => folded.originalSpan(span));
}
