// Implementation of ferry/metrics.h: interceptors that record gRPC's standard per-call metrics
// into prometheus-cpp families.
#include "ferry/metrics.h"

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "ferry/interceptor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ferry {
namespace {

// gRPC's OpenTelemetry plugins' default latency buckets (seconds).
const prometheus::Histogram::BucketBoundaries& latency_buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      0,     0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.003, 0.004,
      0.005, 0.006,   0.008,   0.01,   0.013,  0.016,  0.02,   0.025, 0.03,  0.04,  0.05,
      0.065, 0.08,    0.1,     0.13,   0.16,   0.2,    0.25,   0.3,   0.4,   0.5,   0.65,
      0.8,   1,       2,       5,      10,     20,     50,     100};
  return buckets;
}

// gRPC's OpenTelemetry plugins' default message size buckets (bytes).
const prometheus::Histogram::BucketBoundaries& size_buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      0,       1024,    2048,     4096,     16384,     65536,      262144,
      1048576, 4194304, 16777216, 67108864, 268435456, 1073741824, 4294967296};
  return buckets;
}

// gRFC A96's bucket boundaries for the retry counts.
const prometheus::Histogram::BucketBoundaries& retry_buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {1, 2, 3, 4, 5};
  return buckets;
}
const prometheus::Histogram::BucketBoundaries& transparent_retry_buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {1, 2, 3, 4, 5, 10};
  return buckets;
}

// "/pkg.Service/Method" -> "pkg.Service/Method", as gRPC's metrics label it.
std::string method_label(std::string_view path) {
  if (!path.empty() && path[0] == '/') path.remove_prefix(1);
  return std::string(path);
}

std::string target_label(const CallInfo& call) { return std::string(call.target); }

std::string status_label(const absl::Status& status) {
  return absl::StatusCodeToString(status.code());
}

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

