// Implementation of ferry/otlp_metrics.h: the metrics pusher, a timer on the OtlpClient's I/O
// thread that collects the registry, encodes it (src/otlp/metrics_encoding.h) and exports it.
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <optional>

#include "absl/strings/numbers.h"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/post.hpp"
#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/channel.h"
#include "ferry/otlp_metrics.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.ferry.h"
#include "otlp/metrics_encoding.h"
#include "otlp/resource.h"
#include "prometheus/registry.h"

namespace ferry {
namespace {

namespace collector = opentelemetry::proto::collector::metrics::v1;

// A Collector's partial_success message or a failure's text kept for stats(): a hostile
// Collector's megabyte of text is not held.
constexpr std::size_t kMaxErrorBytes = 256;

std::uint64_t unix_nanos() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

std::chrono::milliseconds env_millis(const char* name, std::chrono::milliseconds fallback) {
  const char* value = std::getenv(name);
  int ms = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &ms) || ms <= 0) return fallback;
  return std::chrono::milliseconds(ms);
}

std::string clipped(std::string_view text) { return std::string(text.substr(0, kMaxErrorBytes)); }

}  // namespace

OtlpMetricsOptions otlp_metrics_options_from_environment() {
  OtlpMetricsOptions options;
  options.exporter = otlp_options_from_environment("METRICS");
  options.interval = env_millis("OTEL_METRIC_EXPORT_INTERVAL", options.interval);
  if (std::getenv("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT") == nullptr &&
      std::getenv("OTEL_EXPORTER_OTLP_TIMEOUT") == nullptr) {
    options.exporter.timeout = env_millis("OTEL_METRIC_EXPORT_TIMEOUT", options.exporter.timeout);
  }
  return options;
}

// What the exporter's thread and its callers share. The timer and the loop live on the client's
// executor; the counters under mutex.
struct OtlpMetricsExporter::State {
  State(prometheus::Registry& r, asio::any_io_executor executor,
        std::vector<std::pair<std::string, std::string>> attributes)
      : registry(&r),
        resource(otlp_detail::full_resource(std::move(attributes))),
        timer(executor) {}

  prometheus::Registry* registry;
  const std::vector<std::pair<std::string, std::string>> resource;
  const std::uint64_t start_unix_nano = unix_nanos();
  // On the client's executor only; reset by the loop as it ends, before the client (and its
  // io_context) goes.
  std::optional<asio::steady_timer> timer;

  mutable std::mutex mutex;
  std::condition_variable changed;
  OtlpExportStats stats;
  std::uint64_t started = 0;   // exports started, ...
  std::uint64_t finished = 0;  // ... and ended
  bool loop_ended = false;
  bool stopping = false;
};

absl::StatusOr<std::unique_ptr<OtlpMetricsExporter>> OtlpMetricsExporter::create(
    prometheus::Registry& registry, OtlpMetricsOptions options) {
  absl::StatusOr<std::unique_ptr<OtlpClient>> client = OtlpClient::create(options.exporter, 1);
  if (!client.ok()) return client.status();
  std::unique_ptr<OtlpMetricsExporter> exporter(
      new OtlpMetricsExporter(registry, std::move(options), *std::move(client)));
  exporter->start_timer();
  return exporter;
}

OtlpMetricsExporter::OtlpMetricsExporter(prometheus::Registry& registry, OtlpMetricsOptions options,
                                         std::unique_ptr<OtlpClient> client)
    : options_(std::move(options)),
      client_(std::move(client)),
      state_(std::make_shared<State>(registry, client_->channel().executor(),
                                     client_->options().resource)) {
  if (options_.interval <= std::chrono::milliseconds(0)) {
    options_.interval = std::chrono::seconds(60);
  }
}

