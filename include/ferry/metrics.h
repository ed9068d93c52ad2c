// ferry/metrics.h: per-method RPC metrics for Prometheus (library ferry::metrics, built when
// Debian's prometheus-cpp-dev is installed), as a server and a client interceptor
// (ferry/interceptor.h). The names are gRPC's OpenTelemetry metric names (gRFC A66) in Prometheus
// spelling, so dashboards made for grpc++/grpc-go carry over; label grpc_method is
// "package.Service/Method", grpc_status the status code's name ("OK", "UNAVAILABLE", ...).
//
//   Server: grpc_server_call_started_total{grpc_method}              counter
//           grpc_server_call_duration_seconds{grpc_method,grpc_status} histogram (its _count is
//                                                                    the calls completed by status)
//   Client: grpc_client_attempt_started_total{grpc_method}            counter (per attempt: a
//           grpc_client_attempt_duration_seconds{grpc_method,grpc_status} call retried by its
//           grpc_client_call_duration_seconds{grpc_method,grpc_status}    policy makes several)
//   Server:
//   grpc_server_call_{sent,rcvd}_total_compressed_message_size_bytes{grpc_method,grpc_status}
//   Client:
//   grpc_client_attempt_{sent,rcvd}_total_compressed_message_size_bytes{grpc_method,grpc_status}
//           histograms of message bytes per call (client: per attempt; payloads as sent, after
//           compression, without the 5-byte prefix), gRPC's size buckets (0, 1 KiB, 2 KiB, 4 KiB,
//           16 KiB ... 4 GiB)
//   Server: grpc_server_authz_decisions_total{grpc_method,authz_policy,authz_rule,authz_decision}
//           counter of an authorization policy's decisions (ferry/authz.h; authz_decision is
//           "allow" or "deny", authz_rule "" when no allow rule matched), and
//           grpc_server_authz_policy_reloads_total{result} ("ok" or "error") when the policy's
//           on_reload is make_authorization_reload_metrics' (below)
//   Both:   grpc_{server,client}_call_{sent,rcvd}_messages_total{grpc_method}  counters (ferry's
//   own:
//           OpenTelemetry's gRPC metrics count bytes, not messages)
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   options.interceptors.push_back(ferry::make_server_metrics(*registry));
//   prometheus::Exposer exposer("127.0.0.1:9464");   // GET /metrics
//   exposer.RegisterCollectable(registry);
#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"

namespace prometheus {
class Registry;
}

namespace ferry {

class ServerInterceptor;
class ClientInterceptor;

// Registers the server metrics' families on registry (which must outlive the interceptor) and
// returns the interceptor that records them. Thread-safe: one instance serves every I/O thread.
// Cost per call: a few hash lookups and atomic increments under prometheus-cpp's family locks.
std::shared_ptr<ServerInterceptor> make_server_metrics(prometheus::Registry& registry);

// The on_reload callback for AuthorizationInterceptor::from_file (ferry/authz.h): counts the
// policy file's reloads by result on registry (which must outlive it). Any thread.
std::function<void(const absl::Status&)> make_authorization_reload_metrics(
    prometheus::Registry& registry);

// The same for a channel's calls.
std::shared_ptr<ClientInterceptor> make_client_metrics(prometheus::Registry& registry);

}  // namespace ferry
