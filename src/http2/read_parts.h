// The parts one read is answered in (http2 layer, private): the counting behind
// WritePolicy::calls_per_write (ferry/write_policy.h). The connection parses a read part by part:
// once enough calls have ended in the current part, nghttp2's DATA callback (which comes with
// the next call's body) pauses the parse; the connection then runs the coroutines the part woke,
// flushes what they answered, and parses on.
#pragma once

#include <cstdint>

namespace ferry::http2 {

class ReadParts {
 public:
  // calls_per_part 0: a read is one part (one write per read).
  explicit ReadParts(std::uint32_t calls_per_part) : calls_per_part_(calls_per_part) {}

  // A new part starts (a read, or the rest of one after a flush).
  void start_part() { ended_ = 0; }
  // The peer ended a stream (END_STREAM): a request on a server, a response on a client.
  void on_call_ended() { ++ended_; }
  // Whether the part is full: the parse stops after the DATA chunk at hand.
  bool full() const { return calls_per_part_ != 0 && ended_ >= calls_per_part_; }

 private:
  std::uint32_t calls_per_part_;
  std::uint32_t ended_ = 0;
};

}  // namespace ferry::http2
