// Loopback tests of Server::shutdown(grace): calls that finish within the grace period complete,
// calls that outlast it are cancelled on both ends, new calls are refused as UNAVAILABLE, and
// shutdown returns in bounded time whatever is in flight.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"

namespace ferry::shutdown_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using namespace testing::echo_methods;
using Clock = std::chrono::steady_clock;

// Runs Server::shutdown(grace) on its own thread (it blocks) and records how long it took.
class ShutdownInBackground {
 public:
  ShutdownInBackground(Server& server, std::chrono::milliseconds grace)
      : started_(Clock::now()), done_(std::async(std::launch::async, [this, &server, grace] {
          server.shutdown(grace);
          return Clock::now() - started_;
        })) {}
  bool finished() const { return done_.wait_for(0s) == std::future_status::ready; }
  Clock::duration took() { return done_.get(); }

 private:
  Clock::time_point started_;
  std::future<Clock::duration> done_;
};

// A unary call spawned on the client loop; its status lands in *out.
void spawn_echo(Loopback& loop, Channel& channel, int delay_ms, absl::Status* out,
                std::atomic<int>& done) {
  asio::co_spawn(
      loop.io(),
      [&channel, delay_ms, out, &done]() -> asio::awaitable<void> {
        EchoRequest request;
        request.set_payload("in flight");
        request.set_delay_ms(delay_ms);
        EchoResponse response;
        ClientContext ctx;
        ctx.set_timeout(20s);
        *out = co_await channel.call(kEcho, ctx, request, response);
        if (out->ok() && response.payload() != "in flight") *out = absl::DataLossError("payload");
        done.fetch_add(1);
      },
      asio::detached);
}

TEST(Shutdown, CallsFinishingWithinTheGracePeriodComplete) {
  Loopback loop;
  std::atomic<int> done{0};
  absl::Status unary = absl::UnknownError("not run");
  spawn_echo(loop, loop.channel(), 300, &unary, done);
  // A server stream that takes ~300 ms too, and a client stream still sending.
  absl::Status expand = absl::UnknownError("not run"), collect = absl::UnknownError("not run");
  int expanded = 0;
  EchoResponse collected;
  ClientContext expand_ctx, collect_ctx;
  asio::co_spawn(
      loop.io(),
      [&]() -> asio::awaitable<void> {
        ClientStream stream = co_await loop.channel().open(kExpand, expand_ctx);
        EchoRequest request;
        request.set_response_count(10);
        request.set_delay_ms(30);
        (void)co_await stream.write_last(request);
        EchoResponse response;
        while (co_await stream.read(response)) ++expanded;
        expand = co_await stream.finish();
        done.fetch_add(1);
      },
      asio::detached);
  asio::co_spawn(
      loop.io(),
      [&]() -> asio::awaitable<void> {
        ClientWriter<EchoRequest> writer = co_await loop.stub().Collect(collect_ctx);
        EchoRequest request;
        request.set_payload("more");
        for (int i = 0; i < 10; ++i) {
          (void)co_await writer.write(request);
          asio::steady_timer t(co_await asio::this_coro::executor, 30ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        collect = co_await writer.finish(collected);
        done.fetch_add(1);
      },
      asio::detached);
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().started.load() == 3; }));

  ShutdownInBackground shutdown(loop.server(), 5s);
  ASSERT_TRUE(loop.wait_until([&] { return done.load() == 3; }, 5s));
  EXPECT_TRUE(unary.ok()) << unary;
  EXPECT_TRUE(expand.ok()) << expand;
  EXPECT_EQ(expanded, 10);
  EXPECT_TRUE(collect.ok()) << collect;
  EXPECT_EQ(collected.received_messages(), 10);
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 0);
  // Once the last call is done the connection closes and shutdown returns, long before 5 s.
  ASSERT_TRUE(loop.wait_until([&] { return shutdown.finished(); }, 3s));
  EXPECT_LT(shutdown.took(), 2s);
}

