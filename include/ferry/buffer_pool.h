// ferry/buffer_pool.h: the bottom layer. Fixed-size memory blocks, recycled through a per-thread
// cache (no lock, no atomic read-modify-write) backed by one shared free list (a mutex, touched
// only when a thread's cache is empty or full). Everything above (slices, the framing codec, the
// HTTP/2 connection) takes its memory from here, so a warm process allocates nothing per message.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "ferry/detail/block.h"

namespace ferry {

// Counters of the process-wide pool. Exact when no other thread is acquiring or releasing.
struct BufferPoolStats {
  std::uint64_t blocks_allocated = 0;    // blocks ever obtained from the OS
  std::uint64_t blocks_freed_to_os = 0;  // blocks given back to the OS (trim, overflow)
  std::int64_t blocks_in_use = 0;        // handed out and not yet released
  // Idle trims (BufferPoolOptions::idle_period) that gave blocks back: each marks the end of a
  // burst, whose blocks then sat unused for a whole period (a ferry::Server's I/O threads then
  // give back what else the burst left: their caches, malloc's free pages).
  std::uint64_t idle_trims = 0;
  std::uint64_t blocks_idle() const {  // cached in a thread or the shared list
    return blocks_allocated - blocks_freed_to_os - static_cast<std::uint64_t>(blocks_in_use);
  }
};

// How much idle memory the process-wide pool keeps, and for how long (BufferPool::configure).
struct BufferPoolOptions {
  // Idle blocks the shared list holds at most, in bytes (rounded down to whole blocks): blocks
  // released beyond it go straight back to the OS. Default 64 MiB (1024 blocks).
  std::size_t max_shared_idle_bytes = std::size_t{64} << 20;
  // Blocks that sat in the shared list through a whole period of this length (the list's
  // low-water mark over the period) go back to the OS: a burst's memory is returned within two
  // periods once traffic falls, while steady traffic, which keeps cycling the same blocks, frees
  // nothing. Checked when a thread takes the shared list's lock anyway (refilling or spilling its
  // cache) and by BufferPool::trim_idle, which a ferry::Server's I/O threads call once a period.
  // Zero turns the idle trim off. Default 10 s.
  std::chrono::milliseconds idle_period{10'000};
};

// The process-wide pool of 64 KiB blocks.
//
// Thread safety: every function may be called from any thread. A block acquired on one thread may
// be released on another; it then joins the releasing thread's cache.
//
// Bounds: each thread caches at most kThreadCacheBlocks idle blocks and the shared list at most
// BufferPoolOptions::max_shared_idle_bytes; blocks released beyond that go back to the OS, so idle
// memory stays bounded (4 MiB a thread + 64 MiB shared by default) whatever the peak was, and the
// shared list's idle blocks go back too once unused for BufferPoolOptions::idle_period.
//
// Memory: each block is its own anonymous mapping (68 KiB: the 64-byte header rounds the 64 KiB
// block up by one page), so a block given back to the OS really leaves the process; from malloc,
// blocks freed below a live allocation stayed resident (a non-main arena trims only its top).
class BufferPool {
 public:
  // 64 KiB: the HTTP/2 default window and the read size that amortises a syscall over many
  // requests; small messages share a block (see SliceChain::reserve), large ones chain blocks.
  static constexpr std::size_t kBlockSize = 64 * 1024;
  static constexpr std::size_t kThreadCacheBlocks = 64;
  // The shared list's bound with the default options.
  static constexpr std::size_t kSharedListBlocks = 1024;

  static BufferPool& instance();

  // Returns a block with a reference count of one and nothing used. Costs a pointer pop from the
  // thread's cache when warm; allocates from the OS only when every cache is empty.
  detail::Block* acquire();

  BufferPoolStats stats() const;

  // Gives every idle block in the shared list and in the calling thread's cache back to the OS.
  void trim();

  // Replaces the options (any thread, any time; a smaller max_shared_idle_bytes frees the
  // surplus at once). Process-wide, like the pool.
  void configure(const BufferPoolOptions& options);
  BufferPoolOptions options() const;

  // The idle trim (see BufferPoolOptions::idle_period): if a period has ended since the last
  // check, gives back the shared list's blocks that stayed idle through it. Costs a lock and a
  // coarse clock read; meant to be called from a timer (ferry::Server's I/O threads do so), so
  // that a pool no thread touches any more still shrinks.
  void trim_idle();

  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

 private:
  BufferPool() = default;
};

}  // namespace ferry

// The inline fast path of acquire and release (internal).
#include "ferry/detail/block_cache.h"
