// Original file: proto/cloud_router.proto


/**
 * The shim's admission state, over all its sessions.
 */
export interface ShimLoad {
  /**
   * Backend calls running now (the step answered included, when it ran).
   */
  'stepsInFlight'?: (number);
  /**
   * Steps waiting for a backend slot.
   */
  'stepsQueued'?: (number);
  /**
   * Moving average of one step's backend time, in milliseconds; 0 before the first step.
   */
  'backendMs'?: (number | string);
  /**
   * The most backend calls the shim runs at once (--max-inflight-steps).
   */
  'maxInFlight'?: (number);
}

/**
 * The shim's admission state, over all its sessions.
 */
export interface ShimLoad__Output {
  /**
   * Backend calls running now (the step answered included, when it ran).
   */
  'stepsInFlight': (number);
  /**
   * Steps waiting for a backend slot.
   */
  'stepsQueued': (number);
  /**
   * Moving average of one step's backend time, in milliseconds; 0 before the first step.
   */
  'backendMs': (number);
  /**
   * The most backend calls the shim runs at once (--max-inflight-steps).
   */
  'maxInFlight': (number);
}
