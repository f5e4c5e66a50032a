/**
 * The single place that loads onnxruntime-node. onnxruntime writes telemetry files on Linux unless
 * ORT_DISABLE_TELEMETRY is set before the native library loads, and an edge product that promises
 * privacy cannot leave that to its users; hence the dynamic import after setting it. (This is the one
 * deliberate write to the environment in the code base.)
 */
process.env.ORT_DISABLE_TELEMETRY = '1';

const ortModule = await import('onnxruntime-node');
export const ort = ortModule.default ?? ortModule;
export type OrtTensor = import('onnxruntime-node').Tensor;
export type OrtSession = import('onnxruntime-node').InferenceSession;
