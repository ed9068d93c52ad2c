// A cluster's call limits and outlier detection (client layer, private): gRFC A32's circuit
// breaker (calls in flight per cluster, max_requests) and gRFC A50's outlier detection
// (endpoints whose calls fail too often are ejected for a while), for a routing resolver's
// clusters (client/call_router.h, xDS). The call path only counts, with atomics; the detector's
// interval timer, on the channel's thread, does the math (OutlierDetector::run_interval).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ferry/resolver.h"

namespace ferry::detail {

// A50's success_rate_ejection and failure_percentage_ejection (outside OutlierDetectionConfig:
// clang 14 takes a nested class with default member initializers for one that cannot be
// default-constructed while the enclosing class is being defined, and std::optional's emplace()
// then fails).
struct SuccessRateEjection {
  std::uint32_t stdev_factor = 1900;  // thousandths of a standard deviation
  std::uint32_t enforcement_percentage = 100;
  std::uint32_t minimum_hosts = 5;
  std::uint32_t request_volume = 100;
  friend bool operator==(const SuccessRateEjection&, const SuccessRateEjection&) = default;
};
struct FailurePercentageEjection {
  std::uint32_t threshold = 85;
  std::uint32_t enforcement_percentage = 100;
  std::uint32_t minimum_hosts = 5;
  std::uint32_t request_volume = 50;
  friend bool operator==(const FailurePercentageEjection&,
                         const FailurePercentageEjection&) = default;
};

// gRFC A50's configuration, validated by whoever made it (ferry::xds NACKs out-of-range
// values): percentages in [0, 100], durations not negative. Durations are clamped on use
// (kMinOutlierInterval, kMaxOutlierDuration), so none overflows a clock or spins a timer.
struct OutlierDetectionConfig {
  using SuccessRate = SuccessRateEjection;
  using FailurePercentage = FailurePercentageEjection;
  std::chrono::milliseconds interval{10000};
  std::chrono::milliseconds base_ejection_time{30000};
  std::chrono::milliseconds max_ejection_time{300000};
  std::uint32_t max_ejection_percent = 10;
  std::optional<SuccessRate> success_rate;
  std::optional<FailurePercentage> failure_percentage;
  friend bool operator==(const OutlierDetectionConfig&, const OutlierDetectionConfig&) = default;
};

// A control plane's interval of 0 (or a few microseconds) would run the detector's math
// back to back on the channel's thread: the timer never fires more often than this.
inline constexpr std::chrono::milliseconds kMinOutlierInterval{100};
// Durations are capped here (a Duration may say 10,000 years; steady_clock's nanoseconds hold
// 292): the interval, the ejection times, and an ejection time times its multiplier.
inline constexpr std::chrono::milliseconds kMaxOutlierDuration{std::chrono::hours(24 * 365)};

// gRFC A32's default when the cluster sets no DEFAULT-priority threshold.
inline constexpr std::uint32_t kDefaultMaxRequests = 1024;

// What a routing resolver says of one cluster beyond its endpoints.
struct ClusterPolicy {
  // gRFC A32: calls in flight on the cluster (counted from the pick to the call's end, across
  // the channel) beyond which a new call fails at once with UNAVAILABLE. 0: every call fails,
  // as in grpc-go.
  std::uint32_t max_requests = kDefaultMaxRequests;
  std::optional<OutlierDetectionConfig> outlier_detection;  // gRFC A50; absent: none
  friend bool operator==(const ClusterPolicy&, const ClusterPolicy&) = default;
};

// A cluster's calls in flight (A32). Shared by the channel's cluster and its calls.
struct ClusterCallCounts {
  std::atomic<std::uint32_t> in_flight{0};
};

// An endpoint's call outcomes since the detector's last interval (A50's active bucket).
struct EndpointCallCounts {
  std::atomic<std::uint64_t> successes{0};
  std::atomic<std::uint64_t> failures{0};
};

// gRFC A50's algorithm for one cluster, on the channel's thread; the clock and the random draws
// (enforcement percentages) are the caller's, so tests drive them.
class OutlierDetector {
 public:
  using Clock = std::chrono::steady_clock;
  explicit OutlierDetector(OutlierDetectionConfig config) : config_(std::move(config)) {}

  // A new configuration (A50: endpoints' ejections stay; with neither algorithm configured,
  // every endpoint is returned at once).
  void set_config(OutlierDetectionConfig config);
  const OutlierDetectionConfig& config() const { return config_; }
  // The interval the timer waits, clamped to [kMinOutlierInterval, kMaxOutlierDuration].
  std::chrono::milliseconds interval() const;

  // The cluster's endpoints now: the state of those that stay is kept (their ejection and
  // multiplier, A50), the others' forgotten.
  void set_addresses(const std::vector<Address>& addresses);
  // Where the calls to address count (null for an address not set): the channel hands it to
  // the connection's calls. Lives as long as the address stays.
  const std::shared_ptr<EndpointCallCounts>* counts_for(const Address& address) const;
  bool ejected(const Address& address) const;
  std::size_t ejected_count() const;

  // The interval timer fired at now: A50's steps (swap the buckets, the success-rate and the
  // failure-percentage ejections, the multipliers' decay and the returns). uniform100() draws
  // in [0, 100) for the enforcement percentages. Returns whether any ejection changed.
  template <class Draw>
  bool run_interval(Clock::time_point now, Draw&& uniform100) {
    return run(now, [&]() -> std::uint32_t { return uniform100(); });
  }

