// Original file: proto/cloud_router.proto


export interface Sampling {
  /**
   * 0 = greedy (argmax).
   */
  'temperature'?: (number | string);
  /**
   * Nucleus mass in (0, 1]; 0 means 1.
   */
  'topP'?: (number | string);
  /**
   * Seed of the session's sampler; absent = the shim picks one.
   */
  'seed'?: (number);
  /**
   * Ids that end a span (returned, then the span stops).
   */
  'stopTokenIds'?: (number)[];
  /**
   * Alternatives to return per generated token (0 = none).
   */
  'topLogprobs'?: (number);
  '_seed'?: "seed";
}

export interface Sampling__Output {
  /**
   * 0 = greedy (argmax).
   */
  'temperature': (number);
  /**
   * Nucleus mass in (0, 1]; 0 means 1.
   */
  'topP': (number);
  /**
   * Seed of the session's sampler; absent = the shim picks one.
   */
  'seed'?: (number);
  /**
   * Ids that end a span (returned, then the span stops).
   */
  'stopTokenIds': (number)[];
  /**
   * Alternatives to return per generated token (0 = none).
   */
  'topLogprobs': (number);
  '_seed'?: "seed";
}
