// Streaming calls retried by their method's retry policy (src/client/retrying_stream.h, gRPC's
// retry design): a server-streaming call that fails with UNAVAILABLE before any response is
// retried with its request; a client-streaming call's messages are sent again to the next
// attempt, whether the failure came after the half-close or while the client was still writing;
// a response message commits the call (no retry after it); messages beyond the per-call buffer
// commit it too; the server's pushback and grpc-previous-rpc-attempts apply as for unary calls.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "asio/co_spawn.hpp"
#include "asio/experimental/awaitable_operators.hpp"
#include "asio/io_context.hpp"
#include "asio/steady_timer.hpp"
#include "asio/use_future.hpp"
#include "client/retrying_stream.h"
#include "ferry/channel.h"
#include "ferry/interceptor.h"
#include "ferry/server.h"
#include "ferry/service.h"
#include "ferry/testing/echo.pb.h"
#include "support/wait.h"

namespace ferry::retry_stream_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;

constexpr const char* kExpand = "/ferry.testing.Flaky/Expand";
constexpr const char* kCollect = "/ferry.testing.Flaky/Collect";
constexpr const char* kChat = "/ferry.testing.Flaky/Chat";

// Methods that fail with UNAVAILABLE on their first `failures` attempts, at a point the test
// chooses, and record what each attempt received.
class FlakyStreams {
 public:
  // Where a failing attempt fails.
  enum class FailAt { kStart, kAfterAllRequests, kAfterTwoRequests, kAfterOneResponse };

  FlakyStreams(int failures, FailAt where)
      : failures_(failures), where_(where), service_("ferry.testing.Flaky") {
    service_.add_server_streaming<EchoRequest, EchoResponse>(
        "Expand",
        [this](ServerContext& ctx, const EchoRequest& request,
               ServerWriter<EchoResponse>& writer) -> asio::awaitable<absl::Status> {
          const bool fail = begin_attempt(ctx, request.payload());
          if (fail && where_ != FailAt::kAfterOneResponse) {
            co_return absl::UnavailableError("not yet");
          }
          for (int i = 0; i < request.response_count(); ++i) {
            EchoResponse r;
            r.set_index(i);
            r.set_payload(request.payload());
            if (!(co_await writer.write(r)).ok()) co_return absl::CancelledError("gone");
            if (fail) co_return absl::UnavailableError("after one response");
          }
          co_return absl::OkStatus();
        });
    service_.add_client_streaming<EchoRequest, EchoResponse>(
        "Collect",
        [this](ServerContext& ctx, ServerReader<EchoRequest>& reader,
               EchoResponse& response) -> asio::awaitable<absl::Status> {
          const bool fail = begin_attempt(ctx, "");
          if (fail && where_ == FailAt::kStart) co_return absl::UnavailableError("not yet");
          EchoRequest r;
          std::string got;
          int n = 0;
          while (co_await reader.read(r)) {
            got += r.payload();
            ++n;
            if (fail && where_ == FailAt::kAfterTwoRequests && n == 2) {
              mid_stream_failures_.fetch_add(1);
              co_return absl::UnavailableError("mid-stream");
            }
          }
          record_payload(got);
          if (fail) co_return absl::UnavailableError("after the half-close");
          response.set_payload(got);
          response.set_received_messages(n);
          co_return absl::OkStatus();
        });
    service_.add_bidi_streaming<EchoRequest, EchoResponse>(
        "Chat",
        [this](ServerContext& ctx, ServerReaderWriter<EchoRequest, EchoResponse>& stream)
            -> asio::awaitable<absl::Status> {
          const bool fail = begin_attempt(ctx, "");
          EchoRequest r;
          std::string got;
          while (co_await stream.read(r)) {
            got += r.payload();
            if (fail && where_ == FailAt::kAfterTwoRequests && got.size() >= 2) {
              mid_stream_failures_.fetch_add(1);
              co_return absl::UnavailableError("mid-stream");
            }
            if (!fail || where_ == FailAt::kAfterOneResponse) {
              EchoResponse out;
              out.set_payload(r.payload());
              co_await stream.write(out);
              if (fail) co_return absl::UnavailableError("after one response");
            }
          }
          record_payload(got);
          co_return absl::OkStatus();
        });
    ServerOptions options;
    options.num_threads = 1;
    server_ = std::make_unique<Server>(options);
    server_->add_service(service_);
    port_ = server_->start("127.0.0.1", 0).value();
  }
  ~FlakyStreams() { server_->shutdown(100ms); }

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  int attempts() const { return attempts_.load(); }
  // Attempts that failed after their second request (FailAt::kAfterTwoRequests).
  int mid_stream_failures() const { return mid_stream_failures_.load(); }
  std::vector<std::string> previous_attempts() {
    std::lock_guard lock(mu_);
    return previous_;
  }
  std::vector<std::string> payloads() {
    std::lock_guard lock(mu_);
    return payloads_;
  }

