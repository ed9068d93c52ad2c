// Implementation of ferry/metrics.h: interceptors that record gRPC's standard per-call metrics
// into prometheus-cpp families.
#include "ferry/metrics.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ferry/interceptor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
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

// gRPC's status codes, 0 (OK) to 16 (UNAUTHENTICATED); another code counts as UNKNOWN, as gRPC
// maps a code it does not know.
constexpr std::size_t kStatusCodes = 17;
std::size_t status_index(const absl::Status& status) {
  const auto code = static_cast<std::size_t>(status.code());
  return code < kStatusCodes ? code : static_cast<std::size_t>(absl::StatusCode::kUnknown);
}
std::string status_label(std::size_t index) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(index));
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

using Labels = std::map<std::string, std::string>;

// A histogram series per status code, added to its family the first time a call ends with it.
class ByStatus {
 public:
  ByStatus(prometheus::Family<prometheus::Histogram>& family, Labels labels,
           const prometheus::Histogram::BucketBoundaries& buckets)
      : family_(&family), labels_(std::move(labels)), buckets_(&buckets) {}

  prometheus::Histogram& operator[](std::size_t status) {
    prometheus::Histogram*& series = series_[status];
    if (series == nullptr) {
      Labels labels = labels_;
      labels.emplace("grpc_status", status_label(status));
      series = &family_->Add(labels, *buckets_);  // prometheus-cpp's family lock, once
    }
    return *series;
  }

 private:
  prometheus::Family<prometheus::Histogram>* family_;
  Labels labels_;
  const prometheus::Histogram::BucketBoundaries* buckets_;
  std::array<prometheus::Histogram*, kStatusCodes> series_{};
};

// Each thread's series of one metrics interceptor, by the calls' target and method: a warm call
// finds its series with two hash lookups of its strings, without a lock or an allocation (where
// prometheus-cpp's Family::Add builds a label map and takes the family's lock each time). A
// series is built on a thread's first call of its (target, method), under the family's lock,
// and the family keeps it for the registry's life, so the pointers stay valid. The entries are
// as many as the interceptor's series (the server's: its registered methods'), on each thread.
template <class Series>
class ThreadSeries {
 public:
  ThreadSeries() = default;

  // make(method, target) builds the Series of a (target, method) this thread has not seen.
  template <class Make>
  Series& find(std::string_view target, std::string_view method, const Make& make) {
    if (Series* hit = last_hit(target, method)) return *hit;
    auto& by_target = entry().series;
    auto t = by_target.find(absl::string_view(target.data(), target.size()));
    if (t == by_target.end()) t = by_target.try_emplace(std::string(target)).first;
    auto m = t->second.find(absl::string_view(method.data(), method.size()));
    if (m == t->second.end()) {
      m = t->second.try_emplace(std::string(method), std::make_unique<Series>(make(method, target)))
              .first;
    }
    remember(target, method, m->second.get());
    return *m->second;
  }

  // The Series this thread has for (target, method), or null.
  Series* cached(std::string_view target, std::string_view method) {
    if (Series* hit = last_hit(target, method)) return hit;
    auto& by_target = entry().series;
    auto t = by_target.find(absl::string_view(target.data(), target.size()));
    if (t == by_target.end()) return nullptr;
    auto m = t->second.find(absl::string_view(method.data(), method.size()));
    if (m == t->second.end()) return nullptr;
    remember(target, method, m->second.get());
    return m->second.get();
  }

 private:
  // The thread's last (interceptor, target, method) found and its Series: the hooks of one call
  // (and the calls of a connection's usual method) find theirs by comparing two short strings,
  // without hashing them or looking the interceptor up. The Series stays valid while its
  // interceptor lives; an id is never reused, so a dead interceptor's entry is never matched.
  struct LastHit {
    std::uint64_t owner = ~std::uint64_t{0};
    std::string target;
    std::string method;
    Series* series = nullptr;
  };
  static LastHit& last() {
    thread_local LastHit hit;
    return hit;
  }
  Series* last_hit(std::string_view target, std::string_view method) const {
    const LastHit& hit = last();
    if (hit.owner != id_ || hit.method != method || hit.target != target) return nullptr;
    return hit.series;
  }
  // Reuses the strings' capacity: allocates only for a name longer than any before it.
  void remember(std::string_view target, std::string_view method, Series* series) const {
    LastHit& hit = last();
    hit.owner = id_;
    hit.target.assign(target.data(), target.size());
    hit.method.assign(method.data(), method.size());
    hit.series = series;
  }

