// A Cluster's call limits and outlier detection (ferry::xds, private; src/xds/resources.h's
// decode_cluster_policy): gRFC A32's circuit_breakers and gRFC A50's outlier_detection, read
// and validated as those gRFCs say, into client/outlier_detection.h's ClusterPolicy.
#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "envoy/config/cluster/v3/circuit_breaker.pb.h"
#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/cluster/v3/outlier_detection.pb.h"
#include "google/protobuf/duration.pb.h"
#include "xds/resources.h"

namespace ferry::xds::detail {
namespace {

using ::ferry::detail::ClusterPolicy;
using ::ferry::detail::OutlierDetectionConfig;

absl::Status invalid_cluster_policy(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("cluster: ", what));
}

// google.protobuf.Duration's own bounds (A50: durations that are not valid are NACKed):
// seconds in [0, 315,576,000,000] here (a negative one is no duration to wait), nanos in
// [0, 999,999,999]. The value is capped at kMaxOutlierDuration (no clock overflows with it).
absl::StatusOr<std::chrono::milliseconds> outlier_duration(const google::protobuf::Duration& d,
                                                           absl::string_view field) {
  constexpr std::int64_t kMaxSeconds = 315576000000;
  if (d.seconds() < 0 || d.seconds() > kMaxSeconds || d.nanos() < 0 || d.nanos() > 999999999) {
    return invalid_cluster_policy(absl::StrCat("outlier_detection.", field, " (", d.seconds(),
                                               "s, ", d.nanos(), "ns) is not a valid duration"));
  }
  constexpr std::int64_t kCapSeconds =
      std::chrono::duration_cast<std::chrono::seconds>(::ferry::detail::kMaxOutlierDuration)
          .count();
  if (d.seconds() >= kCapSeconds) return ::ferry::detail::kMaxOutlierDuration;
  return std::chrono::milliseconds(d.seconds() * 1000 + d.nanos() / 1000000);
}

// A50: a percentage over 100 is NACKed.
absl::Status check_percent(const google::protobuf::UInt32Value& value, absl::string_view field) {
  if (value.value() > 100) {
    return invalid_cluster_policy(
        absl::StrCat("outlier_detection.", field, " ", value.value(), " is over 100"));
  }
  return absl::OkStatus();
}

absl::StatusOr<OutlierDetectionConfig> decode_outlier_detection(
    const envoy::config::cluster::v3::OutlierDetection& od) {
  OutlierDetectionConfig out;
  if (od.has_interval()) {
    absl::StatusOr<std::chrono::milliseconds> d = outlier_duration(od.interval(), "interval");
    if (!d.ok()) return d.status();
    out.interval = *d;
  }
  if (od.has_base_ejection_time()) {
    absl::StatusOr<std::chrono::milliseconds> d =
        outlier_duration(od.base_ejection_time(), "base_ejection_time");
    if (!d.ok()) return d.status();
    out.base_ejection_time = *d;
  }
  if (od.has_max_ejection_time()) {
    absl::StatusOr<std::chrono::milliseconds> d =
        outlier_duration(od.max_ejection_time(), "max_ejection_time");
    if (!d.ok()) return d.status();
    out.max_ejection_time = *d;
  }
  if (od.has_max_ejection_percent()) {
    if (absl::Status s = check_percent(od.max_ejection_percent(), "max_ejection_percent");
        !s.ok()) {
      return s;
    }
    out.max_ejection_percent = od.max_ejection_percent().value();
  }
  // A50: success_rate_ejection unless enforcing_success_rate is 0 (its default is 100).
  OutlierDetectionConfig::SuccessRate sr;
  if (od.has_enforcing_success_rate()) {
    if (absl::Status s = check_percent(od.enforcing_success_rate(), "enforcing_success_rate");
        !s.ok()) {
      return s;
    }
    sr.enforcement_percentage = od.enforcing_success_rate().value();
  }
  if (od.has_success_rate_minimum_hosts()) {
    sr.minimum_hosts = od.success_rate_minimum_hosts().value();
  }
  if (od.has_success_rate_request_volume()) {
    sr.request_volume = od.success_rate_request_volume().value();
  }
  if (od.has_success_rate_stdev_factor()) sr.stdev_factor = od.success_rate_stdev_factor().value();
  if (sr.enforcement_percentage > 0) out.success_rate = sr;
  // A50: failure_percentage_ejection only when enforcing_failure_percentage is set and not 0.
  OutlierDetectionConfig::FailurePercentage fp;
  if (od.has_failure_percentage_threshold()) {
    if (absl::Status s =
            check_percent(od.failure_percentage_threshold(), "failure_percentage_threshold");
        !s.ok()) {
      return s;
    }
    fp.threshold = od.failure_percentage_threshold().value();
  }
  fp.enforcement_percentage = 0;
  if (od.has_enforcing_failure_percentage()) {
    if (absl::Status s =
            check_percent(od.enforcing_failure_percentage(), "enforcing_failure_percentage");
        !s.ok()) {
      return s;
    }
    fp.enforcement_percentage = od.enforcing_failure_percentage().value();
  }
  if (od.has_failure_percentage_minimum_hosts()) {
    fp.minimum_hosts = od.failure_percentage_minimum_hosts().value();
  }
  if (od.has_failure_percentage_request_volume()) {
    fp.request_volume = od.failure_percentage_request_volume().value();
  }
  if (fp.enforcement_percentage > 0) out.failure_percentage = fp;
  return out;
}

}  // namespace

absl::StatusOr<ClusterPolicy> decode_cluster_policy(
    const envoy::config::cluster::v3::Cluster& cluster) {
  ClusterPolicy out;
  // A32: the first threshold of priority DEFAULT gives max_requests (1024 without one); any
  // 32-bit value is taken, 0 failing every call as in grpc-go.
  for (const auto& threshold : cluster.circuit_breakers().thresholds()) {
    if (threshold.priority() != envoy::config::core::v3::DEFAULT) continue;
    if (threshold.has_max_requests()) out.max_requests = threshold.max_requests().value();
    break;
  }
  if (cluster.has_outlier_detection()) {
    absl::StatusOr<OutlierDetectionConfig> od =
        decode_outlier_detection(cluster.outlier_detection());
    if (!od.ok()) return od.status();
    out.outlier_detection = *std::move(od);
  }
  return out;
}

}  // namespace ferry::xds::detail
