// Original file: proto/edge_generator.proto

import type { TokenTimings as _tokenrouter_edge_v1_TokenTimings, TokenTimings__Output as _tokenrouter_edge_v1_TokenTimings__Output } from '../../../tokenrouter/edge/v1/TokenTimings';

export interface Token {
  'index'?: (number);
  'id'?: (number);
  'text'?: (string);
  /**
   * slm, llm or fallback (routed, but the cloud failed and the edge chose).
   */
  'source'?: (string);
  /**
   * Absent for tokens the router did not score (llm_only, later tokens of a span).
   */
  'score'?: (number | string);
  'timings'?: (_tokenrouter_edge_v1_TokenTimings | null);
  'cloudError'?: (string);
  '_score'?: "score";
}

export interface Token__Output {
  'index': (number);
  'id': (number);
  'text': (string);
  /**
   * slm, llm or fallback (routed, but the cloud failed and the edge chose).
   */
  'source': (string);
  /**
   * Absent for tokens the router did not score (llm_only, later tokens of a span).
   */
  'score'?: (number);
  'timings': (_tokenrouter_edge_v1_TokenTimings__Output | null);
  'cloudError': (string);
  '_score'?: "score";
}
