// gRFC A27's priority policy (client/priority_policy.h) over real connections to loopback ferry
// servers: only the priorities it needs are created; a priority whose servers went away hands
// the calls to the next without a TRANSIENT_FAILURE in between, and takes them back once its
// servers are back on their ports; the lower priority keeps its connections for the retention
// time only; a priority stuck connecting (a black-holed address) hands over when the failover
// timer fires; every endpoint failing is TRANSIENT_FAILURE without spinning; priorities flapping
// on every update neither spin nor pile up subchannels.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "client/priority_policy.h"
#include "ferry/server.h"
#include "support/echo_service.h"

namespace ferry::priority_failover_test {
namespace {

using namespace std::chrono_literals;
using detail::PriorityPolicy;
using detail::RoutedLocality;
using detail::Subchannel;
using State = ConnectivityState;

Address loopback(int port) {
  Address a;
  a.tcp = asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                  static_cast<unsigned short>(port));
  return a;
}

// A ferry Echo server that can stop and start again on its port.
class Backend {
 public:
  Backend() : service_(&probe_) { start(0); }
  ~Backend() { stop(); }
  void start(int port) {
    server_.emplace();
    server_->add_service(service_);
    absl::StatusOr<int> bound = server_->start("127.0.0.1", port);
    ASSERT_TRUE(bound.ok()) << bound.status();
    port_ = *bound;
  }
  void restart() { start(port_); }
  void stop() {
    if (server_.has_value()) server_->shutdown(0ms);
    server_.reset();
  }
  Address address() const { return loopback(port_); }

 private:
  testing::EchoProbe probe_;
  testing::EchoService service_;
  std::optional<Server> server_;
  int port_ = 0;
};

// A cluster's channel side, as ChannelCore's ClusterSet is: makes the subchannels, hands their
// reports to the policy, records what the policy publishes.
class Cluster final : public detail::PriorityPolicyHelper, public detail::SubchannelListener {
 public:
  Cluster() {
    auto settings = std::make_shared<detail::SubchannelSettings>();
    settings->options.backoff.initial = 100ms;
    settings->options.backoff.max = 200ms;
    settings_ = std::move(settings);
    policy_.emplace(io_.get_executor(), *this);
  }
  ~Cluster() override {
    policy_->shutdown(/*graceful=*/false);
    // The picker's connections hold timers of io_: they go while it lives (the members after
    // it are destroyed after it).
    picker = detail::LocalityPicker();
    io_.run_for(20ms);
    policy_.reset();
  }
  std::shared_ptr<Subchannel> make_subchannel(Address address) override {
    ++subchannels_made;
    return std::make_shared<Subchannel>(io_.get_executor(), std::move(address), settings_, this);
  }
  void update_picker(detail::LocalityPicker next, State next_state, absl::Status error) override {
    picker = std::move(next);
    state = next_state;
    last_error = std::move(error);
    states.push_back(next_state);
  }
  void on_subchannel_state(Subchannel* subchannel, State s) override {
    policy_->on_subchannel_state(subchannel, s);
  }
  bool ejected(const Subchannel& subchannel) const override {
    return ejected_addresses.contains(subchannel.address().to_string());
  }
  void on_ready_connection(const Subchannel&, detail::ChannelConnection&) override {
    ++connections_readied;
  }
  // As ChannelCore's outlier detector does (gRFC A50): ejects or returns an endpoint.
  void set_ejected(const Address& address, bool ejected) {
    if (ejected) {
      ejected_addresses.insert(address.to_string());
    } else {
      ejected_addresses.erase(address.to_string());
    }
    policy_->refresh_ejections();
  }
  // The addresses of n picks from the current picker.
  std::set<std::string> picked(int n) {
    std::set<std::string> out;
    for (int i = 0; i < n; ++i) {
      const std::shared_ptr<detail::ChannelConnection>* conn = picker.pick();
      if (conn == nullptr) return out;
      if ((*conn)->owner != nullptr) out.insert((*conn)->owner->address().to_string());
    }
    return out;
  }

  PriorityPolicy& policy() { return *policy_; }
  void update(std::vector<std::vector<RoutedLocality>> priorities,
              std::chrono::milliseconds failover = 10s,
              std::chrono::milliseconds retention = 15min) {
    policy_->update(std::move(priorities), {failover, retention});
  }
  // Runs the loop until done() (true) or timeout (false).
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      io_.run_for(5ms);
    }
    return true;
  }
  void run_for(std::chrono::milliseconds d) { io_.run_for(d); }
  bool ready_on(int priority) {
    return policy_->current_priority() == priority && state == State::kReady && !picker.empty();
  }

  detail::LocalityPicker picker;
  State state = State::kIdle;
  absl::Status last_error;
  std::vector<State> states;  // every published state, in order
  int subchannels_made = 0;
  int connections_readied = 0;
  std::set<std::string> ejected_addresses;

 private:
  asio::io_context io_;
  std::shared_ptr<const detail::SubchannelSettings> settings_;
  std::optional<PriorityPolicy> policy_;
};

