// ferry/detail/recycled_message.h: the request and response messages of the typed handlers
// (service.h; internal, not part of ferry's API). Two homes, chosen per message type and thread:
//   - the small messages of a type whose Clear() frees parts of it (a singular submessage, a
//     oneof's string or submessage) live on the call's protobuf Arena, whose first block is
//     inside the call's own (recycled) storage: nothing is allocated for the message, its
//     submessages or its repeated fields, nor for strings up to the standard library's inline
//     capacity (15 bytes). A cleared heap message would free those parts and the next parse
//     would allocate them again: a realistic message (grpc_bench's complex_proto) cost 17
//     allocations per call that way;
//   - the other messages are kept per thread and per type between calls and cleared for the
//     next one, so that their strings and repeated fields keep their capacity (a 16-byte bytes
//     field already needs a heap buffer, which an arena message would allocate every call). A
//     warm server then parses a large bytes field into memory it already holds, where a message per
//     call (or an arena string, which is a std::string) malloc'd and freed it every time (and glibc
//     answered each free of the I/O thread's arena top with MADV_DONTNEED: page faults per call).
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "google/protobuf/arena.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace ferry::detail {

// Whether Message's Clear() frees parts of it, which the next parse allocates again: a singular
// submessage, or a string or submessage in a oneof. Read once from the descriptor; a lite message
// (no descriptor) counts as not.
template <class Message>
bool clear_frees_parts() {
  if constexpr (std::is_base_of_v<google::protobuf::Message, Message>) {
    static const bool frees = [] {
      using google::protobuf::FieldDescriptor;
      const google::protobuf::Descriptor* type = Message::descriptor();
      for (int i = 0; i < type->field_count(); ++i) {
        const FieldDescriptor* field = type->field(i);
        const bool message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
        const bool string = field->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
        if (message && !field->is_repeated()) return true;
        if ((message || string) && field->real_containing_oneof() != nullptr) return true;
      }
      return false;
    }();
    return frees;
  } else {
    return false;
  }
}

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

  // The serialized size up to which a message goes on the call's arena: the request and the
  // response then fit the arena's first block (2 KiB in the call) with room for their objects.
  static constexpr std::size_t kArenaMaxBytes = 256;

  // Whether the next message of this type should live on the call's arena: its Clear() would
  // free parts of it, and no message of the type has been larger than kArenaMaxBytes lately on
  // this thread.
  static bool fits_arena() {
    return clear_frees_parts<Message>() && local().recent_size_ <= kArenaMaxBytes;
  }

  // Records a message's serialized size. recent_size_ follows the largest recent size and decays
  // by 1/64 per message, so a burst of large messages moves the type off the arena at once and
  // back some hundreds of small messages later.
  static void note_size(std::size_t size) noexcept { local().note(size); }

  // Takes back a message from take(); retained is what it was known to hold then.
  static void give_back(Message* msg, std::size_t retained) noexcept {
    RecycledMessages& c = local();
    const std::size_t size = msg->ByteSizeLong();
    c.note(size);
    retained = std::max(retained, size);
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

  void note(std::size_t size) noexcept {
    recent_size_ = std::max(size, recent_size_ - recent_size_ / 64);
  }

  static RecycledMessages& local() {
    thread_local RecycledMessages cache;
    return cache;
  }

  Entry entries_[kMaxCached];
  std::size_t count_ = 0;
  std::size_t retained_ = 0;
  std::size_t recent_size_ = 0;  // see note_size
  bool dead_ = false;
};

// One message for the scope of a handler call: on the call's arena when its type's Clear() frees
// parts and its messages are small (RecycledMessages::fits_arena), else from RecycledMessages and
// given back (cleared) on destruction, on whichever thread that happens. arena must outlive it (the
// call's does).
template <class Message>
class RecycledMessage {
 public:
  explicit RecycledMessage(google::protobuf::Arena* arena = nullptr) {
    if (arena != nullptr && RecycledMessages<Message>::fits_arena()) {
      msg_ = google::protobuf::Arena::CreateMessage<Message>(arena);
      on_arena_ = true;
      return;
    }
    auto [msg, retained] = RecycledMessages<Message>::take();
    msg_ = msg;
    retained_ = retained;
  }
  ~RecycledMessage() {
    if (on_arena_) {
      RecycledMessages<Message>::note_size(msg_->ByteSizeLong());  // the arena frees it
    } else {
      RecycledMessages<Message>::give_back(msg_, retained_);
    }
  }
  RecycledMessage(const RecycledMessage&) = delete;
  RecycledMessage& operator=(const RecycledMessage&) = delete;

  Message& operator*() const { return *msg_; }
  Message* get() const { return msg_; }

 private:
  Message* msg_;
  std::size_t retained_ = 0;
  bool on_arena_ = false;
};

}  // namespace ferry::detail
