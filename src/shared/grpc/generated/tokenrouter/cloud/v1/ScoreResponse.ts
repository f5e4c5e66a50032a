// Original file: proto/cloud_router.proto

import type { PositionScore as _tokenrouter_cloud_v1_PositionScore, PositionScore__Output as _tokenrouter_cloud_v1_PositionScore__Output } from '../../../tokenrouter/cloud/v1/PositionScore';

export interface ScoreResponse {
  /**
   * One per position 0 .. len(ids) - 2, in order.
   */
  'positions'?: (_tokenrouter_cloud_v1_PositionScore)[];
  /**
   * Backend kind and model, as `SessionOpened.backend`.
   */
  'backend'?: (string);
  /**
   * False where a candidate's log-probability is a bound: a backend that returns only its top-k (an
   * OpenAI-compatible server's prompt log-probabilities) gives a candidate outside them the smallest top-k
   * log-probability, an upper bound. True where every figure is the model's own.
   */
  'exact'?: (boolean);
  /**
   * The backend's context window (0 when it does not say): the longest sequence one call may hold.
   */
  'maxContext'?: (number);
  'backendMs'?: (number | string);
}

export interface ScoreResponse__Output {
  /**
   * One per position 0 .. len(ids) - 2, in order.
   */
  'positions': (_tokenrouter_cloud_v1_PositionScore__Output)[];
  /**
   * Backend kind and model, as `SessionOpened.backend`.
   */
  'backend': (string);
  /**
   * False where a candidate's log-probability is a bound: a backend that returns only its top-k (an
   * OpenAI-compatible server's prompt log-probabilities) gives a candidate outside them the smallest top-k
   * log-probability, an upper bound. True where every figure is the model's own.
   */
  'exact': (boolean);
  /**
   * The backend's context window (0 when it does not say): the longest sequence one call may hold.
   */
  'maxContext': (number);
  'backendMs': (number);
}
