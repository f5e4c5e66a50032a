// Original file: proto/cloud_router.proto

import type { SessionOpened as _tokenrouter_cloud_v1_SessionOpened, SessionOpened__Output as _tokenrouter_cloud_v1_SessionOpened__Output } from '../../../tokenrouter/cloud/v1/SessionOpened';
import type { StepResult as _tokenrouter_cloud_v1_StepResult, StepResult__Output as _tokenrouter_cloud_v1_StepResult__Output } from '../../../tokenrouter/cloud/v1/StepResult';
import type { SessionEnd as _tokenrouter_cloud_v1_SessionEnd, SessionEnd__Output as _tokenrouter_cloud_v1_SessionEnd__Output } from '../../../tokenrouter/cloud/v1/SessionEnd';
import type { Prefilled as _tokenrouter_cloud_v1_Prefilled, Prefilled__Output as _tokenrouter_cloud_v1_Prefilled__Output } from '../../../tokenrouter/cloud/v1/Prefilled';

export interface RouteResponse {
  'opened'?: (_tokenrouter_cloud_v1_SessionOpened | null);
  'step'?: (_tokenrouter_cloud_v1_StepResult | null);
  'end'?: (_tokenrouter_cloud_v1_SessionEnd | null);
  /**
   * After `opened`, when `open.prefill` asked for it; before any step result.
   */
  'prefilled'?: (_tokenrouter_cloud_v1_Prefilled | null);
  'message'?: "opened"|"step"|"end"|"prefilled";
}

export interface RouteResponse__Output {
  'opened'?: (_tokenrouter_cloud_v1_SessionOpened__Output | null);
  'step'?: (_tokenrouter_cloud_v1_StepResult__Output | null);
  'end'?: (_tokenrouter_cloud_v1_SessionEnd__Output | null);
  /**
   * After `opened`, when `open.prefill` asked for it; before any step result.
   */
  'prefilled'?: (_tokenrouter_cloud_v1_Prefilled__Output | null);
  'message'?: "opened"|"step"|"end"|"prefilled";
}
