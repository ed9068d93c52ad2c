// Giving memory back once traffic falls, on a server I/O thread (server layer, private). Once
// every BufferPoolOptions::idle_period the timer calls BufferPool::trim_idle, so that the pool
// gives a burst's blocks back even when no call touches it any more. When a burst has ended (an
// idle trim, on any thread, gave blocks back) it also gives back what the burst left elsewhere:
// this thread's caches (its pool blocks, call storage) and, with glibc,
// the free pages of malloc's heaps. One timer per I/O thread; stop() on shutdown, so that the
// thread's loop can end.
#pragma once

#include <cstdint>

#include "asio/any_io_executor.hpp"
#include "asio/steady_timer.hpp"

namespace ferry::detail {

class MemoryTrimTimer {
 public:
  // Arms the timer on ex; construct before the executor's thread runs, or on it.
  explicit MemoryTrimTimer(const asio::any_io_executor& ex);

  // On the executor's thread: cancels the timer for good.
  void stop() {
    stopped_ = true;
    timer_.cancel();
  }

 private:
  void arm();
  // Each period, on the executor's thread.
  void trim();

  asio::steady_timer timer_;
  bool stopped_ = false;
  std::uint64_t idle_trims_seen_;  // BufferPoolStats::idle_trims when this thread last looked
};

// Gives back the memory a burst left to the calling thread and the process: the thread's idle
// pool blocks and call storage, then malloc's free pages (glibc's
// malloc_trim(0); its arenas otherwise shrink only from the top, which any live allocation pins,
// and keep the rest of a burst's freed memory resident). Costs a walk of malloc's free lists, a
// madvise per free run of pages, and the next calls' allocations from malloc and the OS again.
void release_burst_memory();

}  // namespace ferry::detail
