// Implementation of ferry/blocking_stream.h: each operation is ClientStream's, run to its end by
// the blocking adapter (client/blocking.h).
#include "ferry/blocking_stream.h"

#include <utility>

#include "client/blocking.h"

namespace ferry {
namespace {

absl::Status would_deadlock() {
  return absl::FailedPreconditionError(
      "a blocking stream operation on the channel's own thread would deadlock");
}

}  // namespace

absl::Status BlockingClientStream::write(const google::protobuf::MessageLite& msg,
                                         WriteOptions options) {
  return detail::wait_blocking(
      executor_, [&](auto token) { return stream_.write(msg, options, token); }, would_deadlock);
}

absl::Status BlockingClientStream::write_last(const google::protobuf::MessageLite& msg,
                                              WriteOptions options) {
  return detail::wait_blocking(
      executor_, [&](auto token) { return stream_.write_last(msg, options, token); },
      would_deadlock);
}

void BlockingClientStream::writes_done() {
  detail::wait_blocking(
      executor_, [&](auto token) { return stream_.writes_done(token); }, [] {});
}

bool BlockingClientStream::read(google::protobuf::MessageLite& msg) {
  return detail::wait_blocking(
      executor_, [&](auto token) { return stream_.read(msg, token); }, [] { return false; });
}

absl::Status BlockingClientStream::finish() {
  return detail::wait_blocking(
      executor_, [&](auto token) { return stream_.finish(token); }, would_deadlock);
}

absl::Status BlockingClientStream::finish_with_response(google::protobuf::MessageLite& response) {
  return detail::wait_blocking(
      executor_, [&](auto token) { return stream_.finish_with_response(response, token); },
      would_deadlock);
}

}  // namespace ferry