 private:
  // Records the attempt; true when it must fail.
  bool begin_attempt(ServerContext& ctx, std::string_view request_payload) {
    std::lock_guard lock(mu_);
    auto header = ctx.client_metadata().get("grpc-previous-rpc-attempts");
    previous_.push_back(header ? std::string(*header) : "(none)");
    if (!request_payload.empty()) payloads_.emplace_back(request_payload);
    return attempts_.fetch_add(1) < failures_;
  }
  void record_payload(std::string p) {
    std::lock_guard lock(mu_);
    payloads_.push_back(std::move(p));
  }

  const int failures_;
  const FailAt where_;
  Service service_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::atomic<int> attempts_{0};
  std::atomic<int> mid_stream_failures_{0};
  std::mutex mu_;
  std::vector<std::string> previous_;
  std::vector<std::string> payloads_;
};

using FailAt = FlakyStreams::FailAt;

ChannelOptions retrying(int attempts = 4) {
  ChannelOptions options;
  RetryPolicy& p = options.method_configs["/ferry.testing.Flaky/"].retry_policy.emplace();
  p.max_attempts = attempts;
  p.initial_backoff = 5ms;
  p.max_backoff = 5ms;
  return options;
}

EchoRequest request(std::string payload, int response_count = 0) {
  EchoRequest r;
  r.set_payload(std::move(payload));
  r.set_response_count(response_count);
  return r;
}

// Reads every response of stream; how many came.
int read_all(BlockingClientStream& stream) {
  EchoResponse r;
  int n = 0;
  while (stream.read(r)) ++n;
  return n;
}

TEST(RetryStream, ServerStreamingRetriedBeforeAnyResponse) {
  FlakyStreams server(2, FailAt::kStart);
  Channel channel(server.target(), retrying());
  ClientContext ctx;
  ctx.set_timeout(10s);
  BlockingClientStream stream = channel.open_blocking(kExpand, ctx, request("abc", 3));
  EchoResponse r;
  int n = 0;
  while (stream.read(r)) {
    EXPECT_EQ(r.index(), n);
    EXPECT_EQ(r.payload(), "abc");
    ++n;
  }
  EXPECT_TRUE(stream.finish().ok());
  EXPECT_EQ(n, 3);
  EXPECT_EQ(server.attempts(), 3);
  EXPECT_EQ(server.previous_attempts(), (std::vector<std::string>{"(none)", "1", "2"}));
  EXPECT_EQ(server.payloads(), (std::vector<std::string>{"abc", "abc", "abc"}));
}

// Records each call's on_start and the outcome its on_finish saw.
class CountingInterceptor : public ClientInterceptor {
 public:
  asio::awaitable<absl::Status> on_start(ClientContext&, const CallInfo&) override {
    ++starts;
    co_return absl::OkStatus();
  }
  void on_finish(ClientContext&, const CallInfo&, const CallOutcome& outcome) override {
    std::lock_guard lock(mu);
    finishes.push_back(outcome.status);
  }
  std::atomic<int> starts{0};
  std::mutex mu;
  std::vector<absl::Status> finishes;
};

