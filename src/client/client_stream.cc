// Implementation of ferry/client_stream.h: forwards to the private ClientCall, hopping to the
// call's executor when awaited from another one.
#include "ferry/client_stream.h"

#include <optional>

#include "asio/co_spawn.hpp"
#include "asio/dispatch.hpp"
#include "asio/post.hpp"
#include "asio/this_coro.hpp"
#include "asio/system_executor.hpp"
#include "asio/use_awaitable.hpp"
#include "client/channel_loop.h"
#include "client/client_call.h"
#include "client/on_executor.h"
#include "client/retrying_stream.h"
#include "client/unary_call.h"

namespace ferry {
namespace {

absl::Status no_call() { return absl::FailedPreconditionError("no call: the stream was moved"); }

}  // namespace

ClientStream& ClientStream::operator=(ClientStream&& other) noexcept {
  if (this != &other) {
    ClientStream dying(std::move(*this));
    call_ = std::exchange(other.call_, nullptr);
    retrying_ = std::exchange(other.retrying_, nullptr);
    loop_ = std::move(other.loop_);
  }
  return *this;
}

template <class Fn>
void ClientStream::on_call_thread(Fn fn) const {
  if (loop_ != nullptr) {
    loop_->post_or_run(std::move(fn));
  } else {
    asio::post(retrying_ != nullptr ? retrying_->executor() : call_->executor(), std::move(fn));
  }
}

bool ClientStream::loop_ended() const { return loop_ != nullptr && loop_->ended(); }

template <class Fn>
void ClientStream::dispatch_on_call_thread(const asio::any_io_executor& executor, Fn fn) const {
  if (loop_ended()) {
    fn();
  } else {
    asio::dispatch(executor, std::move(fn));
  }
}

ClientStream::~ClientStream() {
  // The loop, if it has ended when the release runs: the last reference then deletes at once,
  // here, rather than posting the deletion to a loop that no longer runs. (A raw pointer: the
  // release runs either now or from the loop's own queue, while the loop lives.)
  const detail::ChannelLoop* loop = loop_.get();
  if (retrying_ != nullptr) {
    detail::RetryingStream* r = retrying_;
    on_call_thread([r, loop] {
      r->cancel(absl::CancelledError("the client dropped the call"));  // no-op once finished
      if (loop != nullptr && loop->ended()) {
        r->unref_inline();
      } else {
        r->unref();
      }
    });
    return;
  }
  if (call_ == nullptr) return;
  detail::ClientCall* call = call_;
  // Cancel an unfinished call; on the call's thread, since its state lives there.
  on_call_thread([call, loop] {
    if (!call->done()) call->cancel(absl::CancelledError("the client dropped the call"));
    call->settle();
    if (loop != nullptr && loop->ended()) {
      call->unref_inline();
    } else {
      call->unref();
    }
  });
}

asio::awaitable<absl::Status> ClientStream::write_awaitable(
    const google::protobuf::MessageLite& msg, bool last, WriteOptions options) {
  if (retrying_ != nullptr) {
    detail::RetryingStream* r = retrying_;
    auto make = [r, &msg, last, options] { return r->write(msg, last, options); };
    co_return co_await detail::on_executor(loop_ended() ? co_await asio::this_coro::executor : r->executor(), std::move(make));
  }
  if (call_ == nullptr) co_return no_call();
  detail::ClientCall* call = call_;
  auto make = [call, &msg, last, options] { return call->write(msg, last, options); };
  co_return co_await detail::on_executor(loop_ended() ? co_await asio::this_coro::executor : call->executor(), std::move(make));
}

asio::awaitable<void> ClientStream::writes_done_awaitable() {
  if (call_ == nullptr && retrying_ == nullptr) co_return;
  auto make = [call = call_, r = retrying_] { return writes_done_on(call, r); };
  co_await detail::on_executor(loop_ended() ? co_await asio::this_coro::executor : executor_for_ops(), std::move(make));
}

asio::awaitable<bool> ClientStream::read_awaitable(google::protobuf::MessageLite& msg) {
  if (retrying_ != nullptr) {
    detail::RetryingStream* r = retrying_;
    auto make = [r, &msg] { return r->read(msg); };
    co_return co_await detail::on_executor(loop_ended() ? co_await asio::this_coro::executor : r->executor(), std::move(make));
  }
  if (call_ == nullptr) co_return false;
  detail::ClientCall* call = call_;
  auto make = [call, &msg] { return call->read(msg); };
  co_return co_await detail::on_executor(loop_ended() ? co_await asio::this_coro::executor : call->executor(), std::move(make));
}

bool ClientStream::last_message_compressed() const {
  if (retrying_ != nullptr) return retrying_->last_message_compressed();
  return call_ != nullptr && call_->last_message_compressed();
}

asio::awaitable<absl::Status> ClientStream::finish_awaitable() {
  if (retrying_ != nullptr) {
    detail::RetryingStream* r = retrying_;
    auto make = [r] { return r->finish(); };
    co_return co_await detail::on_executor(loop_ended() ? co_await asio::this_coro::executor : r->executor(), std::move(make));
  }
  if (call_ == nullptr) co_return no_call();
  detail::ClientCall* call = call_;
  auto make = [call] { return call->finish(); };
  co_return co_await detail::on_executor(loop_ended() ? co_await asio::this_coro::executor : call->executor(), std::move(make));
}

asio::awaitable<absl::Status> ClientStream::finish_with_response_awaitable(
    google::protobuf::MessageLite& response) {
  if (call_ == nullptr && retrying_ == nullptr) co_return no_call();
  auto make = [call = call_, r = retrying_, &response] {
    return finish_with_response_on(call, r, response);
  };
  co_return co_await detail::on_executor(loop_ended() ? co_await asio::this_coro::executor : executor_for_ops(), std::move(make));
}

asio::any_io_executor ClientStream::executor_for_ops() const {
  // A moved-from stream has no call and so no executor: its operations fail at once, on the
  // system executor.
  // Nor has a stream whose channel's own loop has ended: its operations complete at once (the
  // close ended the call) on the system executor, as nothing else touches the call any more.
  if ((call_ == nullptr && retrying_ == nullptr) || loop_ended()) return asio::system_executor();
  if (retrying_ != nullptr) return retrying_->executor();
  return call_->executor();
}

asio::awaitable<absl::Status> ClientStream::write_on(detail::ClientCall* call,
                                                     detail::RetryingStream* retrying,
                                                     const google::protobuf::MessageLite& msg,
                                                     bool last, WriteOptions options) {
  if (retrying != nullptr) return retrying->write(msg, last, options);
  if (call == nullptr) return []() -> asio::awaitable<absl::Status> { co_return no_call(); }();
  return call->write(msg, last, options);
}

asio::awaitable<absl::Status> ClientStream::write_raw_awaitable(const SliceChain& message) {
  if (call_ == nullptr && retrying_ == nullptr) co_return no_call();
  auto make = [call = call_, r = retrying_, &message] { return write_raw_on(call, r, message); };
  co_return co_await detail::on_executor(loop_ended() ? co_await asio::this_coro::executor : executor_for_ops(), std::move(make));
}

asio::awaitable<bool> ClientStream::read_raw_awaitable(SliceChain& message) {
  if (call_ == nullptr && retrying_ == nullptr) co_return false;
  auto make = [call = call_, r = retrying_, &message] { return read_raw_on(call, r, message); };
  co_return co_await detail::on_executor(loop_ended() ? co_await asio::this_coro::executor : executor_for_ops(), std::move(make));
}

namespace {

absl::Status no_raw_on_retried_calls() {
  return absl::UnimplementedError(
      "raw messages on a call retried by its method's retry policy: they are not kept for replay");
}

}  // namespace

asio::awaitable<absl::Status> ClientStream::write_raw_on(detail::ClientCall* call,
                                                         detail::RetryingStream* retrying,
                                                         const SliceChain& message) {
  if (retrying != nullptr) {
    return []() -> asio::awaitable<absl::Status> { co_return no_raw_on_retried_calls(); }();
  }
  if (call == nullptr) return []() -> asio::awaitable<absl::Status> { co_return no_call(); }();
  return call->write_raw(message);
}

asio::awaitable<bool> ClientStream::read_raw_on(detail::ClientCall* call,
                                                detail::RetryingStream* retrying,
                                                SliceChain& message) {
  if (retrying != nullptr) {
    retrying->cancel(no_raw_on_retried_calls());
    return []() -> asio::awaitable<bool> { co_return false; }();
  }
  if (call == nullptr) return []() -> asio::awaitable<bool> { co_return false; }();
  return call->read_raw(message);
}

asio::awaitable<void> ClientStream::writes_done_on(detail::ClientCall* call,
                                                   detail::RetryingStream* retrying) {
  if (retrying != nullptr) retrying->writes_done();
  if (call != nullptr) call->writes_done();
  co_return;
}

asio::awaitable<bool> ClientStream::read_on(detail::ClientCall* call,
                                            detail::RetryingStream* retrying,
                                            google::protobuf::MessageLite& msg) {
  if (retrying != nullptr) return retrying->read(msg);
  if (call == nullptr) return []() -> asio::awaitable<bool> { co_return false; }();
  return call->read(msg);
}

asio::awaitable<absl::Status> ClientStream::finish_on(detail::ClientCall* call,
                                                      detail::RetryingStream* retrying) {
  if (retrying != nullptr) return retrying->finish();
  if (call == nullptr) return []() -> asio::awaitable<absl::Status> { co_return no_call(); }();
  return call->finish();
}

asio::awaitable<absl::Status> ClientStream::finish_with_response_on(
    detail::ClientCall* call, detail::RetryingStream* retrying,
    google::protobuf::MessageLite& response) {
  if (retrying != nullptr) co_return co_await retrying->finish_with_response(response);
  if (call == nullptr) co_return no_call();
  // The steps of writes_done, read and finish, inlined: no nested coroutine is awaited after a
  // wait, since asio throws on that once the awaiting coroutine is cancelled.
  call->ref();
  call->writes_done();
  std::optional<bool> got;
  while (!(got = call->next_message(response))) co_await call->inbound_progress();
  while (!call->done()) co_await call->done_progress();
  absl::Status status = detail::single_response_status(call->status(), *got);
  call->unref();
  co_return status;
}

void ClientStream::expect_single_response() {
  if (retrying_ != nullptr) {
    detail::RetryingStream* r = retrying_;
    r->ref();
    dispatch_on_call_thread(r->executor(), [r] {
      r->expect_single_message();
      r->unref();
    });
    return;
  }
  if (call_ == nullptr) return;
  detail::ClientCall* call = call_;
  call->ref();
  dispatch_on_call_thread(call->executor(), [call] {
    call->expect_single_message();
    call->unref();
  });
}

void ClientStream::cancel() {
  if (retrying_ != nullptr) {
    detail::RetryingStream* r = retrying_;
    r->ref();
    dispatch_on_call_thread(r->executor(), [r] {
      r->cancel(absl::CancelledError("cancelled by the client"));
      r->unref();
    });
    return;
  }
  if (call_ == nullptr) return;
  detail::ClientCall* call = call_;
  call->ref();
  dispatch_on_call_thread(call->executor(), [call] {
    call->cancel(absl::CancelledError("cancelled by the client"));
    call->unref();
  });
}

}  // namespace ferry
