// gRFC A27's endpoint picking, the pure parts (client/locality_picker.h, client/priority_policy.h):
// a locality drawn by weight then round robin within it, with a fixed seed; localities of weight
// 0 or without a READY connection left out; 10,000 localities and weights summing to 2^32-1;
// and gRPC's choice of a priority (lazy creation, the failover timer, going back up), state by
// state. The policy over real connections is test/priority_failover_test.cc's.
#include "client/priority_policy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "asio/io_context.hpp"
#include "client/locality_picker.h"

namespace ferry::priority_policy_test {
namespace {

using detail::ChannelConnection;
using detail::choose_priority;
using detail::LocalityPicker;
using detail::PriorityChildView;
using detail::PriorityChoice;
using State = ConnectivityState;

class Connections {
 public:
  std::shared_ptr<ChannelConnection> make() {
    all_.push_back(std::make_shared<ChannelConnection>(io_.get_executor()));
    return all_.back();
  }

 private:
  asio::io_context io_;
  std::vector<std::shared_ptr<ChannelConnection>> all_;
};

// Picks n times; counts per connection.
std::map<const ChannelConnection*, int> picks(LocalityPicker& picker, int n) {
  std::map<const ChannelConnection*, int> out;
  for (int i = 0; i < n; ++i) {
    const std::shared_ptr<ChannelConnection>* c = picker.pick();
    if (c == nullptr) {
      ++out[nullptr];
    } else {
      ++out[c->get()];
    }
  }
  return out;
}

TEST(LocalityPicker, DrawsALocalityByWeightThenRoundRobinsWithinIt) {
  Connections c;
  auto a1 = c.make(), a2 = c.make(), b = c.make();
  LocalityPicker picker({{3, {a1, a2}}, {1, {b}}}, /*seed=*/42);
  auto counts = picks(picker, 4000);
  // 3:1 of 4,000 calls; with this seed the draws land within 1% of 3,000 / 1,000.
  EXPECT_NEAR(counts[a1.get()] + counts[a2.get()], 3000, 40);
  EXPECT_NEAR(counts[b.get()], 1000, 40);
  // Locality a's calls alternate between its two connections.
  EXPECT_NEAR(counts[a1.get()], counts[a2.get()], 1);
  EXPECT_EQ(counts[nullptr], 0);
  // Another seed, another sequence, the same split.
  LocalityPicker other({{3, {a1, a2}}, {1, {b}}}, /*seed=*/7);
  counts = picks(other, 40000);
  EXPECT_NEAR(counts[b.get()], 10000, 300);
}

TEST(LocalityPicker, LeavesOutLocalitiesOfWeightZeroOrWithoutAReadyConnection) {
  Connections c;
  auto a = c.make(), b = c.make();
  LocalityPicker picker({{0, {a}}, {5, {}}, {2, {b}}}, 1);
  EXPECT_EQ(picker.localities(), 1u);
  auto counts = picks(picker, 100);
  EXPECT_EQ(counts[b.get()], 100);
  LocalityPicker none({{0, {a}}, {5, {}}}, 1);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.pick(), nullptr);
  EXPECT_EQ(LocalityPicker().pick(), nullptr);
}

// A control plane's worst (what xDS validation lets through: 10,000 localities, a priority's
// weights summing to 2^32-1): no overflow, every locality reachable, a pick still a binary search.
TEST(LocalityPicker, TenThousandLocalitiesWithWeightsSummingTo2To32Minus1) {
  Connections c;
  constexpr int kLocalities = 10000;
  std::vector<LocalityPicker::Locality> localities;
  std::vector<std::shared_ptr<ChannelConnection>> conns;
  const std::uint32_t each = std::numeric_limits<std::uint32_t>::max() / kLocalities;
  std::uint64_t sum = 0;
  for (int i = 0; i < kLocalities; ++i) {
    conns.push_back(c.make());
    // The last takes what is left, so that the sum is exactly 2^32-1.
    const std::uint32_t w =
        i + 1 < kLocalities
            ? each
            : static_cast<std::uint32_t>(std::numeric_limits<std::uint32_t>::max() - sum);
    sum += w;
    localities.push_back({w, {conns.back()}});
  }
  ASSERT_EQ(sum, std::numeric_limits<std::uint32_t>::max());
  LocalityPicker picker(std::move(localities), 3);
  auto counts = picks(picker, 200000);
  EXPECT_EQ(counts[nullptr], 0);
  // 20 calls each on average: all but a handful of localities served, none more than 3x.
  EXPECT_GT(counts.size(), static_cast<std::size_t>(kLocalities - 10));
  for (const auto& [conn, n] : counts) EXPECT_LT(n, 60);

  // One locality of weight 2^32-2 beside one of weight 1: the small one takes (almost) nothing.
  auto big = c.make(), small = c.make();
  LocalityPicker skewed({{std::numeric_limits<std::uint32_t>::max() - 1, {big}}, {1, {small}}}, 5);
  counts = picks(skewed, 100000);
  EXPECT_EQ(counts[big.get()] + counts[small.get()], 100000);
  EXPECT_LE(counts[small.get()], 1);
}

PriorityChildView missing() { return {}; }
PriorityChildView child(State state, bool failover_pending = false) {
  return {true, state, failover_pending};
}
void expect_choice(std::vector<PriorityChildView> children, std::size_t priority, bool create,
                   bool deactivate_lower) {
  const PriorityChoice choice = choose_priority(children);
  EXPECT_EQ(choice.priority, priority);
  EXPECT_EQ(choice.create, create);
  EXPECT_EQ(choice.deactivate_lower, deactivate_lower);
}

// gRPC's priority policy (ChoosePriority), state by state, through a failover and back.
TEST(ChoosePriority, FailsOverByConnectivityAndGoesBackUp) {
  // Nothing created: priority 0 is, alone (priority 1 is not touched).
  expect_choice({missing(), missing()}, 0, true, false);
  // Priority 0 connecting within its failover timer: it keeps the calls (they wait).
  expect_choice({child(State::kConnecting, true), missing()}, 0, false, false);
  // READY: in use, and the priorities below it start their retention.
  expect_choice({child(State::kReady), missing()}, 0, false, true);
  expect_choice({child(State::kIdle), child(State::kReady)}, 0, false, true);
  // Its endpoints all failed: priority 1 is created...
  expect_choice({child(State::kTransientFailure), missing()}, 1, true, false);
  // ...and used while it connects within its own timer, then once READY.
  expect_choice({child(State::kTransientFailure), child(State::kConnecting, true)}, 1, false,
                false);
  expect_choice({child(State::kTransientFailure), child(State::kReady)}, 1, false, true);
  // Priority 0 retrying (CONNECTING after it failed: no timer) does not take the calls back...
  expect_choice({child(State::kConnecting), child(State::kReady)}, 1, false, true);
  // ...READY again, it does.
  expect_choice({child(State::kReady), child(State::kReady)}, 0, false, true);
  // Still CONNECTING when its timer fired (a black-holed address): the next priority.
  expect_choice({child(State::kConnecting), missing()}, 1, true, false);
}

TEST(ChoosePriority, WithNothingUsableTheFirstConnectingThenTheLast) {
  // Every priority failed: the last one's failure is reported (calls fail fast with it).
  expect_choice({child(State::kTransientFailure), child(State::kTransientFailure)}, 1, false,
                false);
  // Timers fired but one is still connecting: that one (calls wait rather than fail).
  expect_choice(
      {child(State::kTransientFailure), child(State::kConnecting), child(State::kTransientFailure)},
      1, false, false);
  // A single priority is always the choice.
  expect_choice({child(State::kTransientFailure)}, 0, false, false);
  // A lower priority READY below a higher one connecting in time: the higher one still waits.
  expect_choice({child(State::kConnecting, true), child(State::kReady)}, 0, false, false);
}

// 1,000 priorities (the bound), every one failed: one pass, no creation, the last.
TEST(ChoosePriority, AThousandFailedPrioritiesAreOnePass) {
  std::vector<PriorityChildView> children(detail::kMaxPrioritiesPerCluster,
                                          child(State::kTransientFailure));
  expect_choice(children, children.size() - 1, false, false);
  children[500] = missing();
  expect_choice(children, 500, true, false);
}

}  // namespace
}  // namespace ferry::priority_policy_test
