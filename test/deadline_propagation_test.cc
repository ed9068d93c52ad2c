// Deadline and cancellation propagation through two hops (ClientContext::from_server_context):
// a client calls Relay/Forward, whose handler calls Relay/Sink with a context made from its own.
// The Sink handler sees the client's deadline, and cancelling the client's call cancels the
// Sink call.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "asio/experimental/awaitable_operators.hpp"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "ferry/channel.h"
#include "ferry/client_context.h"
#include "ferry/server.h"
#include "ferry/service.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"

namespace ferry::deadline_propagation_test {
namespace {

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kForward = "/ferry.testing.Relay/Forward";
constexpr std::string_view kSink = "/ferry.testing.Relay/Sink";

// What the two hops saw; written on the server's threads.
struct Hops {
  std::mutex mutex;
  Clock::time_point forward_deadline;
  Clock::time_point sink_deadline;
  absl::Status downstream_status;  // Forward's call to Sink
  std::atomic<bool> sink_started{false};
  std::atomic<bool> sink_saw_cancellation{false};
  std::atomic<bool> forward_done{false};
};

// Forward relays its request to Sink with a context made from its own; Sink waits (up to 10 s)
// until its call is cancelled.
class RelayService : public Service {
 public:
  RelayService(Hops* hops, std::unique_ptr<Channel>* downstream) : Service("ferry.testing.Relay") {
    add_unary<EchoRequest, EchoResponse>(
        "Forward",
        [hops, downstream](ServerContext& ctx, const EchoRequest& request,
                           EchoResponse& response) -> asio::awaitable<absl::Status> {
          {
            std::lock_guard lock(hops->mutex);
            hops->forward_deadline = ctx.deadline();
          }
          ClientContext outgoing = ClientContext::from_server_context(ctx);
          absl::Status s = co_await (*downstream)->call(kSink, outgoing, request, response);
          {
            std::lock_guard lock(hops->mutex);
            hops->downstream_status = s;
          }
          hops->forward_done = true;
          co_return s;
        });
    add_unary<EchoRequest, EchoResponse>(
        "Sink",
        [hops](ServerContext& ctx, const EchoRequest&,
               EchoResponse&) -> asio::awaitable<absl::Status> {
          {
            std::lock_guard lock(hops->mutex);
            hops->sink_deadline = ctx.deadline();
          }
          hops->sink_started = true;
          asio::steady_timer timer(co_await asio::this_coro::executor);
          const auto until = Clock::now() + 10s;
          while (!ctx.is_cancelled() && Clock::now() < until) {
            timer.expires_after(2ms);
            co_await timer.async_wait(asio::use_awaitable);
          }
          hops->sink_saw_cancellation = ctx.is_cancelled();
          co_return absl::OkStatus();
        });
  }
};

TEST(DeadlinePropagation, TheSecondHopInheritsTheDeadline) {
  Hops hops;
  std::unique_ptr<Channel> downstream;
  RelayService relay(&hops, &downstream);
  Loopback loop({}, {}, &relay);
  downstream = std::make_unique<Channel>(loop.target());

  ClientContext ctx;
  ctx.set_timeout(500ms);
  EchoRequest request;
  EchoResponse response;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.channel().call(kForward, ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  ASSERT_TRUE(loop.wait_until([&] { return hops.forward_done.load(); }));
  // Sink's call ended by the same deadline (its handler notices within a poll).
  EXPECT_TRUE(loop.wait_until([&] { return hops.sink_saw_cancellation.load(); }));
  std::lock_guard lock(hops.mutex);
  ASSERT_NE(hops.sink_deadline, Clock::time_point::max());
  // The same deadline, give or take grpc-timeout's rounding and the hop's latency (tens of ms
  // on a loaded 2-core machine).
  const auto skew = hops.sink_deadline - hops.forward_deadline;
  EXPECT_LT(std::chrono::abs(skew), 250ms)
      << std::chrono::duration_cast<std::chrono::microseconds>(skew).count() << " us";
  // Never later than the caller's by more than the hop: the first server's deadline is its
  // receipt plus the grpc-timeout left when the headers were written, so it is the caller's
  // plus the time in between (a few ms; 6.6 ms under the sanitizers on a loaded machine). A
  // rounding or unit bug adds at least a unit of the timeout's encoding.
  EXPECT_LE(hops.forward_deadline, ctx.deadline() + 50ms);
  // The outgoing call ends by its own copy of the deadline, or, when the incoming call's timer
  // fired first (a loaded machine), by that call's cancellation reaching it: both are the
  // propagated deadline.
  EXPECT_TRUE(hops.downstream_status.code() == absl::StatusCode::kDeadlineExceeded ||
              hops.downstream_status.code() == absl::StatusCode::kCancelled)
      << hops.downstream_status;
}

TEST(DeadlinePropagation, CancellingTheIncomingCallCancelsTheOutgoingOne) {
  Hops hops;
  std::unique_ptr<Channel> downstream;
  RelayService relay(&hops, &downstream);
  Loopback loop({}, {}, &relay);
  downstream = std::make_unique<Channel>(loop.target());

  ClientContext ctx;  // no deadline: only the cancellation can end the Sink call early
  EchoRequest request;
  EchoResponse response;
  const auto started = Clock::now();
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    // The call loses to a watcher that returns once Sink is running: `||` then cancels the
    // call (RST_STREAM(CANCEL) to Forward).
    auto sink_running = [&]() -> asio::awaitable<void> {
      asio::steady_timer timer(co_await asio::this_coro::executor);
      while (!hops.sink_started.load()) {
        timer.expires_after(2ms);
        co_await timer.async_wait(asio::use_awaitable);
      }
    };
    auto result =
        co_await (loop.channel().call(kForward, ctx, request, response) || sink_running());
    if (result.index() == 0) co_return std::get<0>(result);
    co_return absl::CancelledError("cancelled by the test");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  // Forward's handler saw its outgoing call cancelled, and Sink saw its call cancelled, well
  // before Sink's own 10 s limit.
  ASSERT_TRUE(loop.wait_until([&] { return hops.forward_done.load(); }));
  EXPECT_LT(Clock::now() - started, 5s);
  EXPECT_TRUE(loop.wait_until([&] { return hops.sink_saw_cancellation.load(); }));
  std::lock_guard lock(hops.mutex);
  EXPECT_EQ(hops.downstream_status.code(), absl::StatusCode::kCancelled) << hops.downstream_status;
  EXPECT_EQ(hops.sink_deadline, Clock::time_point::max());
}

}  // namespace
}  // namespace ferry::deadline_propagation_test
