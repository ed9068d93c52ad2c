// grpc.testing.TestService, the service of gRPC's cross-language interop tests, implemented on
// the base class protoc-gen-ferry generates from test.proto (interop tests; uses only ferry's
// public headers and the generated grpc.testing code). Behaviour follows gRPC's
// interop-test-descriptions and grpc-go's interop server.
#pragma once

#include "grpc/testing/test.ferry.h"

namespace ferry::interop {

// grpc.testing.TestService with:
//   EmptyCall            Empty in, Empty out.
//   UnaryCall            a COMPRESSABLE payload of response_size zero bytes; response_status
//                        (code != 0) becomes the call's status; response_compressed asks for a
//                        gzip response (sent compressed if the client accepts gzip);
//                        expect_compressed must match the request's compressed flag, else
//                        INVALID_ARGUMENT (the clients' feature probe).
//   StreamingOutputCall  one response per response_parameters entry (size, after interval_us;
//                        the call is gzip when any entry asks for compressed, and entries that
//                        do not ask go uncompressed); then response_status, if set.
//   StreamingInputCall   aggregated_payload_size of all requests, after the client half-closes;
//                        each request's expect_compressed is checked as in UnaryCall.
//   FullDuplexCall       answers each request at once per its response_parameters; a request
//                        with response_status (code != 0) ends the call with that status.
//   HalfDuplexCall       buffers the requests until the half-close, then answers them in order.
// UnaryCall and FullDuplexCall echo the first x-grpc-test-echo-initial value in the response
// headers and the first x-grpc-test-echo-trailing-bin value in the trailers.
// CacheableUnaryCall and UnimplementedCall keep the generated base's answer, UNIMPLEMENTED
// (unimplemented_method relies on it). grpc.testing.UnimplementedService is deliberately not
// provided (as in grpc-go's and grpc++'s servers): calls to it fail with UNIMPLEMENTED from
// ferry's router.
//
// Stateless: one object serves every call, on all of the server's threads. It must outlive the
// Server it is added to.
class TestServiceImpl final : public grpc::testing::TestService::Service {
 public:
  asio::awaitable<absl::Status> EmptyCall(ServerContext& context,
                                          const grpc::testing::Empty& request,
                                          grpc::testing::Empty& response) override;

  asio::awaitable<absl::Status> UnaryCall(ServerContext& context,
                                          const grpc::testing::SimpleRequest& request,
                                          grpc::testing::SimpleResponse& response) override;

  asio::awaitable<absl::Status> StreamingOutputCall(
      ServerContext& context, const grpc::testing::StreamingOutputCallRequest& request,
      ServerWriter<grpc::testing::StreamingOutputCallResponse>& writer) override;

  asio::awaitable<absl::Status> StreamingInputCall(
      ServerContext& context, ServerReader<grpc::testing::StreamingInputCallRequest>& reader,
      grpc::testing::StreamingInputCallResponse& response) override;

  asio::awaitable<absl::Status> FullDuplexCall(
      ServerContext& context,
      ServerReaderWriter<grpc::testing::StreamingOutputCallRequest,
                         grpc::testing::StreamingOutputCallResponse>& stream) override;

  asio::awaitable<absl::Status> HalfDuplexCall(
      ServerContext& context,
      ServerReaderWriter<grpc::testing::StreamingOutputCallRequest,
                         grpc::testing::StreamingOutputCallResponse>& stream) override;
};

}  // namespace ferry::interop
