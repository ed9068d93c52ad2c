// gRFC A50's outlier detection math (client/outlier_detection.h) with a driven clock and
// scripted enforcement draws: ejections by failure percentage and success rate, their bounds
// (minimum hosts, request volume, max_ejection_percent), the ejection time's multiplier growing
// and decaying, and hostile values (huge durations, a zero interval) clamped without overflow.
#include "client/outlier_detection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace ferry::outlier_detection_test {
namespace {

using namespace std::chrono_literals;
using detail::EndpointCallCounts;
using detail::OutlierDetectionConfig;
using detail::OutlierDetector;

std::vector<Address> addresses(int n) {
  std::vector<Address> out;
  for (int i = 0; i < n; ++i) {
    Address a;
    a.tcp = asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                    static_cast<unsigned short>(1000 + i));
    out.push_back(a);
  }
  return out;
}

void record(const OutlierDetector& detector, const Address& a, int successes, int failures) {
  EndpointCallCounts& counts = **detector.counts_for(a);
  counts.successes += static_cast<std::uint64_t>(successes);
  counts.failures += static_cast<std::uint64_t>(failures);
}

OutlierDetectionConfig failure_percentage(std::uint32_t max_ejection_percent = 100) {
  OutlierDetectionConfig config;
  config.interval = 1s;
  config.base_ejection_time = 30s;
  config.max_ejection_time = 300s;
  config.max_ejection_percent = max_ejection_percent;
  OutlierDetectionConfig::FailurePercentage fp;
  fp.threshold = 50;
  fp.minimum_hosts = 3;
  fp.request_volume = 10;
  config.failure_percentage = fp;
  return config;
}

auto always() {
  return [] { return std::uint32_t{0}; };
}

TEST(OutlierDetection, AFailingEndpointIsEjectedAndReturnsAfterItsEjectionTime) {
  OutlierDetector detector(failure_percentage());
  const std::vector<Address> a = addresses(3);
  detector.set_addresses(a);
  auto t = std::chrono::steady_clock::now();
  record(detector, a[0], 20, 0);
  record(detector, a[1], 20, 0);
  record(detector, a[2], 0, 20);
  EXPECT_TRUE(detector.run_interval(t, always()));
  EXPECT_FALSE(detector.ejected(a[0]));
  EXPECT_FALSE(detector.ejected(a[1]));
  EXPECT_TRUE(detector.ejected(a[2]));
  // Still ejected before base_ejection_time x 1 has passed (no calls reach it meanwhile).
  for (int i = 1; i < 30; ++i) {
    record(detector, a[0], 20, 0);
    record(detector, a[1], 20, 0);
    EXPECT_FALSE(detector.run_interval(t + std::chrono::seconds(i), always())) << i;
    EXPECT_TRUE(detector.ejected(a[2])) << i;
  }
  EXPECT_TRUE(detector.run_interval(t + 30s, always()));
  EXPECT_FALSE(detector.ejected(a[2]));
  EXPECT_EQ(detector.ejected_count(), 0u);
}

TEST(OutlierDetection, TheMultiplierGrowsWithEachEjectionAndDecaysWhileHealthy) {
  OutlierDetector detector(failure_percentage());
  const std::vector<Address> a = addresses(3);
  detector.set_addresses(a);
  auto t = std::chrono::steady_clock::now();
  auto fail_third = [&] {
    record(detector, a[0], 20, 0);
    record(detector, a[1], 20, 0);
    record(detector, a[2], 0, 20);
  };
  fail_third();
  detector.run_interval(t, always());  // ejected, multiplier 1
  detector.run_interval(t += 30s, always());
  ASSERT_FALSE(detector.ejected(a[2]));
  fail_third();
  detector.run_interval(t += 1s, always());  // ejected again, multiplier 2: 60 s
  ASSERT_TRUE(detector.ejected(a[2]));
  detector.run_interval(t + 59s, always());
  EXPECT_TRUE(detector.ejected(a[2]));
  detector.run_interval(t += 60s, always());
  EXPECT_FALSE(detector.ejected(a[2]));
  // Two healthy intervals take the multiplier back to 0 (2 -> 1 -> 0): the next ejection is 30 s.
  detector.run_interval(t += 1s, always());
  detector.run_interval(t += 1s, always());
  fail_third();
  detector.run_interval(t += 1s, always());
  ASSERT_TRUE(detector.ejected(a[2]));
  detector.run_interval(t += 30s, always());
  EXPECT_FALSE(detector.ejected(a[2]));
  // max_ejection_time caps base x multiplier: 20 ejections in a row never wait over 300 s.
  for (int i = 0; i < 20; ++i) {
    fail_third();
    detector.run_interval(t += 1s, always());
    ASSERT_TRUE(detector.ejected(a[2])) << i;
    detector.run_interval(t += 300s, always());
    ASSERT_FALSE(detector.ejected(a[2])) << i;
  }
}

