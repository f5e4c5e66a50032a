/** Narrows parsed JSON to an object with string keys (not null, not an array) before its fields are read. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
