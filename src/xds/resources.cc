// Implementation of src/xds/resources.h: gRFC A27's validation of the four resource types, each
// rule at its check.
#include "xds/resources.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "asio/ip/address.hpp"
#include "common/strings.h"
#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/core/v3/protocol.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/config/route/v3/route.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "envoy/type/matcher/v3/string.pb.h"
#include "envoy/type/v3/percent.pb.h"
#include "google/protobuf/any.pb.h"
#include "xds/route_settings.h"

namespace ferry::xds::detail {
namespace {

namespace cluster_v3 = envoy::config::cluster::v3;
namespace core_v3 = envoy::config::core::v3;
namespace endpoint_v3 = envoy::config::endpoint::v3;
namespace listener_v3 = envoy::config::listener::v3;
namespace route_v3 = envoy::config::route::v3;
namespace hcm_v3 = envoy::extensions::filters::network::http_connection_manager::v3;

constexpr std::string_view kTypePrefix = "type.googleapis.com/";
constexpr std::string_view kHcmType =
    "type.googleapis.com/"
    "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
constexpr std::string_view kRouterType =
    "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
constexpr std::string_view kResourceWrapperType =
    "type.googleapis.com/envoy.service.discovery.v3.Resource";

using ::ferry::detail::to_absl;

absl::Status invalid(std::string_view what) { return absl::InvalidArgumentError(to_absl(what)); }

// A27: RDS and EDS must come over the same ADS stream: ads {} or self {}.
bool is_ads_or_self(const core_v3::ConfigSource& source) {
  return source.has_ads() || source.has_self();
}

// A28's header matchers; safe_regex ones are NACKed (no RE2 in ferry, docs/xds.md). The
// matchers A28 names (exact_match, prefix_match, ...) are deprecated in Envoy's v3 for
// string_match, which is read too; control planes still send them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
absl::StatusOr<HeaderMatcher> decode_header_matcher(const route_v3::HeaderMatcher& proto,
                                                    const std::string& where) {
  HeaderMatcher out;
  if (proto.name().empty()) return invalid(absl::StrCat(where, ": no name"));
  out.name = absl::AsciiStrToLower(proto.name());
  out.invert = proto.invert_match();
  switch (proto.header_match_specifier_case()) {
    case route_v3::HeaderMatcher::kExactMatch:
      out.kind = HeaderMatcher::Kind::kExact;
      out.value = proto.exact_match();
      break;
    case route_v3::HeaderMatcher::kPrefixMatch:
      out.kind = HeaderMatcher::Kind::kPrefix;
      out.value = proto.prefix_match();
      break;
    case route_v3::HeaderMatcher::kSuffixMatch:
      out.kind = HeaderMatcher::Kind::kSuffix;
      out.value = proto.suffix_match();
      break;
    case route_v3::HeaderMatcher::kContainsMatch:
      out.kind = HeaderMatcher::Kind::kContains;
      out.value = proto.contains_match();
      break;
    case route_v3::HeaderMatcher::kPresentMatch:
      out.kind = HeaderMatcher::Kind::kPresent;
      out.present = proto.present_match();
      break;
    case route_v3::HeaderMatcher::kRangeMatch:
      out.kind = HeaderMatcher::Kind::kRange;
      out.range_start = proto.range_match().start();
      out.range_end = proto.range_match().end();
      if (out.range_start > out.range_end) {
        return invalid(
            absl::StrCat(where, ".range_match: start ", out.range_start, " > end ", out.range_end));
      }
      break;
    case route_v3::HeaderMatcher::kStringMatch: {
      const auto& m = proto.string_match();
      out.ignore_case = m.ignore_case();
      switch (m.match_pattern_case()) {
        case envoy::type::matcher::v3::StringMatcher::kExact:
          out.kind = HeaderMatcher::Kind::kExact;
          out.value = m.exact();
          break;
        case envoy::type::matcher::v3::StringMatcher::kPrefix:
          out.kind = HeaderMatcher::Kind::kPrefix;
          out.value = m.prefix();
          break;
        case envoy::type::matcher::v3::StringMatcher::kSuffix:
          out.kind = HeaderMatcher::Kind::kSuffix;
          out.value = m.suffix();
          break;
        case envoy::type::matcher::v3::StringMatcher::kContains:
          out.kind = HeaderMatcher::Kind::kContains;
          out.value = m.contains();
          break;
        case envoy::type::matcher::v3::StringMatcher::kSafeRegex:
          return invalid(absl::StrCat(where,
                                      ".string_match.safe_regex: regular expressions are "
                                      "not supported (ferry has no RE2)"));
        default:
          return invalid(absl::StrCat(where, ".string_match: no supported pattern"));
      }
      if (out.ignore_case) out.value = absl::AsciiStrToLower(out.value);
      break;
    }
    case route_v3::HeaderMatcher::kSafeRegexMatch:
      return invalid(absl::StrCat(
          where, ".safe_regex_match: regular expressions are not supported (ferry has no RE2)"));
    default:
      return invalid(absl::StrCat(where, ": no supported header_match_specifier"));
  }
  return out;
}
#pragma GCC diagnostic pop

// A28: runtime_fraction's default_value, scaled to a million (the runtime_key is ignored).
std::uint32_t per_million(const envoy::type::v3::FractionalPercent& fraction) {
  std::uint64_t n = fraction.numerator();
  switch (fraction.denominator()) {
    case envoy::type::v3::FractionalPercent::HUNDRED:
      n *= 10000;
      break;
    case envoy::type::v3::FractionalPercent::TEN_THOUSAND:
      n *= 100;
      break;
    default:  // MILLION (an unknown denominator is read as one: the proto's validation says so)
      break;
  }
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(n, 1000000));
}

absl::StatusOr<RouteConfig> decode_route_config(const route_v3::RouteConfiguration& proto) {
  RouteConfig out;
  for (int v = 0; v < proto.virtual_hosts_size(); ++v) {
    const route_v3::VirtualHost& vh = proto.virtual_hosts(v);
    VirtualHost host;
    host.domains.assign(vh.domains().begin(), vh.domains().end());
    if (static_cast<std::size_t>(vh.routes_size()) > kMaxRoutesPerVirtualHost) {
      return invalid(absl::StrCat("virtual_hosts[", v, "]: ", vh.routes_size(), " routes, over ",
                                  kMaxRoutesPerVirtualHost));
    }
    std::set<std::string_view> clusters;  // the distinct clusters the host's routes name
    std::size_t header_matchers = 0;
    // A44: the virtual host's retry policy, for its routes that have none (validated even when
    // every route has its own, as gRPC does).
    std::optional<RouteRetryPolicy> host_retry_policy;
    if (vh.has_retry_policy()) {
      absl::StatusOr<RouteRetryPolicy> policy = decode_route_retry_policy(
          vh.retry_policy(), absl::StrCat("virtual_hosts[", v, "].retry_policy"));
      if (!policy.ok()) return policy.status();
      host_retry_policy = *std::move(policy);
    }
    for (int r = 0; r < vh.routes_size(); ++r) {
      const route_v3::Route& route = vh.routes(r);
      const std::string where = absl::StrCat("virtual_hosts[", v, "].routes[", r, "]");
      if (!route.has_match()) return invalid(absl::StrCat(where, ": no match"));
      const route_v3::RouteMatch& match = route.match();
      Route out_route;
      switch (match.path_specifier_case()) {
        case route_v3::RouteMatch::kPrefix:
          out_route.match = Route::Match::kPrefix;
          out_route.pattern = match.prefix();
          break;
        case route_v3::RouteMatch::kPath:
          out_route.match = Route::Match::kPath;
          out_route.pattern = match.path();
          break;
        case route_v3::RouteMatch::kSafeRegex:
          // A28 wants RE2's syntax and linear time; ferry has no RE2, and std::regex backtracks
          // (exponential time, recursion as deep as the path): NACKed rather than run.
          return invalid(absl::StrCat(
              where,
              ".match.safe_regex: regular expressions are not supported (ferry has no RE2)"));
        default:
          return invalid(absl::StrCat(where, ".match: no prefix, path or safe_regex"));
      }
      if (match.has_case_sensitive()) out_route.case_sensitive = match.case_sensitive().value();
      if (static_cast<std::size_t>(match.headers_size()) > kMaxHeaderMatchersPerRoute) {
        return invalid(absl::StrCat(where, ".match: ", match.headers_size(),
                                    " header matchers, over ", kMaxHeaderMatchersPerRoute));
      }
      header_matchers += match.headers_size();
      if (header_matchers > kMaxHeaderMatchersPerVirtualHost) {
        return invalid(absl::StrCat("virtual_hosts[", v, "]: over ",
                                    kMaxHeaderMatchersPerVirtualHost,
                                    " header matchers in its routes"));
      }
      for (int h = 0; h < match.headers_size(); ++h) {
        absl::StatusOr<HeaderMatcher> header =
            decode_header_matcher(match.headers(h), absl::StrCat(where, ".match.headers[", h, "]"));
        if (!header.ok()) return header.status();
        out_route.headers.push_back(*std::move(header));
      }
      if (match.has_runtime_fraction()) {
        out_route.fraction_per_million = per_million(match.runtime_fraction().default_value());
      }
      // A28: a route whose query_parameters must match never matches (gRPC has no query).
      if (match.query_parameters_size() > 0) continue;
      if (route.has_route()) {
        const route_v3::RouteAction& action = route.route();
        // A31 and A44: what the route sets for its calls besides their cluster.
        absl::StatusOr<std::optional<std::chrono::milliseconds>> max_stream_duration =
            decode_route_max_stream_duration(action, absl::StrCat(where, ".route"));
        if (!max_stream_duration.ok()) return max_stream_duration.status();
        out_route.max_stream_duration = *max_stream_duration;
        if (action.has_retry_policy()) {
          absl::StatusOr<RouteRetryPolicy> policy = decode_route_retry_policy(
              action.retry_policy(), absl::StrCat(where, ".route.retry_policy"));
          if (!policy.ok()) return policy.status();
          out_route.retry_policy = *std::move(policy);
        } else {
          out_route.retry_policy = host_retry_policy;
        }
        switch (action.cluster_specifier_case()) {
          case route_v3::RouteAction::kCluster:
            if (action.cluster().empty()) {
              return invalid(absl::StrCat(where, ".route.cluster: empty"));
            }
            out_route.cluster = action.cluster();
            clusters.insert(action.cluster());
            break;
          case route_v3::RouteAction::kWeightedClusters: {
            // A28: the weights' sum must be positive and fit in 32 bits; a cluster of weight 0
            // takes no call.
            const auto& weighted = action.weighted_clusters().clusters();
            if (static_cast<std::size_t>(weighted.size()) > kMaxWeightedClustersPerRoute) {
              return invalid(absl::StrCat(where, ".route.weighted_clusters: ", weighted.size(),
                                          " clusters, over ", kMaxWeightedClustersPerRoute));
            }
            std::uint64_t sum = 0;
            for (const auto& c : weighted) {
              if (c.name().empty()) {
                return invalid(
                    absl::StrCat(where, ".route.weighted_clusters: a cluster without a name"));
              }
              const std::uint32_t weight = c.has_weight() ? c.weight().value() : 0;
              sum += weight;
              if (weight == 0) continue;
              out_route.weighted_clusters.emplace_back(c.name(), weight);
              clusters.insert(c.name());
            }
            if (sum == 0) {
              return invalid(absl::StrCat(where, ".route.weighted_clusters: the weights sum to 0"));
            }
            if (sum > std::numeric_limits<std::uint32_t>::max()) {
              return invalid(
                  absl::StrCat(where, ".route.weighted_clusters: the weights' sum is over 2^32-1"));
            }
            out_route.total_weight = static_cast<std::uint32_t>(sum);
            break;
          }
          default:
            // A28: cluster_header, or a cluster specifier this build does not know: the route
            // is ignored.
            continue;
        }
      }
      // Any other action (non_forwarding_action, redirect, ...) matches and fails the call.
      host.routes.push_back(std::move(out_route));
    }
    if (clusters.size() > kMaxClustersPerVirtualHost) {
      return invalid(absl::StrCat("virtual_hosts[", v, "]: routes to ", clusters.size(),
                                  " clusters, over ", kMaxClustersPerVirtualHost));
    }
    out.virtual_hosts.push_back(std::move(host));
  }
  return out;
}

absl::StatusOr<Resource> decode_listener(const listener_v3::Listener& listener) {
  // A27: a client listener is an api_listener holding an HttpConnectionManager.
  if (!listener.has_api_listener()) return invalid("listener: no api_listener");
  const google::protobuf::Any& any = listener.api_listener().api_listener();
  if (any.type_url() != kHcmType) {
    return invalid(absl::StrCat("listener: api_listener is '", any.type_url(),
                                "', not an HttpConnectionManager"));
  }
  hcm_v3::HttpConnectionManager hcm;
  if (!any.UnpackTo(&hcm)) return invalid("listener: HttpConnectionManager does not parse");
  // A39: the filters end with the router; an unknown filter that is not optional is an error.
  for (int i = 0; i < hcm.http_filters_size(); ++i) {
    const hcm_v3::HttpFilter& filter = hcm.http_filters(i);
    const std::string& type = filter.typed_config().type_url();
    const bool last = i + 1 == hcm.http_filters_size();
    if (type == kRouterType) {
      if (!last) return invalid("listener: the router filter is not the last http_filter");
      continue;
    }
    if (last) return invalid("listener: the last http_filter is not the router");
    if (!filter.is_optional()) {
      return invalid(absl::StrCat("listener: http_filters[", i, "] '", filter.name(),
                                  "' has an unsupported type '", type, "'"));
    }
  }
  ListenerResource out;
  // A31: the default max_stream_duration of the listener's routes.
  if (hcm.has_common_http_protocol_options() &&
      hcm.common_http_protocol_options().has_max_stream_duration()) {
    absl::StatusOr<std::chrono::milliseconds> max =
        decode_xds_duration(hcm.common_http_protocol_options().max_stream_duration(),
                            "listener: common_http_protocol_options.max_stream_duration");
    if (!max.ok()) return max.status();
    out.max_stream_duration = *max;
  }
  switch (hcm.route_specifier_case()) {
    case hcm_v3::HttpConnectionManager::kRds:
      if (!is_ads_or_self(hcm.rds().config_source())) {
        return invalid("listener: rds.config_source is neither ads nor self");
      }
      if (hcm.rds().route_config_name().empty()) {
        return invalid("listener: rds.route_config_name is empty");
      }
      out.rds_name = hcm.rds().route_config_name();
      break;
    case hcm_v3::HttpConnectionManager::kRouteConfig: {
      absl::StatusOr<RouteConfig> routes = decode_route_config(hcm.route_config());
      if (!routes.ok()) {
        return invalid(absl::StrCat("listener: route_config.", routes.status().message()));
      }
      out.inline_routes = *std::move(routes);
      break;
    }
    default:
      return invalid("listener: neither rds nor route_config");
  }
  return out;
}

absl::StatusOr<Resource> decode_cluster(const cluster_v3::Cluster& cluster) {
  // A27: an EDS cluster (aggregate and logical DNS clusters are gRFC A37's, not ferry's yet).
  if (!cluster.has_type() || cluster.type() != cluster_v3::Cluster::EDS) {
    return invalid("cluster: type is not EDS (the only discovery type ferry supports)");
  }
  if (!cluster.has_eds_cluster_config() ||
      !is_ads_or_self(cluster.eds_cluster_config().eds_config())) {
    return invalid("cluster: eds_cluster_config.eds_config is neither ads nor self");
  }
  // A27: ROUND_ROBIN (A42's RING_HASH is not ferry's yet).
  if (cluster.lb_policy() != cluster_v3::Cluster::ROUND_ROBIN) {
    return invalid(absl::StrCat("cluster: lb_policy ",
                                cluster_v3::Cluster::LbPolicy_Name(cluster.lb_policy()),
                                " is not supported (ROUND_ROBIN is)"));
  }
  ClusterResource out;
  out.eds_service_name = cluster.eds_cluster_config().service_name();
  if (out.eds_service_name.empty()) out.eds_service_name = cluster.name();
  absl::StatusOr<::ferry::detail::ClusterPolicy> policy = decode_cluster_policy(cluster);
  if (!policy.ok()) return policy.status();
  out.policy = *std::move(policy);
  return out;
}

absl::StatusOr<Resource> decode_endpoints(const endpoint_v3::ClusterLoadAssignment& cla) {
  EndpointsResource out;
  std::vector<std::uint64_t> weight_sums;
  // Bounded before anything is kept (docs/xds.md: 10,000 localities and endpoints).
  if (static_cast<std::size_t>(cla.endpoints_size()) > kMaxLocalitiesPerCluster) {
    return invalid(
        absl::StrCat(cla.endpoints_size(), " localities, over ", kMaxLocalitiesPerCluster));
  }
  std::size_t endpoints = 0;
  for (const endpoint_v3::LocalityLbEndpoints& locality : cla.endpoints()) {
    endpoints += static_cast<std::size_t>(locality.lb_endpoints_size());
  }
  if (endpoints > kMaxEndpointsPerCluster) {
    return invalid(absl::StrCat(endpoints, " endpoints, over ", kMaxEndpointsPerCluster));
  }
  for (int l = 0; l < cla.endpoints_size(); ++l) {
    const endpoint_v3::LocalityLbEndpoints& locality = cla.endpoints(l);
    const std::string where = absl::StrCat("endpoints[", l, "]");
    // A27: a locality without a weight is ignored.
    const std::uint32_t weight =
        locality.has_load_balancing_weight() ? locality.load_balancing_weight().value() : 0;
    if (weight == 0) continue;
    // Priorities index a vector: bounded by the localities' count, checked contiguous below.
    if (locality.priority() >= static_cast<std::uint32_t>(cla.endpoints_size())) {
      return invalid(absl::StrCat(where, ".priority ", locality.priority(),
                                  ": priorities are not contiguous from 0"));
    }
    if (locality.priority() >= kMaxPrioritiesPerCluster) {
      return invalid(absl::StrCat(where, ".priority ", locality.priority(), ": over ",
                                  kMaxPrioritiesPerCluster, " priorities"));
    }
    if (locality.priority() >= out.priorities.size()) {
      out.priorities.resize(locality.priority() + 1);
      weight_sums.resize(locality.priority() + 1);
    }
    // A27: a priority's locality weights sum to at most 2^32-1.
    weight_sums[locality.priority()] += weight;
    if (weight_sums[locality.priority()] > std::numeric_limits<std::uint32_t>::max()) {
      return invalid(absl::StrCat(where, ": the locality weights of priority ", locality.priority(),
                                  " sum to over 2^32-1"));
    }
    EndpointLocality out_locality;
    out_locality.weight = weight;
    for (int e = 0; e < locality.lb_endpoints_size(); ++e) {
      const endpoint_v3::LbEndpoint& lb = locality.lb_endpoints(e);
      // A27: only endpoints whose health is UNKNOWN or HEALTHY are used.
      if (lb.health_status() != core_v3::UNKNOWN && lb.health_status() != core_v3::HEALTHY) {
        continue;
      }
      const std::string at = absl::StrCat(where, ".lb_endpoints[", e, "]");
      if (!lb.has_endpoint() || !lb.endpoint().address().has_socket_address()) {
        return invalid(absl::StrCat(at, ": no endpoint.address.socket_address"));
      }
      const core_v3::SocketAddress& socket = lb.endpoint().address().socket_address();
      if (socket.port_specifier_case() != core_v3::SocketAddress::kPortValue ||
          socket.port_value() > 65535) {
        return invalid(absl::StrCat(at, ": port_value missing or over 65535"));
      }
      asio::error_code ec;
      const asio::ip::address ip = asio::ip::make_address(socket.address(), ec);
      if (ec) {
        return invalid(absl::StrCat(at, ": address '", socket.address().substr(0, 64),
                                    "' is not an IP address"));
      }
      Address a;
      a.tcp = asio::ip::tcp::endpoint(ip, static_cast<unsigned short>(socket.port_value()));
      out_locality.addresses.push_back(std::move(a));
    }
    out.priorities[locality.priority()].push_back(std::move(out_locality));
  }
  for (std::size_t p = 0; p < out.priorities.size(); ++p) {
    if (out.priorities[p].empty()) {
      return invalid(absl::StrCat("priority ", p,
                                  " has no locality: priorities are not "
                                  "contiguous from 0"));
    }
  }
  return out;
}

template <class Message>
bool unpack(const google::protobuf::Any& any, std::string_view want, Message& out) {
  return any.type_url() == want && out.ParseFromString(any.value());
}

}  // namespace

