// Implementation of ferry/client_stream.h: forwards to the private StreamCall (a plain call or a
// retrying one), hopping to the call's executor when awaited from another one.
#include "ferry/client_stream.h"

#include "asio/dispatch.hpp"
#include "asio/post.hpp"
#include "asio/system_executor.hpp"
#include "client/channel_loop.h"
#include "client/on_executor.h"
#include "client/stream_call.h"
#include "common/ref.h"

namespace ferry {
namespace {

absl::Status no_call() { return absl::FailedPreconditionError("no call: the stream was moved"); }

template <class T>
asio::awaitable<T> ready(T value) {
  co_return value;
}

// Awaits make() (an operation of call's) on the call's thread, from the awaiting coroutine's;
// once the channel's own loop has ended, right here (the close ended the call, and nothing else
// touches it any more).
template <class Make>
auto on_call_thread(detail::StreamCall* call, detail::ChannelLoop* loop, Make make)
    -> decltype(make()) {
  if (loop != nullptr) co_return co_await detail::on_loop(*loop, call->executor(), std::move(make));
  co_return co_await detail::on_executor(call->executor(), std::move(make));
}

asio::awaitable<void> writes_done_now(detail::StreamCall* call) {
  call->writes_done();
  co_return;
}

}  // namespace

ClientStream& ClientStream::operator=(ClientStream&& other) noexcept {
  if (this != &other) {
    ClientStream dying(std::move(*this));
    call_ = std::exchange(other.call_, nullptr);
    loop_ = std::move(other.loop_);
  }
  return *this;
}

ClientStream::~ClientStream() {
  if (call_ == nullptr) return;
  // Dropped: cancel an unfinished call, on the call's thread since its state lives there. The
  // loop, if it has ended when the release runs: the last reference then deletes at once, here,
  // rather than posting the deletion to a loop that no longer runs. (A raw pointer: the release
  // runs either now or from the loop's own queue, while the loop lives.)
  call_->detach_context();
  const detail::ChannelLoop* loop = loop_.get();
  auto release = [call = call_, loop] {
    call->drop();
    if (loop != nullptr && loop->ended()) {
      call->unref_inline();
    } else {
      call->unref();
    }
  };
  if (loop_ != nullptr) {
    loop_->post_or_run(std::move(release));
  } else {
    asio::post(call_->executor(), std::move(release));
  }
}

asio::any_io_executor ClientStream::executor_for_ops() const {
  // On a channel's own loop, the operation starts right here (the system executor runs it
  // inline) and hops to the loop under the loop's lock (detail::on_loop): spawned onto the
  // loop's executor after a check that it had not ended, it could land after the loop's final
  // poll and never complete (the blocking API then waited for ever).
  if (call_ == nullptr || loop_ != nullptr) return asio::system_executor();
  return call_->executor();
}

bool ClientStream::last_message_compressed() const {
  return call_ != nullptr && call_->last_message_compressed();
}

asio::awaitable<absl::Status> ClientStream::write_op(Target t,
                                                     const google::protobuf::MessageLite& msg,
                                                     bool last, WriteOptions options) {
  if (t.call == nullptr) return ready(no_call());
  return on_call_thread(t.call, t.loop,
                        [c = t.call, &msg, last, options] { return c->write(msg, last, options); });
}

asio::awaitable<void> ClientStream::writes_done_op(Target t) {
  if (t.call == nullptr) return []() -> asio::awaitable<void> { co_return; }();
  return on_call_thread(t.call, t.loop, [c = t.call] { return writes_done_now(c); });
}

asio::awaitable<bool> ClientStream::read_op(Target t, google::protobuf::MessageLite& msg) {
  if (t.call == nullptr) return ready(false);
  return on_call_thread(t.call, t.loop, [c = t.call, &msg] { return c->read(msg); });
}

asio::awaitable<absl::Status> ClientStream::write_raw_op(Target t, const SliceChain& message) {
  if (t.call == nullptr) return ready(no_call());
  return on_call_thread(t.call, t.loop, [c = t.call, &message] { return c->write_raw(message); });
}

asio::awaitable<bool> ClientStream::read_raw_op(Target t, SliceChain& message) {
  if (t.call == nullptr) return ready(false);
  return on_call_thread(t.call, t.loop, [c = t.call, &message] { return c->read_raw(message); });
}

asio::awaitable<absl::Status> ClientStream::finish_op(Target t) {
  if (t.call == nullptr) return ready(no_call());
  return on_call_thread(t.call, t.loop, [c = t.call] { return c->finish(); });
}

asio::awaitable<absl::Status> ClientStream::finish_with_response_op(
    Target t, google::protobuf::MessageLite& response) {
  if (t.call == nullptr) return ready(no_call());
  return on_call_thread(t.call, t.loop,
                        [c = t.call, &response] { return c->finish_with_response(response); });
}

namespace {

// Runs fn(call) on the call's thread, at once when already there, holding a reference meanwhile.
// On a channel's own loop through ChannelLoop::post_or_run: posted under the lock the loop's end
// takes, or run here once it has ended (nothing else runs it then); a dispatch after a check that
// the loop had not ended could land after its final poll, and the cancel was lost.
template <class Fn>
void now_on_call_thread(detail::StreamCall* call, detail::ChannelLoop* loop, Fn fn) {
  if (call == nullptr) return;
  auto run = [ref = detail::Ref<detail::StreamCall>(call), fn] { fn(*ref); };
  if (loop == nullptr) {
    asio::dispatch(call->executor(), std::move(run));
    return;
  }
  const auto* io = call->executor().target<asio::io_context::executor_type>();
  if (io != nullptr && io->running_in_this_thread()) {
    run();
  } else {
    loop->post_or_run(std::move(run));
  }
}

}  // namespace

void ClientStream::expect_single_response() {
  now_on_call_thread(call_, loop_.get(),
                     [](detail::StreamCall& call) { call.expect_single_message(); });
}

void ClientStream::cancel() {
  now_on_call_thread(call_, loop_.get(), [](detail::StreamCall& call) {
    call.cancel(absl::CancelledError("cancelled by the client"));
  });
}

}  // namespace ferry
