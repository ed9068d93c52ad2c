// Implementation of src/client/outlier_detection.h (gRFC A50's bookkeeping; the interval's
// math is the header's template).
#include "client/outlier_detection.h"

#include <algorithm>
#include <array>
#include <limits>
#include <tuple>

#include "absl/hash/hash.h"

namespace ferry::detail {

void OutlierDetector::set_config(OutlierDetectionConfig config) {
  config_ = std::move(config);
  // A50: with neither algorithm, nothing stays ejected (and no multiplier lingers).
  if (!config_.success_rate.has_value() && !config_.failure_percentage.has_value()) {
    for (Endpoint& e : endpoints_) {
      e.ejected = false;
      e.multiplier = 0;
    }
    ejected_ = 0;
  }
}

std::chrono::milliseconds OutlierDetector::interval() const {
  return std::clamp(config_.interval, kMinOutlierInterval, kMaxOutlierDuration);
}

std::size_t OutlierDetector::AddressHash::operator()(const Address& a) const {
  const asio::ip::address ip = a.tcp.address();
  std::array<unsigned char, 16> bytes{};
  unsigned long scope = 0;
  if (ip.is_v6()) {
    bytes = ip.to_v6().to_bytes();
    scope = ip.to_v6().scope_id();
  } else {
    const auto v4 = ip.to_v4().to_bytes();
    std::copy(v4.begin(), v4.end(), bytes.begin());
  }
  using Key = std::tuple<const std::string&, unsigned short, std::array<unsigned char, 16>,
                         unsigned long, bool>;
  return absl::Hash<Key>{}(Key(a.unix_path, a.tcp.port(), bytes, scope, ip.is_v6()));
}

void OutlierDetector::set_addresses(const std::vector<Address>& addresses) {
  std::vector<Endpoint> next;
  next.reserve(addresses.size());
  absl::flat_hash_map<Address, std::size_t, AddressHash> index;
  index.reserve(addresses.size());
  for (const Address& a : addresses) {
    if (!index.try_emplace(a, next.size()).second) continue;  // listed twice
    auto kept = index_.find(a);
    if (kept != index_.end()) {
      next.push_back(std::move(endpoints_[kept->second]));
    } else {
      Endpoint e;
      e.address = a;
      next.push_back(std::move(e));
    }
  }
  endpoints_ = std::move(next);
  index_ = std::move(index);
  ejected_ = static_cast<std::size_t>(std::count_if(endpoints_.begin(), endpoints_.end(),
                                                    [](const Endpoint& e) { return e.ejected; }));
}

const OutlierDetector::Endpoint* OutlierDetector::find(const Address& address) const {
  auto at = index_.find(address);
  return at == index_.end() ? nullptr : &endpoints_[at->second];
}

const std::shared_ptr<EndpointCallCounts>* OutlierDetector::counts_for(
    const Address& address) const {
  const Endpoint* e = find(address);
  return e == nullptr ? nullptr : &e->counts;
}

bool OutlierDetector::ejected(const Address& address) const {
  const Endpoint* e = find(address);
  return e != nullptr && e->ejected;
}

std::size_t OutlierDetector::ejected_count() const { return ejected_; }

// A50: "If the percentage of ejected addresses is at or above max_ejection_percent, stop."
// In integers: ejected * 100 >= max_percent * endpoints (no overflow: both under 2^40).
bool OutlierDetector::may_eject_more() const {
  if (endpoints_.empty()) return false;
  const std::uint64_t ejected = ejected_count();
  return ejected * 100 <
         static_cast<std::uint64_t>(config_.max_ejection_percent) * endpoints_.size();
}

void OutlierDetector::eject(Endpoint& e, Clock::time_point now) {
  if (!e.ejected) ++ejected_;
  e.ejected = true;
  e.ejected_at = now;
  if (e.multiplier < std::numeric_limits<std::uint32_t>::max()) ++e.multiplier;
}

}  // namespace ferry::detail
