// Implementation of ferry/buffer_pool.h: per-thread caches of idle blocks (whose fast path is
// inline in the header) over one shared, mutex-guarded free list, which gives back what it did
// not use for a period (the idle trim). The hot path touches only thread-local state.
#include "ferry/buffer_pool.h"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

namespace ferry {
namespace detail {
constinit thread_local ThreadBlockCache t_block_cache;
}  // namespace detail

namespace {

constexpr std::size_t kPageSize = 4096;
// A block's mapping: header and data rounded up to whole pages.
constexpr std::size_t kMappingSize =
    (detail::Block::kHeaderSize + BufferPool::kBlockSize + kPageSize - 1) / kPageSize * kPageSize;
// A thread's idle blocks: its spare plus up to this many in its list.
constexpr std::uint32_t kListBlocks = BufferPool::kThreadCacheBlocks - 1;

detail::Block* allocate_from_os();
void free_to_os(detail::Block* b);

// The shared free list, guarded by Shared::mu. low_water is the least count since the idle
// trim's period began: that many blocks sat unused through all of it.
struct FreeList {
  detail::Block* head = nullptr;
  std::size_t count = 0;
  std::size_t low_water = 0;

  void push(detail::Block* b) {
    b->next_free = head;
    head = b;
    ++count;
  }
  detail::Block* pop() {
    detail::Block* b = head;
    head = b->next_free;
    --count;
    low_water = std::min(low_water, count);
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
  // The options, as the list uses them; guarded by mu.
  std::size_t max_idle_blocks = BufferPool::kSharedListBlocks;
  std::int64_t idle_period_ns = 0;
  std::int64_t period_start_ns = 0;  // when the idle trim's current period began
  BufferPoolOptions options;
  std::vector<detail::ThreadBlockCache*> caches;  // open caches, for stats()
  std::atomic<std::uint64_t> allocated{0};
  std::atomic<std::uint64_t> freed{0};
  std::uint64_t idle_trims = 0;  // guarded by mu
};

// A coarse clock (the kernel's last tick, read without a syscall): the idle trim needs seconds.
std::int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void apply_options_locked(Shared& s, const BufferPoolOptions& options) {
  s.options = options;
  s.max_idle_blocks = options.max_shared_idle_bytes / BufferPool::kBlockSize;
  s.idle_period_ns = std::chrono::nanoseconds(options.idle_period).count();
  while (s.idle.count > s.max_idle_blocks) free_to_os(s.idle.pop());
}

Shared& shared() {
  static Shared* s = [] {
    Shared* fresh = new Shared;
    apply_options_locked(*fresh, BufferPoolOptions{});
    fresh->period_start_ns = now_ns();
    return fresh;
  }();
  return *s;
}

// The idle trim: once a period has ended, the blocks that sat in the list through all of it
// (its low-water mark) go back to the OS and a new period begins. Called with s.mu held, on
// the slow paths that take it anyway and from BufferPool::trim_idle.
void trim_idle_locked(Shared& s) {
  if (s.idle_period_ns <= 0) return;
  const std::int64_t now = now_ns();
  if (now - s.period_start_ns < s.idle_period_ns) return;
  const std::size_t idle = std::min(s.idle.low_water, s.idle.count);
  for (std::size_t n = idle; n > 0; --n) free_to_os(s.idle.pop());
  if (idle > 0) ++s.idle_trims;
  s.idle.low_water = s.idle.count;
  s.period_start_ns = now;
}

void give_to_shared_locked(Shared& s, detail::Block* b) {
  if (s.idle.count < s.max_idle_blocks) {
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
  trim_idle_locked(s);
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
  trim_idle_locked(s);
  while (cache.count.load(std::memory_order_relaxed) > BufferPool::kThreadCacheBlocks / 2) {
    give_to_shared_locked(s, pop(cache));
  }
}

// Each block is its own mapping, so that freeing it returns its pages whatever else the process
// allocated around it (malloc'd blocks freed below a live chunk stayed resident). Page-aligned,
// hence cache-line aligned. The kernel merges neighbouring mappings into one VMA.
detail::Block* allocate_from_os() {
  void* p =
      ::mmap(nullptr, kMappingSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  shared().allocated.fetch_add(1, std::memory_order_relaxed);
  return new (p) detail::Block;
}

void free_to_os(detail::Block* b) {
  b->~Block();
  ::munmap(b, kMappingSize);
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
  out.idle_trims = s.idle_trims;
  out.blocks_in_use =
      static_cast<std::int64_t>(out.blocks_allocated - out.blocks_freed_to_os - idle);
  return out;
}

void BufferPool::configure(const BufferPoolOptions& options) {
  Shared& s = shared();
  std::lock_guard lock(s.mu);
  apply_options_locked(s, options);
}

BufferPoolOptions BufferPool::options() const {
  Shared& s = shared();
  std::lock_guard lock(s.mu);
  return s.options;
}

void BufferPool::trim_idle() {
  Shared& s = shared();
  std::lock_guard lock(s.mu);
  trim_idle_locked(s);
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
  s.idle.low_water = 0;
}

}  // namespace ferry
