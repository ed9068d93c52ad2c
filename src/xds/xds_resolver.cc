// xds:/// targets (ferry/xds.h): a Resolver over the shared ADS client's watch of one listener.
// The client's thread hands each new result to the resolver's state; the channel's thread reads
// it in resolve(), which waits for the first one, and is told of the later ones through the
// callback the channel gave watch().
#include <mutex>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "asio/post.hpp"
#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/use_awaitable.hpp"
#include "common/strings.h"
#include "ferry/xds.h"
#include "xds/xds_client.h"

namespace ferry::xds {
namespace {

using ::ferry::detail::to_absl;

struct ResolverState {
  std::mutex mutex;
  std::optional<detail::WatchResult> latest;
  std::function<void()> changed;  // the channel's; empty once it closed
  // resolve() calls waiting for the first result: each is woken on its own executor.
  std::vector<std::shared_ptr<asio::steady_timer>> waiters;
};

class XdsResolver final : public Resolver {
 public:
  XdsResolver(std::shared_ptr<detail::XdsClient> client, std::string listener)
      : client_(std::move(client)), state_(std::make_shared<ResolverState>()) {
    id_ = client_->watch(std::move(listener), [weak = std::weak_ptr<ResolverState>(state_)](
                                                  const detail::WatchResult& result) {
      auto state = weak.lock();
      if (state == nullptr) return;
      std::function<void()> changed;
      {
        std::lock_guard lock(state->mutex);
        state->latest = result;
        for (auto& timer : state->waiters) {
          asio::post(timer->get_executor(), [timer] { timer->cancel(); });
        }
        state->waiters.clear();
        changed = state->changed;
      }
      if (changed) changed();
    });
  }
  ~XdsResolver() override { client_->unwatch(id_); }

  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(
      asio::any_io_executor executor) override {
    auto timer = std::make_shared<asio::steady_timer>(executor);
    {
      std::lock_guard lock(state_->mutex);
      if (state_->latest.has_value()) co_return *state_->latest;
      timer->expires_at(asio::steady_timer::time_point::max());
      state_->waiters.push_back(timer);
    }
    asio::error_code ec;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    std::lock_guard lock(state_->mutex);
    std::erase(state_->waiters, timer);
    if (state_->latest.has_value()) co_return *state_->latest;
    co_return absl::UnavailableError("xDS: no configuration yet");
  }

  void watch(std::function<void()> changed) override {
    std::lock_guard lock(state_->mutex);
    state_->changed = std::move(changed);
  }

  std::string_view load_balancing_policy() const override { return "round_robin"; }

 private:
  std::shared_ptr<detail::XdsClient> client_;
  std::shared_ptr<ResolverState> state_;
  std::uint64_t id_ = 0;
};

// A resolver whose every resolution fails with why the target cannot be followed (a bad
// bootstrap), so that a channel made with it fails its calls with that, never crashes.
class FailingResolver final : public Resolver {
 public:
  explicit FailingResolver(absl::Status status) : status_(std::move(status)) {}
  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(asio::any_io_executor) override {
    co_return status_;
  }

 private:
  absl::Status status_;
};

// "xds:///name" -> name; gRFC A47's "xds://authority/name" is refused.
absl::StatusOr<std::string> listener_of(std::string_view target) {
  constexpr std::string_view kPrefix = "xds:///";
  if (!target.starts_with(kPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat("xDS target '", to_absl(target.substr(0, 200)),
                                                   "' is not xds:///name (an authority, gRFC A47's "
                                                   "federation, is not supported)"));
  }
  std::string_view name = target.substr(kPrefix.size());
  if (name.empty()) return absl::InvalidArgumentError("xDS target 'xds:///' names no listener");
  return std::string(name);
}

}  // namespace

absl::StatusOr<std::shared_ptr<Resolver>> make_resolver(std::string_view target,
                                                        const Bootstrap& bootstrap,
                                                        const XdsClientOptions& options) {
  absl::StatusOr<std::string> listener = listener_of(target);
  if (!listener.ok()) return listener.status();
  if (bootstrap.xds_servers.empty()) {
    return absl::InvalidArgumentError("xds bootstrap: no xds_servers");
  }
  return std::make_shared<XdsResolver>(detail::XdsClient::shared(bootstrap, options),
                                       *std::move(listener));
}

void register_resolver() {
  register_resolver_scheme(
      "xds", [](std::string_view target) -> absl::StatusOr<std::shared_ptr<Resolver>> {
        absl::StatusOr<std::string> listener = listener_of(target);
        if (!listener.ok()) return listener.status();
        absl::StatusOr<Bootstrap> bootstrap = load_bootstrap();
        if (!bootstrap.ok()) {
          return std::make_shared<FailingResolver>(absl::UnavailableError(
              absl::StrCat("xDS target '", to_absl(target), "': ", bootstrap.status().message())));
        }
        return make_resolver(target, *bootstrap);
      });
}

}  // namespace ferry::xds
