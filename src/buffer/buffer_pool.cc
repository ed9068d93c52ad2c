// Implementation of ferry/buffer_pool.h: per-thread caches of idle blocks (whose fast path is
// inline in the header) over one shared, mutex-guarded free list. The hot path touches only
// thread-local state.
#include "ferry/buffer_pool.h"

#include <mutex>
#include <new>
#include <vector>

namespace ferry {
namespace detail {
constinit thread_local ThreadBlockCache* t_block_cache = nullptr;
}  // namespace detail

namespace {

constexpr std::size_t kAllocationSize = detail::Block::kHeaderSize + BufferPool::kBlockSize;
constexpr std::align_val_t kAlignment{64};

detail::Block* allocate_from_os();
void free_to_os(detail::Block* b);

void push(detail::ThreadBlockCache& list, detail::Block* b) {
  b->next_free = list.head;
  list.head = b;
  ++list.count;
}

detail::Block* pop(detail::ThreadBlockCache& list) {
  detail::Block* b = list.head;
  list.head = b->next_free;
  --list.count;
  return b;
}

// Set once the thread's cache is destroyed: a Slice destroyed later in thread exit (another
// thread_local's destructor) must not touch it. Trivially destructible, so always readable.
thread_local bool t_cache_destroyed = false;

struct ThreadCache;

// State shared by all threads. Leaked on purpose: thread caches may outlive static destruction.
struct Shared {
  std::mutex mu;
  detail::ThreadBlockCache idle;     // the shared free list (its counters are unused)
  std::vector<ThreadCache*> caches;  // live threads' caches, for stats()
  std::uint64_t exited_acquired = 0;  // counters folded in from exited threads
  std::uint64_t exited_released = 0;
  std::atomic<std::uint64_t> allocated{0};
  std::atomic<std::uint64_t> freed{0};
};

Shared& shared() {
  static Shared* s = new Shared;
  return *s;
}

void give_to_shared_locked(Shared& s, detail::Block* b) {
  if (s.idle.count < BufferPool::kSharedListBlocks) {
    push(s.idle, b);
  } else {
    free_to_os(b);
  }
}

struct ThreadCache {
  detail::ThreadBlockCache fast;

  ThreadCache() {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    s.caches.push_back(this);
  }

  ~ThreadCache() {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    while (fast.count > 0) give_to_shared_locked(s, pop(fast));
    s.exited_acquired += fast.acquired.load(std::memory_order_relaxed);
    s.exited_released += fast.released.load(std::memory_order_relaxed);
    std::erase(s.caches, this);
    t_cache_destroyed = true;
    detail::t_block_cache = nullptr;
  }

  // Takes up to half a cache's worth of blocks from the shared list in one lock.
  void refill() {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    while (s.idle.count > 0 && fast.count < BufferPool::kThreadCacheBlocks / 2) {
      push(fast, pop(s.idle));
    }
  }

  // Moves half the cache to the shared list in one lock, so a thread that only releases (a
  // consumer of blocks another thread filled) does not take the lock on every release.
  void spill() {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    while (fast.count > BufferPool::kThreadCacheBlocks / 2) give_to_shared_locked(s, pop(fast));
  }
};

// The thread's cache, set up on first use; null once the thread is exiting.
ThreadCache* thread_cache() {
  if (t_cache_destroyed) return nullptr;
  thread_local ThreadCache cache;
  detail::t_block_cache = &cache.fast;
  return &cache;
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

Block* acquire_block_slow() {
  Block* b = nullptr;
  if (ThreadCache* cache = thread_cache(); cache != nullptr) {
    if (cache->fast.head == nullptr) cache->refill();
    if (cache->fast.head != nullptr) b = pop(cache->fast);
    bump(cache->fast.acquired);
  } else {  // thread exit: straight from the shared list
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    ++s.exited_acquired;
    if (s.idle.count > 0) b = pop(s.idle);
  }
  if (b == nullptr) b = allocate_from_os();
  b->refs.store(1, std::memory_order_relaxed);
  b->used = 0;
  return b;
}

void release_block_slow(Block* b) noexcept {
  if (ThreadCache* cache = thread_cache(); cache != nullptr) {
    bump(cache->fast.released);
    if (cache->fast.count >= BufferPool::kThreadCacheBlocks) cache->spill();
    push(cache->fast, b);
    return;
  }
  Shared& s = shared();
  std::lock_guard lock(s.mu);
  ++s.exited_released;
  give_to_shared_locked(s, b);
}

}  // namespace detail

BufferPool& BufferPool::instance() {
  static BufferPool* pool = new BufferPool;
  return *pool;
}

detail::Block* BufferPool::acquire() { return detail::acquire_block(); }

BufferPoolStats BufferPool::stats() const {
  Shared& s = shared();
  std::lock_guard lock(s.mu);
  std::uint64_t acquired = s.exited_acquired;
  std::uint64_t released = s.exited_released;
  for (const ThreadCache* c : s.caches) {
    acquired += c->fast.acquired.load(std::memory_order_relaxed);
    released += c->fast.released.load(std::memory_order_relaxed);
  }
  BufferPoolStats out;
  out.blocks_allocated = s.allocated.load(std::memory_order_relaxed);
  out.blocks_freed_to_os = s.freed.load(std::memory_order_relaxed);
  out.blocks_in_use = static_cast<std::int64_t>(acquired - released);
  return out;
}

void BufferPool::trim() {
  Shared& s = shared();
  ThreadCache* mine = thread_cache();
  std::lock_guard lock(s.mu);
  if (mine != nullptr) {
    while (mine->fast.count > 0) free_to_os(pop(mine->fast));
  }
  while (s.idle.count > 0) free_to_os(pop(s.idle));
}

}  // namespace ferry
