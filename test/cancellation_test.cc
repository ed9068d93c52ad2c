// Loopback tests of cancellation: by the client (cancel, dropping the stream, destroying the
// channel), by the server (a status mid-stream), by deadline (enforced on each side), and by a
// peer that goes away. Each checks both ends: the client's status and what the handler saw.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"
#include "support/wait.h"

namespace ferry::cancellation_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using namespace testing::echo_methods;

bool cancelled_or_unavailable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kCancelled || s.code() == absl::StatusCode::kUnavailable;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(asio::use_awaitable);
}

// --- the client cancels -------------------------------------------------------------------------

TEST(Cancellation, ClientCancelsAClientStreamingCall) {
  Loopback loop;
  ClientContext ctx;
  bool write_after_cancel_failed = false;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kCollect, ctx);
    EchoRequest request;
    request.set_payload("before cancel");
    for (int i = 0; i < 3; ++i) (void)co_await stream.write(request);
    // Once the handler has read them, it waits in read() for a fourth message.
    EXPECT_TRUE(co_await testing::until([&] { return loop.probe().messages_read.load() == 3; }));
    stream.cancel();
    write_after_cancel_failed = !(co_await stream.write(request)).ok();
    co_return co_await stream.finish();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_TRUE(write_after_cancel_failed);
  // The handler's pending read returned false and it saw the cancellation.
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
  EXPECT_EQ(loop.probe().messages_read.load(), 3);
  EXPECT_TRUE(loop.wait_until([&] { return loop.server().active_calls() == 0; }));
}

TEST(Cancellation, ClientCancelsABidiCallWhileReading) {
  Loopback loop;
  ClientContext ctx;
  bool read_returned_false = false;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientReaderWriter<EchoRequest, EchoResponse> stream = co_await loop.stub().Chat(ctx);
    EchoRequest request;
    request.set_delay_ms(10'000);  // the handler will sit on this one
    (void)co_await stream.write(request);
    // Cancel from the timer while this coroutine waits in read().
    asio::steady_timer timer(co_await asio::this_coro::executor, 50ms);
    timer.async_wait([&stream](const asio::error_code&) { stream.cancel(); });
    EchoResponse response;
    read_returned_false = !co_await stream.read(response);
    co_return co_await stream.finish();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_TRUE(read_returned_false);
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

// The server's whole answer (three messages and an OK status) has arrived when the client,
// having read one, cancels: the cancel wins, as with grpc-go's and connect-go's clients (and
// connectrpc's conformance suite, whose cancel-after-responses cases failed 1 run in many under
// load): the messages left are dropped and finish() says CANCELLED.
TEST(Cancellation, ClientCancelAfterTheWholeAnswerArrivedStillWins) {
  Loopback loop;
  ClientContext ctx;
  bool first_read = false;
  bool read_after_cancel = true;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    EchoRequest request;
    request.set_response_count(3);
    ClientStream stream = co_await loop.channel().open(kExpand, ctx, request);
    // The handler has written all three and returned; give the bytes time to arrive.
    EXPECT_TRUE(co_await testing::until([&] { return loop.probe().finished.load() == 1; }));
    co_await sleep_for(200ms);
    EchoResponse response;
    first_read = co_await stream.read(response);
    stream.cancel();
    read_after_cancel = co_await stream.read(response);
    co_return co_await stream.finish();
  });
  EXPECT_TRUE(first_read);
  EXPECT_FALSE(read_after_cancel);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  // Once every message is read and the status taken, a cancel changes nothing.
  ClientContext ctx2;
  absl::Status s2 = loop.run([&]() -> asio::awaitable<absl::Status> {
    EchoRequest request;
    request.set_response_count(2);
    ClientStream stream = co_await loop.channel().open(kExpand, ctx2, request);
    EchoResponse response;
    while (co_await stream.read(response)) {
    }
    stream.cancel();
    co_return co_await stream.finish();
  });
  EXPECT_TRUE(s2.ok()) << s2;
}

