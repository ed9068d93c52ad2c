// Implementation of ferry/health.h: the statuses behind a mutex, the Watch streams indexed by
// service behind another, and each Watch stream waiting on a
// timer of its own call's executor that never expires: a change, or the call's cancellation,
// wakes it by cancelling the timer (posted there).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "asio/any_io_executor.hpp"
#include "asio/post.hpp"
#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/health.h"
#include "grpc/health/v1/health.pb.h"

namespace ferry {
namespace {

namespace health_v1 = ::grpc::health::v1;

// How long shutdown() waits for the watchers to have sent NOT_SERVING and ended.
constexpr std::chrono::seconds kShutdownWait{1};

// One Watch stream. service views the stream's own request (which outlives the watcher): the
// name is held once. executor and service are set before the watcher is shared and never
// change; timer is set and cleared on the executor's thread, and cleared under the watcher
// index's mutex when the stream leaves.
struct Watcher {
  std::string_view service;
  std::uint64_t connection = 0;
  asio::any_io_executor executor;
  asio::steady_timer* timer = nullptr;  // null once the stream is over
};

// Wakes w's stream on its own thread (a change, or its call was cancelled).
void wake_watcher(const std::shared_ptr<Watcher>& w) {
  asio::post(w->executor, [w] {
    if (w->timer != nullptr) w->timer->cancel();
  });
}

health_v1::HealthCheckResponse::ServingStatus to_proto(ServingStatus status) {
  return static_cast<health_v1::HealthCheckResponse::ServingStatus>(status);
}

}  // namespace

struct HealthService::State {
  explicit State(const HealthServiceOptions& o) : options(o) {}

  const HealthServiceOptions options;

  // The statuses, and whether shutdown() has run: what Check reads. mu and watchers_mu are
  // never held together, so Check never waits behind the watchers' bookkeeping.
  mutable std::mutex mu;
  absl::flat_hash_map<std::string, ServingStatus> statuses;
  bool shut_down = false;

  // The Watch streams, ordered by (service, watcher) so that a change finds the watchers of its
  // service without looking at the others, and counted per connection for the cap. Each
  // entry's name is its watcher's view of its own request.
  using WatcherKey = std::pair<std::string_view, std::shared_ptr<Watcher>>;
  mutable std::mutex watchers_mu;
  std::condition_variable watcher_left;
  std::set<WatcherKey> watchers;
  absl::flat_hash_map<std::uint64_t, std::size_t> per_connection;

  // Wakes the watchers of service (all of them when null). Takes watchers_mu.
  void wake(const std::string_view* service) {
    std::lock_guard lock(watchers_mu);
    if (service == nullptr) {
      for (const WatcherKey& w : watchers) wake_watcher(w.second);
      return;
    }
    for (auto it = watchers.lower_bound(WatcherKey(*service, nullptr));
         it != watchers.end() && it->first == *service; ++it) {
      wake_watcher(it->second);
    }
  }

  // A change wakes its service's watchers after the status is stored: a watcher that joined
  // before the wake-up is woken, one that joins after it reads the new status.
  void set(std::string_view service, std::optional<ServingStatus> status) {
    {
      std::lock_guard lock(mu);
      if (shut_down) return;
      if (status.has_value()) {
        statuses[std::string(service)] = *status;
      } else {
        statuses.erase(absl::string_view(service.data(), service.size()));
      }
    }
    wake(&service);
  }

  ServingStatus get(std::string_view service) const {
    std::lock_guard lock(mu);
    auto it = statuses.find(absl::string_view(service.data(), service.size()));
    return it == statuses.end() ? ServingStatus::kServiceUnknown : it->second;
  }

  void shutdown() {
    bool first = false;
    {
      std::lock_guard lock(mu);
      if (!shut_down) {
        first = true;
        shut_down = true;
        for (auto& [name, status] : statuses) status = ServingStatus::kNotServing;
      }
    }
    if (first) wake(nullptr);
    std::unique_lock lock(watchers_mu);
    watcher_left.wait_for(lock, kShutdownWait, [this] { return watchers.empty(); });
  }

  // Registers watcher, unless its connection has as many as it may: false then.
  bool join(const std::shared_ptr<Watcher>& watcher) {
    std::lock_guard lock(watchers_mu);
    std::size_t& count = per_connection[watcher->connection];
    if (count >= options.max_watchers_per_connection) {
      if (count == 0) per_connection.erase(watcher->connection);
      return false;
    }
    ++count;
    watchers.emplace(watcher->service, watcher);
    return true;
  }

