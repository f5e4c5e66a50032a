/**
 * Request bodies read strictly. Hono's `parseBody` and `json` (like URLSearchParams and TextDecoder in
 * their default mode) turn bytes that are not UTF-8 into U+FFFD without a word, so a garbled prompt would
 * be generated from instead of refused. Here such a body is an INVALID_ARGUMENT that says so. The body
 * size limit has already been applied by the middleware when these run.
 *
 * @example
 * app.post('/runs', async (c) => start(await readForm(c)));
 * app.post('/v1/completions', async (c) => start(await readJsonObject(c)));
 * app.post('/api/generate', async (c) => start(await readJsonOrForm(c)));
 */
import { isUtf8 } from 'node:buffer';
import type { Context } from 'hono';
import { AppError } from '../../shared/errors.ts';

function invalid(message: string): never {
  throw new AppError('INVALID_ARGUMENT', message);
}

async function utf8Body(c: Context, what: string): Promise<string> {
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  if (!isUtf8(bytes)) invalid(`${what} is not valid UTF-8`);
  return new TextDecoder().decode(bytes);
}

function formPart(encoded: string): string {
  try {
    // decodeURIComponent, unlike URLSearchParams, refuses escapes that do not spell UTF-8 (%FF).
    return decodeURIComponent(encoded.replaceAll('+', ' '));
  } catch {
    return invalid('the form is not valid UTF-8 (a percent-escape does not decode)');
  }
}

const FORM_TYPE = /^application\/x-www-form-urlencoded\b/i;
/** application/json, and the structured-syntax types built on it (application/merge-patch+json, ...). */
const JSON_TYPE = /^application\/([\w.-]+\+)?json\b/i;

const contentType = (c: Context) => c.req.header('content-type') ?? '';

/**
 * An `application/x-www-form-urlencoded` body (what the page's forms send); a field given more than
 * once becomes an array, as with Hono's `parseBody({ all: true })`.
 */
export async function readForm(c: Context): Promise<Record<string, string | string[]>> {
  const type = contentType(c);
  if (!FORM_TYPE.test(type)) invalid(`a form must be sent as application/x-www-form-urlencoded, got ${type || 'no content type'}`);
  return formFields(await utf8Body(c, 'the form'));
}

function formFields(text: string): Record<string, string | string[]> {
  // No prototype: a field named `__proto__` or `constructor` is a field like any other (and refused as unknown).
  const fields: Record<string, string | string[]> = Object.create(null);
  for (const pair of text.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = formPart(eq < 0 ? pair : pair.slice(0, eq));
    const value = formPart(eq < 0 ? '' : pair.slice(eq + 1));
    const previous = fields[name];
    fields[name] = previous === undefined ? value : [...(Array.isArray(previous) ? previous : [previous]), value];
  }
  return fields;
}

/**
 * A body that is JSON when its content type says JSON and a form when it says form (`typed` and `form`
 * encodings of generation-request-fields.ts). Anything else is refused: a JSON body must say so, which
 * also keeps a cross-site `text/plain` post from passing as one. A form whose text is JSON is what
 * `curl -d '{...}'` sends without its `-H`; it is refused with the header to add.
 */
export async function readJsonOrForm(c: Context): Promise<{ body: Record<string, unknown>; encoding: 'typed' | 'form' }> {
  const type = contentType(c);
  if (JSON_TYPE.test(type)) return { body: await readJsonObject(c), encoding: 'typed' };
  if (!FORM_TYPE.test(type)) invalid(`send the request as JSON with Content-Type: application/json (or as a form), got ${type || 'no content type'}`);
  const text = await utf8Body(c, 'the form');
  if (/^\s*[[{]/.test(text)) {
    invalid('the body is JSON but its Content-Type is application/x-www-form-urlencoded (what curl -d sends): send it with Content-Type: application/json');
  }
  return { body: formFields(text), encoding: 'form' };
}

/** A JSON object body (the API's); anything else is an INVALID_ARGUMENT. */
export async function readJsonObject(c: Context): Promise<Record<string, unknown>> {
  const text = await utf8Body(c, 'the request body');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    invalid('request body must be a JSON object');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) invalid('request body must be a JSON object');
  return body as Record<string, unknown>;
}
