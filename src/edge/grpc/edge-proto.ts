/** The edge's own gRPC contract (proto/edge_generator.proto), loaded with the shared proto-loader options. */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { ProtoGrpcType } from '../../shared/grpc/generated/edge_generator.ts';
import { PROTO_LOADER_OPTIONS } from '../../shared/grpc/proto.ts';

const definition = protoLoader.loadSync('edge_generator.proto', PROTO_LOADER_OPTIONS);
const edge = (grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType).tokenrouter.edge.v1;

export const EdgeGeneratorClient = edge.EdgeGenerator;
export const edgeGeneratorService = edge.EdgeGenerator.service;
export const EDGE_GENERATOR_SERVICE_NAME = 'tokenrouter.edge.v1.EdgeGenerator';

export type { EdgeGeneratorHandlers, EdgeGeneratorClient as EdgeGeneratorClientType } from '../../shared/grpc/generated/tokenrouter/edge/v1/EdgeGenerator.ts';
export type { GenerateRequest, GenerateRequest__Output } from '../../shared/grpc/generated/tokenrouter/edge/v1/GenerateRequest.ts';
export type { PrivateSpan__Output } from '../../shared/grpc/generated/tokenrouter/edge/v1/PrivateSpan.ts';
export type { GenerateEvent, GenerateEvent__Output } from '../../shared/grpc/generated/tokenrouter/edge/v1/GenerateEvent.ts';
