/**
 * The largest float32 below 1: the highest score a router can return. Trained routers (mlp.ts and the
 * exported router.onnx) and the baselines cap their scores at it, so that τ = 1 routes every token.
 */
export const MAX_SCORE = 1 - 2 ** -24;
