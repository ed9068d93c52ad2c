// Loopback tests of concurrency: a thousand streams multiplexed on one connection, hundreds of
// bidi streams at once, a hundred connections on one client loop, and a multi-threaded server.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"

namespace ferry::concurrency_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using namespace testing::echo_methods;

// One unary call whose payload names it; counts it in ok when the answer is its own.
asio::awaitable<void> tagged_call(Channel& channel, int tag, int delay_ms, std::atomic<int>& ok,
                                  std::atomic<int>& done) {
  EchoRequest request;
  request.set_payload("call " + std::to_string(tag));
  request.set_delay_ms(delay_ms);
  EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(20s);
  absl::Status s = co_await channel.call(kEcho, ctx, request, response);
  if (s.ok() && response.payload() == request.payload()) ok.fetch_add(1);
  done.fetch_add(1);
}

TEST(Concurrency, AThousandConcurrentUnaryCallsOnOneConnection) {
  Loopback loop;
  constexpr int kCalls = 1000;
  std::atomic<int> ok{0}, done{0};
  // First call alone, so that the connection exists (and SETTINGS raised the concurrency limit
  // to the server's 1000) before the burst.
  loop.run(
      [&]() -> asio::awaitable<void> { co_await tagged_call(loop.channel(), -1, 0, ok, done); });
  ASSERT_EQ(ok.load(), 1);
  ok = 0;
  done = 0;
  // Each handler waits 200 ms before answering: the calls overlap, all open at the same time.
  for (int i = 0; i < kCalls; ++i) {
    asio::co_spawn(loop.io(), tagged_call(loop.channel(), i, 200, ok, done), asio::detached);
  }
  std::size_t peak = 0;
  ASSERT_TRUE(loop.wait_until(
      [&] {
        peak = std::max(peak, loop.server().active_calls());
        return done.load() == kCalls;
      },
      30s))
      << done.load() << " of " << kCalls << " calls done";
  EXPECT_EQ(ok.load(), kCalls);
  // They were really concurrent (the handlers' delays overlapped), not served one by one.
  EXPECT_GE(peak, static_cast<std::size_t>(kCalls) / 2) << "peak concurrent calls on the server";
  EXPECT_EQ(loop.probe().started.load(), kCalls + 1);
}

TEST(Concurrency, CallsBeyondTheServersStreamLimitWaitTheirTurn) {
  ServerOptions options;
  options.max_concurrent_streams = 100;
  Loopback loop(options);
  constexpr int kCalls = 500;
  std::atomic<int> ok{0}, done{0};
  loop.run(
      [&]() -> asio::awaitable<void> { co_await tagged_call(loop.channel(), -1, 0, ok, done); });
  ok = 0;
  done = 0;
  for (int i = 0; i < kCalls; ++i) {
    asio::co_spawn(loop.io(), tagged_call(loop.channel(), i, 50, ok, done), asio::detached);
  }
  std::size_t peak = 0;
  ASSERT_TRUE(loop.wait_until(
      [&] {
        peak = std::max(peak, loop.server().active_calls());
        return done.load() == kCalls;
      },
      30s));
  // None refused: the client holds the streams over the limit until others finish.
  EXPECT_EQ(ok.load(), kCalls);
  EXPECT_LE(peak, 100u);
  EXPECT_GE(peak, 50u);
}

TEST(Concurrency, TwoHundredConcurrentBidiStreams) {
  Loopback loop;
  constexpr int kStreams = 200;
  constexpr int kRounds = 20;
  std::atomic<int> ok{0}, done{0};
  auto chat = [&](int tag) -> asio::awaitable<void> {
    ClientContext ctx;
    ctx.set_timeout(20s);
    ClientReaderWriter<EchoRequest, EchoResponse> stream = co_await loop.stub().Chat(ctx);
    bool good = true;
    for (int i = 0; i < kRounds && good; ++i) {
      EchoRequest request;
      request.set_payload(std::to_string(tag) + "/" + std::to_string(i));
      if (!(co_await stream.write(request)).ok()) good = false;
      EchoResponse response;
      if (!co_await stream.read(response) || response.payload() != request.payload() ||
          response.index() != i) {
        good = false;
      }
    }
    co_await stream.writes_done();
    absl::Status s = co_await stream.finish();
    if (good && s.ok()) ok.fetch_add(1);
    done.fetch_add(1);
  };
  for (int i = 0; i < kStreams; ++i) asio::co_spawn(loop.io(), chat(i), asio::detached);
  std::size_t peak = 0;
  ASSERT_TRUE(loop.wait_until(
      [&] {
        peak = std::max(peak, loop.server().active_calls());
        return done.load() == kStreams;
      },
      30s))
      << done.load() << " of " << kStreams << " streams done";
  EXPECT_EQ(ok.load(), kStreams);
  EXPECT_GE(peak, static_cast<std::size_t>(kStreams) / 2);
}

