// Original file: proto/edge_generator.proto


export interface ChatMessage {
  'role'?: (string);
  'content'?: (string);
}

export interface ChatMessage__Output {
  'role': (string);
  'content': (string);
}
