// Storage for call objects, recycled per thread (calls layer, private). Calls are created and
// deleted at the rate of requests, on their connection's thread; at a few KiB each they are past
// malloc's fast paths, so a final call class takes its storage from here (operator new/delete).
#pragma once

#include <cstddef>
#include <new>

namespace ferry::detail {

// The storage of deleted objects of one size, kept for the next ones on the same thread.
// Bounded, so that a burst gives its surplus back to malloc; freed when the thread ends.
template <std::size_t kSize>
class RecycledStorage {
 public:
  static constexpr std::size_t kMaxCached = 256;

  static void* allocate() {
    RecycledStorage& cache = local();
    return cache.count_ > 0 ? cache.slots_[--cache.count_] : ::operator new(kSize);
  }

  static void release(void* p) noexcept {
    RecycledStorage& cache = local();
    if (cache.dead_ || cache.count_ == kMaxCached) {
      ::operator delete(p);
      return;
    }
    cache.slots_[cache.count_++] = p;
  }

  // Gives the calling thread's cached storage back to malloc: at the end of a burst, so that it
  // does not pin the heap pages around it.
  static void release_idle() noexcept {
    RecycledStorage& cache = local();
    while (cache.count_ > 0) ::operator delete(cache.slots_[--cache.count_]);
  }

  ~RecycledStorage() {
    while (count_ > 0) ::operator delete(slots_[--count_]);
    dead_ = true;  // an object deleted later in this thread's exit goes straight to malloc
  }

 private:
  static RecycledStorage& local() {
    thread_local RecycledStorage cache;
    return cache;
  }

  void* slots_[kMaxCached];
  std::size_t count_ = 0;
  bool dead_ = false;
};

}  // namespace ferry::detail