  using ByMethod = absl::flat_hash_map<std::string, std::unique_ptr<Series>>;
  struct Entry {
    std::weak_ptr<const bool> owner;  // expires with the interceptor
    absl::flat_hash_map<std::string, ByMethod> series;
  };
  using Cache = absl::flat_hash_map<std::uint64_t, Entry>;
  Entry& entry() {
    Cache& cache = thread_cache();
    auto mine = cache.find(id_);
    if (mine == cache.end()) {
      // An interceptor new to this thread: drop the entries of those since destroyed.
      absl::erase_if(cache, [](const auto& e) { return e.second.owner.expired(); });
      mine = cache.emplace(id_, Entry{alive_, {}}).first;
    }
    return mine->second;
  }
  static Cache& thread_cache() {
    thread_local Cache cache;
    return cache;
  }
  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> ids{0};
    return ids.fetch_add(1, std::memory_order_relaxed);
  }

  const std::uint64_t id_ = next_id();  // never reused, unlike an address
  const std::shared_ptr<const bool> alive_ = std::make_shared<const bool>(true);
};

// The server's instruments, their families registered once.
struct ServerFamilies {
  explicit ServerFamilies(prometheus::Registry& registry)
      : started(counter(registry, "grpc_server_call_started_total",
                        "Calls started on the server (grpc.server.call.started).")),
        duration(histogram(registry, "grpc_server_call_duration_seconds",
                           "Server call duration, by final status (grpc.server.call.duration).")),
        sent(
            counter(registry, "grpc_server_call_sent_messages_total", "Messages the server sent.")),
        rcvd(counter(registry, "grpc_server_call_rcvd_messages_total",
                     "Messages the server received.")),
        sent_bytes(histogram(registry, "grpc_server_call_sent_total_compressed_message_size_bytes",
                             "Message bytes (compressed) the server sent per call "
                             "(grpc.server.call.sent_total_compressed_message_size).")),
        rcvd_bytes(histogram(registry, "grpc_server_call_rcvd_total_compressed_message_size_bytes",
                             "Message bytes (compressed) the server received per call "
                             "(grpc.server.call.rcvd_total_compressed_message_size).")),
        authz(counter(registry, "grpc_server_authz_decisions_total",
                      "Calls an authorization policy decided (ferry/authz.h), by policy, rule "
                      "and decision.")) {}

  prometheus::Family<prometheus::Counter>& started;
  prometheus::Family<prometheus::Histogram>& duration;
  prometheus::Family<prometheus::Counter>& sent;
  prometheus::Family<prometheus::Counter>& rcvd;
  prometheus::Family<prometheus::Histogram>& sent_bytes;
  prometheus::Family<prometheus::Histogram>& rcvd_bytes;
  prometheus::Family<prometheus::Counter>& authz;
};

// One server method's series.
struct ServerSeries {
  ServerSeries(ServerFamilies& f, const Labels& method)
      : started(f.started.Add(method)),
        sent(f.sent.Add(method)),
        rcvd(f.rcvd.Add(method)),
        duration(f.duration, method, latency_buckets()),
        sent_bytes(f.sent_bytes, method, size_buckets()),
        rcvd_bytes(f.rcvd_bytes, method, size_buckets()) {}

  prometheus::Counter& started;
  prometheus::Counter& sent;
  prometheus::Counter& rcvd;
  ByStatus duration;
  ByStatus sent_bytes;
  ByStatus rcvd_bytes;
};

class ServerMetrics final : public ServerInterceptor {
 public:
  explicit ServerMetrics(prometheus::Registry& registry) : families_(registry) {}

