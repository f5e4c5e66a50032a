/**
 * The project's protobuf contracts, loaded once with the same options the generated types were made with
 * (`bun run proto:gen`): camelCase fields, enums as strings, defaults filled in, oneofs named.
 *
 * @example
 * server.addService(cloudRouterService, handlers);
 * const client = new CloudRouterClient('127.0.0.1:50061', grpc.credentials.createInsecure());
 */
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { ProtoGrpcType as CloudProto } from './generated/cloud_router.ts';
import type { ProtoGrpcType as HealthProto } from './generated/health.ts';
import type { RouteRequest } from './generated/tokenrouter/cloud/v1/RouteRequest.ts';
import type { RouteResponse } from './generated/tokenrouter/cloud/v1/RouteResponse.ts';
import { PROJECT_ROOT } from '../paths.ts';

export const PROTO_DIR = join(PROJECT_ROOT, 'proto');

/** Must match the flags of the `proto:gen` script, or the generated types lie. */
export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

const cloudDefinition = protoLoader.loadSync('cloud_router.proto', PROTO_LOADER_OPTIONS);
const healthDefinition = protoLoader.loadSync('grpc/health/v1/health.proto', PROTO_LOADER_OPTIONS);

const cloud = (grpc.loadPackageDefinition(cloudDefinition) as unknown as CloudProto).tokenrouter.cloud.v1;
const health = (grpc.loadPackageDefinition(healthDefinition) as unknown as HealthProto).grpc.health.v1;

export const CloudRouterClient = cloud.CloudRouter;
export const cloudRouterService = cloud.CloudRouter.service;
export const HealthClient = health.Health;
export const healthService = health.Health.service;
/** The service name health checks use for the cloud router. */
export const CLOUD_ROUTER_SERVICE_NAME = 'tokenrouter.cloud.v1.CloudRouter';

/** A request exactly as it goes on the wire (for size measurements and tests). */
export function serializeRouteRequest(request: RouteRequest): Buffer {
  return cloudRouterService.Route.requestSerialize(request);
}

/** A response exactly as it goes on the wire (the shim checks its size before sending). */
export function serializeRouteResponse(response: RouteResponse): Buffer {
  return cloudRouterService.Route.responseSerialize(response);
}

export type * from './generated/tokenrouter/cloud/v1/RouteRequest.ts';
export type * from './generated/tokenrouter/cloud/v1/RouteResponse.ts';
export type * from './generated/tokenrouter/cloud/v1/RouteStep.ts';
export type * from './generated/tokenrouter/cloud/v1/ContextExtend.ts';
export type * from './generated/tokenrouter/cloud/v1/OpenSession.ts';
export type * from './generated/tokenrouter/cloud/v1/Sampling.ts';
export type * from './generated/tokenrouter/cloud/v1/StepResult.ts';
export type * from './generated/tokenrouter/cloud/v1/ShimLoad.ts';
export type * from './generated/tokenrouter/cloud/v1/SessionEnd.ts';
export type * from './generated/tokenrouter/cloud/v1/Prefilled.ts';
export type * from './generated/tokenrouter/cloud/v1/SessionOpened.ts';
export type * from './generated/tokenrouter/cloud/v1/TopAlternatives.ts';
export type { TokenSource as WireTokenSource, TokenSource__Output as WireTokenSource__Output } from './generated/tokenrouter/cloud/v1/TokenSource.ts';
export type { FinishReason as WireFinishReason, FinishReason__Output as WireFinishReason__Output } from './generated/tokenrouter/cloud/v1/FinishReason.ts';
export type { CloudRouterClient as CloudRouterClientType, CloudRouterHandlers } from './generated/tokenrouter/cloud/v1/CloudRouter.ts';
export type { HealthHandlers, HealthClient as HealthClientType } from './generated/grpc/health/v1/Health.ts';
export type * from './generated/grpc/health/v1/HealthCheckRequest.ts';
export type * from './generated/grpc/health/v1/HealthCheckResponse.ts';
export type * from './generated/tokenrouter/cloud/v1/ScoreRequest.ts';
export type * from './generated/tokenrouter/cloud/v1/ScoreResponse.ts';
export type * from './generated/tokenrouter/cloud/v1/PositionScore.ts';
export type * from './generated/tokenrouter/cloud/v1/DescribeRequest.ts';
export type * from './generated/tokenrouter/cloud/v1/ShimDescription.ts';
export type {
  TokenizerFingerprint as WireTokenizerFingerprint,
  TokenizerFingerprint__Output as WireTokenizerFingerprint__Output,
} from './generated/tokenrouter/cloud/v1/TokenizerFingerprint.ts';
