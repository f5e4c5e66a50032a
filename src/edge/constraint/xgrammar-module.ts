/**
 * xgrammar's WebAssembly build (`@mlc-ai/web-xgrammar`), loaded once, and its failures as typed errors.
 * The module carries its WebAssembly inline (a base64 data URI), so loading it reads nothing from the
 * network or the disk beyond the package. When xgrammar refuses a schema or a grammar, its C++ code logs
 * the reason (`[FATAL] ... properties must be an object`) and aborts the call with a bare
 * `RuntimeError: Aborted()`; the module stays usable. The reason is caught from the module's error printer,
 * which it binds once, at its first call: `loadXGrammar` installs a printer that either passes lines on
 * or, inside `refusalOf`, keeps them for the error message.
 *
 * @example
 * const xg = await loadXGrammar();
 * const compiled = await refusalOf('json_schema', () => compiler.compileJSONSchema(text, false));
 */
import { AppError, errorMessage } from '../../shared/errors.ts';

type XGrammar = typeof import('@mlc-ai/web-xgrammar');

let loading: Promise<XGrammar> | undefined;
/** Lines the module printed while a call runs inside `refusalOf`; undefined outside one (they go to stderr). */
let captured: string[] | undefined;

/** The module, its runtime started with the capturing printer. */
export function loadXGrammar(): Promise<XGrammar> {
  loading ??= (async () => {
    const xg = await import('@mlc-ai/web-xgrammar');
    const original = console.error;
    // Outside a compile, its warnings (a cloud alternative that is a special token, refused) are dropped: the
    // matcher's answer says all the caller needs, and a routed step must not write to the edge's log.
    const printer = (...args: unknown[]) => {
      const line = args.map(String).join(' ');
      if (captured) captured.push(line);
      else if (!line.includes('[WARNING]')) original(...args);
    };
    // The module binds console.error as it starts (its first call); the global is put back right after.
    console.error = printer;
    try {
      await xg.Testings.isGrammarAcceptString(await xg.Grammar.fromEBNF('root ::= "a"'), 'a');
    } finally {
      console.error = original;
    }
    return xg;
  })();
  return loading;
}

/** xgrammar's own words for why it refused: the FATAL line without its source path, or the error's message. */
function reasonOf(lines: string[], error: unknown): string {
  const fatal = lines.find((l) => l.includes('[FATAL]'));
  if (fatal) return fatal.replace(/^.*\[FATAL\]\s*\S+:\d+:\s*/, '').trim();
  return errorMessage(error).replace(/\. Build with -sASSERTIONS.*$/, '');
}

/**
 * Runs one xgrammar call that reads caller input; a refusal becomes INVALID_ARGUMENT naming `what` and
 * xgrammar's reason. Calls run one at a time on the event loop, so the lines caught are this call's.
 */
export async function refusalOf<T>(what: string, call: () => Promise<T>): Promise<T> {
  const lines: string[] = [];
  captured = lines;
  try {
    return await call();
  } catch (e) {
    throw new AppError('INVALID_ARGUMENT', `${what} was refused by the grammar compiler: ${reasonOf(lines, e)}`, { cause: e });
  } finally {
    captured = undefined;
  }
}
