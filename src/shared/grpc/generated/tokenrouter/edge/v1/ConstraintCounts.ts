// Original file: proto/edge_generator.proto


/**
 * What a constraint changed in one generation (the JSON API's metrics.constraint, OpenAI's usage.constraint).
 */
export interface ConstraintCounts {
  /**
   * Cloud tokens the grammar forbade, replaced by an allowed one of the cloud's top-k or, in a fallback, by the edge's.
   */
  'cloudTokensReplaced'?: (number);
  /**
   * Routed positions where none of the cloud's top-k was allowed: the edge's best allowed token was taken.
   */
  'constrainedFallbacks'?: (number);
  /**
   * Later tokens of cloud route spans dropped from the first one the grammar forbade.
   */
  'spanTokensDropped'?: (number);
}

/**
 * What a constraint changed in one generation (the JSON API's metrics.constraint, OpenAI's usage.constraint).
 */
export interface ConstraintCounts__Output {
  /**
   * Cloud tokens the grammar forbade, replaced by an allowed one of the cloud's top-k or, in a fallback, by the edge's.
   */
  'cloudTokensReplaced': (number);
  /**
   * Routed positions where none of the cloud's top-k was allowed: the edge's best allowed token was taken.
   */
  'constrainedFallbacks': (number);
  /**
   * Later tokens of cloud route spans dropped from the first one the grammar forbade.
   */
  'spanTokensDropped': (number);
}
