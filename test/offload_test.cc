// Offloading blocking handler work (ferry/offload.h): with one I/O thread, a handler that waits
// in blocking code holds up the other calls on its connection, unless it offloads the wait to a
// pool. Asserts the order in which calls complete, not timings.
#include "ferry/offload.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/io_context.hpp"
#include "asio/post.hpp"
#include "asio/this_coro.hpp"
#include "asio/thread_pool.hpp"
#include "asio/use_future.hpp"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "ferry/service.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"
#include "support/wait.h"

namespace ferry::offload_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;

constexpr std::string_view kBlock = "/ferry.testing.Slow/Block";

// Slow/Block waits in blocking code until the test releases it, or 1 s: on the pool when offload
// is set, else inline. Inline, nothing can release it (the echoes that would are stuck behind
// it), so it waits the whole second: that stall is what the test shows.
class SlowService : public Service {
 public:
  SlowService(asio::thread_pool* pool, bool offload_it, std::atomic<bool>* started,
              std::shared_future<void> release)
      : Service("ferry.testing.Slow") {
    add_unary<EchoRequest, EchoResponse>(
        "Block",
        [pool, offload_it, started, release](
            ServerContext&, const EchoRequest&,
            EchoResponse& response) -> asio::awaitable<absl::Status> {
          const std::thread::id io_thread = std::this_thread::get_id();
          started->store(true);
          auto block = [release] {
            release.wait_for(1s);
            return std::this_thread::get_id();
          };
          std::thread::id slept_on;
          if (offload_it) {
            slept_on = co_await offload(*pool, block);
          } else {
            slept_on = block();
          }
          // Back on the I/O thread, whichever thread slept.
          if (std::this_thread::get_id() != io_thread) {
            co_return absl::InternalError("not resumed on the I/O thread");
          }
          response.set_payload(slept_on == io_thread ? "inline" : "pool");
          co_return absl::OkStatus();
        });
  }
};

constexpr int kEchoes = 5;

// Starts Block, waits until its handler runs, then makes 5 Echo calls on the same channel
// (connection), which release Block once all have completed; returns the order in which the
// calls completed ("block" or "echo").
std::vector<std::string> completion_order(bool offload_it, std::string* block_payload) {
  asio::thread_pool pool(2);
  std::atomic<bool> started{false};
  std::promise<void> release;
  SlowService slow(&pool, offload_it, &started, release.get_future().share());
  ServerOptions options;
  options.num_threads = 1;  // every call on one I/O thread
  Loopback loop(options, {}, &slow);

  std::mutex mutex;
  std::vector<std::string> order;
  int echoes_done = 0;
  auto done = [&](const char* what, const absl::Status& s) {
    EXPECT_TRUE(s.ok()) << what << ": " << s;
    std::lock_guard lock(mutex);
    order.push_back(what);
    if (order.back() == "echo" && ++echoes_done == kEchoes) release.set_value();
  };
  ClientContext block_ctx;
  EchoRequest block_request;
  EchoResponse block_response;
  loop.channel().call(kBlock, block_ctx, block_request, block_response,
                      [&](absl::Status s) { done("block", s); });
  EXPECT_TRUE(loop.wait_until([&] { return started.load(); }));

  std::vector<ClientContext> contexts(kEchoes);
  std::vector<EchoRequest> requests(kEchoes);
  std::vector<EchoResponse> responses(kEchoes);
  for (int i = 0; i < kEchoes; ++i) {
    loop.channel().call(testing::echo_methods::kEcho, contexts[i], requests[i], responses[i],
                        [&](absl::Status s) { done("echo", s); });
  }
  EXPECT_TRUE(loop.wait_until(
      [&] {
        std::lock_guard lock(mutex);
        return order.size() == kEchoes + 1;
      },
      10s));
  *block_payload = block_response.payload();
  std::lock_guard lock(mutex);
  return order;
}

TEST(Offload, ABlockingHandlerStallsItsThreadsOtherCalls) {
  std::string payload;
  const std::vector<std::string> order = completion_order(/*offload_it=*/false, &payload);
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order.front(), "block");  // the echoes waited for the blocking wait to end
  EXPECT_EQ(payload, "inline");
}

TEST(Offload, AnOffloadedHandlerLetsTheOtherCallsThrough) {
  std::string payload;
  const std::vector<std::string> order = completion_order(/*offload_it=*/true, &payload);
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order.back(), "block");  // every echo completed during the blocking wait
  EXPECT_EQ(payload, "pool");
}