// An interceptor on the channel (the metrics one, say) must not turn the method's retry policy
// off: the call is retried as without it, and the interceptor sees one call and its final
// status, once.
TEST(RetryStream, InterceptorsKeepTheRetryPolicy) {
  for (const bool fails_for_good : {false, true}) {
    FlakyStreams server(fails_for_good ? 10 : 2, FailAt::kStart);
    auto interceptor = std::make_shared<CountingInterceptor>();
    ChannelOptions options = retrying(3);
    options.interceptors = {interceptor};
    Channel channel(server.target(), options);
    ClientContext ctx;
    ctx.set_timeout(10s);
    BlockingClientStream stream = channel.open_blocking(kExpand, ctx, request("abc", 3));
    const int n = read_all(stream);
    const absl::Status status = stream.finish();
    EXPECT_EQ(server.attempts(), 3) << fails_for_good;
    EXPECT_EQ(n, fails_for_good ? 0 : 3);
    EXPECT_EQ(status.code(),
              fails_for_good ? absl::StatusCode::kUnavailable : absl::StatusCode::kOk)
        << status;
    EXPECT_EQ(interceptor->starts.load(), 1);
    std::lock_guard lock(interceptor->mu);
    EXPECT_EQ(interceptor->finishes, std::vector<absl::Status>{status}) << fails_for_good;
  }
}

TEST(RetryStream, ServerStreamingCommitsOnTheFirstResponse) {
  FlakyStreams server(1, FailAt::kAfterOneResponse);
  Channel channel(server.target(), retrying());
  ClientContext ctx;
  ctx.set_timeout(10s);
  BlockingClientStream stream = channel.open_blocking(kExpand, ctx, request("abc", 3));
  EXPECT_EQ(read_all(stream), 1);
  EXPECT_EQ(stream.finish().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server.attempts(), 1);
}

TEST(RetryStream, ClientStreamingReplaysItsMessagesAfterTheHalfClose) {
  FlakyStreams server(2, FailAt::kAfterAllRequests);
  Channel channel(server.target(), retrying());
  ClientContext ctx;
  ctx.set_timeout(10s);
  BlockingClientStream stream = channel.open_blocking(kCollect, ctx);
  for (const char* p : {"a", "b", "c", "d", "e"}) ASSERT_TRUE(stream.write(request(p)).ok());
  EchoResponse response;
  EXPECT_TRUE(stream.finish_with_response(response).ok());
  EXPECT_EQ(response.received_messages(), 5);
  EXPECT_EQ(response.payload(), "abcde");
  EXPECT_EQ(server.attempts(), 3);
  EXPECT_EQ(server.payloads(), (std::vector<std::string>{"abcde", "abcde", "abcde"}));
}

TEST(RetryStream, ClientStreamingFailedWhileWritingGoesOnOverTheNextAttempt) {
  FlakyStreams server(1, FailAt::kAfterTwoRequests);
  Channel channel(server.target(), retrying());
  ClientContext ctx;
  ctx.set_timeout(10s);
  BlockingClientStream stream = channel.open_blocking(kCollect, ctx);
  for (const char* p : {"a", "b", "c", "d", "e", "f"}) {
    ASSERT_TRUE(stream.write(request(p)).ok()) << p;
    if (*p == 'b') {  // the first attempt fails while we still write
      ASSERT_TRUE(testing::eventually([&] { return server.mid_stream_failures() == 1; }));
    }
  }
  EchoResponse response;
  EXPECT_TRUE(stream.finish_with_response(response).ok());
  EXPECT_EQ(response.payload(), "abcdef");
  EXPECT_EQ(response.received_messages(), 6);
  EXPECT_EQ(server.attempts(), 2);
}

TEST(RetryStream, MessagesBeyondTheBufferCommitTheCall) {
  FlakyStreams server(1, FailAt::kAfterAllRequests);
  ChannelOptions options = retrying();
  options.retry_buffer_per_call = 100;
  Channel channel(server.target(), options);
  ClientContext ctx;
  ctx.set_timeout(10s);
  BlockingClientStream stream = channel.open_blocking(kCollect, ctx);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(stream.write(request(std::string(60, 'x'))).ok());
  EchoResponse response;
  EXPECT_EQ(stream.finish_with_response(response).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server.attempts(), 1);

  // Within the buffer the same call is retried.
  FlakyStreams again(1, FailAt::kAfterAllRequests);
  Channel roomy(again.target(), retrying());
  ClientContext ctx2;
  ctx2.set_timeout(10s);
  BlockingClientStream ok = roomy.open_blocking(kCollect, ctx2);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ok.write(request(std::string(60, 'x'))).ok());
  EXPECT_TRUE(ok.finish_with_response(response).ok());
  EXPECT_EQ(again.attempts(), 2);
}

