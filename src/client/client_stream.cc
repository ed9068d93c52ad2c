// Implementation of ferry/client_stream.h: forwards to the private ClientCall, hopping to the
// call's executor when awaited from another one.
#include "ferry/client_stream.h"

#include "asio/co_spawn.hpp"
#include "asio/use_awaitable.hpp"
#include "client/client_call.h"
#include "client/on_executor.h"

namespace ferry {
namespace {

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

asio::awaitable<absl::Status> ClientStream::write(const google::protobuf::MessageLite& msg,
                                                  WriteOptions options) {
  if (call_ == nullptr) co_return no_call();
  detail::ClientCall* call = call_;
  auto make = [call, &msg, options] { return call->write(msg, false, options); };
  co_return co_await detail::on_executor(call->executor(), std::move(make));
}

asio::awaitable<absl::Status> ClientStream::write_last(const google::protobuf::MessageLite& msg,
                                                       WriteOptions options) {
  if (call_ == nullptr) co_return no_call();
  detail::ClientCall* call = call_;
  auto make = [call, &msg, options] { return call->write(msg, true, options); };
  co_return co_await detail::on_executor(call->executor(), std::move(make));
}

asio::awaitable<void> ClientStream::writes_done() {
  if (call_ == nullptr) co_return;
  detail::ClientCall* call = call_;
  auto make = [call]() -> asio::awaitable<void> {
    call->writes_done();
    co_return;
  };
  co_await detail::on_executor(call->executor(), std::move(make));
}

asio::awaitable<bool> ClientStream::read(google::protobuf::MessageLite& msg) {
  if (call_ == nullptr) co_return false;
  detail::ClientCall* call = call_;
  auto make = [call, &msg] { return call->read(msg); };
  co_return co_await detail::on_executor(call->executor(), std::move(make));
}

bool ClientStream::last_message_compressed() const {
  return call_ != nullptr && call_->last_message_compressed();
}

asio::awaitable<absl::Status> ClientStream::finish() {
  if (call_ == nullptr) co_return no_call();
  detail::ClientCall* call = call_;
  auto make = [call] { return call->finish(); };
  co_return co_await detail::on_executor(call->executor(), std::move(make));
}

void ClientStream::expect_single_response() {
  if (call_ == nullptr) return;
  detail::ClientCall* call = call_;
  call->ref();
  asio::dispatch(call->executor(), [call] {
    call->expect_single_message();
    call->unref();
  });
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
