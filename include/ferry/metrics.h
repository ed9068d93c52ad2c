// ferry/metrics.h: per-method RPC metrics for Prometheus (library ferry::metrics, built when
// Debian's prometheus-cpp-dev is installed), as a server and a client interceptor
// (ferry/interceptor.h). The names are gRPC's OpenTelemetry metric names (gRFC A66, and A96's
// retry histograms) in Prometheus spelling (dots to underscores, a unit suffix, _total on a
// counter), so dashboards made for grpc++/grpc-go carry over; docs/interceptors.md has the table
// of instruments, units, labels and buckets. Labels: grpc_method "package.Service/Method" (on a
// server, registered methods only: an unknown path is answered UNIMPLEMENTED before the
// interceptors, so arbitrary paths create no series; on a client, its first 1000 methods, then
// "other"), grpc_status the status code's name ("OK",
// "UNAVAILABLE", ...), and on the client grpc_target, the channel's target as A66 canonicalizes
// it ("dns:///host:port" for "host:port").
//
//   Server: grpc_server_call_started_total{grpc_method}              counter
//           grpc_server_call_duration_seconds{grpc_method,grpc_status} histogram
//           grpc_server_call_{sent,rcvd}_total_compressed_message_size_bytes{grpc_method,
//             grpc_status}                                           histograms of bytes per call
//   Client: grpc_client_attempt_started_total{grpc_method,grpc_target}  counter, per attempt
//           grpc_client_attempt_duration_seconds{grpc_method,grpc_target,grpc_status}
//           grpc_client_attempt_{sent,rcvd}_total_compressed_message_size_bytes{...same}
//           grpc_client_call_duration_seconds{grpc_method,grpc_target,grpc_status}
//           grpc_client_call_retries, grpc_client_call_transparent_retries,
//           grpc_client_call_retry_delay_seconds{grpc_method,grpc_target}  (A96: per call that
//             was retried)
//           grpc_subchannel_open_connections (gauge), grpc_subchannel_connection_attempts_
//             {succeeded,failed}_total, grpc_subchannel_disconnections_total (gRFC A94; labels
//             grpc_target, grpc_lb_locality "", and grpc_disconnect_error on disconnections)
//   Server: grpc_server_authz_decisions_total{grpc_method,authz_policy,authz_rule,authz_decision}
//           counter of an authorization policy's decisions (ferry/authz.h; authz_decision is
//           "allow" or "deny", authz_rule "" when no allow rule matched), and
//           grpc_server_authz_policy_reloads_total{result} ("ok" or "error") when the policy's
//           on_reload is make_authorization_reload_metrics' (below)
//   Both:   grpc_{server,client}_call_{sent,rcvd}_messages_total   counters (ferry's own:
//           OpenTelemetry's gRPC metrics count bytes, not messages)
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   options.interceptors.push_back(ferry::make_server_metrics(*registry));
//   prometheus::Exposer exposer("127.0.0.1:9464");   // GET /metrics
//   exposer.RegisterCollectable(registry);
//
// The same registry can be pushed to an OpenTelemetry Collector over OTLP under the gRFC names
// (ferry/otlp_metrics.h, library ferry::otlp_metrics).
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
// Cost per call, once a thread has seen the method: a hash lookup per hook in that thread's own
// table of series (no lock, no allocation), then prometheus-cpp's increments (a histogram's
// Observe takes that series' mutex). A thread's first call of a method builds its series under
// prometheus-cpp's family lock.
std::shared_ptr<ServerInterceptor> make_server_metrics(prometheus::Registry& registry);

// The on_reload callback for AuthorizationInterceptor::from_file (ferry/authz.h): counts the
// policy file's reloads by result on registry (which must outlive it). Any thread.
std::function<void(const absl::Status&)> make_authorization_reload_metrics(
    prometheus::Registry& registry);

// The same for a channel's calls.
std::shared_ptr<ClientInterceptor> make_client_metrics(prometheus::Registry& registry);

}  // namespace ferry