std::string_view type_url(ResourceType type) {
  switch (type) {
    case ResourceType::kListener:
      return "type.googleapis.com/envoy.config.listener.v3.Listener";
    case ResourceType::kRouteConfig:
      return "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
    case ResourceType::kCluster:
      return "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    case ResourceType::kEndpoints:
      return "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
  }
  return {};
}

std::string_view short_name(ResourceType type) {
  constexpr std::array<std::string_view, kResourceTypes> kNames = {"lds", "rds", "cds", "eds"};
  return kNames[static_cast<int>(type)];
}

std::optional<ResourceType> type_of_url(std::string_view url) {
  for (ResourceType type : kAllResourceTypes) {
    if (type_url(type) == url) return type;
  }
  return std::nullopt;
}

DecodedResource decode_resource(ResourceType type, const google::protobuf::Any& resource) {
  DecodedResource out;
  const google::protobuf::Any* any = &resource;
  envoy::service::discovery::v3::Resource wrapper;
  if (resource.type_url() == kResourceWrapperType) {
    if (!wrapper.ParseFromString(resource.value())) {
      out.value = invalid("a Resource wrapper that does not parse");
      return out;
    }
    any = &wrapper.resource();
  }
  const std::string_view want = type_url(type);
  if (any->type_url() != want) {
    out.value = invalid(absl::StrCat("a resource of type '", any->type_url().substr(0, 200),
                                     "' in a response of type '", to_absl(want), "'"));
    return out;
  }
  switch (type) {
    case ResourceType::kListener: {
      listener_v3::Listener proto;
      if (!unpack(*any, want, proto)) break;
      out.name = proto.name();
      out.value = decode_listener(proto);
      return out;
    }
    case ResourceType::kRouteConfig: {
      route_v3::RouteConfiguration proto;
      if (!unpack(*any, want, proto)) break;
      out.name = proto.name();
      absl::StatusOr<RouteConfig> config = decode_route_config(proto);
      if (config.ok()) {
        out.value = *std::move(config);
      } else {
        out.value = config.status();
      }
      return out;
    }
    case ResourceType::kCluster: {
      cluster_v3::Cluster proto;
      if (!unpack(*any, want, proto)) break;
      out.name = proto.name();
      out.value = decode_cluster(proto);
      return out;
    }
    case ResourceType::kEndpoints: {
      endpoint_v3::ClusterLoadAssignment proto;
      if (!unpack(*any, want, proto)) break;
      out.name = proto.cluster_name();
      out.value = decode_endpoints(proto);
      return out;
    }
  }
  out.value =
      invalid(absl::StrCat("a ", to_absl(want.substr(kTypePrefix.size())), " that does not parse"));
  return out;
}

