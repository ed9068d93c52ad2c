// Loopback tests of flow control: a slow reader on either side holds the sender back (its write
// suspends) and bounds the memory in between, whatever the volume; and calls that end with
// unread data give their window back, so the connection never stalls.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/buffer_pool.h"
#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"
#include "support/sanitized.h"

namespace ferry::flow_control_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::kSanitized;
using testing::Loopback;
using namespace testing::echo_methods;

constexpr std::size_t kMiB = 1 << 20;
constexpr int kMessageSize = 64 * 1024;

// 1 GiB in 64 KiB messages, as issue #3 asks; 128 MiB under the sanitizers, which are ~10x slower.
constexpr int kBulkMessages = kSanitized ? 2048 : 16384;

// Resident memory of the process (VmRSS), in bytes.
std::size_t rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6)) * 1024;
  }
  return 0;
}

std::size_t pool_bytes_in_use() {
  const std::int64_t blocks = BufferPool::instance().stats().blocks_in_use;
  return static_cast<std::size_t>(std::max<std::int64_t>(blocks, 0)) * BufferPool::kBlockSize;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(asio::use_awaitable);
}

// What the slow phase of a bulk transfer looked like.
struct SlowPhase {
  std::size_t max_rss_growth = 0;   // over the baseline taken before the call
  std::size_t max_pool_in_use = 0;  // pooled blocks held, in bytes
  long max_messages_in_flight = 0;  // sent by the writer and not yet read by the reader
  void sample(std::size_t rss_baseline, long in_flight) {
    const std::size_t rss = rss_bytes();
    if (rss > rss_baseline) max_rss_growth = std::max(max_rss_growth, rss - rss_baseline);
    max_pool_in_use = std::max(max_pool_in_use, pool_bytes_in_use());
    max_messages_in_flight = std::max(max_messages_in_flight, in_flight);
  }
};

void report(const char* what, const SlowPhase& p, std::chrono::steady_clock::duration took) {
  std::printf("%s: rss +%.1f MiB, pool in use %.1f MiB, %ld messages in flight at most, %.2f s\n",
              what, static_cast<double>(p.max_rss_growth) / kMiB,
              static_cast<double>(p.max_pool_in_use) / kMiB, p.max_messages_in_flight,
              std::chrono::duration<double>(took).count());
}

// Messages of `size` the path from a writer to a reader may hold: the receiver's stream window
// (1 MiB; the sender's DATA in flight and the receiver's unread messages together) plus the
// sender's queue above which its writer suspends (256 KiB), with a message of slack for each
// stage's rounding (the writer's last message, the receiver's message still arriving).
constexpr long max_in_flight(std::size_t size) {
  return static_cast<long>((1 * kMiB + 256 * 1024 + size - 1) / size) + 3;
}
constexpr long kMaxInFlight = max_in_flight(kMessageSize);

TEST(FlowControl, SlowClientReaderOfAGibibyteServerStream) {
  Loopback loop;
  // Warm up (pool, connection, allocator arenas) before taking the baseline.
  loop.run([&]() -> asio::awaitable<void> {
    ClientContext ctx;
    EchoRequest request;
    request.set_response_size(kMessageSize);
    request.set_response_count(64);
    ClientStream stream = co_await loop.channel().open(kExpand, ctx);
    (void)co_await stream.write_last(request);
    EchoResponse response;
    while (co_await stream.read(response)) {
    }
    (void)co_await stream.finish();
  });
  const long warm_written = loop.probe().messages_written.load();
  const std::size_t rss_baseline = rss_bytes();

  ClientContext ctx;
  EchoRequest request;
  request.set_response_size(kMessageSize);
  request.set_response_count(kBulkMessages);
  SlowPhase slow;
  int received = 0;
  bool intact = true;
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = loop.run(
      [&]() -> asio::awaitable<absl::Status> {
        ClientStream stream = co_await loop.channel().open(kExpand, ctx);
        (void)co_await stream.write_last(request);
        ClientReader<EchoResponse> reader(std::move(stream));
        EchoResponse response;
        while (co_await reader.read(response)) {
          if (response.index() != received ||
              response.payload().size() != static_cast<std::size_t>(kMessageSize) ||
              response.payload().find_first_not_of('r') != std::string::npos) {
            intact = false;
          }
          ++received;
          if (received <= 40) {
            // Slow phase: 40 reads 25 ms apart, a second in which the server could have pushed
            // gigabytes were nothing holding it back.
            co_await sleep_for(25ms);
            slow.sample(rss_baseline,
                        loop.probe().messages_written.load() - warm_written - received);
          }
        }
        co_return co_await reader.finish();
      },
      std::chrono::seconds(60));
  const auto took = std::chrono::steady_clock::now() - start;
  report("server stream, slow client reader", slow, took);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(received, kBulkMessages);
  EXPECT_TRUE(intact);
  // The server's writer was held back by the client's window ...
  EXPECT_LE(slow.max_messages_in_flight, kMaxInFlight);
  // ... so memory stayed bounded while the client dawdled.
  EXPECT_LT(slow.max_pool_in_use, 16 * kMiB);
  EXPECT_LT(slow.max_rss_growth, 64 * kMiB);
}

