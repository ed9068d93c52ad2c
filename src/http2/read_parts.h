// The parts one read is answered in (http2 layer, private): the counting behind
// ferry/write_policy.h. ReadParts (calls_per_write): the connection parses a read part by part;
// once enough calls have ended in the current part, the session's parse pauses at the next
// call's DATA; the connection then runs the coroutines the part woke,
// flushes what they answered, and parses on. AnswerBytes (bytes_per_write): while those
// coroutines run, the connection writes what they queued once it is large, between two calls.
#pragma once

#include <cstddef>
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

class AnswerBytes {
 public:
  // per_write 0: off (the woken calls' answers leave together, after the last).
  explicit AnswerBytes(std::size_t per_write) : per_write_(per_write) {}

  bool on() const { return per_write_ != 0; }
  // Counting starts (the woken calls start running, or a write just took what was due) from
  // the connection's bytes queued and not yet framed by the session; what the peer's windows hold
  // back stays queued and is not counted again.
  void start(std::size_t queued) { mark_ = queued; }
  // Whether what was queued since start() is to be written now.
  bool due(std::size_t queued) const { return queued >= mark_ + per_write_; }

 private:
  std::size_t per_write_;
  std::size_t mark_ = 0;
};

}  // namespace ferry::http2
