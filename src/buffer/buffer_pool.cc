// Implementation of ferry/buffer_pool.h: per-thread caches of idle blocks (whose fast path is
// inline in the header) over one shared, mutex-guarded free list. The hot path touches only
// thread-local state.
#include "ferry/buffer_pool.h"

#include <mutex>
#include <new>
#include <vector>

namespace ferry {
namespace detail {
constinit thread_local ThreadBlockCache t_block_cache;
}  // namespace detail

namespace {

constexpr std::size_t kAllocationSize = detail::Block::kHeaderSize + BufferPool::kBlockSize;
constexpr std::align_val_t kAlignment{64};
// A thread's idle blocks: its spare plus up to this many in its list.
constexpr std::uint32_t kListBlocks = BufferPool::kThreadCacheBlocks - 1;

detail::Block* allocate_from_os();
void free_to_os(detail::Block* b);

// The shared free list, guarded by Shared::mu.
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

// The owning thread's side of its cache (the slow paths): plain pushes and pops, with count
// stored for stats() to read.
void push(detail::ThreadBlockCache& cache, detail::Block* b) {
  b->next_free = cache.head;
  cache.head = b;
  cache.count.store(cache.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

detail::Block* pop(detail::ThreadBlockCache& cache) {
  detail::Block* b = cache.head;
  cache.head = b->next_free;
  cache.count.store(cache.count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  return b;
}

// Set once the thread's cache is closed: a Slice destroyed later in thread exit (another
// thread_local's destructor) must not reopen it. Trivially destructible, so always readable.
thread_local bool t_cache_closed = false;

// State shared by all threads. Leaked on purpose: thread caches may outlive static destruction.
struct Shared {
  std::mutex mu;
  FreeList idle;
  std::vector<detail::ThreadBlockCache*> caches;  // open caches, for stats()
  std::atomic<std::uint64_t> allocated{0};
  std::atomic<std::uint64_t> freed{0};
};

Shared& shared() {
  static Shared* s = new Shared;
  return *s;
}

void give_to_shared_locked(Shared& s, detail::Block* b) {
  if (s.idle.count < BufferPool::kSharedListBlocks) {
    s.idle.push(b);
  } else {
    free_to_os(b);
  }
}

// Opens the thread's cache on construction and closes it at thread exit, handing its blocks to
// the shared list.
struct CacheRegistration {
  CacheRegistration() {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    s.caches.push_back(&detail::t_block_cache);
    detail::t_block_cache.limit = kListBlocks;
  }

  ~CacheRegistration() {
    detail::ThreadBlockCache& cache = detail::t_block_cache;
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    if (detail::Block* b = cache.spare.exchange(nullptr, std::memory_order_relaxed)) {
      give_to_shared_locked(s, b);
    }
    while (cache.head != nullptr) give_to_shared_locked(s, pop(cache));
    cache.limit = 0;
    std::erase(s.caches, &cache);
    t_cache_closed = true;
  }
};

// The thread's cache, opened on first use; null once the thread is exiting.
detail::ThreadBlockCache* thread_cache() {
  if (t_cache_closed) return nullptr;
  thread_local CacheRegistration registration;
  return &detail::t_block_cache;
}

// Takes up to half a cache's worth of blocks from the shared list in one lock.
void refill(detail::ThreadBlockCache& cache) {
  Shared& s = shared();
  std::lock_guard lock(s.mu);
  while (s.idle.count > 0 &&
         cache.count.load(std::memory_order_relaxed) < BufferPool::kThreadCacheBlocks / 2) {
    push(cache, s.idle.pop());
  }
}

// Moves half the cache to the shared list in one lock, so a thread that only releases (a
// consumer of blocks another thread filled) does not take the lock on every release.
void spill(detail::ThreadBlockCache& cache) {
  Shared& s = shared();
  std::lock_guard lock(s.mu);
  while (cache.count.load(std::memory_order_relaxed) > BufferPool::kThreadCacheBlocks / 2) {
    give_to_shared_locked(s, pop(cache));
  }
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
  if (ThreadBlockCache* cache = thread_cache(); cache != nullptr) {
    if (cache->head == nullptr) refill(*cache);
    if (cache->head != nullptr) b = pop(*cache);
  } else {  // thread exit: straight from the shared list
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    if (s.idle.count > 0) b = s.idle.pop();
  }
  if (b == nullptr) b = allocate_from_os();
  b->refs.store(1, std::memory_order_relaxed);
  b->used = 0;
  return b;
}

void release_block_slow(Block* b) noexcept {
  if (ThreadBlockCache* cache = thread_cache(); cache != nullptr) {
    if (cache->count.load(std::memory_order_relaxed) >= kListBlocks) {
      spill(*cache);
    }
    push(*cache, b);
    return;
  }
  Shared& s = shared();
  std::lock_guard lock(s.mu);
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
  // Every block obtained from the OS and not given back is either idle (in the shared list or a
  // thread's cache) or in use; the caches keep counts, not per-operation counters.
  std::uint64_t idle = s.idle.count;
  for (const detail::ThreadBlockCache* c : s.caches) {
    idle += c->count.load(std::memory_order_relaxed);
    if (c->spare.load(std::memory_order_relaxed) != nullptr) ++idle;
  }
  BufferPoolStats out;
  out.blocks_allocated = s.allocated.load(std::memory_order_relaxed);
  out.blocks_freed_to_os = s.freed.load(std::memory_order_relaxed);
  out.blocks_in_use = static_cast<std::int64_t>(out.blocks_allocated - out.blocks_freed_to_os - idle);
  return out;
}

void BufferPool::trim() {
  Shared& s = shared();
  detail::ThreadBlockCache* mine = thread_cache();
  std::lock_guard lock(s.mu);
  if (mine != nullptr) {
    if (detail::Block* b = mine->spare.exchange(nullptr, std::memory_order_relaxed)) free_to_os(b);
    while (mine->head != nullptr) free_to_os(pop(*mine));
  }
  while (s.idle.count > 0) free_to_os(s.idle.pop());
}

}  // namespace ferry
