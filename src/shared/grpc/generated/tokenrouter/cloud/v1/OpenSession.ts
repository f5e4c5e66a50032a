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
  /**
   * A stable key the shim passes to a backend of several workers, so that a gateway keeps every request with
   * this key on one worker, where the context is in cache (SGLang: the `X-SMG-Routing-Key` header and the
   * `/generate` body's `routing_key`). The edge sends the conversation the caller named, so a chat's turns
   * share it; empty = the shim uses request_id, which the edge keeps for the whole generation, reopened
   * streams included. At most 200 printable ASCII characters (it travels as an HTTP header value).
   */
  'routingKey'?: (string);
  /**
   * Compute the context's cache now, before any step, and answer `prefilled` (see the top of this file): the
   * edge sends its prompt ahead of its first routed token, so that the cloud prefills while the edge does.
   */
  'prefill'?: (boolean);
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
  /**
   * A stable key the shim passes to a backend of several workers, so that a gateway keeps every request with
   * this key on one worker, where the context is in cache (SGLang: the `X-SMG-Routing-Key` header and the
   * `/generate` body's `routing_key`). The edge sends the conversation the caller named, so a chat's turns
   * share it; empty = the shim uses request_id, which the edge keeps for the whole generation, reopened
   * streams included. At most 200 printable ASCII characters (it travels as an HTTP header value).
   */
  'routingKey': (string);
  /**
   * Compute the context's cache now, before any step, and answer `prefilled` (see the top of this file): the
   * edge sends its prompt ahead of its first routed token, so that the cloud prefills while the edge does.
   */
  'prefill': (boolean);
}
