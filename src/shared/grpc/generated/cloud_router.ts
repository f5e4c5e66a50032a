import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { CloudRouterClient as _tokenrouter_cloud_v1_CloudRouterClient, CloudRouterDefinition as _tokenrouter_cloud_v1_CloudRouterDefinition } from './tokenrouter/cloud/v1/CloudRouter';
import type { ContextExtend as _tokenrouter_cloud_v1_ContextExtend, ContextExtend__Output as _tokenrouter_cloud_v1_ContextExtend__Output } from './tokenrouter/cloud/v1/ContextExtend';
import type { DescribeRequest as _tokenrouter_cloud_v1_DescribeRequest, DescribeRequest__Output as _tokenrouter_cloud_v1_DescribeRequest__Output } from './tokenrouter/cloud/v1/DescribeRequest';
import type { OpenSession as _tokenrouter_cloud_v1_OpenSession, OpenSession__Output as _tokenrouter_cloud_v1_OpenSession__Output } from './tokenrouter/cloud/v1/OpenSession';
import type { PositionScore as _tokenrouter_cloud_v1_PositionScore, PositionScore__Output as _tokenrouter_cloud_v1_PositionScore__Output } from './tokenrouter/cloud/v1/PositionScore';
import type { Prefilled as _tokenrouter_cloud_v1_Prefilled, Prefilled__Output as _tokenrouter_cloud_v1_Prefilled__Output } from './tokenrouter/cloud/v1/Prefilled';
import type { RouteRequest as _tokenrouter_cloud_v1_RouteRequest, RouteRequest__Output as _tokenrouter_cloud_v1_RouteRequest__Output } from './tokenrouter/cloud/v1/RouteRequest';
import type { RouteResponse as _tokenrouter_cloud_v1_RouteResponse, RouteResponse__Output as _tokenrouter_cloud_v1_RouteResponse__Output } from './tokenrouter/cloud/v1/RouteResponse';
import type { RouteStep as _tokenrouter_cloud_v1_RouteStep, RouteStep__Output as _tokenrouter_cloud_v1_RouteStep__Output } from './tokenrouter/cloud/v1/RouteStep';
import type { Sampling as _tokenrouter_cloud_v1_Sampling, Sampling__Output as _tokenrouter_cloud_v1_Sampling__Output } from './tokenrouter/cloud/v1/Sampling';
import type { ScoreRequest as _tokenrouter_cloud_v1_ScoreRequest, ScoreRequest__Output as _tokenrouter_cloud_v1_ScoreRequest__Output } from './tokenrouter/cloud/v1/ScoreRequest';
import type { ScoreResponse as _tokenrouter_cloud_v1_ScoreResponse, ScoreResponse__Output as _tokenrouter_cloud_v1_ScoreResponse__Output } from './tokenrouter/cloud/v1/ScoreResponse';
import type { SessionEnd as _tokenrouter_cloud_v1_SessionEnd, SessionEnd__Output as _tokenrouter_cloud_v1_SessionEnd__Output } from './tokenrouter/cloud/v1/SessionEnd';
import type { SessionOpened as _tokenrouter_cloud_v1_SessionOpened, SessionOpened__Output as _tokenrouter_cloud_v1_SessionOpened__Output } from './tokenrouter/cloud/v1/SessionOpened';
import type { ShimDescription as _tokenrouter_cloud_v1_ShimDescription, ShimDescription__Output as _tokenrouter_cloud_v1_ShimDescription__Output } from './tokenrouter/cloud/v1/ShimDescription';
import type { ShimLoad as _tokenrouter_cloud_v1_ShimLoad, ShimLoad__Output as _tokenrouter_cloud_v1_ShimLoad__Output } from './tokenrouter/cloud/v1/ShimLoad';
import type { StepResult as _tokenrouter_cloud_v1_StepResult, StepResult__Output as _tokenrouter_cloud_v1_StepResult__Output } from './tokenrouter/cloud/v1/StepResult';
import type { TokenizerFingerprint as _tokenrouter_cloud_v1_TokenizerFingerprint, TokenizerFingerprint__Output as _tokenrouter_cloud_v1_TokenizerFingerprint__Output } from './tokenrouter/cloud/v1/TokenizerFingerprint';
import type { TokenizerPartDigest as _tokenrouter_cloud_v1_TokenizerPartDigest, TokenizerPartDigest__Output as _tokenrouter_cloud_v1_TokenizerPartDigest__Output } from './tokenrouter/cloud/v1/TokenizerPartDigest';
import type { TopAlternatives as _tokenrouter_cloud_v1_TopAlternatives, TopAlternatives__Output as _tokenrouter_cloud_v1_TopAlternatives__Output } from './tokenrouter/cloud/v1/TopAlternatives';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  tokenrouter: {
    cloud: {
      v1: {
        CloudRouter: SubtypeConstructor<typeof grpc.Client, _tokenrouter_cloud_v1_CloudRouterClient> & { service: _tokenrouter_cloud_v1_CloudRouterDefinition }
        ContextExtend: MessageTypeDefinition<_tokenrouter_cloud_v1_ContextExtend, _tokenrouter_cloud_v1_ContextExtend__Output>
        DescribeRequest: MessageTypeDefinition<_tokenrouter_cloud_v1_DescribeRequest, _tokenrouter_cloud_v1_DescribeRequest__Output>
        FinishReason: EnumTypeDefinition
        OpenSession: MessageTypeDefinition<_tokenrouter_cloud_v1_OpenSession, _tokenrouter_cloud_v1_OpenSession__Output>
        PositionScore: MessageTypeDefinition<_tokenrouter_cloud_v1_PositionScore, _tokenrouter_cloud_v1_PositionScore__Output>
        Prefilled: MessageTypeDefinition<_tokenrouter_cloud_v1_Prefilled, _tokenrouter_cloud_v1_Prefilled__Output>
        RouteRequest: MessageTypeDefinition<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteRequest__Output>
        RouteResponse: MessageTypeDefinition<_tokenrouter_cloud_v1_RouteResponse, _tokenrouter_cloud_v1_RouteResponse__Output>
        RouteStep: MessageTypeDefinition<_tokenrouter_cloud_v1_RouteStep, _tokenrouter_cloud_v1_RouteStep__Output>
        Sampling: MessageTypeDefinition<_tokenrouter_cloud_v1_Sampling, _tokenrouter_cloud_v1_Sampling__Output>
        ScoreRequest: MessageTypeDefinition<_tokenrouter_cloud_v1_ScoreRequest, _tokenrouter_cloud_v1_ScoreRequest__Output>
        ScoreResponse: MessageTypeDefinition<_tokenrouter_cloud_v1_ScoreResponse, _tokenrouter_cloud_v1_ScoreResponse__Output>
        SessionEnd: MessageTypeDefinition<_tokenrouter_cloud_v1_SessionEnd, _tokenrouter_cloud_v1_SessionEnd__Output>
        SessionOpened: MessageTypeDefinition<_tokenrouter_cloud_v1_SessionOpened, _tokenrouter_cloud_v1_SessionOpened__Output>
        ShimDescription: MessageTypeDefinition<_tokenrouter_cloud_v1_ShimDescription, _tokenrouter_cloud_v1_ShimDescription__Output>
        ShimLoad: MessageTypeDefinition<_tokenrouter_cloud_v1_ShimLoad, _tokenrouter_cloud_v1_ShimLoad__Output>
        StepResult: MessageTypeDefinition<_tokenrouter_cloud_v1_StepResult, _tokenrouter_cloud_v1_StepResult__Output>
        TokenSource: EnumTypeDefinition
        TokenizerFingerprint: MessageTypeDefinition<_tokenrouter_cloud_v1_TokenizerFingerprint, _tokenrouter_cloud_v1_TokenizerFingerprint__Output>
        TokenizerPartDigest: MessageTypeDefinition<_tokenrouter_cloud_v1_TokenizerPartDigest, _tokenrouter_cloud_v1_TokenizerPartDigest__Output>
        TopAlternatives: MessageTypeDefinition<_tokenrouter_cloud_v1_TopAlternatives, _tokenrouter_cloud_v1_TopAlternatives__Output>
      }
    }
  }
}

