// Original file: proto/cloud_router.proto

/**
 * Where a context token came from: one entry of the routing-decision history.
 */
export const TokenSource = {
  TOKEN_SOURCE_UNSPECIFIED: 'TOKEN_SOURCE_UNSPECIFIED',
  TOKEN_SOURCE_PROMPT: 'TOKEN_SOURCE_PROMPT',
  TOKEN_SOURCE_SLM: 'TOKEN_SOURCE_SLM',
  TOKEN_SOURCE_LLM: 'TOKEN_SOURCE_LLM',
  TOKEN_SOURCE_FALLBACK: 'TOKEN_SOURCE_FALLBACK',
} as const;

/**
 * Where a context token came from: one entry of the routing-decision history.
 */
export type TokenSource =
  | 'TOKEN_SOURCE_UNSPECIFIED'
  | 0
  | 'TOKEN_SOURCE_PROMPT'
  | 1
  | 'TOKEN_SOURCE_SLM'
  | 2
  | 'TOKEN_SOURCE_LLM'
  | 3
  | 'TOKEN_SOURCE_FALLBACK'
  | 4

/**
 * Where a context token came from: one entry of the routing-decision history.
 */
export type TokenSource__Output = typeof TokenSource[keyof typeof TokenSource]
