// ferry/detail/recycled_message.h: the request and response messages of the typed handlers
// (service.h; internal, not part of ferry's API), kept per thread and per message type between
// calls and cleared for the next one, so that their strings and repeated fields keep their
// capacity. A warm server then parses a large bytes field into memory it already holds, where a
// message per call malloc'd and freed it every time (and glibc answered each free of the I/O
// thread's arena top with MADV_DONTNEED: page faults per call).
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>

namespace ferry::detail {

// The calling thread's cleared messages of type Message. Bounded in count and in the bytes they
// may hold (each message counts the largest serialized size it has had, which approximates the
// capacity it keeps), so that a burst of large messages does not stay resident: a message over
// the budget is deleted instead of kept. Freed when the thread exits.
template <class Message>
class RecycledMessages {
 public:
  static constexpr std::size_t kMaxCached = 64;
  static constexpr std::size_t kMaxRetainedBytes = std::size_t{8} << 20;

  // A cleared message and the bytes it is known to hold; new (0 bytes) when none is cached.
  static std::pair<Message*, std::size_t> take() {
    RecycledMessages& c = local();
    if (c.count_ == 0) return {new Message, 0};
    Entry e = c.entries_[--c.count_];
    c.retained_ -= e.retained;
    return {e.msg, e.retained};
  }

  // Takes back a message from take(); retained is what it was known to hold then.
  static void give_back(Message* msg, std::size_t retained) noexcept {
    RecycledMessages& c = local();
    retained = std::max(retained, msg->ByteSizeLong());
    if (c.dead_ || c.count_ == kMaxCached || retained > kMaxRetainedBytes - c.retained_) {
      delete msg;
      return;
    }
    msg->Clear();
    c.entries_[c.count_++] = Entry{msg, retained};
    c.retained_ += retained;
  }

  ~RecycledMessages() {
    while (count_ > 0) delete entries_[--count_].msg;
    dead_ = true;  // a message given back later in this thread's exit is deleted
  }

 private:
  struct Entry {
    Message* msg;
    std::size_t retained;
  };

  static RecycledMessages& local() {
    thread_local RecycledMessages cache;
    return cache;
  }

  Entry entries_[kMaxCached];
  std::size_t count_ = 0;
  std::size_t retained_ = 0;
  bool dead_ = false;
};

// One message from RecycledMessages for the scope of a handler call; given back (cleared) on
// destruction, on whichever thread that happens.
template <class Message>
class RecycledMessage {
 public:
  RecycledMessage() {
    auto [msg, retained] = RecycledMessages<Message>::take();
    msg_ = msg;
    retained_ = retained;
  }
  ~RecycledMessage() { RecycledMessages<Message>::give_back(msg_, retained_); }
  RecycledMessage(const RecycledMessage&) = delete;
  RecycledMessage& operator=(const RecycledMessage&) = delete;

  Message& operator*() const { return *msg_; }
  Message* get() const { return msg_; }

 private:
  Message* msg_;
  std::size_t retained_;
};

}  // namespace ferry::detail
