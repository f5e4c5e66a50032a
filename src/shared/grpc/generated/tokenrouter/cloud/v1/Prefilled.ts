// Original file: proto/cloud_router.proto

import type { ShimLoad as _tokenrouter_cloud_v1_ShimLoad, ShimLoad__Output as _tokenrouter_cloud_v1_ShimLoad__Output } from '../../../tokenrouter/cloud/v1/ShimLoad';

/**
 * What a prefill ahead (`open.prefill`) did.
 */
export interface Prefilled {
  /**
   * The session's context length (the first step's offset).
   */
  'contextLength'?: (number);
  /**
   * Context tokens the backend found in its cache, and tokens it computed now (0 and 0 from a backend that
   * keeps no cache between requests).
   */
  'cachedTokens'?: (number);
  'prefilledTokens'?: (number);
  'backendMs'?: (number | string);
  /**
   * No backend slot could be had within the step deadline: nothing was computed; the stream goes on.
   */
  'overloaded'?: (boolean);
  'load'?: (_tokenrouter_cloud_v1_ShimLoad | null);
}

/**
 * What a prefill ahead (`open.prefill`) did.
 */
export interface Prefilled__Output {
  /**
   * The session's context length (the first step's offset).
   */
  'contextLength': (number);
  /**
   * Context tokens the backend found in its cache, and tokens it computed now (0 and 0 from a backend that
   * keeps no cache between requests).
   */
  'cachedTokens': (number);
  'prefilledTokens': (number);
  'backendMs': (number);
  /**
   * No backend slot could be had within the step deadline: nothing was computed; the stream goes on.
   */
  'overloaded': (boolean);
  'load': (_tokenrouter_cloud_v1_ShimLoad__Output | null);
}
