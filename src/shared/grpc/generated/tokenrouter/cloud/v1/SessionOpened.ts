// Original file: proto/cloud_router.proto


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
}