TEST(Cancellation, ClientCancelsFromAnotherThread) {
  Loopback loop;
  ClientContext ctx;
  std::thread canceller;
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientReaderWriter<EchoRequest, EchoResponse> stream = co_await loop.stub().Chat(ctx);
    canceller = std::thread([&loop, &stream] {
      testing::eventually([&] { return loop.probe().started.load() == 1; });
      stream.cancel();
    });
    EchoResponse response;
    while (co_await stream.read(response)) {
    }
    co_return co_await stream.finish();
  });
  canceller.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

TEST(Cancellation, ClientCancelWakesAServerWriterBlockedOnFlowControl) {
  Loopback loop;
  ClientContext ctx;
  EchoRequest request;
  request.set_response_count(100'000);
  request.set_response_size(64 * 1024);  // far more than the windows hold
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kExpand, ctx);
    (void)co_await stream.write_last(request);
    EchoResponse response;
    (void)co_await stream.read(response);
    // The server fills the windows and its writer suspends: a fixed pause, as nothing outside
    // the server shows a writer suspended on flow control.
    co_await sleep_for(100ms);
    stream.cancel();
    co_return co_await stream.finish();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
  EXPECT_LT(loop.probe().messages_written.load(), 1000);
}

TEST(Cancellation, DroppingAnUnfinishedStreamCancelsTheCallOnTheServer) {
  Loopback loop;
  loop.run([&]() -> asio::awaitable<void> {
    ClientContext ctx;
    ClientStream stream = co_await loop.channel().open(kCollect, ctx);
    EchoRequest request;
    (void)co_await stream.write(request);
    EXPECT_TRUE(co_await testing::until([&] { return loop.probe().messages_read.load() == 1; }));
    // stream goes out of scope without writes_done or finish
  });
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
  EXPECT_TRUE(loop.wait_until([&] { return loop.server().active_calls() == 0; }));
}

TEST(Cancellation, DestroyingTheChannelMidStreamCancelsOnTheServer) {
  Loopback loop;
  auto channel = std::make_unique<Channel>(loop.io(), loop.target());
  ClientContext ctx;
  ClientStream stream;
  loop.run([&]() -> asio::awaitable<void> {
    stream = co_await channel->open(kCollect, ctx);
    EchoRequest request;
    (void)co_await stream.write(request);
  });
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().messages_read.load() == 1; }));
  channel.reset();
  absl::Status s =
      loop.run([&]() -> asio::awaitable<absl::Status> { co_return co_await stream.finish(); },
               std::chrono::seconds(5));
  EXPECT_TRUE(cancelled_or_unavailable(s)) << s;
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

// A stream may outlive a Channel that runs its own thread (Channel(target)): the channel's
// close ends the call, then the stream's operations complete at once, blocking or awaited, and
// destroying the stream touches nothing the channel took with it (it posted to the destroyed
// io_context before: a use after free, which AddressSanitizer reports).
TEST(Cancellation, AStreamMayOutliveItsChannel) {
  Loopback loop;
  auto channel = std::make_unique<Channel>(loop.target());
  ClientContext blocking_ctx;
  BlockingClientStream blocking = channel->open_blocking(kCollect, blocking_ctx);
  EchoRequest request;
  ASSERT_TRUE(blocking.write(request).ok());
  ClientContext awaited_ctx;
  ClientStream awaited;
  loop.run([&]() -> asio::awaitable<void> {
    awaited = co_await channel->open(kCollect, awaited_ctx);
    (void)co_await awaited.write(request);
  });
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().messages_read.load() == 2; }));
  channel.reset();
  EchoResponse response;
  EXPECT_FALSE(blocking.read(response));
  const absl::Status blocking_status = blocking.finish();
  EXPECT_TRUE(cancelled_or_unavailable(blocking_status)) << blocking_status;
  absl::Status s = loop.run(
      [&]() -> asio::awaitable<absl::Status> {
        EXPECT_FALSE(co_await awaited.read(response));
        EXPECT_FALSE((co_await awaited.write(request)).ok());
        co_return co_await awaited.finish();
      },
      std::chrono::seconds(5));
  EXPECT_TRUE(cancelled_or_unavailable(s)) << s;
  awaited.cancel();
}  // both streams go here, after their channel

