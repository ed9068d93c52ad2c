// The allocator ferry gives nghttp2 (http2 layer, private). nghttp2 allocates per stream and per
// frame (stream objects, outbound items, copied header fields: about seven allocations a unary
// call); this recycles them through per-thread free lists of power-of-two size classes, so a warm
// connection makes no heap allocation per call. Each connection runs on one thread, but memory
// may be freed on any thread: it then joins that thread's lists.
#pragma once

#include <nghttp2/nghttp2.h>

namespace ferry::http2 {

// The nghttp2_mem to pass to nghttp2_session_{client,server}_new3. Static storage.
nghttp2_mem* session_memory();

// Gives the calling thread's idle blocks (up to 256 KiB a size class, kept for the next
// sessions' allocations) back to malloc. For the end of a burst: kept, they would pin the heap
// pages around them. Costs a free per block; the next allocations go to malloc again.
void release_idle_session_memory();

}  // namespace ferry::http2
