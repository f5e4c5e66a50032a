// Original file: proto/cloud_router.proto

import type { TokenSource as _tokenrouter_cloud_v1_TokenSource, TokenSource__Output as _tokenrouter_cloud_v1_TokenSource__Output } from '../../../tokenrouter/cloud/v1/TokenSource';

/**
 * Tokens the edge decided itself, sent as it decides them instead of with the next step (see the top of this
 * file): the shim appends them and computes them into its backend's cache when nothing else waits on the
 * stream. No answer.
 */
export interface ContextExtend {
  /**
   * Must equal the shim's context length.
   */
  'offset'?: (number);
  'ids'?: (number)[];
  /**
   * Routing history for ids (same length).
   */
  'sources'?: (_tokenrouter_cloud_v1_TokenSource)[];
}

/**
 * Tokens the edge decided itself, sent as it decides them instead of with the next step (see the top of this
 * file): the shim appends them and computes them into its backend's cache when nothing else waits on the
 * stream. No answer.
 */
export interface ContextExtend__Output {
  /**
   * Must equal the shim's context length.
   */
  'offset': (number);
  'ids': (number)[];
  /**
   * Routing history for ids (same length).
   */
  'sources': (_tokenrouter_cloud_v1_TokenSource__Output)[];
}
