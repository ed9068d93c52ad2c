// Implementation of ferry/offload.h's per-thread count: which count a server's I/O thread keeps
// of the work its handlers have offloaded (server/io_thread.h sets it when the thread starts).
#include "ferry/offload.h"

namespace ferry::detail {
namespace {

thread_local std::atomic<int>* offloads = nullptr;

}  // namespace

std::atomic<int>* offloads_of_this_thread() noexcept { return offloads; }

void set_offloads_of_this_thread(std::atomic<int>* count) noexcept { offloads = count; }

}  // namespace ferry::detail