const VirtualHost* find_virtual_host(const RouteConfig& config, std::string_view host) {
  // Ranks, best first: exact, suffix wildcard, prefix wildcard, "*"; within a rank the longest.
  const absl::string_view authority = to_absl(host);
  const VirtualHost* best = nullptr;
  int best_rank = 4;
  std::size_t best_length = 0;
  for (const VirtualHost& vh : config.virtual_hosts) {
    for (const std::string& domain_string : vh.domains) {
      const absl::string_view domain = domain_string;
      int rank;
      if (domain == "*") {
        rank = 3;
      } else if (absl::StartsWith(domain, "*")) {
        if (authority.size() < domain.size() ||
            !absl::EndsWithIgnoreCase(authority, domain.substr(1))) {
          continue;
        }
        rank = 1;
      } else if (absl::EndsWith(domain, "*")) {
        if (authority.size() < domain.size() ||
            !absl::StartsWithIgnoreCase(authority, domain.substr(0, domain.size() - 1))) {
          continue;
        }
        rank = 2;
      } else if (absl::EqualsIgnoreCase(domain, authority)) {
        rank = 0;
      } else {
        continue;
      }
      if (rank < best_rank || (rank == best_rank && domain.size() > best_length)) {
        best = &vh;
        best_rank = rank;
        best_length = domain.size();
      }
    }
  }
  return best;
}

