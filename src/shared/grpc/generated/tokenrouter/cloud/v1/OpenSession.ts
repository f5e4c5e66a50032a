// Original file: proto/cloud_router.proto

import type { Sampling as _tokenrouter_cloud_v1_Sampling, Sampling__Output as _tokenrouter_cloud_v1_Sampling__Output } from '../../../tokenrouter/cloud/v1/Sampling';
import type { TokenSource as _tokenrouter_cloud_v1_TokenSource, TokenSource__Output as _tokenrouter_cloud_v1_TokenSource__Output } from '../../../tokenrouter/cloud/v1/TokenSource';

/**
 * First message of a stream: opens the session.
 */
export interface OpenSession {
  /**
   * The edge's id for the generation (logs, the backend's request ids).
   */
  'requestId'?: (string);
  'sampling'?: (_tokenrouter_cloud_v1_Sampling | null);
  /**
   * The context when the session opens: the prompt, or the whole context when the edge reopens a session.
   */
  'contextIds'?: (number)[];
  /**
   * Sources of context_ids (same length), or empty when they are all prompt tokens.
   */
  'contextSources'?: (_tokenrouter_cloud_v1_TokenSource)[];
  /**
   * The edge's deadline for one step; the shim bounds its backend calls by it (0 = the shim's default).
   */
  'stepTimeoutMs'?: (number);
}

/**
 * First message of a stream: opens the session.
 */
export interface OpenSession__Output {
  /**
   * The edge's id for the generation (logs, the backend's request ids).
   */
  'requestId': (string);
  'sampling': (_tokenrouter_cloud_v1_Sampling__Output | null);
  /**
   * The context when the session opens: the prompt, or the whole context when the edge reopens a session.
   */
  'contextIds': (number)[];
  /**
   * Sources of context_ids (same length), or empty when they are all prompt tokens.
   */
  'contextSources': (_tokenrouter_cloud_v1_TokenSource__Output)[];
  /**
   * The edge's deadline for one step; the shim bounds its backend calls by it (0 = the shim's default).
   */
  'stepTimeoutMs': (number);
}
