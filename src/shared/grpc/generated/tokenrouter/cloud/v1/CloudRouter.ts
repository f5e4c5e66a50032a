// Original file: proto/cloud_router.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { DescribeRequest as _tokenrouter_cloud_v1_DescribeRequest, DescribeRequest__Output as _tokenrouter_cloud_v1_DescribeRequest__Output } from '../../../tokenrouter/cloud/v1/DescribeRequest';
import type { RouteRequest as _tokenrouter_cloud_v1_RouteRequest, RouteRequest__Output as _tokenrouter_cloud_v1_RouteRequest__Output } from '../../../tokenrouter/cloud/v1/RouteRequest';
import type { RouteResponse as _tokenrouter_cloud_v1_RouteResponse, RouteResponse__Output as _tokenrouter_cloud_v1_RouteResponse__Output } from '../../../tokenrouter/cloud/v1/RouteResponse';
import type { ScoreRequest as _tokenrouter_cloud_v1_ScoreRequest, ScoreRequest__Output as _tokenrouter_cloud_v1_ScoreRequest__Output } from '../../../tokenrouter/cloud/v1/ScoreRequest';
import type { ScoreResponse as _tokenrouter_cloud_v1_ScoreResponse, ScoreResponse__Output as _tokenrouter_cloud_v1_ScoreResponse__Output } from '../../../tokenrouter/cloud/v1/ScoreResponse';
import type { ShimDescription as _tokenrouter_cloud_v1_ShimDescription, ShimDescription__Output as _tokenrouter_cloud_v1_ShimDescription__Output } from '../../../tokenrouter/cloud/v1/ShimDescription';

export interface CloudRouterClient extends grpc.Client {
  /**
   * What the shim serves, without a session: its backend, window and tokenizer. The edge asks at start (and
   * again while the answer names another tokenizer than its edge model's) so that both sides agree on what
   * every id means before a token is routed; `SessionOpened.tokenizer` says the same on every stream. A shim
   * older than this call answers UNIMPLEMENTED; the edge then goes by `SessionOpened` alone. Checks the
   * bearer token like the other calls.
   */
  Describe(argument: _tokenrouter_cloud_v1_DescribeRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ShimDescription__Output>): grpc.ClientUnaryCall;
  Describe(argument: _tokenrouter_cloud_v1_DescribeRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ShimDescription__Output>): grpc.ClientUnaryCall;
  Describe(argument: _tokenrouter_cloud_v1_DescribeRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ShimDescription__Output>): grpc.ClientUnaryCall;
  Describe(argument: _tokenrouter_cloud_v1_DescribeRequest, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ShimDescription__Output>): grpc.ClientUnaryCall;
  /**
   * What the shim serves, without a session: its backend, window and tokenizer. The edge asks at start (and
   * again while the answer names another tokenizer than its edge model's) so that both sides agree on what
   * every id means before a token is routed; `SessionOpened.tokenizer` says the same on every stream. A shim
   * older than this call answers UNIMPLEMENTED; the edge then goes by `SessionOpened` alone. Checks the
   * bearer token like the other calls.
   */
  describe(argument: _tokenrouter_cloud_v1_DescribeRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ShimDescription__Output>): grpc.ClientUnaryCall;
  describe(argument: _tokenrouter_cloud_v1_DescribeRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ShimDescription__Output>): grpc.ClientUnaryCall;
  describe(argument: _tokenrouter_cloud_v1_DescribeRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ShimDescription__Output>): grpc.ClientUnaryCall;
  describe(argument: _tokenrouter_cloud_v1_DescribeRequest, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ShimDescription__Output>): grpc.ClientUnaryCall;
  
