// Implementation of src/call/deadline_queue.h.
#include "call/deadline_queue.h"

#include <cassert>

namespace ferry::detail {

void DeadlineQueue::add(Deadline* d, TimePoint when) {
  assert(!d->queued());
  d->when_ = when;
  heap_.push_back(d);
  d->index_ = heap_.size() - 1;
  sift_up(d->index_);
  if (d->index_ == 0) arm();
}

void DeadlineQueue::remove(Deadline* d) {
  if (!d->queued()) return;
  const std::size_t i = d->index_;
  d->index_ = Deadline::kNotQueued;
  Deadline* last = heap_.back();
  heap_.pop_back();
  if (i == heap_.size()) return;  // it was the last
  place(i, last);
  sift_up(i);
  sift_down(last->index_);
  // The timer stays armed for the deadline it waits for, even when the heap empties: on_timer
  // then finds nothing due and re-arms for what is queued by then. Cancelling here would cost
  // every call alone in the queue (one in flight) a cancelled wait and a new one. The pending
  // wait keeps the io_context busy until it fires, as the connection's pending read does.
}

void DeadlineQueue::stop() {
  stopped_ = true;
  armed_for_ = TimePoint::max();
  timer_.cancel();
}

void DeadlineQueue::arm() {
  if (stopped_ || heap_.empty() || heap_[0]->when_ >= armed_for_) return;
  armed_for_ = heap_[0]->when_;
  // Replaces a wait for a later deadline, whose handler then runs with operation_aborted.
  timer_.expires_at(armed_for_);
  timer_.async_wait([this, alive = alive_](const asio::error_code& ec) {
    if (ec || !*alive) return;  // replaced by an earlier deadline, stopped, or destroyed
    armed_for_ = TimePoint::max();
    on_timer();
  });
}

void DeadlineQueue::on_timer() {
  const TimePoint now = std::chrono::steady_clock::now();
  while (!heap_.empty() && heap_[0]->when_ <= now) {
    Deadline* d = heap_[0];
    remove(d);
    d->on_deadline();  // may remove others, or destroy d
  }
  arm();
}

void DeadlineQueue::sift_up(std::size_t i) {
  Deadline* d = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (heap_[parent]->when_ <= d->when_) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, d);
}

void DeadlineQueue::sift_down(std::size_t i) {
  Deadline* d = heap_[i];
  const std::size_t n = heap_.size();
  while (true) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1]->when_ < heap_[child]->when_) ++child;
    if (d->when_ <= heap_[child]->when_) break;
    place(i, heap_[child]);
    i = child;
  }
  place(i, d);
}

}  // namespace ferry::detail
