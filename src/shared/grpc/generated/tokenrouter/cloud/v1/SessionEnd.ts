// Original file: proto/cloud_router.proto


/**
 * The last message of every stream, success or failure, except one whose request was over the size limit
 * (see the top of this file).
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
  /**
   * True when the shim ended the session because it sat idle (code DEADLINE_EXCEEDED), before looking at
   * any step still on its way: such a step may be sent again, with the whole context, on a new stream.
   */
  'expired'?: (boolean);
}

/**
 * The last message of every stream, success or failure, except one whose request was over the size limit
 * (see the top of this file).
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
  /**
   * True when the shim ended the session because it sat idle (code DEADLINE_EXCEEDED), before looking at
   * any step still on its way: such a step may be sent again, with the whole context, on a new stream.
   */
  'expired': (boolean);
}
