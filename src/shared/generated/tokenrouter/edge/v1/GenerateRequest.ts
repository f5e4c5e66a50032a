// Original file: proto/edge_generator.proto


export interface GenerateRequest {
  'prompt'?: (string);
  'mode'?: (string);
  'threshold'?: (number | string);
  'maxNewTokens'?: (number);
  'temperature'?: (number | string);
  'topP'?: (number | string);
  'seed'?: (number);
  'stop'?: (string)[];
  'routeSpan'?: (number);
  '_threshold'?: "threshold";
  '_maxNewTokens'?: "maxNewTokens";
  '_temperature'?: "temperature";
  '_topP'?: "topP";
  '_seed'?: "seed";
  '_routeSpan'?: "routeSpan";
}

export interface GenerateRequest__Output {
  'prompt': (string);
  'mode': (string);
  'threshold'?: (number);
  'maxNewTokens'?: (number);
  'temperature'?: (number);
  'topP'?: (number);
  'seed'?: (number);
  'stop': (string)[];
  'routeSpan'?: (number);
  '_threshold'?: "threshold";
  '_maxNewTokens'?: "maxNewTokens";
  '_temperature'?: "temperature";
  '_topP'?: "topP";
  '_seed'?: "seed";
  '_routeSpan'?: "routeSpan";
}
