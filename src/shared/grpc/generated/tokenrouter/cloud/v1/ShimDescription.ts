// Original file: proto/cloud_router.proto

import type { TokenizerFingerprint as _tokenrouter_cloud_v1_TokenizerFingerprint, TokenizerFingerprint__Output as _tokenrouter_cloud_v1_TokenizerFingerprint__Output } from '../../../tokenrouter/cloud/v1/TokenizerFingerprint';

export interface ShimDescription {
  /**
   * As in `SessionOpened`.
   */
  'backend'?: (string);
  'vocabSize'?: (number);
  'maxContext'?: (number);
  'tokenizer'?: (_tokenrouter_cloud_v1_TokenizerFingerprint | null);
}

export interface ShimDescription__Output {
  /**
   * As in `SessionOpened`.
   */
  'backend': (string);
  'vocabSize': (number);
  'maxContext': (number);
  'tokenizer': (_tokenrouter_cloud_v1_TokenizerFingerprint__Output | null);
}
