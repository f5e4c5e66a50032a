// Original file: proto/edge_generator.proto

import type { Token as _tokenrouter_edge_v1_Token, Token__Output as _tokenrouter_edge_v1_Token__Output } from '../../../tokenrouter/edge/v1/Token';
import type { Done as _tokenrouter_edge_v1_Done, Done__Output as _tokenrouter_edge_v1_Done__Output } from '../../../tokenrouter/edge/v1/Done';
import type { Error as _tokenrouter_edge_v1_Error, Error__Output as _tokenrouter_edge_v1_Error__Output } from '../../../tokenrouter/edge/v1/Error';

export interface GenerateEvent {
  'token'?: (_tokenrouter_edge_v1_Token | null);
  'done'?: (_tokenrouter_edge_v1_Done | null);
  'error'?: (_tokenrouter_edge_v1_Error | null);
  'event'?: "token"|"done"|"error";
}

export interface GenerateEvent__Output {
  'token'?: (_tokenrouter_edge_v1_Token__Output | null);
  'done'?: (_tokenrouter_edge_v1_Done__Output | null);
  'error'?: (_tokenrouter_edge_v1_Error__Output | null);
  'event'?: "token"|"done"|"error";
}
