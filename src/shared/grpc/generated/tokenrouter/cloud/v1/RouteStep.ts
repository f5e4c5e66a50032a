// Original file: proto/cloud_router.proto

import type { TokenSource as _tokenrouter_cloud_v1_TokenSource, TokenSource__Output as _tokenrouter_cloud_v1_TokenSource__Output } from '../../../tokenrouter/cloud/v1/TokenSource';
import type { Sampling as _tokenrouter_cloud_v1_Sampling, Sampling__Output as _tokenrouter_cloud_v1_Sampling__Output } from '../../../tokenrouter/cloud/v1/Sampling';

/**
 * One routed token (or span): the context delta plus the routing decision that caused it.
 */
export interface RouteStep {
  /**
   * Absolute index in the context of ids[0]; must equal the shim's context length (a conditional step: the
   * position of the pending step's token, see the top of this file).
   */
  'offset'?: (number);
  /**
   * Context ids appended since the shim last saw the context; the last one is the current token.
   */
  'ids'?: (number)[];
  /**
   * Routing history for ids (same length).
   */
  'sources'?: (_tokenrouter_cloud_v1_TokenSource)[];
  /**
   * Index of the token asked for, counted from the first generated token.
   */
  'tokenIndex'?: (number);
  /**
   * The span: most tokens to return (0 means 1).
   */
  'maxTokens'?: (number);
  'routerScore'?: (number | string);
  'threshold'?: (number | string);
  /**
   * Only when the sampling settings changed since the session opened.
   */
  'sampling'?: (_tokenrouter_cloud_v1_Sampling | null);
  /**
   * The edge model's last-layer hidden state at this position: only when the edge is configured to send it.
   */
  'slmHiddenState'?: (number | string)[];
  /**
   * Sent before the previous step's result, assuming its token (see the top of this file): offset may be
   * below the context length, and a step whose assumption fails is skipped instead of failing the stream.
   */
  'conditional'?: (boolean);
}

/**
 * One routed token (or span): the context delta plus the routing decision that caused it.
 */
export interface RouteStep__Output {
  /**
   * Absolute index in the context of ids[0]; must equal the shim's context length (a conditional step: the
   * position of the pending step's token, see the top of this file).
   */
  'offset': (number);
  /**
   * Context ids appended since the shim last saw the context; the last one is the current token.
   */
  'ids': (number)[];
  /**
   * Routing history for ids (same length).
   */
  'sources': (_tokenrouter_cloud_v1_TokenSource__Output)[];
  /**
   * Index of the token asked for, counted from the first generated token.
   */
  'tokenIndex': (number);
  /**
   * The span: most tokens to return (0 means 1).
   */
  'maxTokens': (number);
  'routerScore': (number);
  'threshold': (number);
  /**
   * Only when the sampling settings changed since the session opened.
   */
  'sampling': (_tokenrouter_cloud_v1_Sampling__Output | null);
  /**
   * The edge model's last-layer hidden state at this position: only when the edge is configured to send it.
   */
  'slmHiddenState': (number)[];
  /**
   * Sent before the previous step's result, assuming its token (see the top of this file): offset may be
   * below the context length, and a step whose assumption fails is skipped instead of failing the stream.
   */
  'conditional': (boolean);
}