  asio::awaitable<absl::Status> on_start(ServerContext& ctx, const CallInfo& call) override {
    return ready_status(*start_now(ctx, call));
  }
  // What the server's chain calls: no coroutine.
  std::optional<absl::Status> start_now(ServerContext&, const CallInfo& call) override {
    series(call).started.Increment();
    return absl::OkStatus();
  }

  void on_finish(ServerContext& ctx, const CallInfo& call, const CallOutcome& outcome) override {
    ServerSeries& s = series(call);
    const std::size_t status = status_index(outcome.status);
    // The policy's decision, when an authorization interceptor ran (this one placed before it
    // sees the calls it denied too). Its labels come from the policy in force, which a reload
    // changes: found through prometheus-cpp's family (a label map and its lock) on such calls.
    const CallAuthorization& authz = ctx.authorization();
    if (authz.decision != CallAuthorization::Decision::kNotEvaluated) {
      families_.authz
          .Add({{"grpc_method", method_label(call.method)},
                {"authz_policy", std::string(authz.policy)},
                {"authz_rule", std::string(authz.rule)},
                {"authz_decision",
                 authz.decision == CallAuthorization::Decision::kAllowed ? "allow" : "deny"}})
          .Increment();
    }
    s.duration[status].Observe(seconds(outcome.duration));
    s.sent.Increment(static_cast<double>(outcome.messages_sent));
    s.rcvd.Increment(static_cast<double>(outcome.messages_received));
    s.sent_bytes[status].Observe(static_cast<double>(outcome.bytes_sent));
    s.rcvd_bytes[status].Observe(static_cast<double>(outcome.bytes_received));
  }

 private:
  // The interceptors run for registered methods only (an unknown path is answered UNIMPLEMENTED
  // before them), so the series are as many as the server's methods, whatever clients send.
  ServerSeries& series(const CallInfo& call) {
    return series_.find({}, call.method, [this](std::string_view method, std::string_view) {
      return ServerSeries(families_, Labels{{"grpc_method", method_label(method)}});
    });
  }

  ServerFamilies families_;
  ThreadSeries<ServerSeries> series_;
};

// The client's instruments.
struct ClientFamilies {
  explicit ClientFamilies(prometheus::Registry& registry)
      : started(counter(registry, "grpc_client_attempt_started_total",
                        "Call attempts started by the client (grpc.client.attempt.started).")),
        attempt_duration(histogram(
            registry, "grpc_client_attempt_duration_seconds",
            "Client call attempt duration, by final status (grpc.client.attempt.duration).")),
        call_duration(
            histogram(registry, "grpc_client_call_duration_seconds",
                      "Client call duration, by final status (grpc.client.call.duration).")),
        sent(
            counter(registry, "grpc_client_call_sent_messages_total", "Messages the client sent.")),
        rcvd(counter(registry, "grpc_client_call_rcvd_messages_total",
                     "Messages the client received.")),
        sent_bytes(histogram(registry,
                             "grpc_client_attempt_sent_total_compressed_message_size_bytes",
                             "Message bytes (compressed) the client sent per call attempt "
                             "(grpc.client.attempt.sent_total_compressed_message_size).")),
        rcvd_bytes(histogram(registry,
                             "grpc_client_attempt_rcvd_total_compressed_message_size_bytes",
                             "Message bytes (compressed) the client received per call attempt "
                             "(grpc.client.attempt.rcvd_total_compressed_message_size).")),
        retries(histogram(registry, "grpc_client_call_retries",
                          "Retries (by the retry policy) per retried call "
                          "(grpc.client.call.retries).")),
        transparent_retries(histogram(registry, "grpc_client_call_transparent_retries",
                                      "Transparent retries per call that made any "
                                      "(grpc.client.call.transparent_retries).")),
        retry_delay(histogram(registry, "grpc_client_call_retry_delay_seconds",
                              "Time a retried call spent with no attempt in flight "
                              "(grpc.client.call.retry_delay).")),
        open_connections(prometheus::BuildGauge()
                             .Name("grpc_subchannel_open_connections")
                             .Help("Open connections (grpc.subchannel.open_connections).")
                             .Register(registry)),
        attempts_succeeded(counter(registry, "grpc_subchannel_connection_attempts_succeeded_total",
                                   "Successful connection attempts "
                                   "(grpc.subchannel.connection_attempts_succeeded).")),
        attempts_failed(counter(registry, "grpc_subchannel_connection_attempts_failed_total",
                                "Failed connection attempts "
                                "(grpc.subchannel.connection_attempts_failed).")),
        disconnections(counter(registry, "grpc_subchannel_disconnections_total",
                               "Times a subchannel's connection stopped being used, by reason "
                               "(grpc.subchannel.disconnections).")) {}

