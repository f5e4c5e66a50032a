// Original file: proto/edge_generator.proto

import type { ChatMessage as _tokenrouter_edge_v1_ChatMessage, ChatMessage__Output as _tokenrouter_edge_v1_ChatMessage__Output } from '../../../tokenrouter/edge/v1/ChatMessage';
import type { PrivateSpan as _tokenrouter_edge_v1_PrivateSpan, PrivateSpan__Output as _tokenrouter_edge_v1_PrivateSpan__Output } from '../../../tokenrouter/edge/v1/PrivateSpan';

export interface GenerateRequest {
  /**
   * Text to continue. Or, instead, `messages`: exactly one of the two.
   */
  'prompt'?: (string);
  /**
   * joint (default), small_only or llm_only. Words: this contract's older spelling says slm / small for the edge
   * model and llm for the cloud model: small_only = the edge model alone, llm_only = the cloud model alone,
   * source slm = chosen by the edge model, slm_ms = the edge model's time.
   */
  'mode'?: (string);
  /**
   * Unset fields take the edge's defaults: the router's default_threshold (0.5 for the built-in one), 64 new tokens, greedy, top_p 1, seed 0, span 1,
   * and the edge's speculation setting.
   */
  'threshold'?: (number | string);
  'maxNewTokens'?: (number);
  'temperature'?: (number | string);
  'topP'?: (number | string);
  'seed'?: (number);
  'stop'?: (string)[];
  'routeSpan'?: (number);
  /**
   * Speculative continuation: decode on from the edge's own guess while a routed token is on the network.
   * It never changes the tokens, only how long the edge waits.
   */
  'speculate'?: (boolean);
  /**
   * Names the chat this generation belongs to: its routed steps reach the cloud under this key, so a cloud of
   * several workers keeps the chat's turns on the worker that holds their shared prefix in cache. Unset:
   * the generation's own request id. At most 128 printable ASCII characters.
   */
  'conversation'?: (string);
  /**
   * Routing budgets the edge holds instead of a fixed threshold (each unset unless given): the target share of
   * generated tokens routed, in (0, 1]; the cloud tokens the edge box spends per minute, over all its generations;
   * the most milliseconds a token may wait for the cloud. The router still orders positions (the lowest scores
   * go first); only the cut on its scores moves. A request that names neither threshold nor a budget gets the
   * edge's --route-* settings; one that names only threshold gets exactly that threshold.
   */
  'routeShare'?: (number | string);
  'routeTokensPerMinute'?: (number);
  'routeWaitMs'?: (number);
  /**
   * A conversation instead of `prompt` (exactly one of the two): the edge renders it with its model's chat
   * template (the pack's, or the edge's --chat-template) and generates the assistant's next turn, which ends
   * at the model's end-of-turn token. Roles: system, user, assistant (developer = system). Special-token text
   * inside a message stays text unless the edge runs with --chat-special-tokens parse. A model without a
   * template answers INVALID_ARGUMENT. (A list cannot sit in a proto3 oneof, hence the rule in words.)
   */
  'messages'?: (_tokenrouter_edge_v1_ChatMessage)[];
  /**
   * Stretches of `prompt` that must never reach the cloud (with `messages`, each message marks its own): every
   * occurrence of their text, generated text included, goes to the cloud as a typed placeholder ([EMAIL_1],
   * [PRIVATE_2]) and comes back as the text. In Unicode code points, in order, without overlaps.
   */
  'privateSpans'?: (_tokenrouter_edge_v1_PrivateSpan)[];
  /**
   * Detector kinds to add to the edge's --private-detect for this request (email, phone, card, iban, ip, or an
   * operator's --private-pattern kind).
   */
  'privateDetect'?: (string)[];
  /**
   * What the output must follow, held on every token whichever model chose it (at most one; the constraint never
   * leaves the box: the cloud is asked for its top-k and the edge takes its most likely allowed token). A JSON
   * schema (its JSON text), a grammar in xgrammar's EBNF (llama.cpp's GBNF reads as it is), a regular
   * expression, or a list of strings the output is exactly one of. A refused one answers INVALID_ARGUMENT.
   */
  'jsonSchema'?: (string);
  'grammar'?: (string);
  'regex'?: (string);
  'choice'?: (string)[];
  '_threshold'?: "threshold";
  '_maxNewTokens'?: "maxNewTokens";
  '_temperature'?: "temperature";
  '_topP'?: "topP";
  '_seed'?: "seed";
  '_routeSpan'?: "routeSpan";
  '_speculate'?: "speculate";
  '_conversation'?: "conversation";
  '_routeShare'?: "routeShare";
  '_routeTokensPerMinute'?: "routeTokensPerMinute";
  '_routeWaitMs'?: "routeWaitMs";
  '_jsonSchema'?: "jsonSchema";
  '_grammar'?: "grammar";
  '_regex'?: "regex";
}