TEST(FlowControl, SlowClientReaderOfLargeMessages) {
  // 1 MiB messages arrive in 16 KiB DATA frames: the window must count whole unread messages,
  // not just the frame that completed each one.
  ChannelOptions options;
  options.max_receive_message_size = 2 * kMiB;
  Loopback loop({}, options);
  const std::size_t pool_baseline = pool_bytes_in_use();
  ClientContext ctx;
  EchoRequest request;
  request.set_response_size(static_cast<int>(kMiB));
  request.set_response_count(48);
  long max_in_flight_seen = 0;
  std::size_t max_pool = 0;
  int received = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kExpand, ctx);
    (void)co_await stream.write_last(request);
    ClientReader<EchoResponse> reader(std::move(stream));
    EchoResponse response;
    while (co_await reader.read(response)) {
      if (response.index() != received || response.payload().size() != kMiB) {
        co_return absl::DataLossError("response " + std::to_string(received) + " is wrong");
      }
      ++received;
      if (received <= 10) {
        co_await sleep_for(50ms);
        max_in_flight_seen =
            std::max(max_in_flight_seen, loop.probe().messages_written.load() - received);
        max_pool = std::max(max_pool, pool_bytes_in_use());
      }
    }
    co_return co_await reader.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(received, 48);
  std::printf("1 MiB messages, slow client reader: %ld in flight at most, pool +%.1f MiB\n",
              max_in_flight_seen,
              static_cast<double>(max_pool - std::min(max_pool, pool_baseline)) / kMiB);
  EXPECT_LE(max_in_flight_seen, max_in_flight(kMiB));
  EXPECT_LT(max_pool - std::min(max_pool, pool_baseline), 12 * kMiB);
}

TEST(FlowControl, SlowServerReaderOfAGibibyteClientStream) {
  Loopback loop;
  loop.run([&]() -> asio::awaitable<void> {
    ClientContext ctx;
    ClientWriter<EchoRequest> writer = co_await loop.stub().Collect(ctx);
    EchoRequest request;
    request.set_payload(std::string(kMessageSize, 'w'));
    for (int i = 0; i < 64; ++i) (void)co_await writer.write(request);
    EchoResponse response;
    (void)co_await writer.finish(response);
  });
  const long warm_read = loop.probe().messages_read.load();
  const std::size_t rss_baseline = rss_bytes();

  ClientContext ctx;
  SlowPhase slow;
  long max_write_ms = 0;
  EchoResponse response;
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = loop.run(
      [&]() -> asio::awaitable<absl::Status> {
        ClientWriter<EchoRequest> writer = co_await loop.stub().Collect(ctx);
        EchoRequest request;
        request.set_payload(
            std::string(kMessageSize - 8, 'w'));  // 64 KiB with the protobuf framing
        for (int i = 0; i < kBulkMessages; ++i) {
          // Slow phase: the handler waits 25 ms after each of the first 40 messages.
          request.set_delay_ms(i < 40 ? 25 : 0);
          const auto before = std::chrono::steady_clock::now();
          if (absl::Status w = co_await writer.write(request); !w.ok()) co_return w;
          const long read = loop.probe().messages_read.load() - warm_read;
          if (read < 40) {
            max_write_ms =
                std::max<long>(max_write_ms, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::steady_clock::now() - before)
                                                 .count());
            slow.sample(rss_baseline, i + 1 - read);
          }
        }
        co_return co_await writer.finish(response);
      },
      std::chrono::seconds(60));
  const auto took = std::chrono::steady_clock::now() - start;
  report("client stream, slow server reader", slow, took);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.received_messages(), kBulkMessages);
  EXPECT_EQ(response.received_bytes(),
            static_cast<std::int64_t>(kBulkMessages) * (kMessageSize - 8));
  // The writer's co_await write() suspended (backpressure) rather than queue everything ...
  EXPECT_GE(max_write_ms, 10);
  EXPECT_LE(slow.max_messages_in_flight, kMaxInFlight);
  // ... and memory stayed bounded.
  EXPECT_LT(slow.max_pool_in_use, 16 * kMiB);
  EXPECT_LT(slow.max_rss_growth, 64 * kMiB);
}

