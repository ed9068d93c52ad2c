// Implementation of src/server/memory_trim_timer.h.
#include "server/memory_trim_timer.h"

#include <chrono>

#include "ferry/buffer_pool.h"
#include "server/server_call.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ferry::detail {

MemoryTrimTimer::MemoryTrimTimer(const asio::any_io_executor& ex)
    : timer_(ex), idle_trims_seen_(BufferPool::instance().stats().idle_trims) {
  arm();
}

void MemoryTrimTimer::arm() {
  // A period of zero (idle trim off) is looked at again later, in case it is configured on.
  auto period = BufferPool::instance().options().idle_period;
  if (period.count() <= 0) period = std::chrono::seconds(10);
  timer_.expires_after(period);
  timer_.async_wait([this](const asio::error_code& ec) {
    if (ec || stopped_) return;
    trim();
    arm();
  });
}

void MemoryTrimTimer::trim() {
  BufferPool& pool = BufferPool::instance();
  pool.trim_idle();
  // The idle trim runs on whichever thread comes first (this timer, or a pool slow path): every
  // thread sees its count change within a period, and gives back its own caches then.
  const std::uint64_t trims = pool.stats().idle_trims;
  if (trims == idle_trims_seen_) return;
  idle_trims_seen_ = trims;
  release_burst_memory();
}

void release_burst_memory() {
  BufferPool::instance().trim();
  ServerCall::release_idle_storage();
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

}  // namespace ferry::detail