TEST(OutlierDetection, MaxEjectionPercentBoundsEjectionsWhenEveryEndpointFails) {
  // A50: no more ejections once the ejected share is at or above max_ejection_percent.
  struct Case {
    int endpoints;
    std::uint32_t percent;
    std::size_t ejected;
  };
  for (const Case& c :
       {Case{10, 30, 3}, Case{3, 10, 1}, Case{3, 0, 0}, Case{3, 50, 2}, Case{4, 100, 4}}) {
    OutlierDetector detector(failure_percentage(c.percent));
    const std::vector<Address> a = addresses(c.endpoints);
    detector.set_addresses(a);
    auto t = std::chrono::steady_clock::now();
    for (int round = 0; round < 5; ++round) {  // failing on, interval after interval
      for (const Address& each : a) record(detector, each, 0, 20);
      detector.run_interval(t += 1s, always());
      EXPECT_EQ(detector.ejected_count(), c.ejected) << c.endpoints << " " << c.percent;
    }
  }
}

TEST(OutlierDetection, MinimumHostsRequestVolumeAndEnforcementAreHonoured) {
  const std::vector<Address> a = addresses(3);
  auto t = std::chrono::steady_clock::now();
  {
    OutlierDetector detector(failure_percentage());
    detector.set_addresses(a);
    record(detector, a[0], 20, 0);
    record(detector, a[1], 5, 0);  // under request_volume: only 2 hosts count, under 3
    record(detector, a[2], 0, 20);
    EXPECT_FALSE(detector.run_interval(t, always()));
    EXPECT_EQ(detector.ejected_count(), 0u);
  }
  {
    OutlierDetectionConfig config = failure_percentage();
    config.failure_percentage->enforcement_percentage = 40;
    OutlierDetector detector(config);
    detector.set_addresses(a);
    record(detector, a[0], 20, 0);
    record(detector, a[1], 20, 0);
    record(detector, a[2], 0, 20);
    EXPECT_FALSE(detector.run_interval(t, [] { return std::uint32_t{40}; }));  // draw >= 40
    record(detector, a[0], 20, 0);
    record(detector, a[1], 20, 0);
    record(detector, a[2], 0, 20);
    EXPECT_TRUE(detector.run_interval(t + 1s, [] { return std::uint32_t{39}; }));
    EXPECT_TRUE(detector.ejected(a[2]));
  }
  {
    // Exactly at the threshold is not over it (A50: "greater than").
    OutlierDetector detector(failure_percentage());
    detector.set_addresses(a);
    record(detector, a[0], 20, 0);
    record(detector, a[1], 20, 0);
    record(detector, a[2], 10, 10);
    EXPECT_FALSE(detector.run_interval(t, always()));
  }
}

TEST(OutlierDetection, SuccessRateEjectsBelowTheMeanLessStdevFactorDeviations) {
  OutlierDetectionConfig config;
  config.max_ejection_percent = 100;
  config.success_rate.emplace();  // stdev_factor 1900, minimum_hosts 5, request_volume 100
  OutlierDetector detector(config);
  const std::vector<Address> a = addresses(5);
  detector.set_addresses(a);
  // Rates 1, 1, 1, 1, 0.5: mean 0.9, stdev 0.2, threshold 0.9 - 1.9 x 0.2 = 0.52.
  for (int i = 0; i < 4; ++i) record(detector, a[i], 100, 0);
  record(detector, a[4], 50, 50);
  auto t = std::chrono::steady_clock::now();
  EXPECT_TRUE(detector.run_interval(t, always()));
  EXPECT_EQ(detector.ejected_count(), 1u);
  EXPECT_TRUE(detector.ejected(a[4]));
  OutlierDetector second(config);
  second.set_addresses(a);
  for (int i = 0; i < 4; ++i) record(second, a[i], 100, 0);
  record(second, a[4], 60, 40);  // mean 0.92, stdev 0.16, threshold 0.616: ejected
  EXPECT_TRUE(second.run_interval(t, always()));
  OutlierDetector third(config);
  third.set_addresses(a);
  for (int i = 0; i < 4; ++i) record(third, a[i], 100, 0);
  record(third, a[4], 99, 1);  // 0.99 against a threshold of 0.9904: ejected too (tiny stdev)
  EXPECT_TRUE(third.run_interval(t, always()));
  OutlierDetector fourth(config);
  fourth.set_addresses(a);
  for (int i = 0; i < 5; ++i) record(fourth, a[i], 100, 0);  // all equal: stdev 0, none below
  EXPECT_FALSE(fourth.run_interval(t, always()));
}

