/**
 * The built-in kinds of private entity and the detector of each.
 *
 * @example
 * BUILT_IN_DETECTORS.email('alice@example.com'); // [{ start: 0, end: 17 }]
 */
import type { TextSpan } from '../linear-pattern.ts';
import { findCards } from './card.ts';
import { findEmails } from './email.ts';
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
