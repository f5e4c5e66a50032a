import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { ChatMessage as _tokenrouter_edge_v1_ChatMessage, ChatMessage__Output as _tokenrouter_edge_v1_ChatMessage__Output } from './tokenrouter/edge/v1/ChatMessage';
import type { CloudDisclosure as _tokenrouter_edge_v1_CloudDisclosure, CloudDisclosure__Output as _tokenrouter_edge_v1_CloudDisclosure__Output } from './tokenrouter/edge/v1/CloudDisclosure';
import type { ConstraintCounts as _tokenrouter_edge_v1_ConstraintCounts, ConstraintCounts__Output as _tokenrouter_edge_v1_ConstraintCounts__Output } from './tokenrouter/edge/v1/ConstraintCounts';
import type { Done as _tokenrouter_edge_v1_Done, Done__Output as _tokenrouter_edge_v1_Done__Output } from './tokenrouter/edge/v1/Done';
import type { EdgeGeneratorClient as _tokenrouter_edge_v1_EdgeGeneratorClient, EdgeGeneratorDefinition as _tokenrouter_edge_v1_EdgeGeneratorDefinition } from './tokenrouter/edge/v1/EdgeGenerator';
import type { Error as _tokenrouter_edge_v1_Error, Error__Output as _tokenrouter_edge_v1_Error__Output } from './tokenrouter/edge/v1/Error';
import type { GenerateEvent as _tokenrouter_edge_v1_GenerateEvent, GenerateEvent__Output as _tokenrouter_edge_v1_GenerateEvent__Output } from './tokenrouter/edge/v1/GenerateEvent';
import type { GenerateRequest as _tokenrouter_edge_v1_GenerateRequest, GenerateRequest__Output as _tokenrouter_edge_v1_GenerateRequest__Output } from './tokenrouter/edge/v1/GenerateRequest';
import type { Metrics as _tokenrouter_edge_v1_Metrics, Metrics__Output as _tokenrouter_edge_v1_Metrics__Output } from './tokenrouter/edge/v1/Metrics';
import type { PrivateSpan as _tokenrouter_edge_v1_PrivateSpan, PrivateSpan__Output as _tokenrouter_edge_v1_PrivateSpan__Output } from './tokenrouter/edge/v1/PrivateSpan';
import type { RoutingBudget as _tokenrouter_edge_v1_RoutingBudget, RoutingBudget__Output as _tokenrouter_edge_v1_RoutingBudget__Output } from './tokenrouter/edge/v1/RoutingBudget';
import type { Token as _tokenrouter_edge_v1_Token, Token__Output as _tokenrouter_edge_v1_Token__Output } from './tokenrouter/edge/v1/Token';
import type { TokenTimings as _tokenrouter_edge_v1_TokenTimings, TokenTimings__Output as _tokenrouter_edge_v1_TokenTimings__Output } from './tokenrouter/edge/v1/TokenTimings';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  tokenrouter: {
    edge: {
      v1: {
        ChatMessage: MessageTypeDefinition<_tokenrouter_edge_v1_ChatMessage, _tokenrouter_edge_v1_ChatMessage__Output>
        CloudDisclosure: MessageTypeDefinition<_tokenrouter_edge_v1_CloudDisclosure, _tokenrouter_edge_v1_CloudDisclosure__Output>
        ConstraintCounts: MessageTypeDefinition<_tokenrouter_edge_v1_ConstraintCounts, _tokenrouter_edge_v1_ConstraintCounts__Output>
        Done: MessageTypeDefinition<_tokenrouter_edge_v1_Done, _tokenrouter_edge_v1_Done__Output>
        EdgeGenerator: SubtypeConstructor<typeof grpc.Client, _tokenrouter_edge_v1_EdgeGeneratorClient> & { service: _tokenrouter_edge_v1_EdgeGeneratorDefinition }
        Error: MessageTypeDefinition<_tokenrouter_edge_v1_Error, _tokenrouter_edge_v1_Error__Output>
        GenerateEvent: MessageTypeDefinition<_tokenrouter_edge_v1_GenerateEvent, _tokenrouter_edge_v1_GenerateEvent__Output>
        GenerateRequest: MessageTypeDefinition<_tokenrouter_edge_v1_GenerateRequest, _tokenrouter_edge_v1_GenerateRequest__Output>
        Metrics: MessageTypeDefinition<_tokenrouter_edge_v1_Metrics, _tokenrouter_edge_v1_Metrics__Output>
        PrivateSpan: MessageTypeDefinition<_tokenrouter_edge_v1_PrivateSpan, _tokenrouter_edge_v1_PrivateSpan__Output>
        RoutingBudget: MessageTypeDefinition<_tokenrouter_edge_v1_RoutingBudget, _tokenrouter_edge_v1_RoutingBudget__Output>
        Token: MessageTypeDefinition<_tokenrouter_edge_v1_Token, _tokenrouter_edge_v1_Token__Output>
        TokenTimings: MessageTypeDefinition<_tokenrouter_edge_v1_TokenTimings, _tokenrouter_edge_v1_TokenTimings__Output>
      }
    }
  }
}

