// Implementation of ferry/health.h: the statuses behind a mutex, and Watch streams that wait on a
// timer of their own call's executor that never expires: a change, or the call's cancellation,
// wakes them by cancelling it (posted there).
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
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

// One Watch stream. Touched by the stream's own executor, and (service, executor) read under the
// state's mutex; timer is set and cleared on the executor's thread only.
struct Watcher {
  std::string service;
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
  mutable std::mutex mu;
  std::condition_variable watcher_left;
  absl::flat_hash_map<std::string, ServingStatus> statuses;
  std::vector<std::shared_ptr<Watcher>> watchers;
  bool shut_down = false;

  // Wakes the watchers of service (all of them when null). mu held.
  void wake(const std::string* service) {
    for (const std::shared_ptr<Watcher>& w : watchers) {
      if (service != nullptr && w->service != *service) continue;
      wake_watcher(w);
    }
  }

  void set(std::string_view service, std::optional<ServingStatus> status) {
    std::lock_guard lock(mu);
    if (shut_down) return;
    std::string name(service);
    if (status.has_value()) {
      statuses[name] = *status;
    } else {
      statuses.erase(name);
    }
    wake(&name);
  }

  ServingStatus get(std::string_view service) const {
    std::lock_guard lock(mu);
    auto it = statuses.find(absl::string_view(service.data(), service.size()));
    return it == statuses.end() ? ServingStatus::kServiceUnknown : it->second;
  }

  void shutdown() {
    std::unique_lock lock(mu);
    if (!shut_down) {
      shut_down = true;
      for (auto& [name, status] : statuses) status = ServingStatus::kNotServing;
      wake(nullptr);
    }
    watcher_left.wait_for(lock, kShutdownWait, [this] { return watchers.empty(); });
  }

  void leave(const std::shared_ptr<Watcher>& watcher) {
    std::lock_guard lock(mu);
    std::erase(watchers, watcher);
    watcher->timer = nullptr;
    watcher_left.notify_all();
  }

  asio::awaitable<absl::Status> check(const health_v1::HealthCheckRequest& request,
                                      health_v1::HealthCheckResponse& response) const {
    const ServingStatus status = get(request.service());
    if (status == ServingStatus::kServiceUnknown) co_return absl::NotFoundError("unknown service");
    response.set_status(to_proto(status));
    co_return absl::OkStatus();
  }

  asio::awaitable<absl::Status> watch(ServerContext& context,
                                      const health_v1::HealthCheckRequest& request,
                                      ServerWriter<health_v1::HealthCheckResponse>& writer) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    auto watcher =
        std::make_shared<Watcher>(Watcher{request.service(), timer.get_executor(), &timer});
    {
      std::lock_guard lock(mu);
      watchers.push_back(watcher);
    }
    struct Leave {
      State* state;
      std::shared_ptr<Watcher> watcher;
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
        auto it = statuses.find(watcher->service);
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

HealthService::HealthService()
    : Service("grpc.health.v1.Health"), state_(std::make_unique<State>()) {
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
  std::lock_guard lock(state_->mu);
  return state_->watchers.size();
}

void HealthService::shutdown() { state_->shutdown(); }

void HealthService::on_server_shutdown() const { state_->shutdown(); }

}  // namespace ferry
