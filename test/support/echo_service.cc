// Implementation of test/support/echo_service.h.
#include "support/echo_service.h"

#include <chrono>
#include <string>

#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"

namespace ferry::testing {
namespace {

// Waits delay_ms in small steps, giving up early when the call is cancelled.
asio::awaitable<void> wait_unless_cancelled(ServerContext& ctx, int delay_ms) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms);
  while (!ctx.is_cancelled() && std::chrono::steady_clock::now() < until) {
    timer.expires_after(std::chrono::milliseconds(2));
    co_await timer.async_wait(asio::use_awaitable);
  }
}

void fill_response(const EchoRequest& request, EchoResponse& response) {
  if (request.response_size() > 0) {
    response.mutable_payload()->assign(static_cast<std::size_t>(request.response_size()), 'r');
  } else {
    response.set_payload(request.payload());
  }
}

absl::Status requested_status(const EchoRequest& request) {
  if (request.status_code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(request.status_code()),
                      request.status_message());
}

// The handler's outcome, reported to the probe (if any) on the way out.
absl::Status report(EchoProbe* probe, ServerContext& ctx, absl::Status status) {
  if (probe != nullptr) probe->record(status, ctx.is_cancelled());
  return status;
}

void echo_metadata(ServerContext& ctx) {
  for (const auto& [key, value] : ctx.client_metadata()) {
    if (key.rfind("initial-", 0) == 0) ctx.add_initial_metadata(key, value);
    if (key.rfind("trailing-", 0) == 0) ctx.add_trailing_metadata(key, value);
  }
}

}  // namespace

asio::awaitable<absl::Status> EchoService::Echo(ServerContext& ctx, const EchoRequest& request,
                                                EchoResponse& response) {
  if (probe_ != nullptr) probe_->started.fetch_add(1);
  echo_metadata(ctx);
  if (request.delay_ms() > 0) co_await wait_unless_cancelled(ctx, request.delay_ms());
  if (ctx.is_cancelled()) co_return report(probe_, ctx, absl::CancelledError("cancelled"));
  fill_response(request, response);
  co_return report(probe_, ctx, requested_status(request));
}

asio::awaitable<absl::Status> EchoService::Collect(ServerContext& ctx,
                                                   ServerReader<EchoRequest>& reader,
                                                   EchoResponse& response) {
  if (probe_ != nullptr) probe_->started.fetch_add(1);
  echo_metadata(ctx);
  EchoRequest request;
  std::int64_t bytes = 0;
  int count = 0;
  while (co_await reader.read(request)) {
    if (probe_ != nullptr) probe_->messages_read.fetch_add(1);
    ++count;
    bytes += static_cast<std::int64_t>(request.payload().size());
    if (request.status_code() != 0) co_return report(probe_, ctx, requested_status(request));
    if (request.delay_ms() > 0) co_await wait_unless_cancelled(ctx, request.delay_ms());
  }
  if (ctx.is_cancelled()) co_return report(probe_, ctx, absl::CancelledError("cancelled"));
  response.set_received_messages(count);
  response.set_received_bytes(bytes);
  co_return report(probe_, ctx, absl::OkStatus());
}

asio::awaitable<absl::Status> EchoService::Expand(ServerContext& ctx, const EchoRequest& request,
                                                  ServerWriter<EchoResponse>& writer) {
  if (probe_ != nullptr) probe_->started.fetch_add(1);
  echo_metadata(ctx);
  EchoResponse response;
  fill_response(request, response);
  for (int i = 0; i < request.response_count(); ++i) {
    if (request.delay_ms() > 0) co_await wait_unless_cancelled(ctx, request.delay_ms());
    response.set_index(i);
    if (absl::Status s = co_await writer.write(response); !s.ok()) {
      co_return report(probe_, ctx, s);
    }
    if (probe_ != nullptr) probe_->messages_written.fetch_add(1);
  }
  co_return report(probe_, ctx, requested_status(request));
}

asio::awaitable<absl::Status> EchoService::Chat(
    ServerContext& ctx, ServerReaderWriter<EchoRequest, EchoResponse>& stream) {
  if (probe_ != nullptr) probe_->started.fetch_add(1);
  echo_metadata(ctx);
  EchoRequest request;
  EchoResponse response;
  int index = 0;
  while (co_await stream.read(request)) {
    if (probe_ != nullptr) probe_->messages_read.fetch_add(1);
    if (request.status_code() != 0) co_return report(probe_, ctx, requested_status(request));
    if (request.delay_ms() > 0) co_await wait_unless_cancelled(ctx, request.delay_ms());
    fill_response(request, response);
    response.set_index(index++);
    if (absl::Status s = co_await stream.write(response); !s.ok()) {
      co_return report(probe_, ctx, s);
    }
    if (probe_ != nullptr) probe_->messages_written.fetch_add(1);
  }
  if (ctx.is_cancelled()) co_return report(probe_, ctx, absl::CancelledError("cancelled"));
  co_return report(probe_, ctx, absl::OkStatus());
}

}  // namespace ferry::testing
