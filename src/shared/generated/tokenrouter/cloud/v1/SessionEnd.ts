// Original file: proto/cloud_router.proto


/**
 * The last message of every stream, success or failure.
 */
export interface SessionEnd {
  /**
   * gRPC status code (0 = OK) and message; the stream's status says the same.
   */
  'code'?: (number);
  'message'?: (string);
  'steps'?: (number);
  'generatedTokens'?: (number);
  'contextTokens'?: (number);
}

/**
 * The last message of every stream, success or failure.
 */
export interface SessionEnd__Output {
  /**
   * gRPC status code (0 = OK) and message; the stream's status says the same.
   */
  'code': (number);
  'message': (string);
  'steps': (number);
  'generatedTokens': (number);
  'contextTokens': (number);
}
