// ferry::tracing's span pipeline (ferry/tracing.h): the bounded queue between the calls and the
// exporter's thread, and the in-memory exporter of the tests.
#include <algorithm>
#include <utility>

#include "ferry/tracing.h"

namespace ferry {

void InMemorySpanExporter::export_spans(std::vector<SpanData>& batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (SpanData& span : batch) spans_.push_back(std::move(span));
}

std::vector<SpanData> InMemorySpanExporter::spans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return spans_;
}

void InMemorySpanExporter::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.clear();
}

BatchSpanProcessor::BatchSpanProcessor(std::shared_ptr<SpanExporter> exporter,
                                       BatchSpanProcessorOptions options)
    : exporter_(std::move(exporter)), options_(options) {
  if (options_.max_queue_size == 0) options_.max_queue_size = 1;
  if (options_.max_export_batch_size == 0) options_.max_export_batch_size = 1;
  thread_ = std::thread([this] { run(); });
}

BatchSpanProcessor::~BatchSpanProcessor() { shutdown(); }

bool BatchSpanProcessor::on_end(SpanData&& span) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() >= options_.max_queue_size) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    queue_.push_back(std::move(span));
    ++queued_total_;
    wake = queue_.size() == options_.max_export_batch_size;
  }
  if (wake) wake_.notify_one();
  return true;
}

void BatchSpanProcessor::force_flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t target = queued_total_;
  if (flush_upto_ < target) flush_upto_ = target;
  wake_.notify_one();
  exported_.wait(lock, [&] { return exported_total_ >= target || stopped_; });
}

void BatchSpanProcessor::shutdown() {
  std::call_once(shut_, [this] {
    exporter_->shutdown_started();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
    exporter_->shutdown();
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    exported_.notify_all();
  });
}

void BatchSpanProcessor::run() {
  std::vector<SpanData> batch;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    const auto deadline = std::chrono::steady_clock::now() + options_.schedule_delay;
    wake_.wait_until(lock, deadline, [&] {
      return stopping_ || queue_.size() >= options_.max_export_batch_size ||
             flush_upto_ > exported_total_;
    });
    // Everything queued goes out, a batch at a time; the lock is released while the exporter
    // works, so calls keep queueing (or dropping) meanwhile without waiting.
    while (!queue_.empty()) {
      const std::size_t n = std::min(queue_.size(), options_.max_export_batch_size);
      batch.clear();
      for (std::size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      lock.unlock();
      try {
        exporter_->export_spans(batch);
      } catch (...) {
        // An exporter's failure loses its batch, never the process or the calls.
      }
      lock.lock();
      exported_total_ += n;
      exported_.notify_all();
    }
    if (stopping_) return;
  }
}

}  // namespace ferry
