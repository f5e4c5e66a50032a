// Original file: proto/edge_generator.proto


export interface TokenTimings {
  'slmMs'?: (number | string);
  'routerMs'?: (number | string);
  'cloudMs'?: (number | string);
}

export interface TokenTimings__Output {
  'slmMs': (number);
  'routerMs': (number);
  'cloudMs': (number);
}