namespace {

// The call's value of a header as A28 matches it: its values joined with ",", nullopt when absent;
// "-bin" headers are absent, content-type is "application/grpc" (the call's own is added below
// the routing). A repeated header is joined in a thread-local buffer that is reused.
std::optional<std::string_view> header_value(const Metadata& metadata, std::string_view name) {
  if (name.ends_with("-bin")) return std::nullopt;
  if (name == "content-type") return std::string_view("application/grpc");
  std::optional<std::string_view> first;
  std::string* joined = nullptr;
  for (const Metadata::Entry entry : metadata) {
    if (!absl::EqualsIgnoreCase(to_absl(entry.first), to_absl(name))) continue;
    if (!first.has_value()) {
      first = entry.second;
      continue;
    }
    if (joined == nullptr) {
      thread_local std::string buffer;
      joined = &buffer;
      joined->assign(*first);
    }
    joined->push_back(',');
    joined->append(entry.second);
  }
  if (joined != nullptr) return std::string_view(*joined);
  return first;
}

bool header_matches(const HeaderMatcher& m, const Metadata& metadata) {
  const std::optional<std::string_view> value = header_value(metadata, m.name);
  bool match = false;
  if (m.kind == HeaderMatcher::Kind::kPresent) {
    match = value.has_value() == m.present;
  } else if (!value.has_value()) {
    return false;  // an absent header matches no value, inverted or not (Envoy, grpc-go)
  } else {
    const absl::string_view v = to_absl(*value);
    switch (m.kind) {
      case HeaderMatcher::Kind::kExact:
        match = m.ignore_case ? absl::EqualsIgnoreCase(v, m.value) : v == m.value;
        break;
      case HeaderMatcher::Kind::kPrefix:
        match =
            m.ignore_case ? absl::StartsWithIgnoreCase(v, m.value) : absl::StartsWith(v, m.value);
        break;
      case HeaderMatcher::Kind::kSuffix:
        match = m.ignore_case ? absl::EndsWithIgnoreCase(v, m.value) : absl::EndsWith(v, m.value);
        break;
      case HeaderMatcher::Kind::kContains:
        if (!m.ignore_case) {
          match = absl::StrContains(v, m.value);
        } else {
          // m.value is lowercase already: a case-blind search without a copy.
          for (std::size_t i = 0; !match && i + m.value.size() <= v.size(); ++i) {
            match = absl::EqualsIgnoreCase(v.substr(i, m.value.size()), m.value);
          }
        }
        break;
      case HeaderMatcher::Kind::kRange: {
        std::int64_t n = 0;
        match = absl::SimpleAtoi(v, &n) && n >= m.range_start && n < m.range_end;
        break;
      }
      case HeaderMatcher::Kind::kPresent:
        break;
    }
  }
  return match != m.invert;
}

}  // namespace