TEST(FlowControl, SmallMessagesTrickledToASlowReaderDoNotPinABlockEach) {
  // Each small message goes out on its own (the writer pauses between them), so each arrives in
  // its own socket read. The handler sits on the first one: the rest wait, far inside the 1 MiB
  // window. They must not each keep a 64 KiB read block alive.
  Loopback loop;
  ClientContext ctx;
  constexpr int kMessages = 1000;
  std::size_t max_pool = 0;
  const std::size_t pool_baseline = pool_bytes_in_use();
  EchoResponse response;
  absl::Status s = loop.run(
      [&]() -> asio::awaitable<absl::Status> {
        ClientWriter<EchoRequest> writer = co_await loop.stub().Collect(ctx);
        EchoRequest request;
        request.set_payload(std::string(100, 't'));
        request.set_delay_ms(3000);
        for (int i = 0; i < kMessages; ++i) {
          if (absl::Status w = co_await writer.write(request); !w.ok()) co_return w;
          request.set_delay_ms(0);
          co_await sleep_for(1ms);
          if (i % 50 == 0) max_pool = std::max(max_pool, pool_bytes_in_use());
        }
        max_pool = std::max(max_pool, pool_bytes_in_use());
        co_return co_await writer.finish(response);
      },
      std::chrono::seconds(20));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.received_messages(), kMessages);
  std::printf("1000 trickled 100-byte messages held: pool in use %.1f MiB over the baseline\n",
              static_cast<double>(max_pool - std::min(max_pool, pool_baseline)) / kMiB);
  EXPECT_LT(max_pool - std::min(max_pool, pool_baseline), 8 * kMiB);
}

// The first failure of a sequence of calls, annotated with the call's number.
absl::Status failed_call(int call, const absl::Status& s) {
  return absl::Status(s.code(), "call " + std::to_string(call) + ": " + std::string(s.message()));
}

// Calls that end with responses the client never read: their bytes must be given back to the
// connection window, or the connection (its window shrunk to 2 MiB here) soon stalls for good.
// Opens `count` server streams of 64 responses of `size` bytes that the client does not read
// (pausing `between` after each), then waits until the server's writers stop: every stream
// started and the count of writes that returned holds still. Returns that count, or -1 when a
// stream could not be opened. Each call's context lives in contexts, as long as the call.
long open_unread_streams(Loopback& loop, int count, int size, std::chrono::milliseconds between,
                         std::vector<std::unique_ptr<ClientContext>>& contexts,
                         std::vector<ClientStream>& streams) {
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    for (int i = 0; i < count; ++i) {
      ClientContext& ctx = *contexts.emplace_back(std::make_unique<ClientContext>());
      ctx.set_timeout(20s);
      EchoRequest request;
      request.set_response_size(size);
      request.set_response_count(64);
      streams.push_back(co_await loop.channel().open(kExpand, ctx));
      if (absl::Status w = co_await streams.back().write_last(request); !w.ok()) co_return w;
      if (between > 0ms) co_await sleep_for(between);
    }
    co_return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok()) return -1;
  long written = -1;
  for (int i = 0;
       i < 100 && (loop.probe().started < count || written != loop.probe().messages_written.load());
       ++i) {
    written = loop.probe().messages_written.load();
    loop.wait_until([] { return false; }, 50ms);
  }
  return written;
}

