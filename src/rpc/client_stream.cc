// Implementation of ferry/client_stream.h: forwards to the private ClientCall, hopping to the
// call's executor when awaited from another one.
#include "ferry/client_stream.h"

#include "asio/co_spawn.hpp"
#include "asio/use_awaitable.hpp"
#include "rpc/client_call.h"

namespace ferry {
namespace {

// Runs make() (which returns an awaitable) on the call's executor and resumes the caller on its
// own. On the same thread it is a plain co_await.
template <class Make>
auto on_call_executor(detail::ClientCall* call, Make make) -> decltype(make()) {
  const asio::any_io_executor& ex = call->executor();
  if (ex.target<asio::io_context::executor_type>() != nullptr &&
      ex.target<asio::io_context::executor_type>()->running_in_this_thread()) {
    co_return co_await make();
  }
  co_return co_await asio::co_spawn(ex, make(), asio::use_awaitable);
}

absl::Status no_call() { return absl::FailedPreconditionError("no call: the stream was moved"); }

}  // namespace

ClientStream& ClientStream::operator=(ClientStream&& other) noexcept {
  if (this != &other) {
    ClientStream dying(std::move(*this));
    call_ = std::exchange(other.call_, nullptr);
  }
  return *this;
}

ClientStream::~ClientStream() {
  if (call_ == nullptr) return;
  detail::ClientCall* call = call_;
  // Cancel an unfinished call; on the call's thread, since its state lives there.
  asio::post(call->executor(), [call] {
    if (!call->done()) call->cancel(absl::CancelledError("the client dropped the call"));
    call->unref();
  });
}

asio::awaitable<absl::Status> ClientStream::write(const google::protobuf::MessageLite& msg) {
  if (call_ == nullptr) co_return no_call();
  detail::ClientCall* call = call_;
  co_return co_await on_call_executor(call, [call, &msg] { return call->write(msg, false); });
}

asio::awaitable<absl::Status> ClientStream::write_last(const google::protobuf::MessageLite& msg) {
  if (call_ == nullptr) co_return no_call();
  detail::ClientCall* call = call_;
  co_return co_await on_call_executor(call, [call, &msg] { return call->write(msg, true); });
}

asio::awaitable<void> ClientStream::writes_done() {
  if (call_ == nullptr) co_return;
  detail::ClientCall* call = call_;
  co_await on_call_executor(call, [call]() -> asio::awaitable<void> {
    call->writes_done();
    co_return;
  });
}

asio::awaitable<bool> ClientStream::read(google::protobuf::MessageLite& msg) {
  if (call_ == nullptr) co_return false;
  detail::ClientCall* call = call_;
  co_return co_await on_call_executor(call, [call, &msg] { return call->read(msg); });
}

asio::awaitable<absl::Status> ClientStream::finish() {
  if (call_ == nullptr) co_return no_call();
  detail::ClientCall* call = call_;
  co_return co_await on_call_executor(call, [call] { return call->finish(); });
}

void ClientStream::cancel() {
  if (call_ == nullptr) return;
  detail::ClientCall* call = call_;
  call->ref();
  asio::dispatch(call->executor(), [call] {
    call->cancel(absl::CancelledError("cancelled by the client"));
    call->unref();
  });
}

}  // namespace ferry
