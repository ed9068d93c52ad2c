// grpc.testing.TestService, the service of gRPC's cross-language interop tests, on ferry's
// Service API (interop tests; uses only ferry's public headers and the generated grpc.testing
// messages). Behaviour follows gRPC's interop-test-descriptions and grpc-go's interop server.
#pragma once

#include "ferry/service.h"

namespace ferry::interop {

// A Service named "grpc.testing.TestService" with:
//   EmptyCall            Empty in, Empty out.
//   UnaryCall            a COMPRESSABLE payload of response_size zero bytes; response_status
//                        (code != 0) becomes the call's status; expect_compressed=true is refused
//                        with INVALID_ARGUMENT (ferry never accepts compressed requests, so such a
//                        request was not compressed).
//   StreamingOutputCall  one response per response_parameters entry (size, after interval_us);
//                        then response_status, if set.
//   StreamingInputCall   aggregated_payload_size of all requests, after the client half-closes.
//   FullDuplexCall       answers each request at once per its response_parameters; a request
//                        with response_status (code != 0) ends the call with that status.
//   HalfDuplexCall       buffers the requests until the half-close, then answers them in order.
// UnaryCall and FullDuplexCall echo the first x-grpc-test-echo-initial value in the response
// headers and the first x-grpc-test-echo-trailing-bin value in the trailers.
// grpc.testing.UnimplementedService is deliberately not provided (as in grpc-go's server):
// calls to it fail with UNIMPLEMENTED from ferry's router.
// The returned Service must outlive the Server it is added to.
Service make_test_service();

}  // namespace ferry::interop
