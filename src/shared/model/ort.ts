/**
 * The single place that loads onnxruntime-node. onnxruntime writes telemetry on Linux (a device id and an
 * event database under `$XDG_CACHE_HOME` or `~/.cache/Microsoft/DeveloperTools/.onnxruntime/`) unless
 * ORT_DISABLE_TELEMETRY is set in the process environment before the native library starts, and an edge
 * product that promises privacy cannot leave that to its users; hence the dynamic import after setting it.
 * (This is the one deliberate write to the environment in the code base; tests/telemetry.test.ts checks
 * that nothing else imports onnxruntime-node and that no telemetry file appears.)
 */

const TELEMETRY_VARIABLE = 'ORT_DISABLE_TELEMETRY';

/**
 * Sets `name` in the C environment, where native code reads it with getenv(). Under Node an assignment to
 * `process.env` does that; under Bun it only changes the JavaScript copy (the control run in
 * tests/telemetry.test.ts shows onnxruntime writing telemetry then), so on Bun the variable goes through
 * libc's setenv() as well, and is read back to be sure.
 */
async function setNativeEnv(name: string, value: string): Promise<void> {
  // Node: calls setenv(). Bun: at least children spawned with process.env inherit it.
  process.env[name] = value;
  if (typeof Bun === 'undefined' || (process.platform !== 'linux' && process.platform !== 'darwin')) return;
  const { dlopen, FFIType } = await import('bun:ffi');
  const cString = (s: string) => new TextEncoder().encode(`${s}\0`);
  const libc = dlopen(process.platform === 'darwin' ? 'libSystem.B.dylib' : 'libc.so.6', {
    setenv: { args: [FFIType.cstring, FFIType.cstring, FFIType.i32], returns: FFIType.i32 },
    getenv: { args: [FFIType.cstring], returns: FFIType.cstring },
  });
  try {
    const rc = libc.symbols.setenv(cString(name), cString(value), 1);
    const seen = String(libc.symbols.getenv(cString(name)));
    // Refuse to load onnxruntime at all rather than run with its telemetry on.
    if (rc !== 0 || seen !== value)
      throw new Error(`could not set ${name}=${value} for onnxruntime (setenv returned ${rc}); start the process with ${name}=${value}`);
  } finally {
    libc.close();
  }
}

await setNativeEnv(TELEMETRY_VARIABLE, '1');

const ortModule = await import('onnxruntime-node');
export const ort = ortModule.default ?? ortModule;
export type OrtTensor = import('onnxruntime-node').Tensor;
export type InferenceSession = import('onnxruntime-node').InferenceSession;
export type SessionOptions = import('onnxruntime-node').InferenceSession.SessionOptions;
export type ValueMetadata = import('onnxruntime-node').InferenceSession.ValueMetadata;
