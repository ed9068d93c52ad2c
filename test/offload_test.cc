// Offloading blocking handler work (ferry/offload.h): with one I/O thread, a handler that sleeps
// 1 s in blocking code holds up the other calls on its connection, unless it offloads the sleep
// to a pool. Asserts the order in which calls complete, not timings.
#include "ferry/offload.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/thread_pool.hpp"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "ferry/service.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"

namespace ferry {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;

constexpr std::string_view kBlock = "/ferry.testing.Slow/Block";

// Slow/Block sleeps 1 s in blocking code: on the pool when offload is set, else inline.
class SlowService : public Service {
 public:
  SlowService(asio::thread_pool* pool, bool offload_it, std::atomic<bool>* started)
      : Service("ferry.testing.Slow") {
    add_unary<EchoRequest, EchoResponse>(
        "Block",
        [pool, offload_it, started](ServerContext&, const EchoRequest&,
                                    EchoResponse& response) -> asio::awaitable<absl::Status> {
          const std::thread::id io_thread = std::this_thread::get_id();
          started->store(true);
          auto sleep = [] {
            std::this_thread::sleep_for(1s);
            return std::this_thread::get_id();
          };
          std::thread::id slept_on;
          if (offload_it) {
            slept_on = co_await offload(*pool, sleep);
          } else {
            slept_on = sleep();
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

// Starts Block, waits until its handler runs, then makes 5 Echo calls on the same channel
// (connection); returns the order in which the calls completed ("block" or "echo").
std::vector<std::string> completion_order(bool offload_it, std::string* block_payload) {
  asio::thread_pool pool(2);
  std::atomic<bool> started{false};
  SlowService slow(&pool, offload_it, &started);
  ServerOptions options;
  options.num_threads = 1;  // every call on one I/O thread
  Loopback loop(options, {}, &slow);

  std::mutex mutex;
  std::vector<std::string> order;
  auto done = [&](const char* what, const absl::Status& s) {
    EXPECT_TRUE(s.ok()) << what << ": " << s;
    std::lock_guard lock(mutex);
    order.push_back(what);
  };
  ClientContext block_ctx;
  EchoRequest block_request;
  EchoResponse block_response;
  loop.channel().call(kBlock, block_ctx, block_request, block_response,
                      [&](absl::Status s) { done("block", s); });
  EXPECT_TRUE(loop.wait_until([&] { return started.load(); }));

  constexpr int kEchoes = 5;
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
  EXPECT_EQ(order.front(), "block");  // the echoes waited for the sleep to end
  EXPECT_EQ(payload, "inline");
}

TEST(Offload, AnOffloadedHandlerLetsTheOtherCallsThrough) {
  std::string payload;
  const std::vector<std::string> order = completion_order(/*offload_it=*/true, &payload);
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order.back(), "block");  // every echo completed during the sleep
  EXPECT_EQ(payload, "pool");
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

}  // namespace
}  // namespace ferry