  prometheus::Family<prometheus::Counter>& started;
  prometheus::Family<prometheus::Histogram>& attempt_duration;
  prometheus::Family<prometheus::Histogram>& call_duration;
  prometheus::Family<prometheus::Counter>& sent;
  prometheus::Family<prometheus::Counter>& rcvd;
  prometheus::Family<prometheus::Histogram>& sent_bytes;
  prometheus::Family<prometheus::Histogram>& rcvd_bytes;
  prometheus::Family<prometheus::Histogram>& retries;
  prometheus::Family<prometheus::Histogram>& transparent_retries;
  prometheus::Family<prometheus::Histogram>& retry_delay;
  // gRFC A94's, per channel target; grpc.lb.locality is empty (ferry has no localities).
  prometheus::Family<prometheus::Gauge>& open_connections;
  prometheus::Family<prometheus::Counter>& attempts_succeeded;
  prometheus::Family<prometheus::Counter>& attempts_failed;
  prometheus::Family<prometheus::Counter>& disconnections;
};

// One (target, method)'s series on the client; the retry histograms are added to their
// families with the first retried call (A96 reports nothing for a call without retries).
struct ClientSeries {
  ClientSeries(ClientFamilies& f, Labels labels)
      : families(&f),
        call(std::move(labels)),
        started(f.started.Add(call)),
        sent(f.sent.Add(call)),
        rcvd(f.rcvd.Add(call)),
        attempt_duration(f.attempt_duration, call, latency_buckets()),
        call_duration(f.call_duration, call, latency_buckets()),
        sent_bytes(f.sent_bytes, call, size_buckets()),
        rcvd_bytes(f.rcvd_bytes, call, size_buckets()) {}

  prometheus::Histogram& retries() {
    if (retries_ == nullptr) retries_ = &families->retries.Add(call, retry_buckets());
    return *retries_;
  }
  prometheus::Histogram& transparent_retries() {
    if (transparent_retries_ == nullptr) {
      transparent_retries_ = &families->transparent_retries.Add(call, transparent_retry_buckets());
    }
    return *transparent_retries_;
  }
  prometheus::Histogram& retry_delay() {
    if (retry_delay_ == nullptr) retry_delay_ = &families->retry_delay.Add(call, latency_buckets());
    return *retry_delay_;
  }

  ClientFamilies* families;
  Labels call;  // grpc_method, grpc_target
  prometheus::Counter& started;
  prometheus::Counter& sent;
  prometheus::Counter& rcvd;
  ByStatus attempt_duration;
  ByStatus call_duration;
  ByStatus sent_bytes;
  ByStatus rcvd_bytes;

 private:
  prometheus::Histogram* retries_ = nullptr;
  prometheus::Histogram* transparent_retries_ = nullptr;
  prometheus::Histogram* retry_delay_ = nullptr;
};

class ClientMetrics final : public ClientInterceptor {
 public:
  explicit ClientMetrics(prometheus::Registry& registry) : families_(registry) {}

  // A few per connection, never per call: the families' own lookups will do. Every label value
  // comes from a bounded set (the channel's target, A94's reasons).
  void on_connection_event(ConnectionEvent event, const ConnectionInfo& info) override {
    Labels labels = {{"grpc_target", std::string(info.target)}, {"grpc_lb_locality", ""}};
    switch (event) {
      case ConnectionEvent::kAttemptSucceeded:
        families_.attempts_succeeded.Add(labels).Increment();
        families_.open_connections.Add(labels).Increment();
        break;
      case ConnectionEvent::kAttemptFailed:
        families_.attempts_failed.Add(labels).Increment();
        break;
      case ConnectionEvent::kDisconnected:
        labels.emplace("grpc_disconnect_error", std::string(info.disconnect_error));
        families_.disconnections.Add(labels).Increment();
        break;
      case ConnectionEvent::kClosed:
        families_.open_connections.Add(labels).Decrement();
        break;
    }
  }