// --- the server ends the call -------------------------------------------------------------------

TEST(Cancellation, ServerStatusMidStreamStopsAClientThatKeepsSending) {
  Loopback loop;
  ClientContext ctx;
  int writes_ok = 0;
  absl::Status first_failed_write;
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = loop.run(
      [&]() -> asio::awaitable<absl::Status> {
        ClientStream stream = co_await loop.channel().open(kCollect, ctx);
        EchoRequest request;
        request.set_payload(std::string(64 * 1024, 'w'));
        // The second message makes the handler return; the client goes on writing 64 MiB.
        for (int i = 0; i < 1024; ++i) {
          request.set_status_code(i == 1 ? static_cast<int>(absl::StatusCode::kPermissionDenied)
                                         : 0);
          absl::Status w = co_await stream.write(request);
          if (!w.ok()) {
            first_failed_write = w;
            break;
          }
          ++writes_ok;
        }
        co_return co_await stream.finish();
      },
      std::chrono::seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  // The writer learnt the call was over long before 64 MiB: it did not hang in write().
  EXPECT_EQ(first_failed_write.code(), absl::StatusCode::kPermissionDenied) << first_failed_write;
  EXPECT_LT(writes_ok, 1024);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(loop.wait_until([&] { return loop.server().active_calls() == 0; }));
}

TEST(Cancellation, ServerStatusWakesAClientWriterBlockedOnFlowControl) {
  // The handler sits 200 ms on the first message, long enough for the client's writer to fill
  // the windows and suspend; then the second message ends the call. The suspended write must
  // return the call's status, not wait forever for window the server will never give.
  Loopback loop;
  ClientContext ctx;
  int writes_ok = 0;
  absl::Status failed_write;
  absl::Status s = loop.run(
      [&]() -> asio::awaitable<absl::Status> {
        ClientStream stream = co_await loop.channel().open(kCollect, ctx);
        EchoRequest request;
        request.set_payload(std::string(64 * 1024, 'b'));
        for (int i = 0; i < 1024; ++i) {
          request.set_delay_ms(i == 0 ? 200 : 0);
          request.set_status_code(i == 1 ? static_cast<int>(absl::StatusCode::kOutOfRange) : 0);
          absl::Status w = co_await stream.write(request);
          if (!w.ok()) {
            failed_write = w;
            break;
          }
          ++writes_ok;
        }
        co_return co_await stream.finish();
      },
      std::chrono::seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_EQ(failed_write.code(), absl::StatusCode::kOutOfRange) << failed_write;
  EXPECT_LT(writes_ok, 1024);
  EXPECT_TRUE(loop.wait_until([&] { return loop.server().active_calls() == 0; }));
}

TEST(Cancellation, ServerStatusMidStreamStillLeavesTheConnectionUsable) {
  Loopback loop;
  // Ten calls each end with unread requests in flight; their window must come back.
  loop.run([&]() -> asio::awaitable<void> {
    for (int call = 0; call < 10; ++call) {
      ClientContext ctx;
      ctx.set_timeout(5s);
      ClientStream stream = co_await loop.channel().open(kCollect, ctx);
      EchoRequest request;
      request.set_payload(std::string(256 * 1024, 'u'));
      request.set_status_code(static_cast<int>(absl::StatusCode::kAborted));
      for (int i = 0; i < 16; ++i) {
        if (!(co_await stream.write(request)).ok()) break;
      }
      absl::Status s = co_await stream.finish();
      EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << "call " << call << ": " << s;
    }
    ClientContext ctx;
    ctx.set_timeout(5s);
    EchoRequest request;
    request.set_payload(std::string(1 << 20, 'z'));
    EchoResponse response;
    absl::Status s = co_await loop.stub().Echo(ctx, request, response);
    EXPECT_TRUE(s.ok()) << s;
  });
}

// --- deadlines ----------------------------------------------------------------------------------

TEST(Cancellation, DeadlineCancelsAUnaryHandler) {
  Loopback loop;
  ClientContext ctx;
  ctx.set_timeout(100ms);
  EchoRequest request;
  request.set_delay_ms(10'000);
  EchoResponse response;
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

TEST(Cancellation, TheServerEnforcesTheDeadlineOnItsOwn) {
  // The client's loop is frozen past the deadline, so its own timer cannot fire: only the
  // server's (from grpc-timeout) can end the handler's pending read.
  Loopback loop;
  ClientContext ctx;
  ctx.set_timeout(300ms);
  ClientStream stream;
  loop.run([&]() -> asio::awaitable<void> {
    stream = co_await loop.channel().open(kCollect, ctx);
    EchoRequest request;
    (void)co_await stream.write(request);
  });
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().messages_read.load() == 1; }, 250ms));
  const auto until = std::chrono::steady_clock::now() + 3s;
  while (loop.probe().finished.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);  // not running the client's loop
  }
  ASSERT_EQ(loop.probe().finished.load(), 1) << "the server did not end the call at its deadline";
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
  absl::Status s =
      loop.run([&]() -> asio::awaitable<absl::Status> { co_return co_await stream.finish(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

TEST(Cancellation, DeadlineWakesAServerWriterBlockedOnFlowControl) {
  Loopback loop;
  ClientContext ctx;
  ctx.set_timeout(300ms);
  EchoRequest request;
  request.set_response_count(100'000);
  request.set_response_size(64 * 1024);
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kExpand, ctx);
    (void)co_await stream.write_last(request);
    // Read nothing: the server's writer blocks until the deadline.
    co_return co_await stream.finish();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
  EXPECT_FALSE(loop.probe().results().at(0).ok());
}

// A handler defined here: reports what ctx.deadline() said.
TEST(Cancellation, HandlerSeesTheClientsDeadline) {
  Service service("ferry.testing.Probe");
  std::atomic<long long> left_ms{-1};
  service.add_unary<EchoRequest, EchoResponse>(
      "Deadline",
      [&left_ms](ServerContext& ctx, const EchoRequest&,
                 EchoResponse&) -> asio::awaitable<absl::Status> {
        left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      ctx.deadline() - std::chrono::steady_clock::now())
                      .count();
        co_return absl::OkStatus();
      });
  Loopback loop({}, {}, &service);
  ClientContext ctx;
  ctx.set_timeout(5s);
  EchoRequest request;
  EchoResponse response;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.channel().call("/ferry.testing.Probe/Deadline", ctx, request, response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_GT(left_ms.load(), 4000);
  EXPECT_LE(left_ms.load(), 5001);
}

TEST(Cancellation, DeadlineFailsAClientWriterBlockedOnFlowControl) {
  Loopback loop;
  ClientContext ctx;
  ctx.set_timeout(300ms);
  absl::Status failed_write;
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = loop.run(
      [&]() -> asio::awaitable<absl::Status> {
        ClientStream stream = co_await loop.channel().open(kCollect, ctx);
        EchoRequest request;
        request.set_payload(std::string(64 * 1024, 'd'));
        request.set_delay_ms(10'000);  // the handler reads one message, then sits
        for (int i = 0; i < 10'000; ++i) {
          if (absl::Status w = co_await stream.write(request); !w.ok()) {
            failed_write = w;
            break;
          }
        }
        co_return co_await stream.finish();
      },
      std::chrono::seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(failed_write.code(), absl::StatusCode::kDeadlineExceeded) << failed_write;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().finished.load() == 1; }));
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

// --- the peer goes away -------------------------------------------------------------------------

TEST(Cancellation, HandlerMayUseItsContextAfterTheConnectionIsGone) {
  // A handler that, once its call is cancelled by the loss of the connection, still awaits
  // something (cleanup, a log sink) and then looks at its context: the context must stay valid
  // for as long as the handler runs, whatever became of the connection.
  Service service("ferry.testing.Linger");
  std::atomic<bool> entered{false}, done{false};
  std::string peer_after;
  service.add_bidi_streaming<EchoRequest, EchoResponse>(
      "Linger",
      [&](ServerContext& ctx,
          ServerReaderWriter<EchoRequest, EchoResponse>& stream) -> asio::awaitable<absl::Status> {
        entered = true;
        EchoRequest request;
        while (co_await stream.read(request)) {
        }
        asio::steady_timer timer(co_await asio::this_coro::executor, 100ms);
        co_await timer.async_wait(asio::use_awaitable);
        peer_after = ctx.peer();
        const bool cancelled = ctx.is_cancelled();
        const auto method = std::string(ctx.method());
        EchoResponse response;
        absl::Status w = co_await stream.write(response);
        done = cancelled && method == "/ferry.testing.Linger/Linger" && !w.ok();
        co_return absl::OkStatus();
      });
  Loopback loop({}, {}, &service);
  auto channel = std::make_unique<Channel>(loop.io(), loop.target());
  ClientContext ctx;
  loop.run([&]() -> asio::awaitable<void> {
    ClientStream stream = co_await channel->open("/ferry.testing.Linger/Linger", ctx);
    EchoRequest request;
    (void)co_await stream.write(request);
    while (!entered) co_await sleep_for(1ms);
    channel.reset();  // the connection goes; the stream is dropped at the end of this scope
  });
  EXPECT_TRUE(loop.wait_until([&] { return done.load(); }, 3s));
  EXPECT_EQ(peer_after.rfind("ipv4:127.0.0.1:", 0), 0u) << peer_after;
}

TEST(Cancellation, ServerShutdownWithoutGraceEndsAnOpenClientStream) {
  Loopback loop;
  ClientContext ctx;
  ClientStream stream;
  loop.run([&]() -> asio::awaitable<void> {
    stream = co_await loop.channel().open(kChat, ctx);
    EchoRequest request;
    (void)co_await stream.write(request);
    EchoResponse response;
    (void)co_await stream.read(response);
  });
  std::thread stopper([&] { loop.server().shutdown(0ms); });
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = loop.run(
      [&]() -> asio::awaitable<absl::Status> {
        EchoResponse response;
        while (co_await stream.read(response)) {
        }
        co_return co_await stream.finish();
      },
      std::chrono::seconds(10));
  stopper.join();
  EXPECT_TRUE(cancelled_or_unavailable(s)) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(loop.probe().finished.load(), 1);
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

TEST(Cancellation, ServerShutdownFailsAClientWriterBlockedOnFlowControl) {
  Loopback loop;
  ClientContext ctx;
  int writes_ok = 0;
  // Once the handler has read one message (and sits on it), give the writer time to fill the
  // windows and suspend (a fixed pause: nothing shows a writer suspended on flow control), then
  // stop the server under it.
  std::thread stopper([&] {
    while (loop.probe().messages_read.load() == 0) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(200ms);
    loop.server().shutdown(0ms);
  });
  absl::Status s = loop.run(
      [&]() -> asio::awaitable<absl::Status> {
        ClientStream stream = co_await loop.channel().open(kCollect, ctx);
        EchoRequest request;
        request.set_payload(std::string(64 * 1024, 's'));
        request.set_delay_ms(10'000);  // the handler reads one message, then sits
        for (int i = 0; i < 10'000; ++i) {
          if (!(co_await stream.write(request)).ok()) break;
          ++writes_ok;
        }
        co_return co_await stream.finish();
      },
      std::chrono::seconds(10));
  stopper.join();
  EXPECT_TRUE(cancelled_or_unavailable(s)) << s;
  EXPECT_LT(writes_ok, 10'000);
  EXPECT_EQ(loop.probe().saw_cancellation.load(), 1);
}

}  // namespace
}  // namespace ferry::cancellation_test