TEST(Shutdown, CallsOutlastingTheGracePeriodAreCancelled) {
  Loopback loop;
  std::atomic<int> done{0};
  absl::Status quick = absl::UnknownError("not run"), slow = absl::UnknownError("not run");
  spawn_echo(loop, loop.channel(), 50, &quick, done);
  spawn_echo(loop, loop.channel(), 10'000, &slow, done);
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().started.load() == 2; }));

  ShutdownInBackground shutdown(loop.server(), 300ms);
  ASSERT_TRUE(loop.wait_until([&] { return done.load() == 2; }, 5s));
  EXPECT_TRUE(quick.ok()) << quick;
  EXPECT_TRUE(slow.code() == absl::StatusCode::kUnavailable ||
              slow.code() == absl::StatusCode::kCancelled)
      << slow;
  ASSERT_TRUE(loop.wait_until([&] { return shutdown.finished(); }, 5s));
  const auto took = shutdown.took();
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 2s);
  // The slow handler saw the cancellation and returned.
  EXPECT_EQ(loop.probe().finished.load(), 2);
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

TEST(Shutdown, StreamOutlastingTheGracePeriodFailsItsPendingOperations) {
  Loopback loop;
  ClientContext ctx;
  int received = 0;
  absl::Status status = absl::UnknownError("not run");
  bool ended = false;
  asio::co_spawn(
      loop.io(),
      [&]() -> asio::awaitable<void> {
        ClientStream stream = co_await loop.channel().open(kExpand, ctx);
        EchoRequest request;
        request.set_response_count(1'000'000);
        request.set_response_size(64 * 1024);  // the server's writer blocks on flow control
        (void)co_await stream.write_last(request);
        EchoResponse response;
        while (co_await stream.read(response)) {
          ++received;
          asio::steady_timer t(co_await asio::this_coro::executor, 20ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        status = co_await stream.finish();
        ended = true;
      },
      asio::detached);
  ASSERT_TRUE(loop.wait_until([&] { return received > 0; }));
  ShutdownInBackground shutdown(loop.server(), 200ms);
  ASSERT_TRUE(loop.wait_until([&] { return ended; }, 5s));
  EXPECT_TRUE(status.code() == absl::StatusCode::kUnavailable ||
              status.code() == absl::StatusCode::kCancelled)
      << status;
  ASSERT_TRUE(loop.wait_until([&] { return shutdown.finished(); }, 5s));
  EXPECT_LT(shutdown.took(), 2s);
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

TEST(Shutdown, NewCallsAfterShutdownBeginsAreUnavailable) {
  Loopback loop;
  std::atomic<int> done{0};
  absl::Status long_call = absl::UnknownError("not run");
  spawn_echo(loop, loop.channel(), 1000, &long_call, done);  // keeps the server in its grace
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().started.load() == 1; }));

  ShutdownInBackground shutdown(loop.server(), 5s);
  // Let the GOAWAY reach the client.
  loop.wait_until([] { return false; }, 100ms);

  // On the same channel (its connection is draining) ...
  std::atomic<int> new_done{0};
  absl::Status same_channel = absl::UnknownError("not run");
  spawn_echo(loop, loop.channel(), 0, &same_channel, new_done);
  // ... and on a new one (nothing accepts any more).
  Channel other(loop.io(), loop.target());
  absl::Status other_channel = absl::UnknownError("not run");
  spawn_echo(loop, other, 0, &other_channel, new_done);
  ASSERT_TRUE(loop.wait_until([&] { return new_done.load() == 2; }, 5s));
  EXPECT_EQ(same_channel.code(), absl::StatusCode::kUnavailable) << same_channel;
  EXPECT_EQ(other_channel.code(), absl::StatusCode::kUnavailable) << other_channel;
  EXPECT_EQ(loop.probe().started.load(), 1) << "a call started after shutdown began";

  // The call in flight still completes.
  ASSERT_TRUE(loop.wait_until([&] { return done.load() == 1; }, 5s));
  EXPECT_TRUE(long_call.ok()) << long_call;
  ASSERT_TRUE(loop.wait_until([&] { return shutdown.finished(); }, 5s));
  EXPECT_LT(shutdown.took(), 3s);
}

