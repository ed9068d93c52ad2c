// Implementation of src/call/recycled_frame.h: per-thread free lists, one per 64-byte size class
// up to 2 KiB, each keeping at most kKeep frames; and ferry::ready_status (ferry/call_info.h),
// the recycled coroutine an on_start that decides at once returns.
#include "call/recycled_frame.h"

#include <new>

#include "absl/status/status.h"
#include "ferry/call_info.h"

namespace ferry::detail {
namespace {

constexpr std::size_t kGranule = 64;
constexpr std::size_t kClasses = 32;  // frames up to 2 KiB
// Enough for the chains' frames of a few hundred calls in flight on one thread; beyond it a
// released frame goes back to the heap.
constexpr std::size_t kKeep = 512;

struct FreeFrame {
  FreeFrame* next;
};

// Plain thread_local data (no destructor of its own), so that frames released while the thread
// ends, after the Reaper ran, still find it: they then go to the heap.
struct FreeLists {
  FreeFrame* head[kClasses];
  std::size_t count[kClasses];
  bool gone;  // the thread is ending: nothing is kept any more
};
thread_local FreeLists free_lists{};

// Gives the thread's frames back to the heap when it ends.
struct Reaper {
  bool armed = false;
  ~Reaper() {
    free_lists.gone = true;
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeFrame* f = free_lists.head[c]) {
        free_lists.head[c] = f->next;
        ::operator delete(f);
      }
      free_lists.count[c] = 0;
    }
  }
};
thread_local Reaper reaper;

std::size_t size_class(std::size_t size) { return (size + kGranule - 1) / kGranule - 1; }

}  // namespace

void* acquire_frame(std::size_t size) {
  const std::size_t c = size_class(size);
  if (c >= kClasses) return ::operator new(size);
  // Always the whole class's size, even when this thread keeps nothing any more (its Reaper has
  // run): the frame may be released on another thread, which files it under its class, and a
  // later frame of up to the class's size would then overrun an exact-size allocation.
  if (free_lists.gone) return ::operator new((c + 1) * kGranule);
  if (FreeFrame* f = free_lists.head[c]) {
    free_lists.head[c] = f->next;
    --free_lists.count[c];
    return f;
  }
  reaper.armed = true;  // odr-use: registers the thread's Reaper
  return ::operator new((c + 1) * kGranule);
}

void release_frame(void* frame, std::size_t size) noexcept {
  const std::size_t c = size_class(size);
  if (c >= kClasses || free_lists.gone || free_lists.count[c] >= kKeep) {
    ::operator delete(frame);
    return;
  }
  reaper.armed = true;
  auto* f = static_cast<FreeFrame*>(frame);
  f->next = free_lists.head[c];
  free_lists.head[c] = f;
  ++free_lists.count[c];
}

namespace {

asio::awaitable<absl::Status> ready(RecycledFrame, absl::Status status) { co_return status; }

}  // namespace
}  // namespace ferry::detail

namespace ferry {

asio::awaitable<absl::Status> ready_status(absl::Status status) {
  return detail::ready(detail::RecycledFrame{}, std::move(status));
}

}  // namespace ferry