 private:
  struct Endpoint {
    Address address;
    std::shared_ptr<EndpointCallCounts> counts = std::make_shared<EndpointCallCounts>();
    std::uint64_t successes = 0, failures = 0;  // the last interval's (the inactive bucket)
    bool ejected = false;
    Clock::time_point ejected_at{};
    std::uint32_t multiplier = 0;
  };
  template <class F>
  bool run(Clock::time_point now, F uniform100);
  bool may_eject_more() const;
  void eject(Endpoint& e, Clock::time_point now);
  const Endpoint* find(const Address& address) const;

  struct AddressHash {
    std::size_t operator()(const Address& a) const;
  };

  OutlierDetectionConfig config_;
  std::vector<Endpoint> endpoints_;
  // endpoints_' indices by address: the channel asks of each endpoint as it builds a picker, so
  // a cluster of n endpoints costs n lookups, not n^2 comparisons (10,000 endpoints are allowed).
  absl::flat_hash_map<Address, std::size_t, AddressHash> index_;
  // How many of endpoints_ are ejected, kept as they change: an interval asks before each
  // ejection whether max_ejection_percent allows one more.
  std::size_t ejected_ = 0;
};

template <class F>
bool OutlierDetector::run(Clock::time_point now, F uniform100) {
  bool changed = false;
  // A50: the active bucket becomes the inactive one, which the algorithms read.
  for (Endpoint& e : endpoints_) {
    e.successes = e.counts->successes.exchange(0, std::memory_order_relaxed);
    e.failures = e.counts->failures.exchange(0, std::memory_order_relaxed);
  }
  // Success-rate ejection: endpoints with request_volume calls whose success rate is below the
  // mean by more than stdev_factor / 1000 standard deviations.
  if (const auto& sr = config_.success_rate; sr.has_value()) {
    std::size_t hosts = 0;
    double sum = 0;
    for (const Endpoint& e : endpoints_) {
      const std::uint64_t volume = e.successes + e.failures;
      if (volume < sr->request_volume || volume == 0) continue;
      ++hosts;
      sum += static_cast<double>(e.successes) / static_cast<double>(volume);
    }
    if (hosts >= sr->minimum_hosts && hosts > 0) {
      const double mean = sum / static_cast<double>(hosts);
      double squares = 0;
      for (const Endpoint& e : endpoints_) {
        const std::uint64_t volume = e.successes + e.failures;
        if (volume < sr->request_volume || volume == 0) continue;
        const double d = static_cast<double>(e.successes) / static_cast<double>(volume) - mean;
        squares += d * d;
      }
      const double stdev = std::sqrt(squares / static_cast<double>(hosts));
      const double threshold = mean - stdev * (static_cast<double>(sr->stdev_factor) / 1000.0);
      for (Endpoint& e : endpoints_) {
        const std::uint64_t volume = e.successes + e.failures;
        if (volume < sr->request_volume || volume == 0) continue;
        if (!may_eject_more()) break;
        const double rate = static_cast<double>(e.successes) / static_cast<double>(volume);
        if (rate < threshold && !e.ejected && uniform100() < sr->enforcement_percentage) {
          eject(e, now);
          changed = true;
        }
      }
    }
  }
  // Failure-percentage ejection: endpoints with request_volume calls of which more than
  // threshold percent failed.
  if (const auto& fp = config_.failure_percentage; fp.has_value()) {
    std::size_t hosts = 0;
    for (const Endpoint& e : endpoints_) {
      const std::uint64_t volume = e.successes + e.failures;
      if (volume >= fp->request_volume && volume > 0) ++hosts;
    }
    if (hosts >= fp->minimum_hosts && hosts > 0) {
      for (Endpoint& e : endpoints_) {
        const std::uint64_t volume = e.successes + e.failures;
        if (volume < fp->request_volume || volume == 0) continue;
        if (!may_eject_more()) break;
        // failures / volume > threshold / 100 (in doubles: no product overflows).
        const double percent =
            100.0 * static_cast<double>(e.failures) / static_cast<double>(volume);
        if (percent > static_cast<double>(fp->threshold) && !e.ejected &&
            uniform100() < fp->enforcement_percentage) {
          eject(e, now);
          changed = true;
        }
      }
    }
  }
  // A50: the multiplier of an endpoint not ejected decays; an ejected one returns once
  // base_ejection_time x multiplier (capped at max(base, max_ejection_time)) has passed.
  const auto base = std::min(config_.base_ejection_time, kMaxOutlierDuration);
  const auto cap = std::max(base, std::min(config_.max_ejection_time, kMaxOutlierDuration));
  for (Endpoint& e : endpoints_) {
    if (!e.ejected) {
      if (e.multiplier > 0) --e.multiplier;
      continue;
    }
    // base x multiplier, saturating at cap (both at most kMaxOutlierDuration, a year in ms).
    std::chrono::milliseconds duration = cap;
    if (base.count() == 0 ||
        static_cast<std::uint64_t>(e.multiplier) <=
            static_cast<std::uint64_t>(cap.count()) / static_cast<std::uint64_t>(base.count())) {
      duration = std::min(cap, base * static_cast<std::int64_t>(e.multiplier));
    }
    if (now >= e.ejected_at + duration) {
      e.ejected = false;
      --ejected_;
      changed = true;
    }
  }
  return changed;
}

}  // namespace ferry::detail