TEST(Shutdown, NewStreamRacingTheGoawayIsServedOrUnavailable) {
  // No pause between the shutdown and the new call: the stream may reach the server after its
  // GOAWAY or the channel may already know (then it reconnects, and is refused): UNAVAILABLE.
  // The shutdown is two GOAWAYs around a PING (RFC 9113 §6.8): a stream the client sent before
  // it read the first is served. Never a hang, never a handler run for a call that failed.
  Loopback loop;
  std::atomic<int> done{0};
  absl::Status long_call = absl::UnknownError("not run");
  spawn_echo(loop, loop.channel(), 500, &long_call, done);
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().started.load() == 1; }));
  ShutdownInBackground shutdown(loop.server(), 5s);
  // The GOAWAY is sent, the client has not read it (its loop does not run): a fixed pause, as
  // nothing shows the GOAWAY on the wire.
  std::this_thread::sleep_for(20ms);
  std::atomic<int> new_done{0};
  absl::Status racing[5];
  for (auto& s : racing) {
    s = absl::UnknownError("not run");
    spawn_echo(loop, loop.channel(), 0, &s, new_done);
  }
  ASSERT_TRUE(loop.wait_until([&] { return new_done.load() == 5; }, 5s));
  int served = 0;
  for (const auto& s : racing) {
    if (s.ok()) {
      ++served;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    }
  }
  ASSERT_TRUE(loop.wait_until([&] { return done.load() == 1 && shutdown.finished(); }, 5s));
  EXPECT_TRUE(long_call.ok()) << long_call;
  EXPECT_EQ(loop.probe().started.load(), 1 + served);
}

TEST(Shutdown, IdleConnectionsDoNotHoldShutdownForTheGracePeriod) {
  Loopback loop;
  std::vector<std::unique_ptr<Channel>> channels;
  std::atomic<int> done{0};
  std::vector<absl::Status> statuses(10);
  for (int i = 0; i < 10; ++i) {
    channels.push_back(std::make_unique<Channel>(loop.io(), loop.target()));
    spawn_echo(loop, *channels.back(), 0, &statuses[i], done);
  }
  ASSERT_TRUE(loop.wait_until([&] { return done.load() == 10; }));
  for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
  ShutdownInBackground shutdown(loop.server(), 10s);
  ASSERT_TRUE(loop.wait_until([&] { return shutdown.finished(); }, 5s));
  EXPECT_LT(shutdown.took(), 1s);
}

TEST(Shutdown, HandlerIgnoringCancellationDoesNotDelayTheClient) {
  // A handler that sleeps 1.5 s without looking at is_cancelled(): the client must be told at
  // the end of the grace period, not when the handler gets round to returning; shutdown then
  // waits for the handler (up to its own bound of a few seconds, past which it abandons it).
  Service service("ferry.testing.Stubborn");
  std::atomic<bool> entered{false};
  service.add_unary<EchoRequest, EchoResponse>(
      "Sleep",
      [&entered](ServerContext&, const EchoRequest&,
                 EchoResponse&) -> asio::awaitable<absl::Status> {
        entered = true;
        asio::steady_timer t(co_await asio::this_coro::executor, 1500ms);
        asio::error_code ignored;
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
        co_return absl::OkStatus();
      });
  Loopback loop({}, {}, &service);
  absl::Status status = absl::UnknownError("not run");
  bool ended = false;
  ClientContext ctx;
  asio::co_spawn(
      loop.io(),
      [&]() -> asio::awaitable<void> {
        EchoRequest request;
        EchoResponse response;
        status =
            co_await loop.channel().call("/ferry.testing.Stubborn/Sleep", ctx, request, response);
        ended = true;
      },
      asio::detached);
  ASSERT_TRUE(loop.wait_until([&] { return entered.load(); }));
  const auto start = Clock::now();
  ShutdownInBackground shutdown(loop.server(), 100ms);
  // The client is told at once: the connection is closed past the grace period.
  ASSERT_TRUE(loop.wait_until([&] { return ended; }, 3s));
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_TRUE(status.code() == absl::StatusCode::kUnavailable ||
              status.code() == absl::StatusCode::kCancelled)
      << status;
  ASSERT_TRUE(loop.wait_until([&] { return shutdown.finished(); }, 10s));
  EXPECT_LT(shutdown.took(), 5s);
}

}  // namespace
}  // namespace ferry::shutdown_test
