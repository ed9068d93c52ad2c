// Implementation of ferry/otlp_tracing.h: the OTLP span exporter. The BatchSpanProcessor's
// thread encodes each batch (src/otlp/trace_encoding.h), starts its export on the OtlpClient's
// I/O thread and waits for the answer; the calls never see any of it.
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "ferry/otlp_tracing.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.ferry.h"
#include "otlp/resource.h"
#include "otlp/trace_encoding.h"

namespace ferry {
namespace {

namespace collector = opentelemetry::proto::collector::trace::v1;

// A Collector's partial_success message or a failure's text kept for stats(): a hostile
// Collector's megabyte of text is not held.
constexpr std::size_t kMaxErrorBytes = 256;
// How much longer than the export's own deadline the processor's thread waits for its end (the
// call ends by its deadline; this covers the I/O thread's scheduling).
constexpr std::chrono::milliseconds kDeadlineSlack{1000};

std::string clipped(std::string_view text) { return std::string(text.substr(0, kMaxErrorBytes)); }

}  // namespace

OtlpSpanExporterOptions otlp_span_exporter_options_from_environment() {
  OtlpSpanExporterOptions options;
  options.exporter = otlp_options_from_environment("TRACES");
  return options;
}

struct OtlpSpanExporter::State {
  explicit State(std::vector<std::pair<std::string, std::string>> attributes)
      : resource(otlp_detail::full_resource(std::move(attributes))) {}

  const std::vector<std::pair<std::string, std::string>> resource;
  mutable std::mutex mutex;
  std::condition_variable changed;
  OtlpSpanExportStats stats;
  std::uint64_t finished = 0;  // exports ended (their callbacks ran)
  // Set by shutdown_started: no export waits past it.
  std::optional<std::chrono::steady_clock::time_point> shutdown_deadline;

  // Waits (lock held on mutex) until done() or deadline, or the shutdown deadline, which may
  // come while it waits. Whether done() held.
  template <class Done>
  bool wait(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline,
            Done done) {
    for (;;) {
      if (done()) return true;
      const auto until = shutdown_deadline ? std::min(deadline, *shutdown_deadline) : deadline;
      if (std::chrono::steady_clock::now() >= until) return false;
      changed.wait_until(lock, until);
    }
  }
};

absl::StatusOr<std::shared_ptr<OtlpSpanExporter>> OtlpSpanExporter::create(
    OtlpSpanExporterOptions options) {
  absl::StatusOr<std::unique_ptr<OtlpClient>> client = OtlpClient::create(options.exporter, 1);
  if (!client.ok()) return client.status();
  return std::shared_ptr<OtlpSpanExporter>(
      new OtlpSpanExporter(std::move(options), *std::move(client)));
}

OtlpSpanExporter::OtlpSpanExporter(OtlpSpanExporterOptions options,
                                   std::unique_ptr<OtlpClient> client)
    : options_(std::move(options)),
      state_(std::make_shared<State>(client->options().resource)),
      client_(std::move(client)) {}

OtlpSpanExporter::~OtlpSpanExporter() { shutdown(); }

void OtlpSpanExporter::export_spans(std::vector<SpanData>& batch) {
  if (batch.empty()) return;
  const auto count = static_cast<std::uint64_t>(batch.size());
  auto fail = [&](std::string error) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    ++state_->stats.exports_failed;
    state_->stats.spans_failed += count;
    state_->stats.last_error = clipped(error);
  };
  const auto deadline =
      std::chrono::steady_clock::now() + options_.exporter.timeout + kDeadlineSlack;
  std::unique_lock<std::mutex> lock(state_->mutex);
  const bool late =
      state_->shutdown_deadline && std::chrono::steady_clock::now() >= *state_->shutdown_deadline;
  lock.unlock();
  if (client_ == nullptr || late) {
    fail("OTLP trace export: shut down");
    return;
  }
  // A previous export that outlived its wait (only when shutdown cut it short) still holds the
  // one slot: wait for it as long as this export may take.
  lock.lock();
  state_->wait(lock, deadline, [&] { return client_->in_flight() == 0; });
  lock.unlock();

  auto request = std::make_shared<collector::ExportTraceServiceRequest>();
  otlp_detail::encode_spans(batch, state_->resource, *request);
  auto response = std::make_shared<collector::ExportTraceServiceResponse>();
  auto result = std::make_shared<std::optional<absl::Status>>();
  const bool started = client_->start_export(
      collector::TraceService::kExportPath, request, response,
      [state = state_, response, result, count](const absl::Status& status) {
        std::lock_guard<std::mutex> lock(state->mutex);
        if (status.ok()) {
          ++state->stats.exports_ok;
          std::uint64_t rejected = 0;
          if (response->has_partial_success()) {
            const auto& partial = response->partial_success();
            // A hostile count is believed only up to the batch's size.
            if (partial.rejected_spans() > 0) {
              rejected = std::min(count, static_cast<std::uint64_t>(partial.rejected_spans()));
            }
            if (!partial.error_message().empty()) {
              state->stats.last_error = clipped(partial.error_message());
            }
          }
          state->stats.spans_rejected += rejected;
          state->stats.spans_exported += count - rejected;
        } else {
          ++state->stats.exports_failed;
          state->stats.spans_failed += count;
          state->stats.last_error = clipped(status.ToString());
        }
        *result = status;
        ++state->finished;
        state->changed.notify_all();
      });
  request.reset();  // the call holds its copy
  if (!started) {
    fail("OTLP trace export: the previous export is still in flight");
    return;
  }
  lock.lock();
  // The call ends by its deadline (options.exporter.timeout) and its callback counts it; past
  // this wait (shutdown's) it is left to end, or to be cancelled by shutdown().
  state_->wait(lock, deadline, [&] { return result->has_value(); });
}

void OtlpSpanExporter::shutdown_started() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->shutdown_deadline) {
    state_->shutdown_deadline = std::chrono::steady_clock::now() + options_.shutdown_timeout;
  }
  state_->changed.notify_all();
}

void OtlpSpanExporter::shutdown() {
  if (client_ == nullptr) return;
  client_.reset();  // cancels the export in flight (its callback counts it), joins the thread
}

OtlpSpanExportStats OtlpSpanExporter::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

}  // namespace ferry