// A port nothing listens on (connections refused at once).
int refused_port() {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, asio::ip::tcp::endpoint(asio::ip::tcp::v4(), 0));
  return acceptor.local_endpoint().port();
}

std::vector<std::vector<RoutedLocality>> two_priorities(const Address& p0, const Address& p1) {
  return {{RoutedLocality{1, {p0}}}, {RoutedLocality{1, {p1}}}};
}

TEST(PriorityFailover, UsesPriorityZeroAndCreatesNoOther) {
  Backend a, b;
  Cluster cluster;
  cluster.update(two_priorities(a.address(), b.address()));
  ASSERT_TRUE(cluster.run_until([&] { return cluster.ready_on(0); }));
  cluster.run_for(200ms);
  // Lazy: priority 1 was never needed, so never connected.
  EXPECT_EQ(cluster.policy().created_priorities(), 1u);
  EXPECT_EQ(cluster.subchannels_made, 1);
  EXPECT_TRUE(cluster.ready_on(0));
}

TEST(PriorityFailover, ServersGoneHandOverToTheNextPriorityAndBackOnTheirReturn) {
  Backend a, b;
  Cluster cluster;
  cluster.update(two_priorities(a.address(), b.address()), 10s, /*retention=*/500ms);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.ready_on(0); }));
  const std::size_t before = cluster.states.size();
  a.stop();
  // Priority 0's only endpoint refuses connections: TRANSIENT_FAILURE at once, so priority 1
  // (created now) takes over well before the 10 s failover timer.
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_TRUE(cluster.run_until([&] { return cluster.ready_on(1); }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, 5s);
  // Calls never saw TRANSIENT_FAILURE meanwhile (they waited while priority 1 connected).
  for (std::size_t i = before; i < cluster.states.size(); ++i) {
    EXPECT_NE(cluster.states[i], State::kTransientFailure) << i;
  }
  // Priority 0 stays created and retries: back on its port, it takes the calls back.
  a.restart();
  ASSERT_TRUE(cluster.run_until([&] { return cluster.ready_on(0); }, 5s));
  // Priority 1 keeps its connections for the retention time, then lets them go.
  EXPECT_EQ(cluster.policy().created_priorities(), 2u);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.policy().created_priorities() == 1; }, 3s));
  EXPECT_TRUE(cluster.ready_on(0));
}

TEST(PriorityFailover, APriorityStillConnectingWhenTheFailoverTimerFiresHandsOver) {
  // Accepts TCP (the kernel's backlog) but never speaks HTTP/2: CONNECTING for the attempt's
  // 20 s connect timeout.
  asio::io_context io;
  asio::ip::tcp::acceptor black_hole(io, asio::ip::tcp::endpoint(asio::ip::tcp::v4(), 0));
  Backend b;
  Cluster cluster;
  const auto start = std::chrono::steady_clock::now();
  cluster.update(two_priorities(loopback(black_hole.local_endpoint().port()), b.address()),
                 /*failover=*/300ms);
  cluster.run_for(100ms);
  EXPECT_EQ(cluster.policy().current_priority(), 0);
  EXPECT_EQ(cluster.state, State::kConnecting);  // calls wait for it
  EXPECT_EQ(cluster.policy().created_priorities(), 1u);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.ready_on(1); }, 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 280ms);
}

TEST(PriorityFailover, EveryEndpointFailingIsTransientFailureWithoutSpinning) {
  Cluster cluster;
  cluster.update({{RoutedLocality{1, {loopback(refused_port())}}},
                  {RoutedLocality{1, {loopback(refused_port())}}, RoutedLocality{0, {}}}});
  ASSERT_TRUE(cluster.run_until([&] { return cluster.state == State::kTransientFailure; }, 5s));
  EXPECT_EQ(cluster.policy().current_priority(), 1);  // the last one's failure is reported
  EXPECT_TRUE(cluster.picker.empty());
  EXPECT_FALSE(cluster.last_error.ok());
  EXPECT_EQ(cluster.subchannels_made, 2);
  // The endpoints retry with back-off (100 to 200 ms here): a handful of reports a second, and
  // the state stays TRANSIENT_FAILURE (sticky, as gRPC's round_robin) while they do.
  const std::size_t before = cluster.states.size();
  cluster.run_for(1s);
  EXPECT_LT(cluster.states.size() - before, 60u);
  for (std::size_t i = before; i < cluster.states.size(); ++i) {
    EXPECT_EQ(cluster.states[i], State::kTransientFailure) << i;
  }
}

