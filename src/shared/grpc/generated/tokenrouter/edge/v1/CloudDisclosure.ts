// Original file: proto/edge_generator.proto

import type { Long } from '@grpc/proto-loader';

/**
 * What one generation sent the cloud (the JSON API's metrics.cloud, OpenAI's usage.cloud).
 */
export interface CloudDisclosure {
  /**
   * Token ids sent: each stream's whole context when it opened, then each step's new ids.
   */
  'tokensSent'?: (number);
  /**
   * Serialized bytes of the messages sent (protobuf; gRPC and HTTP/2 framing not counted).
   */
  'bytesSent'?: (number | string | Long);
  /**
   * Bytes of edge hidden states among them: 0 unless the edge runs with --send-hidden-state.
   */
  'hiddenStateBytes'?: (number | string | Long);
  /**
   * Steps sent, and streams opened (an opening carries the whole context).
   */
  'steps'?: (number);
  'streams'?: (number);
  /**
   * Distinct placeholders the cloud read instead of private values.
   */
  'placeholders'?: (number);
  /**
   * Routed positions the edge decided itself because a private value was under way there.
   */
  'withheldSteps'?: (number);
  /**
   * Milliseconds the edge spent translating to and from placeholders (0 without private values).
   */
  'pseudonymMs'?: (number | string);
  /**
   * Steps the box's last check stopped because they would have disclosed a private value (docs/privacy.md).
   */
  'gateBlockedSteps'?: (number);
}

/**
 * What one generation sent the cloud (the JSON API's metrics.cloud, OpenAI's usage.cloud).
 */
export interface CloudDisclosure__Output {
  /**
   * Token ids sent: each stream's whole context when it opened, then each step's new ids.
   */
  'tokensSent': (number);
  /**
   * Serialized bytes of the messages sent (protobuf; gRPC and HTTP/2 framing not counted).
   */
  'bytesSent': (string);
  /**
   * Bytes of edge hidden states among them: 0 unless the edge runs with --send-hidden-state.
   */
  'hiddenStateBytes': (string);
  /**
   * Steps sent, and streams opened (an opening carries the whole context).
   */
  'steps': (number);
  'streams': (number);
  /**
   * Distinct placeholders the cloud read instead of private values.
   */
  'placeholders': (number);
  /**
   * Routed positions the edge decided itself because a private value was under way there.
   */
  'withheldSteps': (number);
  /**
   * Milliseconds the edge spent translating to and from placeholders (0 without private values).
   */
  'pseudonymMs': (number);
  /**
   * Steps the box's last check stopped because they would have disclosed a private value (docs/privacy.md).
   */
  'gateBlockedSteps': (number);
}
