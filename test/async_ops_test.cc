// Loopback tests of ferry's operations as asio initiating functions: completion tokens other than
// use_awaitable (a callback, use_future from another thread), and per-operation cancellation
// through a completion handler's cancellation slot, on both sides (`||` with a timer, an
// explicit cancellation_signal). Each cancellation test checks both ends: the status the
// cancelled side sees and that RST_STREAM reached the other.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <variant>

#include "asio/bind_cancellation_slot.hpp"
#include "asio/cancellation_signal.hpp"
#include "asio/experimental/awaitable_operators.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "asio/use_future.hpp"
#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/completion.h"
#include "ferry/server.h"
#include "ferry/server_stream.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"
#include "support/wait.h"

namespace ferry::async_ops_test {
namespace {

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using namespace testing::echo_methods;

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(asio::use_awaitable);
}

EchoRequest slow_request() {
  EchoRequest request;
  request.set_payload("slow");
  request.set_delay_ms(10'000);  // the handler sits on it until the call is cancelled
  return request;
}

// --- client: per-operation cancellation ---------------------------------------------------------

TEST(AsyncOps, UnaryCallRacedAgainstATimerIsCancelled) {
  Loopback loop;
  ClientContext ctx;
  const EchoRequest request = slow_request();
  EchoResponse response;
  absl::Status call_status = absl::UnknownError("not completed");
  const auto start = std::chrono::steady_clock::now();
  const std::size_t winner = loop.run([&]() -> asio::awaitable<std::size_t> {
    asio::steady_timer timer(co_await asio::this_coro::executor, 100ms);
    auto result = co_await ([&]() -> asio::awaitable<void> {
      call_status = co_await loop.stub().Echo(ctx, request, response);
    }() || timer.async_wait(asio::use_awaitable));
    co_return result.index();
  });
  EXPECT_EQ(winner, 1u);  // the timer
  EXPECT_EQ(call_status.code(), absl::StatusCode::kCancelled) << call_status;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // RST_STREAM(CANCEL) reached the handler, which gave up its sleep.
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
  EXPECT_TRUE(loop.wait_until([&] { return loop.server().active_calls() == 0; }));
}

TEST(AsyncOps, UnaryCallThatWinsTheRaceIsNotCancelled) {
  Loopback loop;
  ClientContext ctx;
  EchoRequest request;
  request.set_payload("quick");
  EchoResponse response;
  const std::size_t winner = loop.run([&]() -> asio::awaitable<std::size_t> {
    asio::steady_timer timer(co_await asio::this_coro::executor, 10s);
    auto result = co_await (loop.channel().call(kEcho, ctx, request, response) ||
                            timer.async_wait(asio::use_awaitable));
    if (result.index() == 0) EXPECT_TRUE(std::get<0>(result).ok()) << std::get<0>(result);
    co_return result.index();
  });
  EXPECT_EQ(winner, 0u);
  EXPECT_EQ(response.payload(), "quick");
  // The slot handler the call installed is gone: a later cancellation of the coroutine's slot
  // must not reach the finished call (ASan would see it).
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 0);
}

TEST(AsyncOps, UnaryCallCancelledThroughASignalWithACallbackToken) {
  Loopback loop;
  ClientContext ctx;
  const EchoRequest request = slow_request();
  EchoResponse response;
  asio::cancellation_signal signal;
  std::optional<absl::Status> status;
  bool on_loop_thread = false;
  loop.channel().call(kEcho, ctx, request, response,
                      asio::bind_cancellation_slot(signal.slot(), [&](absl::Status s) {
                        on_loop_thread = loop.io().get_executor().running_in_this_thread();
                        status = std::move(s);
                      }));
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().started.load() == 1; }));
  EXPECT_FALSE(status.has_value());
  signal.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(loop.wait_until([&] { return status.has_value(); }));
  EXPECT_EQ(status->code(), absl::StatusCode::kCancelled) << *status;
  EXPECT_TRUE(on_loop_thread);
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

