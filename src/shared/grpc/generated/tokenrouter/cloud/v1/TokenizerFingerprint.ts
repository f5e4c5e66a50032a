// Original file: proto/cloud_router.proto

import type { TokenizerPartDigest as _tokenrouter_cloud_v1_TokenizerPartDigest, TokenizerPartDigest__Output as _tokenrouter_cloud_v1_TokenizerPartDigest__Output } from '../../../tokenrouter/cloud/v1/TokenizerPartDigest';

/**
 * What a model pack means by its token ids. Both sides compute it the same way (src/shared/tokenizer-fingerprint.ts)
 * from tokenizer.json and tokenizer_config.json; equal `sha256` = the same tokenizer.
 */
export interface TokenizerFingerprint {
  /**
   * SHA-256 (hex) over the parts' digests, joined by ':' in the order of `parts`.
   */
  'sha256'?: (string);
  /**
   * Distinct ids the tokenizer names (its vocabulary and added tokens).
   */
  'vocabularySize'?: (number);
  /**
   * Each part's own SHA-256, so that a mismatch can say which differ: vocabulary, model (type, merges,
   * settings), normalizer (with the pre-tokenizer, post-processor and decoder), added_tokens, special_ids.
   */
  'parts'?: (_tokenrouter_cloud_v1_TokenizerPartDigest)[];
}

/**
 * What a model pack means by its token ids. Both sides compute it the same way (src/shared/tokenizer-fingerprint.ts)
 * from tokenizer.json and tokenizer_config.json; equal `sha256` = the same tokenizer.
 */
export interface TokenizerFingerprint__Output {
  /**
   * SHA-256 (hex) over the parts' digests, joined by ':' in the order of `parts`.
   */
  'sha256': (string);
  /**
   * Distinct ids the tokenizer names (its vocabulary and added tokens).
   */
  'vocabularySize': (number);
  /**
   * Each part's own SHA-256, so that a mismatch can say which differ: vocabulary, model (type, merges,
   * settings), normalizer (with the pre-tokenizer, post-processor and decoder), added_tokens, special_ids.
   */
  'parts': (_tokenrouter_cloud_v1_TokenizerPartDigest__Output)[];
}
