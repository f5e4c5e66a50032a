// Original file: proto/edge_generator.proto

import type { RoutingBudget as _tokenrouter_edge_v1_RoutingBudget, RoutingBudget__Output as _tokenrouter_edge_v1_RoutingBudget__Output } from '../../../tokenrouter/edge/v1/RoutingBudget';
import type { CloudDisclosure as _tokenrouter_edge_v1_CloudDisclosure, CloudDisclosure__Output as _tokenrouter_edge_v1_CloudDisclosure__Output } from '../../../tokenrouter/edge/v1/CloudDisclosure';
import type { ConstraintCounts as _tokenrouter_edge_v1_ConstraintCounts, ConstraintCounts__Output as _tokenrouter_edge_v1_ConstraintCounts__Output } from '../../../tokenrouter/edge/v1/ConstraintCounts';

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
  /**
   * Speculative continuation (zero when off): routed tokens decoded past, those whose guess was right,
   * their ratio, the speculative steps thrown away and their edge time, and the edge time of the kept
   * ones (decoding done during the wait).
   */
  'speculated'?: (number);
  'speculationHits'?: (number);
  'hitRate'?: (number | string);
  'wastedSteps'?: (number);
  'wastedMs'?: (number | string);
  'savedMs'?: (number | string);
  /**
   * Conditional steps: steps sent while the previous one was in flight (a speculative position routed), and
   * those whose assumed token was wrong (the cloud skipped them).
   */
  'conditionalSteps'?: (number);
  'conditionalSkipped'?: (number);
  /**
   * Prompt tokens restored from the edge's prompt cache (a cached prefix of an earlier generation's
   * tokens) instead of prefilled; 0 when the cache is off or held no prefix of this prompt.
   */
  'cachedTokens'?: (number);
  /**
   * Mean rows of the edge forward passes behind the generation's one-token steps: 1 when each ran alone,
   * more when batched with other generations' steps (--max-batch).
   */
  'meanBatchSize'?: (number | string);
  /**
   * The cut that decided this generation's routing: its policy, the budgets, and how much of them was used.
   */
  'budget'?: (_tokenrouter_edge_v1_RoutingBudget | null);
  /**
   * What left the box for the cloud during this generation.
   */
  'cloud'?: (_tokenrouter_edge_v1_CloudDisclosure | null);
  /**
   * What the request's constraint (json_schema, grammar, regex, choice) changed; absent without one.
   */
  'constraint'?: (_tokenrouter_edge_v1_ConstraintCounts | null);
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
  /**
   * Speculative continuation (zero when off): routed tokens decoded past, those whose guess was right,
   * their ratio, the speculative steps thrown away and their edge time, and the edge time of the kept
   * ones (decoding done during the wait).
   */
  'speculated': (number);
  'speculationHits': (number);
  'hitRate': (number);
  'wastedSteps': (number);
  'wastedMs': (number);
  'savedMs': (number);
  /**
   * Conditional steps: steps sent while the previous one was in flight (a speculative position routed), and
   * those whose assumed token was wrong (the cloud skipped them).
   */
  'conditionalSteps': (number);
  'conditionalSkipped': (number);
  /**
   * Prompt tokens restored from the edge's prompt cache (a cached prefix of an earlier generation's
   * tokens) instead of prefilled; 0 when the cache is off or held no prefix of this prompt.
   */
  'cachedTokens': (number);
  /**
   * Mean rows of the edge forward passes behind the generation's one-token steps: 1 when each ran alone,
   * more when batched with other generations' steps (--max-batch).
   */
  'meanBatchSize': (number);
  /**
   * The cut that decided this generation's routing: its policy, the budgets, and how much of them was used.
   */
  'budget': (_tokenrouter_edge_v1_RoutingBudget__Output | null);
  /**
   * What left the box for the cloud during this generation.
   */
  'cloud': (_tokenrouter_edge_v1_CloudDisclosure__Output | null);
  /**
   * What the request's constraint (json_schema, grammar, regex, choice) changed; absent without one.
   */
  'constraint': (_tokenrouter_edge_v1_ConstraintCounts__Output | null);
}