TEST(AsyncOps, TotalCancellationAloneIsNotHonoured) {
  // Cancelling the call has side effects, which total cancellation forbids: the call goes on.
  Loopback loop;
  ClientContext ctx;
  EchoRequest request;
  request.set_payload("kept");
  request.set_delay_ms(200);
  EchoResponse response;
  asio::cancellation_signal signal;
  std::optional<absl::Status> status;
  loop.channel().call(
      kEcho, ctx, request, response,
      asio::bind_cancellation_slot(signal.slot(), [&](absl::Status s) { status = std::move(s); }));
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().started.load() == 1; }));
  signal.emit(asio::cancellation_type::total);
  ASSERT_TRUE(loop.wait_until([&] { return status.has_value(); }));
  EXPECT_TRUE(status->ok()) << *status;
  EXPECT_EQ(response.payload(), "kept");
}

TEST(AsyncOps, UnaryCallCancelledWhileItWaitsForAConnection) {
  // A listener that never answers: TCP connects (into its backlog) but the TLS handshake never
  // completes, so the call waits for a connection when it is cancelled. Cancelled there, the
  // call once threw asio's "co_await: Operation aborted" out of the channel's thread.
  asio::io_context listener_io;
  asio::ip::tcp::acceptor silent(listener_io, {asio::ip::make_address("127.0.0.1"), 0});
  ChannelOptions options;
  absl::StatusOr<std::shared_ptr<ChannelCredentials>> credentials =
      ChannelCredentials::create({});  // the system's roots: the handshake never starts anyway
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  options.credentials = *credentials;
  Channel channel("127.0.0.1:" + std::to_string(silent.local_endpoint().port()), options);
  ClientContext ctx;
  EchoRequest request;
  EchoResponse response;
  asio::cancellation_signal signal;
  std::promise<absl::Status> done;
  channel.call(kEcho, ctx, request, response,
               asio::bind_cancellation_slot(signal.slot(),
                                            [&](absl::Status s) { done.set_value(std::move(s)); }));
  auto connecting = [&] { return channel.state() == ConnectivityState::kConnecting; };
  EXPECT_TRUE(testing::eventually(connecting));
  signal.emit(asio::cancellation_type::terminal);
  std::future<absl::Status> status = done.get_future();
  ASSERT_EQ(status.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(status.get().code(), absl::StatusCode::kCancelled);
  // The channel goes here with its TLS handshake still pending: the subchannel's shutdown
  // abandons it, or LeakSanitizer finds its stream and coroutine kept alive by each other.
}

TEST(AsyncOps, StreamReadRacedAgainstATimerCancelsTheCall) {
  Loopback loop;
  ClientContext ctx;
  const EchoRequest request = slow_request();
  absl::Status finished;
  const std::size_t winner = loop.run([&]() -> asio::awaitable<std::size_t> {
    ClientReaderWriter<EchoRequest, EchoResponse> stream = co_await loop.stub().Chat(ctx);
    (void)co_await stream.write(request);
    EchoResponse response;
    asio::steady_timer timer(co_await asio::this_coro::executor, 100ms);
    auto result = co_await (stream.read(response) || timer.async_wait(asio::use_awaitable));
    finished = co_await stream.finish();
    // Later operations fail as the call ended.
    EXPECT_FALSE(co_await stream.read(response));
    EXPECT_EQ((co_await stream.write(request)).code(), absl::StatusCode::kCancelled);
    co_return result.index();
  });
  EXPECT_EQ(winner, 1u);
  EXPECT_EQ(finished.code(), absl::StatusCode::kCancelled) << finished;
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

TEST(AsyncOps, StreamFinishCancelledThroughASignal) {
  Loopback loop;
  ClientContext ctx;
  const EchoRequest request = slow_request();
  ClientStream stream;
  loop.run([&]() -> asio::awaitable<void> {
    stream = co_await loop.channel().open(kChat, ctx);
    (void)co_await stream.write(request);
  });
  asio::cancellation_signal signal;
  std::optional<absl::Status> status;
  stream.finish(
      asio::bind_cancellation_slot(signal.slot(), [&](absl::Status s) { status = std::move(s); }));
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().started.load() == 1; }));
  EXPECT_FALSE(status.has_value());
  signal.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(loop.wait_until([&] { return status.has_value(); }));
  EXPECT_EQ(status->code(), absl::StatusCode::kCancelled) << *status;
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

