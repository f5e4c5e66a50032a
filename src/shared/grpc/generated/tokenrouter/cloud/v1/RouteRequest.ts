// Original file: proto/cloud_router.proto

import type { OpenSession as _tokenrouter_cloud_v1_OpenSession, OpenSession__Output as _tokenrouter_cloud_v1_OpenSession__Output } from '../../../tokenrouter/cloud/v1/OpenSession';
import type { RouteStep as _tokenrouter_cloud_v1_RouteStep, RouteStep__Output as _tokenrouter_cloud_v1_RouteStep__Output } from '../../../tokenrouter/cloud/v1/RouteStep';
import type { ContextExtend as _tokenrouter_cloud_v1_ContextExtend, ContextExtend__Output as _tokenrouter_cloud_v1_ContextExtend__Output } from '../../../tokenrouter/cloud/v1/ContextExtend';

export interface RouteRequest {
  'open'?: (_tokenrouter_cloud_v1_OpenSession | null);
  'step'?: (_tokenrouter_cloud_v1_RouteStep | null);
  'extend'?: (_tokenrouter_cloud_v1_ContextExtend | null);
  'message'?: "open"|"step"|"extend";
}

export interface RouteRequest__Output {
  'open'?: (_tokenrouter_cloud_v1_OpenSession__Output | null);
  'step'?: (_tokenrouter_cloud_v1_RouteStep__Output | null);
  'extend'?: (_tokenrouter_cloud_v1_ContextExtend__Output | null);
  'message'?: "open"|"step"|"extend";
}
