// Original file: proto/edge_generator.proto


export interface Error {
  'code'?: (string);
  'message'?: (string);
}

export interface Error__Output {
  'code': (string);
  'message': (string);
}