  // Nothing to decide before the call (the default on_start's OK), without its coroutine.
  std::optional<absl::Status> start_now(ClientContext&, const CallInfo&) override {
    return absl::OkStatus();
  }

  // The attempt metrics count attempts (a retried call makes several), the call metrics calls.
  void on_attempt_start(ClientContext&, const CallInfo& call) override {
    series(call).started.Increment();
  }

  void on_attempt_end(ClientContext&, const CallInfo& call, const CallOutcome& attempt) override {
    ClientSeries& s = series(call);
    const std::size_t status = status_index(attempt.status);
    s.attempt_duration[status].Observe(seconds(attempt.duration));
    s.sent_bytes[status].Observe(static_cast<double>(attempt.bytes_sent));
    s.rcvd_bytes[status].Observe(static_cast<double>(attempt.bytes_received));
  }

  void on_finish(ClientContext&, const CallInfo& call, const CallOutcome& outcome) override {
    ClientSeries& s = series(call);
    s.call_duration[status_index(outcome.status)].Observe(seconds(outcome.duration));
    s.sent.Increment(static_cast<double>(outcome.messages_sent));
    s.rcvd.Increment(static_cast<double>(outcome.messages_received));
    // gRFC A96: recorded for a call that was retried, and a count only when it is not 0.
    if (outcome.retries > 0) s.retries().Observe(outcome.retries);
    if (outcome.transparent_retries > 0) {
      s.transparent_retries().Observe(outcome.transparent_retries);
    }
    if (outcome.retries > 0 || outcome.transparent_retries > 0) {
      s.retry_delay().Observe(seconds(outcome.retry_delay));
    }
  }

 private:
  ClientSeries& series(const CallInfo& call) {
    if (ClientSeries* cached = series_.cached(call.target, call.method)) return *cached;
    // A (target, method) new to this thread: its method gets a label of its own while the
    // interceptor has labelled fewer than kMaxMethodLabels methods, then "other".
    std::string label = method_label(call.method);
    std::string_view key = call.method;
    if (!admit(label)) {
      label = "other";
      key = kOtherKey;  // one entry for them all: a thread's table stays bounded too
    }
    return series_.find(call.target, key, [&](std::string_view, std::string_view target) {
      return ClientSeries(families_, Labels{{"grpc_method", std::move(label)},
                                            {"grpc_target", std::string(target)}});
    });
  }

  // Whether method (a label) is one of the first kMaxMethodLabels the interceptor has seen.
  // Once per thread and method (and per call of a method over the limit).
  bool admit(const std::string& method) {
    if (method.size() > kMaxMethodLabelBytes) return false;
    std::lock_guard<std::mutex> lock(methods_mutex_);
    if (methods_.contains(method)) return true;
    if (methods_.size() >= kMaxMethodLabels) return false;
    methods_.insert(method);
    return true;
  }

  // A client's methods are its application's, which ferry cannot tell from a path it was handed
  // (gRFC A66 labels "generic" methods "other"): an application that forwards paths it was sent
  // (a proxy) must not make a series per path. Over this many methods, "other".
  static constexpr std::size_t kMaxMethodLabels = 1000;
  // prometheus-cpp copies a label into each of a method's series (a dozen or more): a method
  // name longer than any real one ("package.Service/Method") is "other" too.
  static constexpr std::size_t kMaxMethodLabelBytes = 256;
  // The key of the "other" series in a thread's table: no method path holds a NUL.
  static constexpr std::string_view kOtherKey{"\0other", 6};

  ClientFamilies families_;
  ThreadSeries<ClientSeries> series_;
  std::mutex methods_mutex_;
  absl::flat_hash_set<std::string> methods_;
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
