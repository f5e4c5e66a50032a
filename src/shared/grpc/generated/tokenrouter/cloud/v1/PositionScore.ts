// Original file: proto/cloud_router.proto


/**
 * The cloud model at one position: what it thinks of the next id, of the candidate, and its own top-k.
 */
export interface PositionScore {
  'nextLogprob'?: (number | string);
  /**
   * 0 when the request named no candidates.
   */
  'candidateLogprob'?: (number | string);
  'topIds'?: (number)[];
  'topLogprobs'?: (number | string)[];
}

/**
 * The cloud model at one position: what it thinks of the next id, of the candidate, and its own top-k.
 */
export interface PositionScore__Output {
  'nextLogprob': (number);
  /**
   * 0 when the request named no candidates.
   */
  'candidateLogprob': (number);
  'topIds': (number)[];
  'topLogprobs': (number)[];
}
