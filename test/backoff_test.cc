// The connection back-off calculator (src/client/backoff.h), checked deterministically with an
// injected random source: gRPC's defaults (1 s, x1.6, jitter 0.2, max 120 s), the jitter's
// bounds at both ends of the random range, the cap, and reset.
#include "client/backoff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ferry::backoff_test {
namespace {

using std::chrono::milliseconds;

// The unjittered delays gRPC's defaults give: 1000, 1600, 2560, ... capped at 120000.
std::vector<double> unjittered(int n) {
  std::vector<double> out;
  double d = 1000;
  for (int i = 0; i < n; ++i) {
    out.push_back(d);
    d = std::min(d * 1.6, 120000.0);
  }
  return out;
}

TEST(Backoff, MiddleOfTheRandomRangeGivesTheExactSequence) {
  detail::Backoff backoff(BackoffOptions{}, [] { return 0.5; });  // zero jitter
  const std::vector<double> want = unjittered(20);
  for (double w : want) EXPECT_NEAR(backoff.next().count(), w, 1.0);
}

TEST(Backoff, JitterStaysWithinTwentyPercentBothWays) {
  // The lowest and highest draws: each retry after the first lands at -20% / +20% (the draw
  // range is half-open, so the top is approached from below).
  for (double draw : {0.0, 0.999999}) {
    detail::Backoff backoff(BackoffOptions{}, [draw] { return draw; });
    const std::vector<double> want = unjittered(15);
    EXPECT_EQ(backoff.next(), milliseconds(1000));  // the first retry is not jittered
    for (std::size_t i = 1; i < want.size(); ++i) {
      const double got = backoff.next().count();
      const double factor = draw < 0.5 ? 0.8 : 1.2;
      EXPECT_NEAR(got, want[i] * factor, 1.0) << "retry " << i;
    }
  }
}

TEST(Backoff, RandomDrawsStayInsideTheBoundsAndTheCapHolds) {
  detail::Backoff backoff(BackoffOptions{});  // the real random source
  const std::vector<double> want = unjittered(40);
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double got = backoff.next().count();
    EXPECT_GE(got, want[i] * 0.8 - 1) << i;
    EXPECT_LE(got, want[i] * 1.2 + 1) << i;
    EXPECT_LE(got, 120000 * 1.2 + 1);
  }
}

TEST(Backoff, ResetStartsOverAndOptionsApply) {
  BackoffOptions options;
  options.initial = milliseconds(10);
  options.multiplier = 2;
  options.max = milliseconds(50);
  options.jitter = 0;
  detail::Backoff backoff(options, [] { return 0.9; });
  EXPECT_EQ(backoff.next(), milliseconds(10));
  EXPECT_EQ(backoff.next(), milliseconds(20));
  EXPECT_EQ(backoff.next(), milliseconds(40));
  EXPECT_EQ(backoff.next(), milliseconds(50));
  EXPECT_EQ(backoff.next(), milliseconds(50));
  backoff.reset();
  EXPECT_EQ(backoff.next(), milliseconds(10));
}

TEST(ConnectivityState, Names) {
  EXPECT_EQ(connectivity_state_name(ConnectivityState::kIdle), "IDLE");
  EXPECT_EQ(connectivity_state_name(ConnectivityState::kTransientFailure), "TRANSIENT_FAILURE");
}

}  // namespace
}  // namespace ferry::backoff_test
