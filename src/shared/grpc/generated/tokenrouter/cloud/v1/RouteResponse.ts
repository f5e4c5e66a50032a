// Original file: proto/cloud_router.proto

import type { SessionOpened as _tokenrouter_cloud_v1_SessionOpened, SessionOpened__Output as _tokenrouter_cloud_v1_SessionOpened__Output } from '../../../tokenrouter/cloud/v1/SessionOpened';
import type { StepResult as _tokenrouter_cloud_v1_StepResult, StepResult__Output as _tokenrouter_cloud_v1_StepResult__Output } from '../../../tokenrouter/cloud/v1/StepResult';
import type { SessionEnd as _tokenrouter_cloud_v1_SessionEnd, SessionEnd__Output as _tokenrouter_cloud_v1_SessionEnd__Output } from '../../../tokenrouter/cloud/v1/SessionEnd';

export interface RouteResponse {
  'opened'?: (_tokenrouter_cloud_v1_SessionOpened | null);
  'step'?: (_tokenrouter_cloud_v1_StepResult | null);
  'end'?: (_tokenrouter_cloud_v1_SessionEnd | null);
  'message'?: "opened"|"step"|"end";
}

export interface RouteResponse__Output {
  'opened'?: (_tokenrouter_cloud_v1_SessionOpened__Output | null);
  'step'?: (_tokenrouter_cloud_v1_StepResult__Output | null);
  'end'?: (_tokenrouter_cloud_v1_SessionEnd__Output | null);
  'message'?: "opened"|"step"|"end";
}
