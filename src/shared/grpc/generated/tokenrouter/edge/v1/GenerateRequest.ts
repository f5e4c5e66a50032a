// Original file: proto/edge_generator.proto


export interface GenerateRequest {
  'prompt'?: (string);
  /**
   * joint (default), small_only or llm_only.
   */
  'mode'?: (string);
  /**
   * Unset fields take the edge's defaults: the router's default_threshold (0.5 for the built-in one), 64 new tokens, greedy, top_p 1, seed 0, span 1,
   * and the edge's speculation setting.
   */
  'threshold'?: (number | string);
  'maxNewTokens'?: (number);
  'temperature'?: (number | string);
  'topP'?: (number | string);
  'seed'?: (number);
  'stop'?: (string)[];
  'routeSpan'?: (number);
  /**
   * Speculative continuation: decode on from the edge's own guess while a routed token is on the network.
   * It never changes the tokens, only how long the edge waits.
   */
  'speculate'?: (boolean);
  '_threshold'?: "threshold";
  '_maxNewTokens'?: "maxNewTokens";
  '_temperature'?: "temperature";
  '_topP'?: "topP";
  '_seed'?: "seed";
  '_routeSpan'?: "routeSpan";
  '_speculate'?: "speculate";
}

export interface GenerateRequest__Output {
  'prompt': (string);
  /**
   * joint (default), small_only or llm_only.
   */
  'mode': (string);
  /**
   * Unset fields take the edge's defaults: the router's default_threshold (0.5 for the built-in one), 64 new tokens, greedy, top_p 1, seed 0, span 1,
   * and the edge's speculation setting.
   */
  'threshold'?: (number);
  'maxNewTokens'?: (number);
  'temperature'?: (number);
  'topP'?: (number);
  'seed'?: (number);
  'stop': (string)[];
  'routeSpan'?: (number);
  /**
   * Speculative continuation: decode on from the edge's own guess while a routed token is on the network.
   * It never changes the tokens, only how long the edge waits.
   */
  'speculate'?: (boolean);
  '_threshold'?: "threshold";
  '_maxNewTokens'?: "maxNewTokens";
  '_temperature'?: "temperature";
  '_topP'?: "topP";
  '_seed'?: "seed";
  '_routeSpan'?: "routeSpan";
  '_speculate'?: "speculate";
}