export interface GenerateRequest__Output {
  /**
   * Text to continue. Or, instead, `messages`: exactly one of the two.
   */
  'prompt': (string);
  /**
   * joint (default), small_only or llm_only. Words: this contract's older spelling says slm / small for the edge
   * model and llm for the cloud model: small_only = the edge model alone, llm_only = the cloud model alone,
   * source slm = chosen by the edge model, slm_ms = the edge model's time.
   */
  'mode': (string);
  /**
   * Unset fields take the edge's defaults: the router's default_threshold (0.5 for the built-in one), 64 new tokens, greedy, top_p 1, seed 0, span 1,
   * and the edge's speculation setting.
   */
  'threshold'?: (number);
  'maxNewTokens'?: (number);
  'temperature'?: (number);
  'topP'?: (number);
  'seed'?: (number);
  'stop': (string)[];
  'routeSpan'?: (number);
  /**
   * Speculative continuation: decode on from the edge's own guess while a routed token is on the network.
   * It never changes the tokens, only how long the edge waits.
   */
  'speculate'?: (boolean);
  /**
   * Names the chat this generation belongs to: its routed steps reach the cloud under this key, so a cloud of
   * several workers keeps the chat's turns on the worker that holds their shared prefix in cache. Unset:
   * the generation's own request id. At most 128 printable ASCII characters.
   */
  'conversation'?: (string);
  /**
   * Routing budgets the edge holds instead of a fixed threshold (each unset unless given): the target share of
   * generated tokens routed, in (0, 1]; the cloud tokens the edge box spends per minute, over all its generations;
   * the most milliseconds a token may wait for the cloud. The router still orders positions (the lowest scores
   * go first); only the cut on its scores moves. A request that names neither threshold nor a budget gets the
   * edge's --route-* settings; one that names only threshold gets exactly that threshold.
   */
  'routeShare'?: (number);
  'routeTokensPerMinute'?: (number);
  'routeWaitMs'?: (number);
  /**
   * A conversation instead of `prompt` (exactly one of the two): the edge renders it with its model's chat
   * template (the pack's, or the edge's --chat-template) and generates the assistant's next turn, which ends
   * at the model's end-of-turn token. Roles: system, user, assistant (developer = system). Special-token text
   * inside a message stays text unless the edge runs with --chat-special-tokens parse. A model without a
   * template answers INVALID_ARGUMENT. (A list cannot sit in a proto3 oneof, hence the rule in words.)
   */
  'messages': (_tokenrouter_edge_v1_ChatMessage__Output)[];
  /**
   * Stretches of `prompt` that must never reach the cloud (with `messages`, each message marks its own): every
   * occurrence of their text, generated text included, goes to the cloud as a typed placeholder ([EMAIL_1],
   * [PRIVATE_2]) and comes back as the text. In Unicode code points, in order, without overlaps.
   */
  'privateSpans': (_tokenrouter_edge_v1_PrivateSpan__Output)[];
  /**
   * Detector kinds to add to the edge's --private-detect for this request (email, phone, card, iban, ip, or an
   * operator's --private-pattern kind).
   */
  'privateDetect': (string)[];
  /**
   * What the output must follow, held on every token whichever model chose it (at most one; the constraint never
   * leaves the box: the cloud is asked for its top-k and the edge takes its most likely allowed token). A JSON
   * schema (its JSON text), a grammar in xgrammar's EBNF (llama.cpp's GBNF reads as it is), a regular
   * expression, or a list of strings the output is exactly one of. A refused one answers INVALID_ARGUMENT.
   */
  'jsonSchema'?: (string);
  'grammar'?: (string);
  'regex'?: (string);
  'choice': (string)[];
  '_threshold'?: "threshold";
  '_maxNewTokens'?: "maxNewTokens";
  '_temperature'?: "temperature";
  '_topP'?: "topP";
  '_seed'?: "seed";
  '_routeSpan'?: "routeSpan";
  '_speculate'?: "speculate";
  '_conversation'?: "conversation";
  '_routeShare'?: "routeShare";
  '_routeTokensPerMinute'?: "routeTokensPerMinute";
  '_routeWaitMs'?: "routeWaitMs";
  '_jsonSchema'?: "jsonSchema";
  '_grammar'?: "grammar";
  '_regex'?: "regex";
}
