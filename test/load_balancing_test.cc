// Multi-server channels over loopback: replicas of the Echo server on 127.0.0.1, reached through
// an ipv4: address list or a resolver stub. round_robin spreads calls evenly; pick_first sticks
// to one replica and moves when it goes; a replica's graceful shutdown (GOAWAY) or death under
// load costs no call; a restarted replica is used again; the channel's connectivity state and
// wait_for_ready behave as gRPC documents.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/use_future.hpp"
#include "client/target_resolver.h"
#include "ferry/channel.h"
#include "ferry/resolver.h"
#include "ferry/retry.h"
#include "ferry/server.h"
#include "support/echo_service.h"
#include "support/wait.h"

namespace ferry::load_balancing_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoProbe;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::EchoService;
using testing::echo_methods::kEcho;

// One Echo server on 127.0.0.1 that can be stopped and started again on the same port.
class Replica {
 public:
  Replica() : service_(&probe_) { start(0); }
  ~Replica() { stop(0ms); }

  void start(int port) {
    ServerOptions options;
    options.num_threads = 1;
    server_ = std::make_unique<Server>(options);
    server_->add_service(service_);
    absl::StatusOr<int> bound = server_->start("127.0.0.1", port);
    ASSERT_TRUE(bound.ok()) << bound.status();
    port_ = *bound;
  }
  // Graceful shutdown (GOAWAY, then grace for the calls in flight); 0 cuts them off.
  void stop(std::chrono::milliseconds grace) {
    if (server_ != nullptr) server_->shutdown(grace);
    server_.reset();
  }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int calls() const { return probe_.started.load(); }

 private:
  EchoProbe probe_;
  EchoService service_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

std::string ipv4_list(const std::vector<std::unique_ptr<Replica>>& replicas) {
  std::string target = "ipv4:";
  for (const auto& r : replicas) target += (target.size() > 5 ? "," : "") + r->address();
  return target;
}

std::vector<std::unique_ptr<Replica>> make_replicas(int n) {
  std::vector<std::unique_ptr<Replica>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_unique<Replica>());
  return out;
}

ChannelOptions fast_backoff(LoadBalancingPolicy policy) {
  ChannelOptions options;
  options.load_balancing = policy;
  options.backoff.initial = 20ms;
  options.backoff.max = 200ms;
  options.min_resolve_interval = 50ms;
  return options;
}

// Unary Echo calls on a channel's own thread, `in_flight` at a time, until `total` are done.
class Load {
 public:
  Load(Channel& channel, int total, int in_flight, bool wait_for_ready, int delay_ms = 0)
      : total_(total) {
    for (int i = 0; i < in_flight; ++i) {
      asio::co_spawn(channel.executor(), worker(channel, wait_for_ready, delay_ms), asio::detached);
    }
  }
  // Blocks until every call completed or limit passed; true when all completed.
  bool wait(std::chrono::seconds limit = 60s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (completed() < total_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(1ms);
    }
    return completed() == total_;
  }
  int completed() const { return completed_.load(); }
  std::vector<absl::Status> failures() const {
    std::lock_guard lock(mutex_);
    return failures_;
  }

 private:
  asio::awaitable<void> worker(Channel& channel, bool wait_for_ready, int delay_ms) {
    EchoRequest request;
    request.set_payload("load");
    request.set_delay_ms(delay_ms);
    EchoResponse response;
    while (next_.fetch_add(1) < total_) {
      ClientContext context;
      context.set_timeout(20s);
      context.set_wait_for_ready(wait_for_ready);
      absl::Status status = co_await channel.call(kEcho, context, request, response);
      if (!status.ok()) {
        std::lock_guard lock(mutex_);
        failures_.push_back(status);
      }
      completed_.fetch_add(1);
    }
  }

  const int total_;
  std::atomic<int> next_{0};
  std::atomic<int> completed_{0};
  mutable std::mutex mutex_;
  std::vector<absl::Status> failures_;
};

std::string describe(const std::vector<absl::Status>& failures) {
  std::string out;
  for (std::size_t i = 0; i < failures.size() && i < 5; ++i) out += failures[i].ToString() + "; ";
  return out;
}

