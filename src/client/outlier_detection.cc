// Implementation of src/client/outlier_detection.h (gRFC A50's bookkeeping; the interval's
// math is the header's template).
#include "client/outlier_detection.h"

#include <algorithm>
#include <limits>

namespace ferry::detail {

void OutlierDetector::set_config(OutlierDetectionConfig config) {
  config_ = std::move(config);
  // A50: with neither algorithm, nothing stays ejected (and no multiplier lingers).
  if (!config_.success_rate.has_value() && !config_.failure_percentage.has_value()) {
    for (Endpoint& e : endpoints_) {
      e.ejected = false;
      e.multiplier = 0;
    }
  }
}

std::chrono::milliseconds OutlierDetector::interval() const {
  return std::clamp(config_.interval, kMinOutlierInterval, kMaxOutlierDuration);
}

void OutlierDetector::set_addresses(const std::vector<Address>& addresses) {
  std::vector<Endpoint> next;
  next.reserve(addresses.size());
  for (const Address& a : addresses) {
    auto same = [&a](const Endpoint& e) { return e.address == a; };
    if (std::any_of(next.begin(), next.end(), same)) continue;  // listed twice
    auto kept = std::find_if(endpoints_.begin(), endpoints_.end(), same);
    if (kept != endpoints_.end()) {
      next.push_back(std::move(*kept));
    } else {
      Endpoint e;
      e.address = a;
      next.push_back(std::move(e));
    }
  }
  endpoints_ = std::move(next);
}

const std::shared_ptr<EndpointCallCounts>* OutlierDetector::counts_for(
    const Address& address) const {
  for (const Endpoint& e : endpoints_) {
    if (e.address == address) return &e.counts;
  }
  return nullptr;
}

bool OutlierDetector::ejected(const Address& address) const {
  for (const Endpoint& e : endpoints_) {
    if (e.address == address) return e.ejected;
  }
  return false;
}

std::size_t OutlierDetector::ejected_count() const {
  return static_cast<std::size_t>(std::count_if(endpoints_.begin(), endpoints_.end(),
                                                [](const Endpoint& e) { return e.ejected; }));
}

// A50: "If the percentage of ejected addresses is at or above max_ejection_percent, stop."
// In integers: ejected * 100 >= max_percent * endpoints (no overflow: both under 2^40).
bool OutlierDetector::may_eject_more() const {
  if (endpoints_.empty()) return false;
  const std::uint64_t ejected = ejected_count();
  return ejected * 100 <
         static_cast<std::uint64_t>(config_.max_ejection_percent) * endpoints_.size();
}

void OutlierDetector::eject(Endpoint& e, Clock::time_point now) {
  e.ejected = true;
  e.ejected_at = now;
  if (e.multiplier < std::numeric_limits<std::uint32_t>::max()) ++e.multiplier;
}

}  // namespace ferry::detail