// Promise: what the offloaded function holds is copied and released exactly once: a shared_ptr
// it captured has its count back where it was once offload returns. (ferry's offload gave
// co_spawn a capturing coroutine lambda, whose captures asio 1.22 released twice when it
// completed to use_awaitable: the count came out one short, and ASan saw the promise this file's
// Slow service held freed under it.)
TEST(Offload, WhatTheFunctionHoldsIsReleasedOnce) {
  asio::thread_pool pool(1);
  asio::io_context io;
  auto held = std::make_shared<int>(41);
  auto result = asio::co_spawn(
      io,
      [&]() -> asio::awaitable<int> {
        auto work = [held] { return *held + 1; };
        co_return co_await offload(pool, work);
      },
      asio::use_future);
  io.run();
  pool.join();
  EXPECT_EQ(result.get(), 42);
  EXPECT_EQ(held.use_count(), 1);
}

TEST(Offload, ReturnsValuesAndRethrowsExceptions) {
  asio::thread_pool pool(1);
  asio::io_context io;
  int value = 0;
  bool threw = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        value = co_await offload(pool, [] { return 42; });
        co_await offload(pool, [] {});  // void
        try {
          co_await offload(pool, []() -> int { throw std::runtime_error("boom"); });
        } catch (const std::runtime_error&) {
          threw = true;
        }
      },
      asio::detached);
  io.run();
  EXPECT_EQ(value, 42);
  EXPECT_TRUE(threw);
}

// Serves `slow` on a server of `threads` I/O threads, calls its Block method and, once the
// handler has started, shuts the server down; after_shutdown checks what shutdown must have
// waited for, before the server goes and the pool is joined (whatever the pool still posts finds
// a living io_context, or none at all). The call ends either way.
void call_then_shut_down(Service& slow, int threads, asio::thread_pool& pool,
                         const std::atomic<bool>& started,
                         const std::function<void()>& after_shutdown) {
  ServerOptions options;
  options.num_threads = threads;
  auto server = std::make_unique<Server>(options);
  server->add_service(slow);
  const int port = server->start("127.0.0.1", 0).value();
  Channel channel("127.0.0.1:" + std::to_string(port));
  ClientContext ctx;
  ctx.set_timeout(10s);
  EchoRequest request;
  EchoResponse response;
  std::promise<absl::Status> finished;
  channel.call(kBlock, ctx, request, response, [&](absl::Status s) { finished.set_value(s); });
  ASSERT_TRUE(testing::eventually([&] { return started.load(); }));
  server->shutdown(0ms);
  after_shutdown();
  server.reset();
  pool.join();
  EXPECT_EQ(finished.get_future().wait_for(10s), std::future_status::ready);
}

// Server::shutdown while a handler waits in offload for longer than shutdown's 2 s bound on
// stuck handlers: the pool hands the result back into the handler's io_context, so shutdown
// waits for the work to return before it stops and frees that thread. It used to stop and join
// the thread after 2 s, and the destroyed server's io_context then took the pool's post
// (heap-use-after-free in asio's scheduler under ASan).
TEST(Offload, ShutdownWaitsForOffloadedWorkBeforeFreeingItsThread) {
  asio::thread_pool pool(1);
  std::atomic<bool> started{false};
  std::atomic<bool> returned{false};
  Service slow("ferry.testing.Slow");
  slow.add_unary<EchoRequest, EchoResponse>(
      "Block",
      [&](ServerContext&, const EchoRequest&, EchoResponse&) -> asio::awaitable<absl::Status> {
        started = true;
        co_await offload(pool, [&] {
          std::this_thread::sleep_for(2500ms);
          returned = true;
        });
        co_return absl::OkStatus();
      });
  call_then_shut_down(slow, 2, pool, started, [&] {
    EXPECT_TRUE(returned) << "shutdown returned while the pool still had the handler's work";
  });
}

// The same, with the handler's I/O thread busy when the pool's result comes back (as with
// another call's handler running there): shutdown saw no offload in flight and stopped the loop
// at once, and the result, queued behind the busy moment, went with the loop unrun: the handler
// never resumed, and its call's frames were lost (LeakSanitizer: a ServerCall). Shutdown now
// lets the loop run what the pool posted.
TEST(Offload, ShutdownResumesTheHandlerTheLastOffloadCompletes) {
  asio::thread_pool pool(1);
  std::atomic<bool> started{false};
  std::atomic<bool> resumed{false};
  Service slow("ferry.testing.Slow");
  slow.add_unary<EchoRequest, EchoResponse>(
      "Block",
      [&](ServerContext&, const EchoRequest&, EchoResponse&) -> asio::awaitable<absl::Status> {
        started = true;
        const asio::any_io_executor io = co_await asio::this_coro::executor;
        auto work = [io] {
          std::this_thread::sleep_for(2500ms);                         // past shutdown's 2-s bound
          asio::post(io, [] { std::this_thread::sleep_for(300ms); });  // the loop, busy
        };
        co_await offload(pool, work);
        resumed = true;
        co_return absl::OkStatus();
      });
  call_then_shut_down(slow, 1, pool, started, [&] {
    EXPECT_TRUE(resumed) << "the handler's offload came back but the handler never resumed";
  });
}

}  // namespace
}  // namespace ferry::offload_test