TEST(Concurrency, AHundredConnectionsOnOneClientLoop) {
  Loopback loop;
  constexpr int kChannels = 100;
  constexpr int kCallsEach = 10;
  std::vector<std::unique_ptr<Channel>> channels;
  for (int i = 0; i < kChannels; ++i) {
    channels.push_back(std::make_unique<Channel>(loop.io(), loop.target()));
  }
  std::atomic<int> ok{0}, done{0};
  auto client = [&](Channel& channel, int tag) -> asio::awaitable<void> {
    for (int i = 0; i < kCallsEach; ++i) {
      co_await tagged_call(channel, tag * 1000 + i, 0, ok, done);
    }
  };
  for (int i = 0; i < kChannels; ++i) {
    asio::co_spawn(loop.io(), client(*channels[i], i), asio::detached);
  }
  ASSERT_TRUE(loop.wait_until([&] { return done.load() == kChannels * kCallsEach; }, 30s))
      << done.load() << " calls done";
  EXPECT_EQ(ok.load(), kChannels * kCallsEach);
  channels.clear();
  // No call is left open on the server once the channels are gone.
  EXPECT_TRUE(loop.wait_until([&] { return loop.server().active_calls() == 0; }, 5s));
}

TEST(Concurrency, ServerWithTwoThreadsServesConnectionsOnBoth) {
  ServerOptions options;
  options.num_threads = 2;
  Loopback loop(options);
  constexpr int kChannels = 8;
  constexpr int kCallsEach = 50;
  std::vector<std::unique_ptr<Channel>> channels;
  for (int i = 0; i < kChannels; ++i) {
    channels.push_back(std::make_unique<Channel>(loop.io(), loop.target()));
  }
  std::atomic<int> ok{0}, done{0};
  // Each connection runs 5 calls at a time (handlers wait 1 ms), so both server threads are
  // busy at once.
  for (int c = 0; c < kChannels; ++c) {
    for (int lane = 0; lane < 5; ++lane) {
      asio::co_spawn(
          loop.io(),
          [&, c, lane]() -> asio::awaitable<void> {
            for (int i = 0; i < kCallsEach / 5; ++i) {
              co_await tagged_call(*channels[c], c * 10000 + lane * 100 + i, 1, ok, done);
            }
          },
          asio::detached);
    }
  }
  ASSERT_TRUE(loop.wait_until([&] { return done.load() == kChannels * kCallsEach; }, 30s))
      << done.load() << " calls done";
  EXPECT_EQ(ok.load(), kChannels * kCallsEach);
  // Connections go round-robin to the threads: handlers ran on both.
  EXPECT_EQ(loop.probe().threads().size(), 2u);
  channels.clear();
}

TEST(Concurrency, TwoThreadServerWithBlockingClientsOnManyThreads) {
  ServerOptions options;
  options.num_threads = 2;
  Server server(options);
  testing::EchoService echo;
  server.add_service(echo);
  absl::StatusOr<int> port = server.start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string target = "127.0.0.1:" + std::to_string(*port);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Channel channel(target);  // its own I/O thread
      testing::Echo::BlockingStub echo_stub(channel);
      for (int i = 0; i < 50; ++i) {
        EchoRequest request;
        request.set_payload(std::to_string(t) + ":" + std::to_string(i));
        EchoResponse response;
        ClientContext ctx;
        ctx.set_timeout(10s);
        if (echo_stub.Echo(ctx, request, response).ok() &&
            response.payload() == request.payload()) {
          ok.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
  server.shutdown(1s);
}

}  // namespace
}  // namespace ferry::concurrency_test
