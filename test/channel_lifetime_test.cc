// A channel's lifetime against the calls it carries (ferry/channel.h, src/client): a call that
// waits in a retry's back-off when the channel is destroyed fails rather than hanging; a channel
// destroyed on its own thread does not join itself; a target or an address that asio cannot take
// fails its calls with a status instead of leaving the channel CONNECTING for ever; a connect
// whose deadline passes as it completes touches nothing of its finished frames.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "client/connector.h"
#include "ferry/blocking_stream.h"
#include "ferry/channel.h"
#include "ferry/resolver.h"
#include "ferry/server.h"
#include "ferry/service.h"
#include "ferry/testing/echo.pb.h"
#include "support/wait.h"

namespace ferry::channel_lifetime_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;

// Runs fn on a thread of its own and waits up to limit for its result. A call that hangs fails
// the test and ends the program there (its thread cannot be joined).
template <class Fn>
auto within(std::chrono::seconds limit, Fn fn) {
  using Result = decltype(fn());
  auto promise = std::make_shared<std::promise<Result>>();
  std::future<Result> result = promise->get_future();
  std::thread([promise, fn = std::move(fn)]() mutable { promise->set_value(fn()); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << "the call did not complete within " << limit.count() << " s";
    std::fflush(stdout);
    std::_Exit(1);
  }
  return result.get();
}

// Every attempt of every method fails with UNAVAILABLE, which retry policies retry.
class RefusingServer {
 public:
  RefusingServer() : service_("ferry.testing.Refusing") {
    service_.add_unary<EchoRequest, EchoResponse>(
        "Call",
        [this](ServerContext&, const EchoRequest&, EchoResponse&) -> asio::awaitable<absl::Status> {
          attempts_.fetch_add(1);
          co_return absl::UnavailableError("not now");
        });
    service_.add_bidi_streaming<EchoRequest, EchoResponse>(
        "Chat",
        [this](ServerContext&,
               ServerReaderWriter<EchoRequest, EchoResponse>&) -> asio::awaitable<absl::Status> {
          attempts_.fetch_add(1);
          co_return absl::UnavailableError("not now");
        });
    ServerOptions options;
    options.num_threads = 1;
    server_ = std::make_unique<Server>(options);
    server_->add_service(service_);
    port_ = server_->start("127.0.0.1", 0).value();
  }
  ~RefusingServer() { server_->shutdown(100ms); }

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  int attempts() const { return attempts_.load(); }
  // Waits until the server has seen n attempts.
  void wait_for_attempts(int n) const {
    ASSERT_TRUE(testing::eventually([&] { return attempts() >= n; })) << attempts();
  }

 private:
  Service service_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::atomic<int> attempts_{0};
};

// Retries after a back-off far longer than the test.
ChannelOptions long_backoff() {
  ChannelOptions options;
  RetryPolicy& p = options.method_configs["/ferry.testing.Refusing/"].retry_policy.emplace();
  p.max_attempts = 5;
  p.initial_backoff = 60s;
  p.max_backoff = 60s;
  return options;
}

// How a call whose channel was destroyed during its back-off ends: with its last attempt's
// status (UNAVAILABLE) or the closed channel's (CANCELLED), at once. The back-off is drawn from
// [0, 60 s): a draw under the test's 50 ms (about 1 in 1000) lets a second attempt in first.
void expect_ended_in_backoff(const absl::Status& status, int attempts) {
  EXPECT_LE(attempts, 2);
  EXPECT_TRUE(status.code() == absl::StatusCode::kCancelled ||
              status.code() == absl::StatusCode::kUnavailable)
      << status;
}

// A blocking unary call on another thread is in its retry's back-off when the channel goes: the
// call fails (the channel's contract: calls still running fail) instead of waiting on a loop that
// no longer runs. It used to hang for ever, its frame keeping the channel's core alive.
TEST(ChannelLifetime, UnaryCallInRetryBackoffFailsWhenTheChannelIsDestroyed) {
  RefusingServer server;
  auto channel = std::make_unique<Channel>(server.target(), long_backoff());
  std::future<absl::Status> call = std::async(std::launch::async, [&channel] {
    EchoRequest request;
    EchoResponse response;
    ClientContext ctx;
    ctx.set_timeout(120s);
    return channel->call_blocking("/ferry.testing.Refusing/Call", ctx, request, response);
  });
  server.wait_for_attempts(1);
  std::this_thread::sleep_for(50ms);  // the attempt's status is in: the call waits to retry
  const auto destroyed = std::chrono::steady_clock::now();
  channel.reset();
  ASSERT_EQ(call.wait_for(10s), std::future_status::ready) << "the call hangs in its back-off";
  expect_ended_in_backoff(call.get(), server.attempts());
  EXPECT_LT(std::chrono::steady_clock::now() - destroyed, 5s);
}

// The same for a streaming call kept by a retry policy (client/retrying_stream.h). Its write
// may itself wait in the back-off (an operation on a failed attempt waits for the retry), so the
// write and the finish both run beside the test.
TEST(ChannelLifetime, RetryingStreamInBackoffFailsWhenTheChannelIsDestroyed) {
  RefusingServer server;
  auto channel = std::make_unique<Channel>(server.target(), long_backoff());
  ClientContext ctx;
  ctx.set_timeout(120s);
  BlockingClientStream stream = channel->open_blocking("/ferry.testing.Refusing/Chat", ctx);
  std::future<absl::Status> finished = std::async(std::launch::async, [&stream] {
    EchoRequest request;
    request.set_payload("x");
    (void)stream.write(request);
    return stream.finish();
  });
  server.wait_for_attempts(1);
  std::this_thread::sleep_for(50ms);
  channel.reset();
  ASSERT_EQ(finished.wait_for(10s), std::future_status::ready) << "the stream hangs in back-off";
  expect_ended_in_backoff(finished.get(), server.attempts());
}

// The last reference to a Channel(target) dropped by a completion handler, which runs on the
// channel's own thread: ~Channel cannot join that thread. It used to call join() on itself, and
// std::terminate ended the program ("Resource deadlock avoided").
TEST(ChannelLifetime, ChannelDestroyedOnItsOwnThreadDoesNotJoinItself) {
  RefusingServer server;
  auto channel = std::make_shared<Channel>(server.target());
  auto request = std::make_shared<EchoRequest>();
  auto response = std::make_shared<EchoResponse>();
  auto ctx = std::make_shared<ClientContext>();
  ctx->set_timeout(10s);
  std::promise<std::thread::id> released;
  std::future<std::thread::id> where = released.get_future();
  Channel& ch = *channel;
  ch.call("/ferry.testing.Refusing/Call", *ctx, *request, *response,
          [channel = std::move(channel), request, response, ctx,
           released = std::move(released)](absl::Status) mutable {
            channel.reset();  // the last reference: ~Channel on the channel's thread
            released.set_value(std::this_thread::get_id());
          });
  ASSERT_EQ(where.wait_for(10s), std::future_status::ready);
  EXPECT_NE(where.get(), std::this_thread::get_id());
  std::this_thread::sleep_for(100ms);  // the detached thread ends its loop and goes
}

// An abstract name asio's endpoint cannot hold (107 bytes: 108 with its leading NUL) is refused
// when the target parses; it used to pass, throw inside the detached connection attempt, and
// leave the channel CONNECTING for ever (a call without a deadline hung).
TEST(ChannelLifetime, TooLongAbstractNameFailsTheCall) {
  Channel channel("unix-abstract:" + std::string(107, 'a'));
  const absl::Status status = within(10s, [&channel] {
    EchoRequest request;
    EchoResponse response;
    ClientContext ctx;  // no deadline: a hang is a hang
    return channel.call_blocking("/ferry.testing.Refusing/Call", ctx, request, response);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("too long"), std::string_view::npos) << status;
}

// The same name from an application's resolver (no target check on the way): the connection
// attempt fails with a status, and the channel goes on to TRANSIENT_FAILURE.
TEST(ChannelLifetime, TooLongUnixAddressFromAResolverFailsTheCall) {
  Address address;
  address.unix_path = std::string(1, '\0') + std::string(200, 'a');
  ChannelOptions options;
  options.resolver = make_static_resolver({address});
  Channel channel("anything", options);
  const absl::Status status = within(10s, [&channel] {
    EchoRequest request;
    EchoResponse response;
    ClientContext ctx;  // no deadline: fails fast once the only address has failed
    return channel.call_blocking("/ferry.testing.Refusing/Call", ctx, request, response);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("too long"), std::string_view::npos) << status;
}

// Connections whose deadline falls about when they complete: the timeout's handler, queued in
// the same pass of the reactor as the connect's completion, runs after the connect's frames are
// gone. It used to write into them and close a socket that was gone: the next connection's, when
// its frame reused the block (so a connection with 10 s to go "timed out"; under ASan with
// frames not recycled, a heap-use-after-free). Every other connection here has 10 s.
TEST(ChannelLifetime, ConnectCompletingAsItsDeadlinePassesTouchesNothingAfterwards) {
  asio::io_context io(1);
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  Address address;
  address.tcp = acceptor.local_endpoint();
  ChannelOptions options;
  constexpr int kPairs = 400;
  int tight_done = 0;
  int roomy_connected = 0;
  std::string roomy_failure;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < kPairs; ++i) {
          const auto now = std::chrono::steady_clock::now();
          auto tight = co_await detail::connect_address(
              io.get_executor(), address, "", now + std::chrono::microseconds(i % 40), options);
          ++tight_done;
          auto roomy =
              co_await detail::connect_address(io.get_executor(), address, "", now + 10s, options);
          if (roomy.ok()) {
            ++roomy_connected;
          } else if (roomy_failure.empty()) {
            roomy_failure = roomy.status().ToString();
          }
        }
      },
      asio::detached);
  io.run();  // the connections wait in the listen backlog, never accepted
  EXPECT_EQ(tight_done, kPairs);
  EXPECT_EQ(roomy_connected, kPairs) << roomy_failure;
}

}  // namespace
}  // namespace ferry::channel_lifetime_test
