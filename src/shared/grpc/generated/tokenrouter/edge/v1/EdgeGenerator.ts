// Original file: proto/edge_generator.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { GenerateEvent as _tokenrouter_edge_v1_GenerateEvent, GenerateEvent__Output as _tokenrouter_edge_v1_GenerateEvent__Output } from '../../../tokenrouter/edge/v1/GenerateEvent';
import type { GenerateRequest as _tokenrouter_edge_v1_GenerateRequest, GenerateRequest__Output as _tokenrouter_edge_v1_GenerateRequest__Output } from '../../../tokenrouter/edge/v1/GenerateRequest';

export interface EdgeGeneratorClient extends grpc.Client {
  Generate(argument: _tokenrouter_edge_v1_GenerateRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_tokenrouter_edge_v1_GenerateEvent__Output>;
  Generate(argument: _tokenrouter_edge_v1_GenerateRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_tokenrouter_edge_v1_GenerateEvent__Output>;
  generate(argument: _tokenrouter_edge_v1_GenerateRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_tokenrouter_edge_v1_GenerateEvent__Output>;
  generate(argument: _tokenrouter_edge_v1_GenerateRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_tokenrouter_edge_v1_GenerateEvent__Output>;
  
}

export interface EdgeGeneratorHandlers extends grpc.UntypedServiceImplementation {
  Generate: grpc.handleServerStreamingCall<_tokenrouter_edge_v1_GenerateRequest__Output, _tokenrouter_edge_v1_GenerateEvent>;
  
}

export interface EdgeGeneratorDefinition extends grpc.ServiceDefinition {
  Generate: MethodDefinition<_tokenrouter_edge_v1_GenerateRequest, _tokenrouter_edge_v1_GenerateEvent, _tokenrouter_edge_v1_GenerateRequest__Output, _tokenrouter_edge_v1_GenerateEvent__Output>
}
