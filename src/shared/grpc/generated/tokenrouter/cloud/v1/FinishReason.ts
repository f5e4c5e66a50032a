// Original file: proto/cloud_router.proto

export const FinishReason = {
  FINISH_REASON_UNSPECIFIED: 'FINISH_REASON_UNSPECIFIED',
  /**
   * The span is full (max_tokens returned).
   */
  FINISH_REASON_LENGTH: 'FINISH_REASON_LENGTH',
  /**
   * The last returned id is one of the stop ids.
   */
  FINISH_REASON_STOP: 'FINISH_REASON_STOP',
  /**
   * The model's context window is full.
   */
  FINISH_REASON_CONTEXT: 'FINISH_REASON_CONTEXT',
} as const;

export type FinishReason =
  | 'FINISH_REASON_UNSPECIFIED'
  | 0
  /**
   * The span is full (max_tokens returned).
   */
  | 'FINISH_REASON_LENGTH'
  | 1
  /**
   * The last returned id is one of the stop ids.
   */
  | 'FINISH_REASON_STOP'
  | 2
  /**
   * The model's context window is full.
   */
  | 'FINISH_REASON_CONTEXT'
  | 3

export type FinishReason__Output = typeof FinishReason[keyof typeof FinishReason]
