// Implementation of ferry/buffer_pool.h: per-thread caches of idle blocks over one shared,
// mutex-guarded free list. The hot path (acquire/release on a warm thread) touches only
// thread-local state: its counters are single-writer atomics written with plain stores.
#include "ferry/buffer_pool.h"

#include <mutex>
#include <new>
#include <vector>

namespace ferry {
namespace {

constexpr std::size_t kAllocationSize = detail::Block::kHeaderSize + BufferPool::kBlockSize;
constexpr std::align_val_t kAlignment{64};

detail::Block* allocate_from_os();
void free_to_os(detail::Block* b);

// A free list of blocks linked through Block::next_free.
struct FreeList {
  detail::Block* head = nullptr;
  std::size_t count = 0;

  void push(detail::Block* b) {
    b->next_free = head;
    head = b;
    ++count;
  }
  detail::Block* pop() {
    detail::Block* b = head;
    head = b->next_free;
    --count;
    return b;
  }
};

// Single-writer counter: the owning thread updates it without a locked instruction, others read.
struct OwnedCounter {
  std::atomic<std::uint64_t> value{0};
  void add(std::uint64_t n) {
    value.store(value.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t get() const { return value.load(std::memory_order_relaxed); }
};

struct ThreadCache;

// Set once the thread's cache is destroyed: a Slice destroyed later in thread exit (another
// thread_local's destructor) must not touch it. Trivially destructible, so always readable.
thread_local bool t_cache_destroyed = false;
// The fast path's way to the thread's cache: a trivially initialised thread_local costs one
// TLS load, where the cache object itself would be guarded by an initialisation check.
thread_local ThreadCache* t_cache = nullptr;


// State shared by all threads. Leaked on purpose: thread caches may outlive static destruction.
struct Shared {
  std::mutex mu;
  FreeList idle;
  std::vector<ThreadCache*> caches;   // live threads' caches, for stats()
  std::uint64_t exited_acquired = 0;  // counters folded in from exited threads
  std::uint64_t exited_released = 0;
  std::atomic<std::uint64_t> allocated{0};
  std::atomic<std::uint64_t> freed{0};
};

Shared& shared() {
  static Shared* s = new Shared;
  return *s;
}

struct ThreadCache {
  FreeList idle;
  OwnedCounter acquired;
  OwnedCounter released;

  ThreadCache() {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    s.caches.push_back(this);
  }

  ~ThreadCache() {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    while (idle.count > 0) give_to_shared_locked(s, idle.pop());
    s.exited_acquired += acquired.get();
    s.exited_released += released.get();
    std::erase(s.caches, this);
    t_cache_destroyed = true;
    t_cache = nullptr;
  }

  static void give_to_shared_locked(Shared& s, detail::Block* b) {
    if (s.idle.count < BufferPool::kSharedListBlocks) {
      s.idle.push(b);
    } else {
      free_to_os(b);
    }
  }

  detail::Block* acquire() {
    if (idle.count == 0) refill();
    detail::Block* b = idle.count > 0 ? idle.pop() : allocate_from_os();
    acquired.add(1);
    return b;
  }

  void release(detail::Block* b) {
    released.add(1);
    if (idle.count >= BufferPool::kThreadCacheBlocks) spill();
    idle.push(b);
  }

  // Takes up to half a cache's worth of blocks from the shared list in one lock.
  void refill() {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    while (s.idle.count > 0 && idle.count < BufferPool::kThreadCacheBlocks / 2) idle.push(s.idle.pop());
  }

  // Moves half the cache to the shared list in one lock, so a thread that only releases (a
  // consumer of blocks another thread filled) does not take the lock on every release.
  void spill() {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    while (idle.count > BufferPool::kThreadCacheBlocks / 2) give_to_shared_locked(s, idle.pop());
  }
};

ThreadCache& thread_cache() {
  if (t_cache != nullptr) return *t_cache;
  thread_local ThreadCache cache;
  t_cache = &cache;
  return cache;
}

detail::Block* allocate_from_os() {
  void* p = ::operator new(kAllocationSize, kAlignment);
  shared().allocated.fetch_add(1, std::memory_order_relaxed);
  return new (p) detail::Block;
}

void free_to_os(detail::Block* b) {
  b->~Block();
  ::operator delete(static_cast<void*>(b), kAlignment);
  shared().freed.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

namespace detail {
void release_block(Block* b) noexcept {
  if (t_cache_destroyed) {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    ++s.exited_released;
    ThreadCache::give_to_shared_locked(s, b);
    return;
  }
  thread_cache().release(b);
}
}  // namespace detail

BufferPool& BufferPool::instance() {
  static BufferPool* pool = new BufferPool;
  return *pool;
}

detail::Block* BufferPool::acquire() { return detail::acquire_block(); }

detail::Block* detail::acquire_block() {
  detail::Block* b;
  if (t_cache_destroyed) {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    ++s.exited_acquired;
    b = s.idle.count > 0 ? s.idle.pop() : nullptr;
  } else {
    b = thread_cache().acquire();
  }
  if (b == nullptr) b = allocate_from_os();
  b->refs.store(1, std::memory_order_relaxed);
  b->used = 0;
  return b;
}

BufferPoolStats BufferPool::stats() const {
  Shared& s = shared();
  std::lock_guard lock(s.mu);
  std::uint64_t acquired = s.exited_acquired;
  std::uint64_t released = s.exited_released;
  for (const ThreadCache* c : s.caches) {
    acquired += c->acquired.get();
    released += c->released.get();
  }
  BufferPoolStats out;
  out.blocks_allocated = s.allocated.load(std::memory_order_relaxed);
  out.blocks_freed_to_os = s.freed.load(std::memory_order_relaxed);
  out.blocks_in_use = static_cast<std::int64_t>(acquired - released);
  return out;
}

void BufferPool::trim() {
  ThreadCache& mine = thread_cache();
  Shared& s = shared();
  std::lock_guard lock(s.mu);
  while (mine.idle.count > 0) free_to_os(mine.idle.pop());
  while (s.idle.count > 0) free_to_os(s.idle.pop());
}

}  // namespace ferry
