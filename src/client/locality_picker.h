// gRFC A27's endpoint pick within one priority of a cluster (client layer, private): a locality
// drawn by its load_balancing_weight (gRPC's weighted_target), then round robin over that
// locality's READY connections (client/load_balancer.h's Picker). Built by the priority policy
// (client/priority_policy.h) on each change; used by a routed channel's calls on its executor.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "client/load_balancer.h"
#include "common/splitmix.h"

namespace ferry::detail {

class LocalityPicker {
 public:
  struct Locality {
    std::uint32_t weight = 0;
    std::vector<std::shared_ptr<ChannelConnection>> ready;  // its READY connections
  };

  LocalityPicker() = default;
  // Localities of weight 0 or without a READY connection take no call and are left out, as
  // weighted_target leaves out children that are not READY. seed: of the per-call draw (a fixed
  // one in tests). Weights are summed in 64 bits: any count of 32-bit weights fits.
  LocalityPicker(std::vector<Locality> localities, std::uint64_t seed) : random_{seed} {
    for (Locality& l : localities) {
      if (l.weight == 0 || l.ready.empty()) continue;
      total_ += l.weight;
      cumulative_.push_back(total_);
      pickers_.emplace_back(std::move(l.ready));
    }
  }

  // The hot path: null when no locality has a READY connection. A draw below the weights' total,
  // a binary search of their running sums (log2 of the localities' count, at most 14 steps for
  // 10,000), then the locality's round robin. No allocation. Measured (Release, the thread's CPU
  // time on a loaded machine): 1.3 to 2.5 ns for one locality (Picker alone: 0.6 to 1.6), 11 to
  // 12 for two, 50 for 100, 110 to 130 for 10,000.
  const std::shared_ptr<ChannelConnection>* pick() {
    const std::size_t n = pickers_.size();
    if (n <= 1) return n == 0 ? nullptr : pickers_[0].pick();
    const std::uint64_t draw = random_.below(total_);  // bias under 2^-31 for totals within 2^33
    const std::size_t i =
        std::upper_bound(cumulative_.begin(), cumulative_.end(), draw) - cumulative_.begin();
    return pickers_[i].pick();
  }
  bool empty() const { return pickers_.empty(); }
  // The localities that take calls (weight > 0, a READY connection).
  std::size_t localities() const { return pickers_.size(); }

 private:
  std::vector<Picker> pickers_;            // one per locality that takes calls
  std::vector<std::uint64_t> cumulative_;  // running sums of their weights
  std::uint64_t total_ = 0;
  SplitMix64 random_;  // the per-call draw
};

}  // namespace ferry::detail