prometheus::Family<prometheus::Counter>& counter(prometheus::Registry& registry,
                                                 const std::string& name, const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Histogram>& histogram(prometheus::Registry& registry,
                                                     const std::string& name,
                                                     const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

class ServerMetrics final : public ServerInterceptor {
 public:
  explicit ServerMetrics(prometheus::Registry& registry)
      : started_(counter(registry, "grpc_server_call_started_total",
                         "Calls started on the server (grpc.server.call.started).")),
        duration_(histogram(registry, "grpc_server_call_duration_seconds",
                            "Server call duration, by final status (grpc.server.call.duration).")),
        sent_(
            counter(registry, "grpc_server_call_sent_messages_total", "Messages the server sent.")),
        rcvd_(counter(registry, "grpc_server_call_rcvd_messages_total",
                      "Messages the server received.")),
        sent_bytes_(histogram(registry, "grpc_server_call_sent_total_compressed_message_size_bytes",
                              "Message bytes (compressed) the server sent per call "
                              "(grpc.server.call.sent_total_compressed_message_size).")),
        rcvd_bytes_(histogram(registry, "grpc_server_call_rcvd_total_compressed_message_size_bytes",
                              "Message bytes (compressed) the server received per call "
                              "(grpc.server.call.rcvd_total_compressed_message_size).")),
        authz_(counter(registry, "grpc_server_authz_decisions_total",
                       "Calls an authorization policy decided (ferry/authz.h), by policy, rule "
                       "and decision.")) {}

  asio::awaitable<absl::Status> on_start(ServerContext&, const CallInfo& call) override {
    started_.Add({{"grpc_method", method_label(call.method)}}).Increment();
    return ready_status();  // not a coroutine of its own: no frame from asio's small cache
  }

  void on_finish(ServerContext& ctx, const CallInfo& call, const CallOutcome& outcome) override {
    const std::string method = method_label(call.method);
    const std::string status = status_label(outcome.status);
    // The policy's decision, when an authorization interceptor ran (this one placed before it
    // sees the calls it denied too).
    const CallAuthorization& authz = ctx.authorization();
    if (authz.decision != CallAuthorization::Decision::kNotEvaluated) {
      authz_
          .Add({{"grpc_method", method},
                {"authz_policy", std::string(authz.policy)},
                {"authz_rule", std::string(authz.rule)},
                {"authz_decision",
                 authz.decision == CallAuthorization::Decision::kAllowed ? "allow" : "deny"}})
          .Increment();
    }
    duration_.Add({{"grpc_method", method}, {"grpc_status", status}}, latency_buckets())
        .Observe(seconds(outcome.duration));
    sent_.Add({{"grpc_method", method}}).Increment(static_cast<double>(outcome.messages_sent));
    rcvd_.Add({{"grpc_method", method}}).Increment(static_cast<double>(outcome.messages_received));
    sent_bytes_.Add({{"grpc_method", method}, {"grpc_status", status}}, size_buckets())
        .Observe(static_cast<double>(outcome.bytes_sent));
    rcvd_bytes_.Add({{"grpc_method", method}, {"grpc_status", status}}, size_buckets())
        .Observe(static_cast<double>(outcome.bytes_received));
  }

 private:
  prometheus::Family<prometheus::Counter>& started_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Counter>& sent_;
  prometheus::Family<prometheus::Counter>& rcvd_;
  prometheus::Family<prometheus::Histogram>& sent_bytes_;
  prometheus::Family<prometheus::Histogram>& rcvd_bytes_;
  prometheus::Family<prometheus::Counter>& authz_;
};

class ClientMetrics final : public ClientInterceptor {
 public:
  explicit ClientMetrics(prometheus::Registry& registry)
      : started_(counter(registry, "grpc_client_attempt_started_total",
                         "Call attempts started by the client (grpc.client.attempt.started).")),
        attempt_duration_(histogram(
            registry, "grpc_client_attempt_duration_seconds",
            "Client call attempt duration, by final status (grpc.client.attempt.duration).")),
        call_duration_(
            histogram(registry, "grpc_client_call_duration_seconds",
                      "Client call duration, by final status (grpc.client.call.duration).")),
        sent_(
            counter(registry, "grpc_client_call_sent_messages_total", "Messages the client sent.")),
        rcvd_(counter(registry, "grpc_client_call_rcvd_messages_total",
                      "Messages the client received.")),
        sent_bytes_(histogram(registry,
                              "grpc_client_attempt_sent_total_compressed_message_size_bytes",
                              "Message bytes (compressed) the client sent per call attempt "
                              "(grpc.client.attempt.sent_total_compressed_message_size).")),
        rcvd_bytes_(histogram(registry,
                              "grpc_client_attempt_rcvd_total_compressed_message_size_bytes",
                              "Message bytes (compressed) the client received per call attempt "
                              "(grpc.client.attempt.rcvd_total_compressed_message_size).")),
        retries_(histogram(registry, "grpc_client_call_retries",
                           "Retries (by the retry policy) per retried call "
                           "(grpc.client.call.retries).")),
        transparent_retries_(histogram(registry, "grpc_client_call_transparent_retries",
                                       "Transparent retries per call that made any "
                                       "(grpc.client.call.transparent_retries).")),
        retry_delay_(histogram(registry, "grpc_client_call_retry_delay_seconds",
                               "Time a retried call spent with no attempt in flight "
                               "(grpc.client.call.retry_delay).")) {}

  // The attempt metrics count attempts (a retried call makes several), the call metrics calls.
  void on_attempt_start(ClientContext&, const CallInfo& call) override {
    started_.Add({{"grpc_method", method_label(call.method)}, {"grpc_target", target_label(call)}})
        .Increment();
  }

  void on_attempt_end(ClientContext&, const CallInfo& call, const CallOutcome& attempt) override {
    const std::map<std::string, std::string> labels = {
        {"grpc_method", method_label(call.method)},
        {"grpc_target", target_label(call)},
        {"grpc_status", status_label(attempt.status)}};
    attempt_duration_.Add(labels, latency_buckets()).Observe(seconds(attempt.duration));
    sent_bytes_.Add(labels, size_buckets()).Observe(static_cast<double>(attempt.bytes_sent));
    rcvd_bytes_.Add(labels, size_buckets()).Observe(static_cast<double>(attempt.bytes_received));
  }

  void on_finish(ClientContext&, const CallInfo& call, const CallOutcome& outcome) override {
    const std::string method = method_label(call.method);
    const std::string target = target_label(call);
    call_duration_
        .Add({{"grpc_method", method},
              {"grpc_target", target},
              {"grpc_status", status_label(outcome.status)}},
             latency_buckets())
        .Observe(seconds(outcome.duration));
    const std::map<std::string, std::string> labels = {{"grpc_method", method},
                                                       {"grpc_target", target}};
    sent_.Add(labels).Increment(static_cast<double>(outcome.messages_sent));
    rcvd_.Add(labels).Increment(static_cast<double>(outcome.messages_received));
    // gRFC A96: recorded for a call that was retried, and a count only when it is not 0.
    if (outcome.retries > 0) {
      retries_.Add(labels, retry_buckets()).Observe(outcome.retries);
    }
    if (outcome.transparent_retries > 0) {
      transparent_retries_.Add(labels, transparent_retry_buckets())
          .Observe(outcome.transparent_retries);
    }
    if (outcome.retries > 0 || outcome.transparent_retries > 0) {
      retry_delay_.Add(labels, latency_buckets()).Observe(seconds(outcome.retry_delay));
    }
  }

 private:
  prometheus::Family<prometheus::Counter>& started_;
  prometheus::Family<prometheus::Histogram>& attempt_duration_;
  prometheus::Family<prometheus::Histogram>& call_duration_;
  prometheus::Family<prometheus::Counter>& sent_;
  prometheus::Family<prometheus::Counter>& rcvd_;
  prometheus::Family<prometheus::Histogram>& sent_bytes_;
  prometheus::Family<prometheus::Histogram>& rcvd_bytes_;
  prometheus::Family<prometheus::Histogram>& retries_;
  prometheus::Family<prometheus::Histogram>& transparent_retries_;
  prometheus::Family<prometheus::Histogram>& retry_delay_;
};

}  // namespace

std::shared_ptr<ServerInterceptor> make_server_metrics(prometheus::Registry& registry) {
  return std::make_shared<ServerMetrics>(registry);
}

std::shared_ptr<ClientInterceptor> make_client_metrics(prometheus::Registry& registry) {
  return std::make_shared<ClientMetrics>(registry);
}

std::function<void(const absl::Status&)> make_authorization_reload_metrics(
    prometheus::Registry& registry) {
  auto& family = counter(registry, "grpc_server_authz_policy_reloads_total",
                         "Authorization policy reloads from its file, by result (ok: the new "
                         "policy is in force; error: the previous one stayed).");
  prometheus::Counter* ok = &family.Add({{"result", "ok"}});
  prometheus::Counter* error = &family.Add({{"result", "error"}});
  return [ok, error](const absl::Status& status) { (status.ok() ? ok : error)->Increment(); };
}

}  // namespace ferry