  Route(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteResponse__Output>;
  Route(options?: grpc.CallOptions): grpc.ClientDuplexStream<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteResponse__Output>;
  route(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteResponse__Output>;
  route(options?: grpc.CallOptions): grpc.ClientDuplexStream<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteResponse__Output>;
  
  /**
   * Teacher forcing, for the tools (router training, `router eval`, `eval`, benchmarks) against the cloud model
   * as it is deployed: the cloud model reads a token sequence in one forward pass and returns, per position,
   * the log-probability of the next id, of a candidate id (the edge model's proposal there), and its top-k.
   * One call per window of a document: a tool windows documents longer than `ScoreResponse.max_context`. No
   * session, nothing kept. A backend that cannot return prompt log-probabilities answers UNIMPLEMENTED with
   * the reason; so does a shim older than this call.
   */
  Score(argument: _tokenrouter_cloud_v1_ScoreRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ScoreResponse__Output>): grpc.ClientUnaryCall;
  Score(argument: _tokenrouter_cloud_v1_ScoreRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ScoreResponse__Output>): grpc.ClientUnaryCall;
  Score(argument: _tokenrouter_cloud_v1_ScoreRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ScoreResponse__Output>): grpc.ClientUnaryCall;
  Score(argument: _tokenrouter_cloud_v1_ScoreRequest, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ScoreResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Teacher forcing, for the tools (router training, `router eval`, `eval`, benchmarks) against the cloud model
   * as it is deployed: the cloud model reads a token sequence in one forward pass and returns, per position,
   * the log-probability of the next id, of a candidate id (the edge model's proposal there), and its top-k.
   * One call per window of a document: a tool windows documents longer than `ScoreResponse.max_context`. No
   * session, nothing kept. A backend that cannot return prompt log-probabilities answers UNIMPLEMENTED with
   * the reason; so does a shim older than this call.
   */
  score(argument: _tokenrouter_cloud_v1_ScoreRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ScoreResponse__Output>): grpc.ClientUnaryCall;
  score(argument: _tokenrouter_cloud_v1_ScoreRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ScoreResponse__Output>): grpc.ClientUnaryCall;
  score(argument: _tokenrouter_cloud_v1_ScoreRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ScoreResponse__Output>): grpc.ClientUnaryCall;
  score(argument: _tokenrouter_cloud_v1_ScoreRequest, callback: grpc.requestCallback<_tokenrouter_cloud_v1_ScoreResponse__Output>): grpc.ClientUnaryCall;
  
}

export interface CloudRouterHandlers extends grpc.UntypedServiceImplementation {
  /**
   * What the shim serves, without a session: its backend, window and tokenizer. The edge asks at start (and
   * again while the answer names another tokenizer than its edge model's) so that both sides agree on what
   * every id means before a token is routed; `SessionOpened.tokenizer` says the same on every stream. A shim
   * older than this call answers UNIMPLEMENTED; the edge then goes by `SessionOpened` alone. Checks the
   * bearer token like the other calls.
   */
  Describe: grpc.handleUnaryCall<_tokenrouter_cloud_v1_DescribeRequest__Output, _tokenrouter_cloud_v1_ShimDescription>;
  
  Route: grpc.handleBidiStreamingCall<_tokenrouter_cloud_v1_RouteRequest__Output, _tokenrouter_cloud_v1_RouteResponse>;
  
  /**
   * Teacher forcing, for the tools (router training, `router eval`, `eval`, benchmarks) against the cloud model
   * as it is deployed: the cloud model reads a token sequence in one forward pass and returns, per position,
   * the log-probability of the next id, of a candidate id (the edge model's proposal there), and its top-k.
   * One call per window of a document: a tool windows documents longer than `ScoreResponse.max_context`. No
   * session, nothing kept. A backend that cannot return prompt log-probabilities answers UNIMPLEMENTED with
   * the reason; so does a shim older than this call.
   */
  Score: grpc.handleUnaryCall<_tokenrouter_cloud_v1_ScoreRequest__Output, _tokenrouter_cloud_v1_ScoreResponse>;
  
}

export interface CloudRouterDefinition extends grpc.ServiceDefinition {
  Describe: MethodDefinition<_tokenrouter_cloud_v1_DescribeRequest, _tokenrouter_cloud_v1_ShimDescription, _tokenrouter_cloud_v1_DescribeRequest__Output, _tokenrouter_cloud_v1_ShimDescription__Output>
  Route: MethodDefinition<_tokenrouter_cloud_v1_RouteRequest, _tokenrouter_cloud_v1_RouteResponse, _tokenrouter_cloud_v1_RouteRequest__Output, _tokenrouter_cloud_v1_RouteResponse__Output>
  Score: MethodDefinition<_tokenrouter_cloud_v1_ScoreRequest, _tokenrouter_cloud_v1_ScoreResponse, _tokenrouter_cloud_v1_ScoreRequest__Output, _tokenrouter_cloud_v1_ScoreResponse__Output>
}
