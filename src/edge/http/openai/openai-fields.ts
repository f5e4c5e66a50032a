/**
 * Strict reading of an OpenAI request body: every key must be one the endpoint supports (anything else
 * is refused by name, so a client never believes a parameter took effect when it did not), `null` means
 * "not given" as in OpenAI's API, and each value is checked for type and range with a message that
 * names the field.
 *
 * @example
 * const fields = new OpenAIFields(body, ['model', 'temperature']);
 * fields.number('temperature', 0, 2); // undefined when absent or null
 */
import { OpenAIParamError } from './openai-errors.ts';

/** A raw value for a message: JSON, which shows strings quoted and types as they are. */
export function show(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

export class OpenAIFields {
  constructor(
    private readonly body: Record<string, unknown>,
    allowed: readonly string[],
    /** Keys accepted only at the value that means "off" (what a client that sends every default sends). */
    neutral: Readonly<Record<string, readonly unknown[]>> = {},
  ) {
    for (const [key, value] of Object.entries(body)) {
      if (allowed.includes(key) || value === null) continue;
      // Own keys only: `neutral.constructor` would find Object's, and a body key named so became a 500.
      const accepted = Object.hasOwn(neutral, key) ? neutral[key] : undefined;
      if (accepted?.includes(value)) continue;
      const only = accepted ? ` (only ${accepted.map(show).join(' or ')}, its default)` : '';
      throw new OpenAIParamError(key, `unsupported parameter: ${key}${only} is not supported by this edge`);
    }
  }

  /** The value, with `null` as absent. */
  get(key: string): unknown {
    const value = Object.hasOwn(this.body, key) ? this.body[key] : undefined;
    return value === null ? undefined : value;
  }

  string(key: string): string | undefined {
    const value = this.get(key);
    if (value !== undefined && typeof value !== 'string') throw new OpenAIParamError(key, `${key} must be a string, got ${show(value)}`);
    return value;
  }

  boolean(key: string): boolean | undefined {
    const value = this.get(key);
    if (value !== undefined && typeof value !== 'boolean') throw new OpenAIParamError(key, `${key} must be a boolean, got ${show(value)}`);
    return value;
  }

  /** A number in [min, max] (or (min, max] with `minOpen`). */
  number(key: string, min: number, max: number, minOpen = false): number | undefined {
    const value = this.get(key);
    if (value === undefined) return undefined;
    if (typeof value !== 'number' || !Number.isFinite(value)) throw new OpenAIParamError(key, `${key} must be a number, got ${show(value)}`);
    if (value > max || value < min || (minOpen && value === min)) {
      throw new OpenAIParamError(key, `${key} must be in ${minOpen ? '(' : '['}${min}, ${max}], got ${value}`);
    }
    return value;
  }

  integer(key: string, min: number, max: number): number | undefined {
    const value = this.get(key);
    if (value === undefined) return undefined;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      throw new OpenAIParamError(key, `${key} must be an integer in [${min}, ${max}], got ${show(value)}`);
    }
    return value;
  }

  oneOf<T extends string>(key: string, values: readonly T[]): T | undefined {
    const value = this.get(key);
    if (value !== undefined && !(values as readonly unknown[]).includes(value)) {
      throw new OpenAIParamError(key, `${key} must be one of ${values.join(', ')}, got ${show(value)}`);
    }
    return value as T | undefined;
  }
}