// Makes calls until every replica has served one: round_robin then has all its connections up.
bool all_serving(Channel& channel, const std::vector<std::unique_ptr<Replica>>& replicas) {
  auto every_replica_called = [&] {
    for (const auto& r : replicas) {
      if (r->calls() == 0) return false;
    }
    return true;
  };
  return testing::eventually([&] {
    EchoRequest request;
    EchoResponse response;
    ClientContext context;
    context.set_timeout(5s);
    EXPECT_TRUE(channel.call_blocking(kEcho, context, request, response).ok());
    return every_replica_called();
  });
}

// Waits (from the test thread) until the channel is READY.
bool wait_ready(Channel& channel, std::chrono::milliseconds limit = 5s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  ConnectivityState s = channel.state(/*try_to_connect=*/true);
  while (s != ConnectivityState::kReady && std::chrono::steady_clock::now() < until) {
    channel.wait_for_state_change(s, until, asio::use_future).get();
    s = channel.state(true);
  }
  return s == ConnectivityState::kReady;
}

TEST(LoadBalancing, RoundRobinSpreadsCallsEvenly) {
  auto replicas = make_replicas(3);
  Channel channel(ipv4_list(replicas), fast_backoff(LoadBalancingPolicy::kRoundRobin));
  // The channel is READY with its first connection; the other two come up.
  ASSERT_TRUE(all_serving(channel, replicas));
  std::vector<int> before;
  for (const auto& r : replicas) before.push_back(r->calls());
  Load load(channel, 3000, 64, /*wait_for_ready=*/false);
  ASSERT_TRUE(load.wait());
  EXPECT_TRUE(load.failures().empty()) << describe(load.failures());
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    const int got = replicas[i]->calls() - before[i];
    EXPECT_GE(got, 900) << "replica " << i;
    EXPECT_LE(got, 1100) << "replica " << i;
  }
}

TEST(LoadBalancing, PickFirstSticksToOneServerAndMovesWhenItGoes) {
  auto replicas = make_replicas(3);
  Channel channel(ipv4_list(replicas), fast_backoff(LoadBalancingPolicy::kPickFirst));
  {
    Load load(channel, 300, 8, /*wait_for_ready=*/false);
    ASSERT_TRUE(load.wait());
    EXPECT_TRUE(load.failures().empty()) << describe(load.failures());
  }
  EXPECT_EQ(replicas[0]->calls(), 300);
  EXPECT_EQ(replicas[1]->calls(), 0);
  EXPECT_EQ(replicas[2]->calls(), 0);
  replicas[0]->stop(1s);
  {
    Load load(channel, 300, 8, /*wait_for_ready=*/true);
    ASSERT_TRUE(load.wait());
    EXPECT_TRUE(load.failures().empty()) << describe(load.failures());
  }
  EXPECT_EQ(replicas[1]->calls(), 300);  // the next address in order, and only it
  EXPECT_EQ(replicas[2]->calls(), 0);
}

// A replica shuts down gracefully (GOAWAY) while 64 calls are in flight: its calls finish, new
// ones go to the others at once, and those sent before the GOAWAY reached the client but not
// processed are retried transparently. Not one call fails, wait_for_ready or not, and not one
// runs twice: a request read after the GOAWAY was queued (above its last stream id, so retried
// by the client) is refused, not run.
TEST(LoadBalancing, GracefulShutdownUnderLoadFailsNoCall) {
  auto replicas = make_replicas(3);
  Channel channel(ipv4_list(replicas), fast_backoff(LoadBalancingPolicy::kRoundRobin));
  ASSERT_TRUE(all_serving(channel, replicas));
  int handled = 0;
  for (const auto& r : replicas) handled -= r->calls();  // the warm-up's
  Load load(channel, 6000, 64, /*wait_for_ready=*/false, /*delay_ms=*/1);
  while (load.completed() < 1500) std::this_thread::sleep_for(1ms);
  const int others_before = replicas[0]->calls() + replicas[2]->calls();
  replicas[1]->stop(5s);
  const int stopped_total = replicas[1]->calls();
  ASSERT_TRUE(load.wait());
  EXPECT_TRUE(load.failures().empty())
      << load.failures().size() << " failed: " << describe(load.failures());
  EXPECT_EQ(replicas[1]->calls(), stopped_total);
  EXPECT_GT(replicas[0]->calls() + replicas[2]->calls() - others_before, 3000);
  for (const auto& r : replicas) handled += r->calls();
  EXPECT_EQ(handled, 6000) << "a call ran on two servers";
  std::printf("graceful shutdown: 6000 calls, %zu failed, %d on the stopped replica\n",
              load.failures().size(), stopped_total);
}