bool route_matches(const Route& route, std::string_view path, const Metadata& metadata,
                   RouteRandom& random) {
  const absl::string_view p = to_absl(path);
  if (route.match == Route::Match::kPrefix) {
    if (!(route.case_sensitive ? absl::StartsWith(p, route.pattern)
                               : absl::StartsWithIgnoreCase(p, route.pattern))) {
      return false;
    }
  } else if (!(route.case_sensitive ? p == route.pattern
                                    : absl::EqualsIgnoreCase(p, route.pattern))) {
    return false;
  }
  for (const HeaderMatcher& m : route.headers) {
    if (!header_matches(m, metadata)) return false;
  }
  if (route.fraction_per_million.has_value() &&
      random.below(1000000) >= *route.fraction_per_million) {
    return false;
  }
  return true;
}

int match_route(const VirtualHost& host, std::string_view path, const Metadata& metadata,
                RouteRandom& random) {
  for (std::size_t i = 0; i < host.routes.size(); ++i) {
    if (route_matches(host.routes[i], path, metadata, random)) return static_cast<int>(i);
  }
  return -1;
}

std::size_t pick_weighted(const Route& route, RouteRandom& random) {
  std::uint64_t draw = random.below(route.total_weight);
  for (std::size_t i = 0; i < route.weighted_clusters.size(); ++i) {
    const std::uint32_t weight = route.weighted_clusters[i].second;
    if (draw < weight) return i;
    draw -= weight;
  }
  return route.weighted_clusters.size() - 1;
}

std::vector<Address> addresses_to_use(const EndpointsResource& endpoints) {
  for (const auto& priority : endpoints.priorities) {
    std::vector<Address> out;
    for (const EndpointLocality& locality : priority) {
      for (const Address& a : locality.addresses) {
        if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
      }
    }
    if (!out.empty()) return out;
  }
  return {};
}

}  // namespace ferry::xds::detail
