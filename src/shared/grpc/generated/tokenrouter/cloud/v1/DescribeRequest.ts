// Original file: proto/cloud_router.proto


export interface DescribeRequest {
}

export interface DescribeRequest__Output {
}
