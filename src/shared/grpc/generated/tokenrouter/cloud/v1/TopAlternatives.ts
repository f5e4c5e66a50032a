// Original file: proto/cloud_router.proto


export interface TopAlternatives {
  'ids'?: (number)[];
  'logprobs'?: (number | string)[];
}

export interface TopAlternatives__Output {
  'ids': (number)[];
  'logprobs': (number)[];
}
