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
    if (stopping_ || queue_.size() + backlog_ >= options_.max_queue_size) {
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

namespace {

// Spare records kept at most: as many as the queue holds (the calls take them while the next
// batches fill, and a late export returns a queue's worth at once), at least two batches' worth,
// up to kMaxSpareRecords. And the largest kept: a record that held a long stream's
// events (or long strings) is freed rather than kept, so the spares' memory stays small and
// bounded (a kept record is a few hundred bytes).
constexpr std::size_t kMaxSpareRecords = 4096;
constexpr std::size_t kMaxSpareEvents = 8;
constexpr std::size_t kMaxSpareAttributes = 8;
constexpr std::size_t kMaxSpareString = 256;

bool small_record(const SpanData& span) {
  if (span.events.capacity() > kMaxSpareEvents ||
      span.attributes.capacity() > kMaxSpareAttributes || span.name.capacity() > kMaxSpareString ||
      span.tracestate.capacity() > kMaxSpareString ||
      span.status_message.capacity() > kMaxSpareString) {
    return false;
  }
  for (const SpanEvent& event : span.events) {
    if (event.attributes.capacity() > kMaxSpareAttributes ||
        event.name.capacity() > kMaxSpareString) {
      return false;
    }
  }
  return true;
}

std::size_t spare_pool(SpanKind kind) {
  const auto k = static_cast<std::size_t>(kind);
  return k >= 1 && k <= 3 ? k - 1 : 0;
}

}  // namespace

SpanData BatchSpanProcessor::take_spare(SpanKind kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (spare_count_ == 0) return SpanData{};
  std::vector<SpanData>* pool = &spares_[spare_pool(kind)];
  if (pool->empty()) {  // another kind's, reshaped by the caller
    for (auto& other : spares_) {
      if (!other.empty()) pool = &other;
    }
  }
  SpanData spare = std::move(pool->back());
  pool->pop_back();
  --spare_count_;
  return spare;
}

void BatchSpanProcessor::keep_spares_locked(std::vector<SpanData>& batch) {
  const std::size_t bound = std::min(
      kMaxSpareRecords, std::max(options_.max_queue_size, 2 * options_.max_export_batch_size));
  for (SpanData& span : batch) {
    if (spare_count_ >= bound) break;
    if (!small_record(span)) continue;
    spares_[spare_pool(span.kind)].push_back(std::move(span));
    ++spare_count_;
  }
  batch.clear();
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
  std::vector<SpanData> taken;  // the queue's spans, handed to the exporter a batch at a time
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
      taken.swap(queue_);  // the queue gets taken's (empty) storage back
      backlog_ = taken.size();
      for (std::size_t at = 0; at < taken.size();) {
        const std::size_t n = std::min(taken.size() - at, options_.max_export_batch_size);
        for (std::size_t i = 0; i < n; ++i) batch.push_back(std::move(taken[at + i]));
        at += n;
        backlog_ -= n;
        lock.unlock();
        try {
          exporter_->export_spans(batch);
        } catch (...) {
          // An exporter's failure loses its batch, never the process or the calls.
        }
        lock.lock();
        exported_total_ += n;
        keep_spares_locked(batch);
        exported_.notify_all();
      }
      taken.clear();
    }
    if (stopping_) return;
  }
}

}  // namespace ferry
