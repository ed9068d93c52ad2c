// bench/alloc_counter.cc: the malloc interposer behind alloc_counter.h. Definitions in the
// executable take precedence over libc's for every shared library in the process; each forwards to
// glibc's own entry point (__libc_*), so the heap stays glibc's and nothing but a counter is added.
#include "alloc_counter.h"

#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>

extern "C" {
void* __libc_malloc(std::size_t size);
void __libc_free(void* p);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* p, std::size_t size);
void* __libc_memalign(std::size_t alignment, std::size_t size);
void* __libc_valloc(std::size_t size);
void* __libc_pvalloc(std::size_t size);
}

namespace {

// constinit: malloc runs before any dynamic initializer, so the counter must need none.
constinit std::atomic<std::uint64_t> g_allocations{0};
// Initial-exec TLS of the executable: reading it never allocates, even on a thread's first malloc.
constinit thread_local std::uint64_t t_allocations [[gnu::tls_model("initial-exec")]] = 0;

inline void count_allocation() {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  ++t_allocations;
}

}  // namespace

namespace ferry::bench {
std::uint64_t allocation_count() { return g_allocations.load(std::memory_order_relaxed); }
std::uint64_t thread_allocation_count() { return t_allocations; }
}  // namespace ferry::bench

extern "C" {

void* malloc(std::size_t size) noexcept {
  count_allocation();
  return __libc_malloc(size);
}

void free(void* p) noexcept { __libc_free(p); }

void* calloc(std::size_t count, std::size_t size) noexcept {
  count_allocation();
  return __libc_calloc(count, size);
}

// Counted even when glibc grows the block in place: the caller paid for a trip into the
// allocator either way. realloc(p, 0) only frees.
void* realloc(void* p, std::size_t size) noexcept {
  if (size != 0) count_allocation();
  return __libc_realloc(p, size);
}

void* memalign(std::size_t alignment, std::size_t size) noexcept {
  count_allocation();
  return __libc_memalign(alignment, size);
}

// libstdc++'s aligned operator new (the buffer pool's blocks) calls this one.
void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  count_allocation();
  return __libc_memalign(alignment, size);
}

int posix_memalign(void** out, std::size_t alignment, std::size_t size) noexcept {
  // __libc_memalign rounds a bad alignment up; posix_memalign must refuse it instead.
  if (alignment == 0 || alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) {
    return EINVAL;
  }
  count_allocation();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

void* valloc(std::size_t size) noexcept {
  count_allocation();
  return __libc_valloc(size);
}

void* pvalloc(std::size_t size) noexcept {
  count_allocation();
  return __libc_pvalloc(size);
}

}  // extern "C"
