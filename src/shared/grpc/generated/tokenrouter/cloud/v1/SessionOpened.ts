// Original file: proto/cloud_router.proto

import type { TokenizerFingerprint as _tokenrouter_cloud_v1_TokenizerFingerprint, TokenizerFingerprint__Output as _tokenrouter_cloud_v1_TokenizerFingerprint__Output } from '../../../tokenrouter/cloud/v1/TokenizerFingerprint';

export interface SessionOpened {
  /**
   * The shim's id for this session (logs on both sides).
   */
  'sessionId'?: (string);
  /**
   * Backend kind and model, e.g. "embedded:stories260k".
   */
  'backend'?: (string);
  /**
   * 0 when the backend does not say.
   */
  'vocabSize'?: (number);
  'maxContext'?: (number);
  /**
   * The shim's tokenizer (its --model-pack's); absent when it has none, or from a shim older than the field.
   * An edge whose edge model's tokenizer has another fingerprint routes nothing to this shim.
   */
  'tokenizer'?: (_tokenrouter_cloud_v1_TokenizerFingerprint | null);
}

export interface SessionOpened__Output {
  /**
   * The shim's id for this session (logs on both sides).
   */
  'sessionId': (string);
  /**
   * Backend kind and model, e.g. "embedded:stories260k".
   */
  'backend': (string);
  /**
   * 0 when the backend does not say.
   */
  'vocabSize': (number);
  'maxContext': (number);
  /**
   * The shim's tokenizer (its --model-pack's); absent when it has none, or from a shim older than the field.
   * An edge whose edge model's tokenizer has another fingerprint routes nothing to this shim.
   */
  'tokenizer': (_tokenrouter_cloud_v1_TokenizerFingerprint__Output | null);
}