TEST(AsyncOps, CallAwaitedFromAnotherExecutorIsCancelledOnTheChannelsThread) {
  // The channel runs its own thread; the race runs on the test's loop. The cancellation is
  // relayed to the channel's thread rather than run on the one that emitted it.
  Loopback loop;
  Channel channel(loop.target());
  ClientContext ctx;
  const EchoRequest request = slow_request();
  EchoResponse response;
  absl::Status call_status = absl::UnknownError("not completed");
  const std::size_t winner = loop.run([&]() -> asio::awaitable<std::size_t> {
    asio::steady_timer timer(co_await asio::this_coro::executor, 100ms);
    auto result = co_await ([&]() -> asio::awaitable<void> {
      call_status = co_await channel.call(kEcho, ctx, request, response);
    }() || timer.async_wait(asio::use_awaitable));
    co_return result.index();
  });
  EXPECT_EQ(winner, 1u);
  EXPECT_EQ(call_status.code(), absl::StatusCode::kCancelled) << call_status;
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

// --- client: other completion tokens ------------------------------------------------------------

TEST(AsyncOps, UseFutureFromAnotherThread) {
  Loopback loop;
  Channel channel(loop.target());  // its own thread; this one only waits on futures
  ClientContext ctx;
  EchoRequest request;
  request.set_payload("future");
  EchoResponse response;
  absl::Status s = channel.call(kEcho, ctx, request, response, asio::use_future).get();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.payload(), "future");

  ClientContext stream_ctx;
  ClientStream stream = channel.open(kChat, stream_ctx, asio::use_future).get();
  request.set_payload("one");
  ASSERT_TRUE(stream.write(request, asio::use_future).get().ok());
  ASSERT_TRUE(stream.read(response, asio::use_future).get());
  EXPECT_EQ(response.payload(), "one");
  request.set_payload("two");
  ASSERT_TRUE(stream.write_last(request, {}, asio::use_future).get().ok());
  ASSERT_TRUE(stream.read(response, asio::use_future).get());
  EXPECT_EQ(response.payload(), "two");
  EXPECT_FALSE(stream.read(response, asio::use_future).get());
  s = stream.finish(asio::use_future).get();
  EXPECT_TRUE(s.ok()) << s;
}

TEST(AsyncOps, CallbackTokensCompleteOnTheChannelsExecutor) {
  Loopback loop;
  ClientContext ctx;
  EchoRequest request;
  request.set_payload("callback");
  EchoResponse response;
  std::optional<absl::Status> status;
  bool on_loop_thread = false;
  loop.channel().call(kEcho, ctx, request, response, [&](absl::Status s) {
    on_loop_thread = loop.io().get_executor().running_in_this_thread();
    status = std::move(s);
  });
  ASSERT_TRUE(loop.wait_until([&] { return status.has_value(); }));
  EXPECT_TRUE(status->ok()) << *status;
  EXPECT_TRUE(on_loop_thread);
  EXPECT_EQ(response.payload(), "callback");

  // A client-streaming call driven by callbacks alone, ending with the single-response rule.
  ClientContext stream_ctx;
  std::optional<ClientStream> opened;
  loop.channel().open(kCollect, stream_ctx, [&](ClientStream s) { opened = std::move(s); });
  ASSERT_TRUE(loop.wait_until([&] { return opened.has_value(); }));
  ClientWriter<EchoRequest> writer(std::move(*opened));
  std::optional<absl::Status> written;
  writer.write(request, {}, [&](absl::Status s) { written = std::move(s); });
  ASSERT_TRUE(loop.wait_until([&] { return written.has_value(); }));
  EXPECT_TRUE(written->ok()) << *written;
  EchoResponse summary;
  std::optional<absl::Status> finished;
  writer.finish(summary, [&](absl::Status s) { finished = std::move(s); });
  ASSERT_TRUE(loop.wait_until([&] { return finished.has_value(); }));
  EXPECT_TRUE(finished->ok()) << *finished;
  EXPECT_EQ(loop.probe().messages_read.load(), 1);
}

