// Original file: proto/edge_generator.proto


export interface Error {
  /**
   * The error kind (INVALID_ARGUMENT, UNAVAILABLE, ...), as in the stream's status.
   */
  'code'?: (string);
  'message'?: (string);
}

export interface Error__Output {
  /**
   * The error kind (INVALID_ARGUMENT, UNAVAILABLE, ...), as in the stream's status.
   */
  'code': (string);
  'message': (string);
}