TEST(OutlierDetection, EndpointsKeepTheirStateAcrossUpdatesAndNoAlgorithmReturnsAll) {
  OutlierDetector detector(failure_percentage());
  std::vector<Address> a = addresses(4);
  detector.set_addresses({a[0], a[1], a[2]});
  record(detector, a[0], 20, 0);
  record(detector, a[1], 20, 0);
  record(detector, a[2], 0, 20);
  auto t = std::chrono::steady_clock::now();
  detector.run_interval(t, always());
  detector.set_addresses({a[2], a[3], a[0]});
  EXPECT_TRUE(detector.ejected(a[2]));
  EXPECT_EQ(detector.counts_for(a[1]), nullptr);
  EXPECT_NE(detector.counts_for(a[3]), nullptr);
  OutlierDetectionConfig none = failure_percentage();
  none.failure_percentage.reset();
  detector.set_config(none);
  EXPECT_EQ(detector.ejected_count(), 0u);
}

// A control plane may give a cluster 10,000 endpoints (what ferry::xds accepts): the detector's
// work per endpoint (set_addresses, the lookups the channel makes as it builds a picker, an
// interval ejecting every failing endpoint that max_ejection_percent allows) must stay what it
// is for 100. With a scan per lookup and a count of the ejected per ejection, both quadratic,
// each of 10,000 endpoints cost about 100 times what each of 100 did.
TEST(OutlierDetection, WorkPerEndpointDoesNotGrowWithTheCluster) {
  auto per_endpoint = [](int n) {
    const std::vector<Address> a = addresses(n);
    auto least = std::chrono::nanoseconds::max();
    for (int round = 0; round < 3; ++round) {
      OutlierDetector detector(failure_percentage(100));
      const auto start = std::chrono::steady_clock::now();
      detector.set_addresses(a);
      for (const Address& x : a) record(detector, x, 0, 20);  // every endpoint fails
      detector.run_interval(std::chrono::steady_clock::now(), always());
      std::size_t ejected = 0;
      for (const Address& x : a) ejected += detector.ejected(x) ? 1 : 0;
      least = std::min(least, std::chrono::nanoseconds(std::chrono::steady_clock::now() - start));
      EXPECT_EQ(ejected, a.size());
      EXPECT_EQ(detector.ejected_count(), a.size());
    }
    return least / n;
  };
  const auto small = per_endpoint(100);
  const auto large = per_endpoint(10000);
  EXPECT_LT(large, small * 20) << "per endpoint: " << small.count() << " ns with 100, "
                               << large.count() << " ns with 10,000";
}

TEST(OutlierDetection, HostileDurationsAreClampedWithoutOverflow) {
  OutlierDetectionConfig config = failure_percentage();
  config.interval = 0ms;
  OutlierDetector zero(config);
  EXPECT_EQ(zero.interval(), detail::kMinOutlierInterval);  // never a spinning timer
  config.interval = std::chrono::milliseconds(std::int64_t{315576000000} * 1000);
  config.base_ejection_time = std::chrono::milliseconds(std::int64_t{315576000000} * 1000);
  config.max_ejection_time = config.base_ejection_time;
  OutlierDetector huge(config);
  EXPECT_EQ(huge.interval(), detail::kMaxOutlierDuration);
  const std::vector<Address> a = addresses(3);
  huge.set_addresses(a);
  auto t = std::chrono::steady_clock::now();
  // Ejected over and over: base x multiplier saturates at the cap (UBSan checks the products).
  for (int i = 0; i < 50; ++i) {
    record(huge, a[0], 20, 0);
    record(huge, a[1], 20, 0);
    record(huge, a[2], 0, 20);
    huge.run_interval(t, always());
    EXPECT_TRUE(huge.ejected(a[2]));
    huge.run_interval(t + detail::kMaxOutlierDuration, always());
    EXPECT_FALSE(huge.ejected(a[2])) << i;
  }
  // A base of 0: returned at the next interval.
  config.base_ejection_time = 0ms;
  OutlierDetector instant(config);
  instant.set_addresses(a);
  record(instant, a[0], 20, 0);
  record(instant, a[1], 20, 0);
  record(instant, a[2], 0, 20);
  instant.run_interval(t, always());
  EXPECT_FALSE(instant.ejected(a[2]));
}

}  // namespace
}  // namespace ferry::outlier_detection_test