TEST(RetryStream, NoPolicyNoRetry) {
  FlakyStreams server(1, FailAt::kStart);
  Channel channel(server.target());
  ClientContext ctx;
  ctx.set_timeout(10s);
  BlockingClientStream stream = channel.open_blocking(kExpand, ctx, request("abc", 3));
  EchoResponse r;
  EXPECT_FALSE(stream.read(r));
  EXPECT_EQ(stream.finish().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server.attempts(), 1);
}

// A read cancelled through its completion handler's slot (the losing side of `||`) cancels the
// call, which is not retried: the read completes with false and the call with CANCELLED.
TEST(RetryStream, ReadCancelledThroughItsSlotEndsTheCall) {
  using namespace asio::experimental::awaitable_operators;
  std::atomic<int> attempts{0};
  Service slow("ferry.testing.Slow");
  slow.add_server_streaming<EchoRequest, EchoResponse>(
      "Wait",
      [&](ServerContext&, const EchoRequest&,
          ServerWriter<EchoResponse>& writer) -> asio::awaitable<absl::Status> {
        attempts.fetch_add(1);
        asio::steady_timer timer(co_await asio::this_coro::executor, 2s);
        co_await timer.async_wait(asio::use_awaitable);
        co_await writer.write(EchoResponse());
        co_return absl::OkStatus();
      });
  ServerOptions server_options;
  server_options.num_threads = 1;
  Server server(server_options);
  server.add_service(slow);
  const int port = server.start("127.0.0.1", 0).value();
  ChannelOptions options;
  RetryPolicy& policy = options.method_config.retry_policy.emplace();
  policy.max_attempts = 3;
  policy.retryable_status_codes = {absl::StatusCode::kCancelled, absl::StatusCode::kUnavailable};
  Channel channel("127.0.0.1:" + std::to_string(port), options);
  asio::io_context io;
  auto body = [&]() -> asio::awaitable<std::string> {
    ClientContext ctx;
    ctx.set_timeout(10s);
    ClientStream stream = co_await channel.open("/ferry.testing.Slow/Wait", ctx, EchoRequest());
    EchoResponse r;
    auto raced =
        co_await (stream.read(r) || asio::steady_timer(io, 100ms).async_wait(asio::use_awaitable));
    if (raced.index() != 1) co_return "the read won";
    absl::Status s = co_await stream.finish();
    co_return std::string(absl::StatusCodeToString(s.code()));
  };
  std::future<std::string> result = asio::co_spawn(io, body(), asio::use_future);
  io.run();
  EXPECT_EQ(result.get(), "CANCELLED");
  EXPECT_EQ(attempts.load(), 1);
  server.shutdown(100ms);
}

// Bidi through the awaitable API, from a coroutine on another io_context: the first attempt
// fails after reading two messages, before answering; the call goes on over the second, which
// answers every message; once an answer came, a failure is final.
TEST(RetryStream, BidiAwaitedFromAnotherExecutor) {
  FlakyStreams server(1, FailAt::kAfterTwoRequests);
  Channel channel(server.target(), retrying());
  asio::io_context io;
  auto body = [&]() -> asio::awaitable<std::string> {
    ClientContext ctx;
    ctx.set_timeout(10s);
    ClientStream stream = co_await channel.open(kChat, ctx);
    std::string answers;
    for (const char* p : {"a", "b", "c"}) {
      if (!(co_await stream.write(request(p))).ok()) co_return "write failed";
      co_await asio::steady_timer(io, 20ms).async_wait(asio::use_awaitable);
    }
    co_await stream.writes_done();
    EchoResponse r;
    while (co_await stream.read(r)) answers += r.payload();
    absl::Status s = co_await stream.finish();
    co_return s.ok() ? answers : std::string(s.message());
  };
  std::future<std::string> result = asio::co_spawn(io, body(), asio::use_future);
  io.run();
  EXPECT_EQ(result.get(), "abc");
  EXPECT_EQ(server.attempts(), 2);
}

}  // namespace
}  // namespace ferry::retry_stream_test
