// Implementation of src/http2/session_memory.h.
#include "http2/session_memory.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace ferry::http2 {
namespace {

// Classes of 32 B to 4 KiB; larger requests (rare: big header blocks) go straight to malloc.
constexpr int kClasses = 8;
constexpr std::size_t kSmallest = 32;
constexpr std::size_t kLargest = kSmallest << (kClasses - 1);
// Idle memory a thread keeps per class, so a burst does not pin memory for ever.
constexpr std::size_t kIdleBytesPerClass = 256 * 1024;
constexpr std::uint32_t kUnpooled = 0xFF;

// Every block starts with this header; callers get the bytes after it (16-byte aligned).
struct alignas(16) BlockHeader {
  std::uint32_t size_class;
  std::uint32_t unused;
  BlockHeader* next_free;
};

// The smallest class that holds size (<= kLargest): 32 B -> 0, 33..64 -> 1, and so on.
int class_of(std::size_t size) {
  if (size <= kSmallest) return 0;
  return static_cast<int>(std::bit_width(size - 1)) - std::countr_zero(kSmallest);
}

std::size_t capacity_of(int c) { return kSmallest << c; }

struct FreeLists {
  BlockHeader* head[kClasses] = {};
  std::size_t count[kClasses] = {};

  void free_all() {
    for (int c = 0; c < kClasses; ++c) {
      while (head[c] != nullptr) std::free(std::exchange(head[c], head[c]->next_free));
      count[c] = 0;
    }
  }
  ~FreeLists() { free_all(); }
};

// Trivially initialised pointer for the fast path; the lists themselves are set up on first use.
thread_local FreeLists* t_lists = nullptr;
thread_local bool t_lists_gone = false;

FreeLists* lists() {
  if (t_lists != nullptr || t_lists_gone) return t_lists;
  struct Owner {
    FreeLists lists;
    ~Owner() {
      t_lists = nullptr;
      t_lists_gone = true;
    }
  };
  thread_local Owner owner;
  t_lists = &owner.lists;
  return t_lists;
}

void* allocate(std::size_t size, void*) {
  if (size > kLargest) {
    auto* h = static_cast<BlockHeader*>(std::malloc(sizeof(BlockHeader) + size));
    if (h == nullptr) return nullptr;
    h->size_class = kUnpooled;
    return h + 1;
  }
  const int c = class_of(size);
  FreeLists* l = lists();
  BlockHeader* h;
  if (l != nullptr && l->head[c] != nullptr) {
    h = l->head[c];
    l->head[c] = h->next_free;
    --l->count[c];
  } else {
    h = static_cast<BlockHeader*>(std::malloc(sizeof(BlockHeader) + capacity_of(c)));
    if (h == nullptr) return nullptr;
    h->size_class = static_cast<std::uint32_t>(c);
  }
  return h + 1;
}

void deallocate(void* p, void*) {
  if (p == nullptr) return;
  BlockHeader* h = static_cast<BlockHeader*>(p) - 1;
  const std::uint32_t c = h->size_class;
  FreeLists* l = c == kUnpooled ? nullptr : lists();
  if (l == nullptr || l->count[c] * capacity_of(static_cast<int>(c)) >= kIdleBytesPerClass) {
    std::free(h);
    return;
  }
  h->next_free = l->head[c];
  l->head[c] = h;
  ++l->count[c];
}

void* allocate_zeroed(std::size_t n, std::size_t size, void* user) {
  if (size != 0 && n > SIZE_MAX / size) return nullptr;
  void* p = allocate(n * size, user);
  if (p != nullptr) std::memset(p, 0, n * size);
  return p;
}

void* reallocate(void* p, std::size_t size, void* user) {
  if (p == nullptr) return allocate(size, user);
  if (size == 0) {
    deallocate(p, user);
    return nullptr;
  }
  BlockHeader* h = static_cast<BlockHeader*>(p) - 1;
  if (h->size_class != kUnpooled && size <= capacity_of(static_cast<int>(h->size_class))) return p;
  if (h->size_class == kUnpooled) {
    // Unpooled blocks stay unpooled when they grow; the header moves with them.
    auto* grown = static_cast<BlockHeader*>(std::realloc(h, sizeof(BlockHeader) + size));
    return grown == nullptr ? nullptr : grown + 1;
  }
  void* q = allocate(size, user);
  if (q == nullptr) return nullptr;
  std::memcpy(q, p, capacity_of(static_cast<int>(h->size_class)));
  deallocate(p, user);
  return q;
}

nghttp2_mem g_memory = {nullptr, allocate, deallocate, allocate_zeroed, reallocate};

}  // namespace

nghttp2_mem* session_memory() { return &g_memory; }

void release_idle_session_memory() {
  if (t_lists != nullptr) t_lists->free_all();
}

}  // namespace ferry::http2