// 16 server streams to a client that reads none of them: what the server queues for them on the
// connection stays under ServerOptions::max_queued_send_bytes (plus a message per stream), where
// each stream alone would queue up to its own 256 KiB high-water mark (16 x 288 KiB here); and
// the client then reads the streams one after the other, which the others must not block.
TEST(FlowControl, QueuedBytesOfAConnectionStayUnderItsBound) {
  constexpr int kStreams = 16;
  constexpr int kSize = 32 * 1024;
  ServerOptions server_options;
  server_options.max_queued_send_bytes = kMiB;
  ChannelOptions options;
  options.stream_window = 64 * 1024;  // the connection window stays large: streams read later
  Loopback loop(server_options, options);
  std::vector<std::unique_ptr<ClientContext>> contexts;  // a call's context outlives it
  std::vector<ClientStream> streams;
  const long written = open_unread_streams(loop, kStreams, kSize, 0ms, contexts, streams);
  ASSERT_GE(written, 0);
  // Writes that returned: what is queued, what each stream's 64 KiB window let through (two
  // messages), and per stream the message queued when its queue was empty and the one that
  // waits.
  const long bound = kMiB / kSize + 4 * kStreams;
  EXPECT_LE(written, bound);
  EXPECT_GT(written, 0);
  // The client reads everything: every stream completes.
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    for (ClientStream& stream : streams) {
      EchoResponse response;
      int n = 0;
      while (co_await stream.read(response)) ++n;
      if (absl::Status f = co_await stream.finish(); !f.ok()) co_return f;
      if (n != 64) co_return absl::InternalError("read " + std::to_string(n) + " of 64");
    }
    co_return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

// The same with a client that reads nothing at all (its 64 KiB connection window used up): then
// every writer waits at the bound, not only those with bytes already queued, so the connection
// holds the bound plus the message that crossed it.
TEST(FlowControl, AClientThatReadsNothingGetsTheBoundAndNoMore) {
  constexpr int kStreams = 16;
  constexpr int kSize = 32 * 1024;
  ServerOptions server_options;
  server_options.max_queued_send_bytes = kMiB;
  ChannelOptions options;
  options.stream_window = 64 * 1024;
  options.connection_window = 64 * 1024;
  Loopback loop(server_options, options);
  std::vector<std::unique_ptr<ClientContext>> contexts;  // a call's context outlives it
  std::vector<ClientStream> streams;
  // A pause after each stream: the server answers and the window closes before the next.
  const long written = open_unread_streams(loop, kStreams, kSize, 30ms, contexts, streams);
  ASSERT_GE(written, 0);
  // The bound, the 64 KiB window's two messages and the message that crossed the bound; the
  // streams opened later queue nothing (each queued one without the window rule: 43).
  EXPECT_LE(written, kMiB / kSize + 4);
  EXPECT_GT(written, 0);
}

TEST(FlowControl, UnreadResponsesOfFinishedCallsDoNotLeakTheConnectionWindow) {
  ChannelOptions options;
  options.connection_window = 2 * kMiB;
  Loopback loop({}, options);
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    for (int call = 0; call < 12; ++call) {
      ClientContext ctx;
      ctx.set_timeout(3s);
      EchoRequest request;
      request.set_response_size(kMessageSize);
      request.set_response_count(8);  // 512 KiB: fits the stream window, trailers follow
      ClientStream stream = co_await loop.channel().open(kExpand, ctx);
      (void)co_await stream.write_last(request);
      EchoResponse response;
      (void)co_await stream.read(response);  // read one of eight
      absl::Status s = co_await stream.finish();
      if (!s.ok()) co_return failed_call(call, s);
    }
    co_return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(FlowControl, UnreadResponsesOfCancelledCallsDoNotLeakTheConnectionWindow) {
  ChannelOptions options;
  options.connection_window = 2 * kMiB;
  Loopback loop({}, options);
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    for (int call = 0; call < 12; ++call) {
      ClientContext ctx;
      ctx.set_timeout(3s);
      EchoRequest request;
      request.set_response_size(kMessageSize);
      request.set_response_count(1000);
      ClientStream stream = co_await loop.channel().open(kExpand, ctx);
      (void)co_await stream.write_last(request);
      EchoResponse response;
      if (!co_await stream.read(response)) co_return failed_call(call, co_await stream.finish());
      co_await sleep_for(20ms);  // let the window fill with unread responses (a fixed pause)
      stream.cancel();
      absl::Status s = co_await stream.finish();
      if (s.code() != absl::StatusCode::kCancelled) co_return failed_call(call, s);
    }
    ClientContext ctx;
    ctx.set_timeout(3s);
    EchoRequest request;
    request.set_response_size(static_cast<int>(kMiB));
    EchoResponse response;
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(FlowControl, UnreadRequestsOfFinishedCallsDoNotLeakTheServersConnectionWindow) {
  // The mirror image on the server: handlers that end without reading every request.
  ServerOptions options;
  options.connection_window = 2 * kMiB;
  Loopback loop(options);
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    for (int call = 0; call < 12; ++call) {
      ClientContext ctx;
      ctx.set_timeout(3s);
      ClientStream stream = co_await loop.channel().open(kCollect, ctx);
      EchoRequest request;
      request.set_payload(std::string(kMessageSize, 'q'));
      request.set_delay_ms(50);  // the handler dawdles while the rest arrive
      (void)co_await stream.write(request);
      request.set_delay_ms(0);
      request.set_status_code(static_cast<int>(absl::StatusCode::kAborted));
      (void)co_await stream.write(request);  // ends the call once read
      request.set_status_code(0);
      for (int i = 0; i < 6; ++i) {
        if (!(co_await stream.write(request)).ok()) break;
      }
      absl::Status s = co_await stream.finish();
      if (s.code() != absl::StatusCode::kAborted) co_return failed_call(call, s);
    }
    ClientContext ctx;
    ctx.set_timeout(3s);
    EchoRequest request;
    request.set_payload(std::string(kMiB, 'z'));
    EchoResponse response;
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace ferry::flow_control_test
