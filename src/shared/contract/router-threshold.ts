/**
 * The τ a router serves when nothing names one: a router pack's router.json without `default_threshold`, the
 * built-in top-1 router, a request parsed without a router at hand, and a router trained without `--threshold`.
 * Half: a score is a probability that the edge's token is good enough, and below even odds it goes to the cloud.
 */
export const DEFAULT_ROUTER_THRESHOLD = 0.5;