// A replica is cut off (no grace) with 64 calls in flight. wait_for_ready calls of an idempotent
// method with a retry policy for UNAVAILABLE lose none: the cut-off calls are retried on the
// others. Later the replica comes back on the same port and takes calls again.
TEST(LoadBalancing, KilledServerUnderLoadThenRestarted) {
  auto replicas = make_replicas(3);
  ChannelOptions options = fast_backoff(LoadBalancingPolicy::kRoundRobin);
  options.method_configs[std::string(kEcho)].retry_policy =
      RetryPolicy{.max_attempts = 3, .initial_backoff = 5ms, .max_backoff = 50ms};
  Channel channel(ipv4_list(replicas), options);
  ASSERT_TRUE(all_serving(channel, replicas));
  int attempts = 0;
  for (const auto& r : replicas) attempts -= r->calls();  // the warm-up's
  Load load(channel, 6000, 64, /*wait_for_ready=*/true, /*delay_ms=*/1);
  while (load.completed() < 1500) std::this_thread::sleep_for(1ms);
  replicas[1]->stop(0ms);
  ASSERT_TRUE(load.wait());
  const auto failures = load.failures();
  for (const auto& r : replicas) attempts += r->calls();
  std::printf("killed replica: 6000 calls, %zu failed, %d retried attempts reached a server\n",
              failures.size(), attempts - 6000);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed: " << describe(failures);

  const int port = replicas[1]->port();
  replicas[1]->start(port);
  const int before = replicas[1]->calls();
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (replicas[1]->calls() == before && std::chrono::steady_clock::now() < until) {
    Load more(channel, 64, 8, /*wait_for_ready=*/true);
    ASSERT_TRUE(more.wait());
    EXPECT_TRUE(more.failures().empty()) << describe(more.failures());
  }
  EXPECT_GT(replicas[1]->calls(), before) << "the restarted replica never got a call";
}

// A user's resolver, answering two loopback servers and counting its lookups.
class TwoAddresses final : public Resolver {
 public:
  explicit TwoAddresses(std::vector<Address> addresses) : addresses_(std::move(addresses)) {}
  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(asio::any_io_executor) override {
    ++lookups;
    co_return addresses_;
  }
  std::atomic<int> lookups{0};

 private:
  std::vector<Address> addresses_;
};

Address loopback(int port) {
  Address a;
  a.tcp = asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port);
  return a;
}

TEST(LoadBalancing, PluggedResolverWithTwoAddressesSpreadsOverBoth) {
  auto replicas = make_replicas(2);
  auto resolver = std::make_shared<TwoAddresses>(
      std::vector<Address>{loopback(replicas[0]->port()), loopback(replicas[1]->port())});
  ChannelOptions options = fast_backoff(LoadBalancingPolicy::kRoundRobin);
  options.resolver = resolver;
  Channel channel("echo.service.internal", options);
  ASSERT_TRUE(all_serving(channel, replicas));
  Load load(channel, 1000, 16, /*wait_for_ready=*/false);
  ASSERT_TRUE(load.wait());
  EXPECT_TRUE(load.failures().empty()) << describe(load.failures());
  EXPECT_GE(replicas[0]->calls(), 400);
  EXPECT_GE(replicas[1]->calls(), 400);
  EXPECT_EQ(resolver->lookups.load(), 1);  // no connection was lost: no re-resolution
}

