// Implementation of test/interop/test_service.h.
#include "interop/test_service.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "grpc/testing/empty.pb.h"
#include "grpc/testing/messages.pb.h"

namespace ferry::interop {
namespace {

using grpc::testing::EchoStatus;
using grpc::testing::Empty;
using grpc::testing::Payload;
using grpc::testing::PayloadType;
using grpc::testing::ResponseParameters;
using grpc::testing::SimpleRequest;
using grpc::testing::SimpleResponse;
using grpc::testing::StreamingInputCallRequest;
using grpc::testing::StreamingInputCallResponse;
using grpc::testing::StreamingOutputCallRequest;
using grpc::testing::StreamingOutputCallResponse;

constexpr std::string_view kEchoInitialKey = "x-grpc-test-echo-initial";
constexpr std::string_view kEchoTrailingKey = "x-grpc-test-echo-trailing-bin";

// A payload of `size` zero bytes; only COMPRESSABLE exists in grpc.testing.
absl::Status fill_payload(PayloadType type, std::int32_t size, Payload& payload) {
  if (size < 0) {
    return absl::InvalidArgumentError("requested a response with invalid length " +
                                      std::to_string(size));
  }
  if (type != grpc::testing::COMPRESSABLE) {
    return absl::InvalidArgumentError("unsupported payload type " +
                                      std::to_string(static_cast<int>(type)));
  }
  payload.set_type(type);
  payload.mutable_body()->assign(static_cast<std::size_t>(size), '\0');
  return absl::OkStatus();
}

absl::Status echo_status(const EchoStatus& status) {
  if (status.code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.code()), status.message());
}

// Only the first value of each, as grpc-go's server does: the client checks for exactly one.
void echo_metadata(ServerContext& ctx) {
  if (auto v = ctx.client_metadata().get(kEchoInitialKey)) {
    ctx.add_initial_metadata(kEchoInitialKey, *v);
  }
  if (auto v = ctx.client_metadata().get(kEchoTrailingKey)) {
    ctx.add_trailing_metadata(kEchoTrailingKey, *v);
  }
}

// The CompressedRequest feature (interop-test-descriptions): a request whose expect_compressed
// is set must have arrived compressed (value true) or uncompressed (false), else
// INVALID_ARGUMENT, which is also how clients probe for the feature. As grpc++'s server checks.
absl::Status check_expected_compression(const ServerContext& ctx,
                                        const grpc::testing::BoolValue* expect) {
  if (expect == nullptr) return absl::OkStatus();
  if (expect->value() && !ctx.last_message_compressed()) {
    return absl::InvalidArgumentError("expected a compressed request, got an uncompressed one");
  }
  if (!expect->value() && ctx.last_message_compressed()) {
    return absl::InvalidArgumentError("expected an uncompressed request, got a compressed one");
  }
  return absl::OkStatus();
}

// Waits interval_us, in short steps so that a cancelled call stops waiting promptly.
asio::awaitable<void> sleep_unless_cancelled(ServerContext& ctx, std::int32_t interval_us) {
  if (interval_us <= 0) co_return;
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::microseconds(interval_us);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!ctx.is_cancelled() && Clock::now() < until) {
    timer.expires_at(std::min(until, Clock::now() + std::chrono::milliseconds(5)));
    co_await timer.async_wait(asio::use_awaitable);
  }
}

// Sends one response per entry of params (each after its interval). The CompressedResponse
// feature: when any entry asks for compression the call's responses are gzip (if the client
// accepts it; set before the first response, later requests cannot change it), and each entry
// that does not ask is sent uncompressed.
asio::awaitable<absl::Status> answer(
    ServerContext& ctx, PayloadType type,
    const google::protobuf::RepeatedPtrField<ResponseParameters>& params,
    ServerWriter<StreamingOutputCallResponse>& writer) {
  for (const ResponseParameters& p : params) {
    if (p.compressed().value()) ctx.set_compression(Compression::kGzip);
  }
  StreamingOutputCallResponse response;
  for (const ResponseParameters& p : params) {
    co_await sleep_unless_cancelled(ctx, p.interval_us());
    if (ctx.is_cancelled()) co_return absl::CancelledError("the call was cancelled");
    if (absl::Status s = fill_payload(type, p.size(), *response.mutable_payload()); !s.ok()) {
      co_return s;
    }
    WriteOptions options;
    options.no_compression = !p.compressed().value();
    if (absl::Status s = co_await writer.write(response, options); !s.ok()) co_return s;
  }
  co_return absl::OkStatus();
}

}  // namespace

