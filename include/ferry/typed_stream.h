// ferry/typed_stream.h: the typed views of a call's message streams (call layer, public), from one
// template. A view holds the type-erased stream (a client's ClientStream or
// BlockingClientStream, by value; a server handler's ServerContext, by reference) and forwards
// each operation to it with the message types fixed, so a view adds no code per message type.
// Which operations a view has follows from what it sends and receives; the names users write
// are the aliases in client_stream.h, blocking_stream.h and server_stream.h:
//
//   view                                  Stream                 Out        In
//   ClientReader<Res>                     ClientStream           -          Res
//   ClientWriter<Req>                     ClientStream           Req        - (one response)
//   ClientReaderWriter<Req, Res>          ClientStream           Req        Res
//   BlockingClientReader/Writer/...       BlockingClientStream   as above
//   ServerReader<Req>                     ServerContext&         -          Req
//   ServerWriter<Res>                     ServerContext&         Res        -
//   ServerReaderWriter<Req, Res>          ServerContext&         Res        Req
//
// The operations take the stream's own trailing arguments (WriteOptions, a completion token for
// the asynchronous streams) and return what it returns; see the stream's header for each.
#pragma once

#include <type_traits>
#include <utility>

#include "ferry/compression.h"

namespace ferry {

class SliceChain;

namespace detail {
// Stands in for a view's absent direction in the signatures of the operations it does not have
// (a parameter of type void& cannot even be declared); those are constrained away.
struct NoMessage {};
template <class T>
using MessageOrNone = std::conditional_t<std::is_void_v<T>, NoMessage, T>;
}  // namespace detail

// Out: the message type the view writes, In: the one it reads; void for a direction it lacks.
template <class Stream, class Out, class In>
class TypedStream {
  // A client's stream (it can cancel its call); a server's context cannot, and has no finish.
  static constexpr bool kClient = requires(std::remove_reference_t<Stream> & s) { s.cancel(); };
  // A client's writer with nothing to read: the call has one response, which finish() takes.
  static constexpr bool kSingleResponse = kClient && std::is_void_v<In> && !std::is_void_v<Out>;

 public:
  explicit TypedStream(Stream stream) : stream_(static_cast<Stream&&>(stream)) {
    if constexpr (kSingleResponse) stream_.expect_single_response();
  }

  // Sends a message (the stream's write; token: none for a blocking stream, else one completion
  // token, asio::use_awaitable when there is none).
  template <class... Token>
    requires(!std::is_void_v<Out>)
  auto write(const detail::MessageOrNone<Out>& msg, WriteOptions options = {}, Token&&... token) {
    return stream_.write(msg, options, std::forward<Token>(token)...);
  }
  // Sends a serialized message by reference (the stream's write_raw).
  template <class... Args>
    requires(!std::is_void_v<Out>)
  auto write_raw(const SliceChain& message, Args&&... args) {
    return stream_.write_raw(message, std::forward<Args>(args)...);
  }
  // A client half-closes its side (the stream's writes_done).
  template <class... Args>
    requires(kClient && !std::is_void_v<Out>)
  auto writes_done(Args&&... args) { return stream_.writes_done(std::forward<Args>(args)...); }

  // The next message; false at the end of the peer's stream or once the call is over.
  template <class... Args>
    requires(!std::is_void_v<In>)
  auto read(detail::MessageOrNone<In>& msg, Args&&... args) {
    return stream_.read(msg, std::forward<Args>(args)...);
  }
  // The next message's serialized bytes, by reference (the stream's read_raw).
  template <class... Args>
    requires(!std::is_void_v<In>)
  auto read_raw(SliceChain& message, Args&&... args) {
    return stream_.read_raw(message, std::forward<Args>(args)...);
  }
  // Whether the message read last arrived compressed.
  bool last_message_compressed() const requires(!std::is_void_v<In>) {
    return stream_.last_message_compressed();
  }

  // A client's end of the call: waits for its status (the stream's finish).
  template <class... Args>
    requires(kClient && !kSingleResponse)
  auto finish(Args&&... args) { return stream_.finish(std::forward<Args>(args)...); }
  // A client-streaming call's end: half-closes, waits for the single response and the status
  // (the stream's finish_with_response).
  template <class Response, class... Args>
    requires(kSingleResponse)
  auto finish(Response& response, Args&&... args) {
    return stream_.finish_with_response(response, std::forward<Args>(args)...);
  }
  // A client's cancel: the call ends with CANCELLED (RST_STREAM); does not wait.
  void cancel() requires kClient { stream_.cancel(); }

 private:
  Stream stream_;
};

}  // namespace ferry
