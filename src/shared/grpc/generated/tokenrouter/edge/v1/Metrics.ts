// Original file: proto/edge_generator.proto


export interface Metrics {
  'promptTokens'?: (number);
  'tokens'?: (number);
  'routed'?: (number);
  'fallback'?: (number);
  'routedRatio'?: (number | string);
  'ttftMs'?: (number | string);
  'tbtMeanMs'?: (number | string);
  'tbtP50Ms'?: (number | string);
  'tbtP95Ms'?: (number | string);
  'slmMs'?: (number | string);
  'prefillMs'?: (number | string);
  'routerMs'?: (number | string);
  'cloudMs'?: (number | string);
  'totalMs'?: (number | string);
}

export interface Metrics__Output {
  'promptTokens': (number);
  'tokens': (number);
  'routed': (number);
  'fallback': (number);
  'routedRatio': (number);
  'ttftMs': (number);
  'tbtMeanMs': (number);
  'tbtP50Ms': (number);
  'tbtP95Ms': (number);
  'slmMs': (number);
  'prefillMs': (number);
  'routerMs': (number);
  'cloudMs': (number);
  'totalMs': (number);
}