asio::awaitable<absl::Status> TestServiceImpl::EmptyCall(ServerContext&, const Empty&, Empty&) {
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> TestServiceImpl::UnaryCall(ServerContext& ctx,
                                                         const SimpleRequest& request,
                                                         SimpleResponse& response) {
  echo_metadata(ctx);
  if (absl::Status s = check_expected_compression(
          ctx, request.has_expect_compressed() ? &request.expect_compressed() : nullptr);
      !s.ok()) {
    co_return s;
  }
  if (request.response_compressed().value()) ctx.set_compression(Compression::kGzip);
  if (absl::Status s = echo_status(request.response_status()); !s.ok()) co_return s;
  if (request.fill_server_id()) {
    // One id per server process: the pick_first_unary case checks every call reached one server.
    static const std::string id = "ferry-interop-" + std::to_string(::getpid());
    response.set_server_id(id);
  }
  co_return fill_payload(request.response_type(), request.response_size(),
                         *response.mutable_payload());
}

asio::awaitable<absl::Status> TestServiceImpl::StreamingOutputCall(
    ServerContext& ctx, const StreamingOutputCallRequest& request,
    ServerWriter<StreamingOutputCallResponse>& writer) {
  absl::Status s =
      co_await answer(ctx, request.response_type(), request.response_parameters(), writer);
  if (!s.ok()) co_return s;
  co_return echo_status(request.response_status());
}

asio::awaitable<absl::Status> TestServiceImpl::StreamingInputCall(
    ServerContext& ctx, ServerReader<StreamingInputCallRequest>& reader,
    StreamingInputCallResponse& response) {
  StreamingInputCallRequest request;
  std::int64_t sum = 0;
  while (co_await reader.read(request)) {
    if (absl::Status s = check_expected_compression(
            ctx, request.has_expect_compressed() ? &request.expect_compressed() : nullptr);
        !s.ok()) {
      co_return s;
    }
    sum += static_cast<std::int64_t>(request.payload().body().size());
  }
  if (ctx.is_cancelled()) co_return absl::CancelledError("the call was cancelled");
  response.set_aggregated_payload_size(static_cast<std::int32_t>(sum));
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> TestServiceImpl::FullDuplexCall(
    ServerContext& ctx,
    ServerReaderWriter<StreamingOutputCallRequest, StreamingOutputCallResponse>& stream) {
  echo_metadata(ctx);
  ServerWriter<StreamingOutputCallResponse> writer(ctx);
  StreamingOutputCallRequest request;
  while (co_await stream.read(request)) {
    if (absl::Status s = echo_status(request.response_status()); !s.ok()) co_return s;
    absl::Status s =
        co_await answer(ctx, request.response_type(), request.response_parameters(), writer);
    if (!s.ok()) co_return s;
  }
  if (ctx.is_cancelled()) co_return absl::CancelledError("the call was cancelled");
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> TestServiceImpl::HalfDuplexCall(
    ServerContext& ctx,
    ServerReaderWriter<StreamingOutputCallRequest, StreamingOutputCallResponse>& stream) {
  std::vector<StreamingOutputCallRequest> requests;
  StreamingOutputCallRequest request;
  while (co_await stream.read(request)) requests.push_back(request);
  if (ctx.is_cancelled()) co_return absl::CancelledError("the call was cancelled");
  ServerWriter<StreamingOutputCallResponse> writer(ctx);
  for (const StreamingOutputCallRequest& r : requests) {
    absl::Status s = co_await answer(ctx, r.response_type(), r.response_parameters(), writer);
    if (!s.ok()) co_return s;
  }
  co_return absl::OkStatus();
}

}  // namespace ferry::interop