// --- server: per-operation cancellation ---------------------------------------------------------

struct ServerSide {
  std::atomic<int> done{0};
  std::atomic<bool> timer_won{false};
  std::atomic<bool> cancelled{false};
  std::atomic<bool> read_result{true};
  std::atomic<bool> write_failed{false};
};

TEST(AsyncOps, ServerReadRacedAgainstATimerCancelsTheCall) {
  Service service("ferry.testing.Tokens");
  ServerSide seen;
  service.add_bidi_streaming<EchoRequest, EchoResponse>(
      "Wait",
      [&](ServerContext& ctx,
          ServerReaderWriter<EchoRequest, EchoResponse>& stream) -> asio::awaitable<absl::Status> {
        EchoRequest request;
        asio::steady_timer timer(co_await asio::this_coro::executor, 100ms);
        auto result = co_await (stream.read(request) || timer.async_wait(asio::use_awaitable));
        seen.timer_won = result.index() == 1;
        seen.cancelled = ctx.is_cancelled();
        // The call is over: a read now ends at once, a write fails.
        seen.read_result = co_await stream.read(request);
        seen.write_failed = !(co_await stream.write(EchoResponse())).ok();
        seen.done = 1;
        co_return absl::OkStatus();  // not sent: the call was cancelled
      });
  Loopback loop({}, {}, &service);
  ClientContext ctx;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open("/ferry.testing.Tokens/Wait", ctx);
    EchoResponse response;
    EXPECT_FALSE(co_await stream.read(response));
    co_return co_await stream.finish();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;  // RST_STREAM(CANCEL) from the server
  ASSERT_TRUE(loop.wait_until([&] { return seen.done.load() == 1; }));
  EXPECT_TRUE(seen.timer_won);
  EXPECT_TRUE(seen.cancelled);
  EXPECT_FALSE(seen.read_result);
  EXPECT_TRUE(seen.write_failed);
  EXPECT_TRUE(loop.wait_until([&] { return loop.server().active_calls() == 0; }));
}

TEST(AsyncOps, ServerReadWithACallbackTokenAndASignal) {
  Service service("ferry.testing.Tokens");
  ServerSide seen;
  service.add_bidi_streaming<EchoRequest, EchoResponse>(
      "Wait",
      [&](ServerContext& ctx,
          ServerReaderWriter<EchoRequest, EchoResponse>& stream) -> asio::awaitable<absl::Status> {
        EchoRequest request;
        // The first read completes normally through a callback.
        std::optional<bool> got;
        ctx.read(request, [&](bool ok) { got = ok; });
        while (!got) co_await sleep_for(1ms);
        EXPECT_TRUE(*got);
        EXPECT_EQ(request.payload(), "first");
        // The second waits for a request that never comes, until the signal.
        asio::cancellation_signal signal;
        std::optional<bool> second;
        stream.read(request,
                    asio::bind_cancellation_slot(signal.slot(), [&](bool ok) { second = ok; }));
        co_await sleep_for(50ms);  // time passing is what this checks: the read stays pending
        seen.timer_won = !second.has_value();
        signal.emit(asio::cancellation_type::terminal);
        while (!second) co_await sleep_for(1ms);
        seen.read_result = *second;
        seen.cancelled = ctx.is_cancelled();
        seen.done = 1;
        co_return absl::OkStatus();
      });
  Loopback loop({}, {}, &service);
  ClientContext ctx;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open("/ferry.testing.Tokens/Wait", ctx);
    EchoRequest request;
    request.set_payload("first");
    (void)co_await stream.write(request);
    co_return co_await stream.finish();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  ASSERT_TRUE(loop.wait_until([&] { return seen.done.load() == 1; }));
  EXPECT_TRUE(seen.timer_won);  // the read was pending until the signal
  EXPECT_FALSE(seen.read_result);
  EXPECT_TRUE(seen.cancelled);
}

}  // namespace
}  // namespace ferry::async_ops_test
