// Re-resolution (ChannelOptions::min_resolve_interval, resolve_period) through a resolver stub:
// a lost connection makes the channel ask its resolver again, never more often than the
// minimum interval however often connections fail; with a period, the channel asks on its own
// and so finds a replica added behind the name without any connection failing.
#include "ferry/resolver.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "ferry/channel.h"
#include "ferry/server.h"
#include "support/echo_service.h"
#include "support/wait.h"

namespace ferry::resolver_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A resolver whose answer the test changes, counting its lookups.
class Registry final : public Resolver {
 public:
  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(asio::any_io_executor) override {
    lookups.fetch_add(1);
    std::lock_guard lock(mu_);
    co_return addresses_;
  }
  void set(std::vector<int> ports) {
    std::lock_guard lock(mu_);
    addresses_.clear();
    for (int port : ports) {
      Address a;
      a.tcp = asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                      static_cast<unsigned short>(port));
      addresses_.push_back(a);
    }
  }
  std::atomic<int> lookups{0};

 private:
  std::mutex mu_;
  std::vector<Address> addresses_;
};

class Replica {
 public:
  Replica() : service_(&probe_) {
    server_.add_service(service_);
    port_ = server_.start("127.0.0.1", 0).value();
  }
  ~Replica() { stop(); }
  void stop() {
    if (!stopped_) server_.shutdown(0ms);
    stopped_ = true;
  }
  int port() const { return port_; }
  int calls() const { return probe_.started.load(); }

 private:
  testing::EchoProbe probe_;
  testing::EchoService service_;
  Server server_;
  int port_ = 0;
  bool stopped_ = false;
};

absl::Status echo(Channel& channel) {
  testing::EchoRequest request;
  testing::EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(5s);
  return channel.call_blocking("/ferry.testing.Echo/Echo", ctx, request, response);
}

ChannelOptions options_with(std::shared_ptr<Resolver> resolver) {
  ChannelOptions options;
  options.resolver = std::move(resolver);
  options.load_balancing = LoadBalancingPolicy::kRoundRobin;
  options.backoff.initial = 20ms;
  options.backoff.max = 50ms;
  options.backoff.jitter = 0;
  return options;
}

using testing::eventually;

TEST(Resolver, LostConnectionReResolvesAtABoundedRate) {
  auto registry = std::make_shared<Registry>();
  auto replica = std::make_unique<Replica>();
  registry->set({replica->port()});
  ChannelOptions options = options_with(registry);
  options.min_resolve_interval = 300ms;
  Channel channel("registry.internal", options);
  ASSERT_TRUE(echo(channel).ok());
  EXPECT_EQ(registry->lookups.load(), 1);
  // Time passing is what this checks: longer than the interval, and still one lookup.
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(registry->lookups.load(), 1);  // nothing failed: no re-resolution

  // The server goes: the connection is lost, and every reconnection (each 20-50 ms) fails.
  const auto lost = Clock::now();  // before: the lookup the loss asks for may come during stop()
  replica->stop();
  ASSERT_TRUE(eventually([&] { return registry->lookups.load() >= 2; }));
  // Failing connections keep asking the resolver: two more lookups, which must take at least
  // two intervals (at most one per 300 ms since the loss, plus the one the loss asked for).
  EXPECT_TRUE(eventually([&] { return registry->lookups.load() >= 4; }))
      << "failing connections stopped asking the resolver";
  const int lookups = registry->lookups.load();
  const auto elapsed = Clock::now() - lost;
  EXPECT_LE(lookups, 2 + static_cast<int>(elapsed / 300ms)) << lookups;
}

TEST(Resolver, PeriodicResolutionFindsAnAddedReplica) {
  auto registry = std::make_shared<Registry>();
  Replica first;
  Replica added;
  registry->set({first.port()});
  ChannelOptions options = options_with(registry);
  options.min_resolve_interval = 100ms;
  options.resolve_period = 200ms;
  Channel channel("registry.internal", options);
  ASSERT_TRUE(echo(channel).ok());
  registry->set({first.port(), added.port()});  // scaled up; no connection fails
  ASSERT_TRUE(eventually([&] {
    EXPECT_TRUE(echo(channel).ok());
    return added.calls() > 0;
  })) << "the added replica never got a call";
  EXPECT_GE(registry->lookups.load(), 2);
  // round_robin now spreads over both.
  const int before = first.calls();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(echo(channel).ok());
  EXPECT_GE(first.calls() - before, 5);
}

}  // namespace
}  // namespace ferry::resolver_test
