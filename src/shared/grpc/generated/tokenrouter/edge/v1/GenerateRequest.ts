// Original file: proto/edge_generator.proto


export interface GenerateRequest {
  'prompt'?: (string);
  /**
   * joint (default), small_only or llm_only.
   */
  'mode'?: (string);
  /**
   * Unset fields take the edge's defaults: the router's default_threshold (0.5 for the built-in one), 64 new tokens, greedy, top_p 1, seed 0, span 1.
   */
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
  /**
   * joint (default), small_only or llm_only.
   */
  'mode': (string);
  /**
   * Unset fields take the edge's defaults: the router's default_threshold (0.5 for the built-in one), 64 new tokens, greedy, top_p 1, seed 0, span 1.
   */
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
