// Original file: proto/cloud_router.proto

import type { TopAlternatives as _tokenrouter_cloud_v1_TopAlternatives, TopAlternatives__Output as _tokenrouter_cloud_v1_TopAlternatives__Output } from '../../../tokenrouter/cloud/v1/TopAlternatives';
import type { FinishReason as _tokenrouter_cloud_v1_FinishReason, FinishReason__Output as _tokenrouter_cloud_v1_FinishReason__Output } from '../../../tokenrouter/cloud/v1/FinishReason';
import type { ShimLoad as _tokenrouter_cloud_v1_ShimLoad, ShimLoad__Output as _tokenrouter_cloud_v1_ShimLoad__Output } from '../../../tokenrouter/cloud/v1/ShimLoad';

/**
 * The cloud model's state after a step.
 */
export interface StepResult {
  /**
   * Generated ids (1 to max_tokens); the shim has appended them to the session's context.
   */
  'ids'?: (number)[];
  'text'?: (string);
  /**
   * Natural-log probability of each generated id under the cloud model.
   */
  'logprobs'?: (number | string)[];
  /**
   * Per generated id, the top alternatives (only when asked for).
   */
  'top'?: (_tokenrouter_cloud_v1_TopAlternatives)[];
  /**
   * Prompt tokens the backend served from its cache (KV reuse).
   */
  'cachedTokens'?: (number);
  /**
   * Backend compute time and the shim's own time around it, in milliseconds.
   */
  'backendMs'?: (number | string);
  'shimMs'?: (number | string);
  'finishReason'?: (_tokenrouter_cloud_v1_FinishReason);
  /**
   * The session's context length after this step (the next step's offset).
   */
  'contextLength'?: (number);
  /**
   * A conditional step whose assumption failed: nothing was computed or appended, and ids is empty.
   */
  'skipped'?: (boolean);
  /**
   * The shim's load when it answered (see the top of this file).
   */
  'load'?: (_tokenrouter_cloud_v1_ShimLoad | null);
  /**
   * The backend was saturated and the step could not have been answered within its deadline: nothing was
   * computed, ids is empty, and context_length says where the shim's context is (see the top of this file).
   */
  'overloaded'?: (boolean);
}

/**
 * The cloud model's state after a step.
 */
export interface StepResult__Output {
  /**
   * Generated ids (1 to max_tokens); the shim has appended them to the session's context.
   */
  'ids': (number)[];
  'text': (string);
  /**
   * Natural-log probability of each generated id under the cloud model.
   */
  'logprobs': (number)[];
  /**
   * Per generated id, the top alternatives (only when asked for).
   */
  'top': (_tokenrouter_cloud_v1_TopAlternatives__Output)[];
  /**
   * Prompt tokens the backend served from its cache (KV reuse).
   */
  'cachedTokens': (number);
  /**
   * Backend compute time and the shim's own time around it, in milliseconds.
   */
  'backendMs': (number);
  'shimMs': (number);
  'finishReason': (_tokenrouter_cloud_v1_FinishReason__Output);
  /**
   * The session's context length after this step (the next step's offset).
   */
  'contextLength': (number);
  /**
   * A conditional step whose assumption failed: nothing was computed or appended, and ids is empty.
   */
  'skipped': (boolean);
  /**
   * The shim's load when it answered (see the top of this file).
   */
  'load': (_tokenrouter_cloud_v1_ShimLoad__Output | null);
  /**
   * The backend was saturated and the step could not have been answered within its deadline: nothing was
   * computed, ids is empty, and context_length says where the shim's context is (see the top of this file).
   */
  'overloaded': (boolean);
}