TEST(LoadBalancing, StateAndWaitForReady) {
  auto replicas = make_replicas(1);
  const std::string target = ipv4_list(replicas);
  Channel channel(target, fast_backoff(LoadBalancingPolicy::kPickFirst));
  EXPECT_EQ(channel.state(), ConnectivityState::kIdle);  // lazy: nothing happens before a call
  ASSERT_TRUE(wait_ready(channel));
  replicas[0]->stop(0ms);
  // The connection goes (IDLE), the next attempt fails: TRANSIENT_FAILURE.
  const auto until = std::chrono::steady_clock::now() + 5s;
  ConnectivityState s = channel.state(true);
  while (s != ConnectivityState::kTransientFailure && std::chrono::steady_clock::now() < until) {
    channel.wait_for_state_change(s, until, asio::use_future).get();
    s = channel.state(true);
  }
  ASSERT_EQ(s, ConnectivityState::kTransientFailure);
  EchoRequest request;
  EchoResponse response;
  {
    ClientContext fail_fast;
    fail_fast.set_timeout(5s);
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = channel.call_blocking(kEcho, fail_fast, request, response);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  }
  {
    ClientContext waits;
    waits.set_timeout(300ms);
    waits.set_wait_for_ready(true);
    absl::Status status = channel.call_blocking(kEcho, waits, request, response);
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  }
  // A wait_for_ready call made while the server is down completes once it is back.
  std::promise<absl::Status> result;
  ClientContext waits;
  waits.set_timeout(10s);
  waits.set_wait_for_ready(true);
  auto pending = channel.call(kEcho, waits, request, response, asio::use_future);
  // A fixed pause: nothing shows that a call is waiting for ready, and it must be when the
  // server comes back (else this shows nothing).
  std::this_thread::sleep_for(100ms);
  replicas[0]->start(replicas[0]->port());
  EXPECT_TRUE(pending.get().ok());
  EXPECT_EQ(channel.state(), ConnectivityState::kReady);
  EXPECT_FALSE(channel
                   .wait_for_state_change(ConnectivityState::kReady,
                                          std::chrono::steady_clock::now() + 50ms, asio::use_future)
                   .get());
}

// Promise: an application that retries fail-fast calls in a tight loop on the channel's own
// thread still lets the channel reconnect: each failed call gives the thread a turn, so the
// back-off timer runs, and once the server is back the loop's calls succeed. (The soak found
// such a loop spinning on UNAVAILABLE forever: the calls failed inline, and the timer that would
// reconnect never ran.)
TEST(LoadBalancing, AFailFastLoopOnTheChannelsThreadLetsItReconnect) {
  auto replicas = make_replicas(1);
  const std::string target = ipv4_list(replicas);
  replicas[0]->stop(0ms);
  asio::io_context io(1);
  Channel channel(io, target, fast_backoff(LoadBalancingPolicy::kPickFirst));
  std::atomic<int> failures{0};
  std::atomic<bool> started_failing{false};
  auto looped = asio::co_spawn(
      io,
      [&]() -> asio::awaitable<absl::Status> {
        const auto until = std::chrono::steady_clock::now() + 10s;
        EchoRequest request;
        EchoResponse response;
        absl::Status status;
        while (std::chrono::steady_clock::now() < until) {
          ClientContext ctx;
          status = co_await channel.call(kEcho, ctx, request, response);
          if (status.ok()) co_return status;
          failures.fetch_add(1);
          started_failing.store(true);
        }
        co_return status;
      },
      asio::use_future);
  std::thread runner([&io] { io.run(); });
  ASSERT_TRUE(testing::eventually([&] { return started_failing.load(); }, 5s));
  replicas[0]->start(replicas[0]->port());
  const absl::Status last = looped.get();
  EXPECT_TRUE(last.ok()) << last << " after " << failures.load() << " failed calls";
  io.stop();
  runner.join();
}

TEST(LoadBalancing, AddressListTargets) {
  auto v4 = detail::resolver_for_target("ipv4:127.0.0.1:1,10.0.0.2:2");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->authority, "127.0.0.1:1");
  auto v6 = detail::resolver_for_target("ipv6:[::1]:50051,[fe80::1]:2");
  ASSERT_TRUE(v6.ok()) << v6.status();
  for (const char* bad : {"ipv4:127.0.0.1:1,", "ipv4:[::1]:1", "ipv6:127.0.0.1:1",
                          "ipv4:example.com:80", "ipv4:1.2.3.4:99999"}) {
    EXPECT_FALSE(detail::resolver_for_target(bad).ok()) << bad;
  }
  asio::io_context io;
  auto addresses = asio::co_spawn(io, v4->resolver->resolve(io.get_executor()), asio::use_future);
  io.run();
  auto list = addresses.get();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].to_string(), "10.0.0.2:2");
}

}  // namespace
}  // namespace ferry::load_balancing_test