  void leave(const std::shared_ptr<Watcher>& watcher) {
    std::lock_guard lock(watchers_mu);
    watchers.erase(WatcherKey(watcher->service, watcher));
    if (auto it = per_connection.find(watcher->connection);
        it != per_connection.end() && --it->second == 0) {
      per_connection.erase(it);
    }
    watcher->timer = nullptr;  // a wake-up already posted holds the watcher, and finds no timer
    watcher_left.notify_all();
  }

  absl::Status check_name(std::string_view service) const {
    if (service.size() <= options.max_service_name_size) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("the service name is ", service.size(),
                                                   " bytes long, over the limit of ",
                                                   options.max_service_name_size));
  }

  asio::awaitable<absl::Status> check(const health_v1::HealthCheckRequest& request,
                                      health_v1::HealthCheckResponse& response) const {
    if (absl::Status s = check_name(request.service()); !s.ok()) co_return s;
    const ServingStatus status = get(request.service());
    if (status == ServingStatus::kServiceUnknown) co_return absl::NotFoundError("unknown service");
    response.set_status(to_proto(status));
    co_return absl::OkStatus();
  }

  asio::awaitable<absl::Status> watch(ServerContext& context,
                                      const health_v1::HealthCheckRequest& request,
                                      ServerWriter<health_v1::HealthCheckResponse>& writer) {
    if (absl::Status s = check_name(request.service()); !s.ok()) co_return s;
    asio::steady_timer timer(co_await asio::this_coro::executor);
    auto watcher = std::make_shared<Watcher>(
        Watcher{request.service(), context.connection_id(), timer.get_executor(), &timer});
    if (!join(watcher)) {
      co_return absl::ResourceExhaustedError(
          absl::StrCat("this connection has ", options.max_watchers_per_connection,
                       " health Watch streams open, as many as it may"));
    }
    struct Leave {
      State* state;
      const std::shared_ptr<Watcher>& watcher;
      ~Leave() { state->leave(watcher); }
    } leave{this, watcher};
    // A client that cancels (or a deadline, a lost connection) wakes the stream at once: it
    // sends nothing else a waiting watcher would see.
    const CancellationRegistration on_cancel =
        context.on_cancel([watcher](const absl::Status&) { wake_watcher(watcher); });

    health_v1::HealthCheckResponse response;
    std::optional<ServingStatus> sent;
    while (!context.is_cancelled()) {
      ServingStatus now;
      bool over;
      {
        std::lock_guard lock(mu);
        auto it =
            statuses.find(absl::string_view(watcher->service.data(), watcher->service.size()));
        now = it == statuses.end() ? ServingStatus::kServiceUnknown : it->second;
        over = shut_down;
      }
      if (now != sent) {
        response.set_status(to_proto(now));
        if (absl::Status s = co_await writer.write(response); !s.ok()) co_return s;
        sent = now;
        continue;  // the status may have changed during the write
      }
      if (over) co_return absl::UnavailableError("the server is shutting down");
      // No suspension since the checks above (the call's cancellation included): a change or
      // a cancellation posts its wake-up behind this wait.
      timer.expires_at(asio::steady_timer::time_point::max());
      asio::error_code ignored;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
    co_return absl::CancelledError("the watch was cancelled");
  }
};

HealthService::HealthService(HealthServiceOptions options)
    : Service("grpc.health.v1.Health"), state_(std::make_unique<State>(options)) {
  state_->statuses[""] = ServingStatus::kServing;
  State* state = state_.get();
  add_unary<health_v1::HealthCheckRequest, health_v1::HealthCheckResponse>(
      "Check", [state](ServerContext&, const health_v1::HealthCheckRequest& request,
                       health_v1::HealthCheckResponse& response) {
        return state->check(request, response);
      });
  add_server_streaming<health_v1::HealthCheckRequest, health_v1::HealthCheckResponse>(
      "Watch", [state](ServerContext& context, const health_v1::HealthCheckRequest& request,
                       ServerWriter<health_v1::HealthCheckResponse>& writer) {
        return state->watch(context, request, writer);
      });
  set_descriptor_source([]() -> const google::protobuf::ServiceDescriptor* {
    return health_v1::HealthCheckRequest::descriptor()->file()->FindServiceByName("Health");
  });
}

HealthService::~HealthService() = default;

void HealthService::set_status(std::string_view service, ServingStatus status) {
  state_->set(service, status);
}

void HealthService::clear_status(std::string_view service) { state_->set(service, std::nullopt); }

ServingStatus HealthService::status(std::string_view service) const { return state_->get(service); }

std::size_t HealthService::watch_count() const {
  std::lock_guard lock(state_->watchers_mu);
  return state_->watchers.size();
}

void HealthService::shutdown() { state_->shutdown(); }

void HealthService::on_server_shutdown() const { state_->shutdown(); }

}  // namespace ferry
