// Original file: proto/cloud_router.proto


export interface ScoreRequest {
  /**
   * The sequence as the model reads it (BOS first where the model uses one); 2 ids or more, at most the
   * backend's context window.
   */
  'ids'?: (number)[];
  /**
   * For each position i (reading ids[0..i], predicting ids[i+1]): an id whose log-probability to return,
   * e.g. the edge model's top-1 there. Empty = none; otherwise exactly len(ids) - 1 of them.
   */
  'candidateIds'?: (number)[];
  /**
   * The cloud's most likely ids to return per position, most likely first; 0 = none, at most 20.
   */
  'topK'?: (number);
  /**
   * Ids at or above it are left out of top-k and of the normalisation: a pair whose embeddings are padded
   * differently (Qwen2.5-0.5B 151,936 rows, the 32B 152,064) compares over the ids both have. 0 = all. A
   * remote backend normalises over its whole vocabulary (padding rows carry next to no mass).
   */
  'vocabLimit'?: (number);
  /**
   * The tool's id for the call (logs, the backend's request id).
   */
  'requestId'?: (string);
}

export interface ScoreRequest__Output {
  /**
   * The sequence as the model reads it (BOS first where the model uses one); 2 ids or more, at most the
   * backend's context window.
   */
  'ids': (number)[];
  /**
   * For each position i (reading ids[0..i], predicting ids[i+1]): an id whose log-probability to return,
   * e.g. the edge model's top-1 there. Empty = none; otherwise exactly len(ids) - 1 of them.
   */
  'candidateIds': (number)[];
  /**
   * The cloud's most likely ids to return per position, most likely first; 0 = none, at most 20.
   */
  'topK': (number);
  /**
   * Ids at or above it are left out of top-k and of the normalisation: a pair whose embeddings are padded
   * differently (Qwen2.5-0.5B 151,936 rows, the 32B 152,064) compares over the ids both have. 0 = all. A
   * remote backend normalises over its whole vocabulary (padding rows carry next to no mass).
   */
  'vocabLimit': (number);
  /**
   * The tool's id for the call (logs, the backend's request id).
   */
  'requestId': (string);
}
