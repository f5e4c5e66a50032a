// Original file: proto/edge_generator.proto

import type { Metrics as _tokenrouter_edge_v1_Metrics, Metrics__Output as _tokenrouter_edge_v1_Metrics__Output } from '../../../tokenrouter/edge/v1/Metrics';

export interface Done {
  /**
   * eos, stop, length, context or cancelled.
   */
  'finishReason'?: (string);
  'text'?: (string);
  'metrics'?: (_tokenrouter_edge_v1_Metrics | null);
  'requestId'?: (string);
  'router'?: (string);
  /**
   * What the cloud saw: the text of the context the cloud held at the end, private values as placeholders;
   * empty when nothing was routed.
   */
  'cloudText'?: (string);
}

export interface Done__Output {
  /**
   * eos, stop, length, context or cancelled.
   */
  'finishReason': (string);
  'text': (string);
  'metrics': (_tokenrouter_edge_v1_Metrics__Output | null);
  'requestId': (string);
  'router': (string);
  /**
   * What the cloud saw: the text of the context the cloud held at the end, private values as placeholders;
   * empty when nothing was routed.
   */
  'cloudText': (string);
}
