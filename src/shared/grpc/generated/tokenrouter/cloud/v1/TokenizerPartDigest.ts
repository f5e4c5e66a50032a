// Original file: proto/cloud_router.proto


export interface TokenizerPartDigest {
  'name'?: (string);
  'sha256'?: (string);
}

export interface TokenizerPartDigest__Output {
  'name': (string);
  'sha256': (string);
}
