// Original file: proto/edge_generator.proto


/**
 * What decided the routing of one generation (the JSON API's metrics.budget, OpenAI's usage.routing).
 */
export interface RoutingBudget {
  /**
   * threshold (a fixed τ), or the budgets given joined by + (share, tokens, wait; e.g. share+wait).
   */
  'policy'?: (string);
  /**
   * The budgets as given; unset when not.
   */
  'share'?: (number | string);
  'tokensPerMinute'?: (number);
  'waitMs'?: (number);
  /**
   * τ of the request: the cut itself under threshold, the ceiling a wait budget lowers otherwise.
   */
  'threshold'?: (number | string);
  /**
   * The cut at the last decided position (routed when the score was below it), and its mean over the positions.
   */
  'cut'?: (number | string);
  'meanCut'?: (number | string);
  /**
   * Positions the router scored, those routed, and their ratio (0 before any).
   */
  'decided'?: (number);
  'routedPositions'?: (number);
  'realizedShare'?: (number | string);
  /**
   * Cloud tokens the box spent in the last minute (with a token budget).
   */
  'tokensLastMinute'?: (number);
  /**
   * The wait a routed token was expected to cost at the last decision, in ms (with a wait budget).
   */
  'expectedWaitMs'?: (number | string);
  /**
   * Routed steps the cloud refused as overloaded (decided on the edge instead).
   */
  'overloaded'?: (number);
  '_share'?: "share";
  '_tokensPerMinute'?: "tokensPerMinute";
  '_waitMs'?: "waitMs";
  '_tokensLastMinute'?: "tokensLastMinute";
  '_expectedWaitMs'?: "expectedWaitMs";
}

/**
 * What decided the routing of one generation (the JSON API's metrics.budget, OpenAI's usage.routing).
 */
export interface RoutingBudget__Output {
  /**
   * threshold (a fixed τ), or the budgets given joined by + (share, tokens, wait; e.g. share+wait).
   */
  'policy': (string);
  /**
   * The budgets as given; unset when not.
   */
  'share'?: (number);
  'tokensPerMinute'?: (number);
  'waitMs'?: (number);
  /**
   * τ of the request: the cut itself under threshold, the ceiling a wait budget lowers otherwise.
   */
  'threshold': (number);
  /**
   * The cut at the last decided position (routed when the score was below it), and its mean over the positions.
   */
  'cut': (number);
  'meanCut': (number);
  /**
   * Positions the router scored, those routed, and their ratio (0 before any).
   */
  'decided': (number);
  'routedPositions': (number);
  'realizedShare': (number);
  /**
   * Cloud tokens the box spent in the last minute (with a token budget).
   */
  'tokensLastMinute'?: (number);
  /**
   * The wait a routed token was expected to cost at the last decision, in ms (with a wait budget).
   */
  'expectedWaitMs'?: (number);
  /**
   * Routed steps the cloud refused as overloaded (decided on the edge instead).
   */
  'overloaded': (number);
  '_share'?: "share";
  '_tokensPerMinute'?: "tokensPerMinute";
  '_waitMs'?: "waitMs";
  '_tokensLastMinute'?: "tokensLastMinute";
  '_expectedWaitMs'?: "expectedWaitMs";
}
