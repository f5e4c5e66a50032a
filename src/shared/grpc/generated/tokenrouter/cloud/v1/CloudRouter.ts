// Original file: proto/cloud_router.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { RouteRequest as _tokenrouter_cloud_v1_RouteRequest, RouteRequest__Output as _tokenrouter_cloud_v1_RouteRequest__Output } from '../../../tokenrouter/cloud/v1/RouteRequest';
import type { RouteResponse as _tokenrouter_cloud_v1_RouteResponse, RouteResponse__Output as _tokenrouter_cloud_v1_RouteResponse__Output } from '../../../tokenrouter/cloud/v1/RouteResponse';

export interface CloudRouterClient extends grpc.Client {
  Route(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteResponse__Output>;
  Route(options?: grpc.CallOptions): grpc.ClientDuplexStream<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteResponse__Output>;
  route(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteResponse__Output>;
  route(options?: grpc.CallOptions): grpc.ClientDuplexStream<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteResponse__Output>;
  
}

export interface CloudRouterHandlers extends grpc.UntypedServiceImplementation {
  Route: grpc.handleBidiStreamingCall<_tokenrouter_cloud_v1_RouteRequest__Output, _tokenrouter_cloud_v1_RouteResponse>;
  
}

export interface CloudRouterDefinition extends grpc.ServiceDefinition {
  Route: MethodDefinition<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteResponse, _tokenrouter_cloud_v1_RouteRequest__Output, _tokenrouter_cloud_v1_RouteResponse__Output>
}