TEST(PriorityFailover, PrioritiesFlappingOnEveryUpdateNeitherSpinNorPileUp) {
  Backend a, b;
  Cluster cluster;
  cluster.update(two_priorities(a.address(), b.address()));
  ASSERT_TRUE(cluster.run_until([&] { return cluster.ready_on(0); }));
  // 500 updates swapping the priorities, a millisecond apart at most.
  for (int i = 0; i < 500; ++i) {
    cluster.update(i % 2 == 0 ? two_priorities(b.address(), a.address())
                              : two_priorities(a.address(), b.address()));
    cluster.run_for(1ms);
  }
  // At most one new subchannel per update (an address moving to a priority not created), their
  // predecessors shut down; once it settles, priority 0 serves again.
  EXPECT_LE(cluster.subchannels_made, 502);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.ready_on(0); }));
  // The bounds: priorities past 1,000, localities past 10,000 are dropped, never kept.
  std::vector<std::vector<RoutedLocality>> many(1200, {RoutedLocality{1, {}}});
  many[0] = {RoutedLocality{1, {a.address()}}};
  cluster.update(std::move(many));
  ASSERT_TRUE(cluster.run_until([&] { return cluster.ready_on(0); }));
  EXPECT_EQ(cluster.policy().created_priorities(), 1u);
}

// gRFC A50 under A27: an ejected endpoint (PriorityPolicyHelper::ejected) is TRANSIENT_FAILURE to
// its priority, as gRPC's ejected subchannels report: it leaves its locality's round robin, a
// locality whose READY endpoints are all ejected takes no call, and a priority left with none
// fails over to the next (created only then); returned endpoints take the calls back.
TEST(PriorityFailover, EjectedEndpointsLeaveTheirLocalityAndAnAllEjectedPriorityFailsOver) {
  Backend a1, a2, a3, b;
  Cluster cluster;
  cluster.update(
      {{RoutedLocality{1, {a1.address(), a2.address()}}, RoutedLocality{1, {a3.address()}}},
       {RoutedLocality{1, {b.address()}}}},
      10s, /*retention=*/15min);
  const std::set<std::string> all = {a1.address().to_string(), a2.address().to_string(),
                                     a3.address().to_string()};
  ASSERT_TRUE(cluster.run_until([&] { return cluster.ready_on(0) && cluster.picked(200) == all; }));
  EXPECT_GT(cluster.connections_readied, 0);
  EXPECT_EQ(cluster.picker.localities(), 2u);

  // One of locality 1's two endpoints ejected: it takes no call, its locality-mate does.
  cluster.set_ejected(a1.address(), true);
  EXPECT_TRUE(cluster.ready_on(0));
  EXPECT_EQ(cluster.picked(200),
            (std::set<std::string>{a2.address().to_string(), a3.address().to_string()}));
  EXPECT_EQ(cluster.picker.localities(), 2u);
  // Both ejected: locality 1 takes no call, locality 2 all of them; still priority 0.
  cluster.set_ejected(a2.address(), true);
  EXPECT_TRUE(cluster.ready_on(0));
  EXPECT_EQ(cluster.picker.localities(), 1u);
  EXPECT_EQ(cluster.picked(200), (std::set<std::string>{a3.address().to_string()}));
  EXPECT_EQ(cluster.policy().created_priorities(), 1u);

  // Every endpoint of priority 0 ejected: it is not READY, so priority 1 is created and takes
  // the calls.
  const std::size_t before = cluster.states.size();
  cluster.set_ejected(a3.address(), true);
  EXPECT_NE(cluster.policy().current_priority(), 0);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.ready_on(1); }, 5s));
  EXPECT_EQ(cluster.picked(50), (std::set<std::string>{b.address().to_string()}));
  EXPECT_EQ(cluster.policy().created_priorities(), 2u);
  // Meanwhile the calls waited for priority 1 to connect (CONNECTING), none failing.
  ASSERT_GT(cluster.states.size(), before);
  EXPECT_EQ(cluster.states[before], State::kConnecting);

  // An endpoint returns: priority 0 is READY again and takes the calls back, on it alone.
  cluster.set_ejected(a2.address(), false);
  EXPECT_TRUE(cluster.ready_on(0));
  EXPECT_EQ(cluster.picked(50), (std::set<std::string>{a2.address().to_string()}));
  cluster.set_ejected(a1.address(), false);
  cluster.set_ejected(a3.address(), false);
  EXPECT_EQ(cluster.picked(200), all);
}

}  // namespace
}  // namespace ferry::priority_failover_test
