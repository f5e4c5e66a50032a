// Original file: proto/edge_generator.proto

import type { PrivateSpan as _tokenrouter_edge_v1_PrivateSpan, PrivateSpan__Output as _tokenrouter_edge_v1_PrivateSpan__Output } from '../../../tokenrouter/edge/v1/PrivateSpan';

export interface ChatMessage {
  'role'?: (string);
  'content'?: (string);
  /**
   * Stretches of `content` that must never reach the cloud, as GenerateRequest.private_spans.
   */
  'privateSpans'?: (_tokenrouter_edge_v1_PrivateSpan)[];
}

export interface ChatMessage__Output {
  'role': (string);
  'content': (string);
  /**
   * Stretches of `content` that must never reach the cloud, as GenerateRequest.private_spans.
   */
  'privateSpans': (_tokenrouter_edge_v1_PrivateSpan__Output)[];
}
