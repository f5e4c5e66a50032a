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
  /**
   * SHA-256 (hex) of the shim's tokenizer vocabulary: tokenizer.json's token → id map and added tokens as
   * compact JSON `[vocab, [[id, content], ...]]`. A tool compares it with its edge pack's: routing needs a pair
   * that means the same thing by every id. Empty when the shim has no tokenizer (no --model-pack).
   */
  'vocabularySha256'?: (string);
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
  /**
   * SHA-256 (hex) of the shim's tokenizer vocabulary: tokenizer.json's token → id map and added tokens as
   * compact JSON `[vocab, [[id, content], ...]]`. A tool compares it with its edge pack's: routing needs a pair
   * that means the same thing by every id. Empty when the shim has no tokenizer (no --model-pack).
   */
  'vocabularySha256': (string);
}