namespace {

// Starts one push on the client's thread: collects, encodes, exports. Returns whether it
// started (false: one is in flight; counted as skipped when `count_skip`). `result`, when given,
// receives this push's own status once it ended (under state->mutex).
template <class State>
bool start_push(OtlpClient& client, const std::shared_ptr<State>& state, bool count_skip,
                std::shared_ptr<std::optional<absl::Status>> result = nullptr) {
  if (client.in_flight() > 0) {  // before collecting: a skipped push costs nothing
    if (count_skip) {
      std::lock_guard<std::mutex> lock(state->mutex);
      ++state->stats.exports_skipped;
    }
    return false;
  }
  auto request = std::make_shared<collector::ExportMetricsServiceRequest>();
  otlp_detail::encode_metrics(state->registry->Collect(), state->resource, state->start_unix_nano,
                              unix_nanos(), *request);
  auto response = std::make_shared<collector::ExportMetricsServiceResponse>();
  const bool started =
      client.start_export(collector::MetricsService::kExportPath, request, response,
                          [state, response, result](const absl::Status& status) {
                            std::lock_guard<std::mutex> lock(state->mutex);
                            if (status.ok()) {
                              ++state->stats.exports_ok;
                              if (response->has_partial_success()) {
                                const auto& partial = response->partial_success();
                                if (partial.rejected_data_points() > 0) {
                                  state->stats.points_rejected +=
                                      static_cast<std::uint64_t>(partial.rejected_data_points());
                                }
                                if (!partial.error_message().empty()) {
                                  state->stats.last_error = clipped(partial.error_message());
                                }
                              }
                            } else {
                              ++state->stats.exports_failed;
                              state->stats.last_error = clipped(status.ToString());
                            }
                            if (result != nullptr) *result = status;
                            ++state->finished;
                            state->changed.notify_all();
                          });
  if (started) {
    std::lock_guard<std::mutex> lock(state->mutex);
    ++state->started;
  } else if (count_skip) {
    std::lock_guard<std::mutex> lock(state->mutex);
    ++state->stats.exports_skipped;
  }
  return started;
}

}  // namespace

void OtlpMetricsExporter::start_timer() {
  asio::co_spawn(
      client_->channel().executor(),
      [state = state_, client = client_.get(),
       interval = options_.interval]() -> asio::awaitable<void> {
        for (;;) {
          state->timer->expires_after(interval);
          asio::error_code ec;
          co_await state->timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
          {
            std::lock_guard<std::mutex> lock(state->mutex);
            if (state->stopping) break;
          }
          start_push(*client, state, true);
        }
        state->timer.reset();
        std::lock_guard<std::mutex> lock(state->mutex);
        state->loop_ended = true;
        state->changed.notify_all();
      },
      asio::detached);
}

absl::Status OtlpMetricsExporter::flush(std::chrono::milliseconds timeout) {
  if (client_ == nullptr) return absl::FailedPreconditionError("exporter shut down");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Try on the client's thread; learn whether it started and, if so, its number.
    auto attempt = std::make_shared<std::pair<bool, std::uint64_t>>();
    auto result = std::make_shared<std::optional<absl::Status>>();
    std::promise<void> tried;
    std::future<void> tried_future = tried.get_future();
    asio::post(client_->channel().executor(), [&, state = state_, client = client_.get()] {
      attempt->first = start_push(*client, state, false, result);
      std::lock_guard<std::mutex> lock(state->mutex);
      attempt->second = state->started;
      tried.set_value();
    });
    if (tried_future.wait_until(deadline) != std::future_status::ready) {
      // The post still runs later and writes through the references: wait for it, briefly
      // (the client's thread runs nothing that blocks).
      tried_future.wait();
      return absl::DeadlineExceededError("OTLP flush: timed out");
    }
    std::unique_lock<std::mutex> lock(state_->mutex);
    if (attempt->first) {
      // This push's own status, whatever the timer's pushes that ended meanwhile got.
      if (!state_->changed.wait_until(lock, deadline, [&] { return result->has_value(); })) {
        return absl::DeadlineExceededError("OTLP flush: the Collector did not answer in time");
      }
      return **result;
    }
    // One was in flight: wait for it to end, then push again.
    const std::uint64_t in_flight_number = state_->started;
    if (!state_->changed.wait_until(lock, deadline,
                                    [&] { return state_->finished >= in_flight_number; })) {
      return absl::DeadlineExceededError("OTLP flush: an earlier export is still in flight");
    }
  }
}

void OtlpMetricsExporter::shutdown(std::chrono::milliseconds timeout) {
  if (client_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  asio::post(client_->channel().executor(), [state = state_] {
    if (state->timer) state->timer->cancel();
  });
  {
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->changed.wait_for(lock, std::chrono::seconds(5), [&] { return state_->loop_ended; });
  }
  (void)flush(timeout);
  client_.reset();  // fails what is still in flight, joins the thread
}

OtlpMetricsExporter::~OtlpMetricsExporter() { shutdown(options_.shutdown_timeout); }

OtlpExportStats OtlpMetricsExporter::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

}  // namespace ferry
