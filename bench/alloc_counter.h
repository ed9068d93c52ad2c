// bench/alloc_counter.h: counts heap allocations in a benchmark binary. alloc_counter.cc replaces
// malloc and its siblings for the whole process (operator new, protobuf, grpc++, abseil all end up
// there), forwarding to glibc's allocator, so a benchmark can report allocations per operation.
#pragma once

#include <cstdint>

namespace ferry::bench {

// Allocations made by any thread since the process started: every malloc, calloc, realloc to a
// non-zero size, and aligned allocation (memalign, posix_memalign, aligned_alloc, valloc, pvalloc).
// Frees are not counted. Costs one relaxed load; exact when no other thread is allocating.
std::uint64_t allocation_count();

// Allocations made by the calling thread since it started (e.g. a server's I/O thread, read from
// inside a handler). Costs one TLS load.
std::uint64_t thread_allocation_count();

}  // namespace ferry::bench
