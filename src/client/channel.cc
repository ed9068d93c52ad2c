// Implementation of ferry/channel.h: the channel's thread, and the unary, streaming and
// blocking entry points (connections: client/channel_core.h; the unary call:
// client/unary_call.h).
#include "ferry/channel.h"

#include "asio/co_spawn.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/post.hpp"
#include "client/blocking.h"
#include "client/channel_core.h"
#include "client/channel_loop.h"
#include "client/client_call.h"
#include "client/client_interceptors.h"
#include "client/on_executor.h"
#include "client/retrying_stream.h"
#include "client/unary_call.h"

namespace ferry {
namespace {

// The unary call, with the channel's interceptors when it has any (the one branch the feature
// costs a channel without them).
asio::awaitable<absl::Status> unary_entry(std::shared_ptr<detail::ChannelCore> core,
                                          std::string_view method, ClientContext& context,
                                          const google::protobuf::MessageLite& request,
                                          google::protobuf::MessageLite& response) {
  if (!core->interceptors().empty()) {
    return detail::intercepted_unary_call(std::move(core), method, context, request, response);
  }
  return detail::unary_call(std::move(core), method, context, request, response);
}

}  // namespace

Channel::Channel(asio::io_context& io, std::string target, ChannelOptions options)
    : core_(std::make_shared<detail::ChannelCore>(io.get_executor(), std::move(target),
                                                  std::move(options))) {}

Channel::Channel(std::string target, ChannelOptions options)
    : own_loop_(std::make_shared<detail::ChannelLoop>()),
      core_(std::make_shared<detail::ChannelCore>(own_loop_->io().get_executor(), std::move(target),
                                                  std::move(options))) {
  core_->set_loop(own_loop_);
  // Until ~Channel stops it, right after closing the connections (detail::ChannelLoop::run).
  own_thread_ = std::thread([loop = own_loop_] { loop->run(); });
}

Channel::~Channel() {
  auto core = core_;
  if (own_loop_ != nullptr) {
    asio::post(core->executor(), [core] { core->close(); });
    asio::post(core->executor(), [loop = own_loop_] { loop->stop(); });
    if (own_thread_.get_id() == std::this_thread::get_id()) {
      // Destroyed on its own thread (say by a completion handler holding the last reference to
      // it): that thread cannot join itself. It runs what was just posted, ends its loop as it
      // would have, and then goes, holding the loop (and through the posts, the core) until
      // then.
      own_thread_.detach();
    } else {
      own_thread_.join();
    }
  } else {
    asio::post(core->executor(), [core] { core->close(); });
  }
}

asio::io_context::executor_type Channel::executor() const { return core_->executor(); }

ConnectivityState Channel::state(bool try_to_connect) {
  const ConnectivityState s = core_->state();
  if (try_to_connect && s == ConnectivityState::kIdle) {
    asio::post(core_->executor(), [core = core_] { core->exit_idle(); });
  }
  return s;
}

asio::awaitable<bool> Channel::wait_for_state_change_on(
    std::shared_ptr<detail::ChannelCore> core, ConnectivityState last_observed,
    std::chrono::steady_clock::time_point deadline) {
  co_return co_await core->wait_for_state_change(last_observed, deadline);
}

// Not a coroutine itself: every coroutine frame a call holds while it waits is an allocation
// once more calls are in flight than asio's per-thread frame cache holds (two). On the channel's
// thread a unary call holds one frame, unary_call's.
asio::awaitable<absl::Status> Channel::call_awaitable(std::shared_ptr<detail::ChannelCore> core,
                                                      std::string_view method,
                                                      ClientContext& context,
                                                      const google::protobuf::MessageLite& request,
                                                      google::protobuf::MessageLite& response) {
  if (core->executor().running_in_this_thread()) {
    return unary_entry(std::move(core), method, context, request, response);
  }
  // Everything by value or by reference to what the caller keeps alive while it awaits: this
  // function's own parameters are gone by then.
  const auto executor = core->executor();
  auto make = [core = std::move(core), method, &context, &request, &response] {
    return unary_entry(core, method, context, request, response);
  };
  return detail::on_executor(executor, std::move(make));
}

asio::awaitable<ClientStream> Channel::open_awaitable(std::shared_ptr<detail::ChannelCore> core,
                                                      std::string_view method,
                                                      ClientContext& context,
                                                      const google::protobuf::MessageLite* request,
                                                      RpcKind kind) {
  // named: see call()
  auto make = [&, core] { return open_on(core, method, context, request, kind); };
  co_return co_await detail::on_executor(core->executor(), std::move(make));
}

asio::awaitable<ClientStream> Channel::open_on(std::shared_ptr<detail::ChannelCore> core,
                                               std::string_view method, ClientContext& context,
                                               const google::protobuf::MessageLite* request,
                                               RpcKind kind) {
  // The interceptors' on_finish hooks, given to the call (or its last attempt) once it is open.
  std::unique_ptr<detail::ClientCallObserver> observer;
  if (!core->interceptors().empty()) {
    detail::StreamHooks hooks = co_await detail::start_stream_hooks(core, method, context, kind);
    observer = std::move(hooks.observer);
    if (!hooks.status.ok()) {
      // Rejected: a call that is over already, whose observer is told at once.
      auto* rejected = new detail::ClientCall(core->executor(), &context, std::move(hooks.status));
      rejected->set_observer(std::move(observer));
      co_return ClientStream(rejected, core->loop());
    }
  }
  if (core->retries_streams(method)) {
    // A retry policy for the method: the call keeps its request messages for further attempts.
    // Held by stream from here: should the start throw (asio does so when the operation's slot
    // has cancelled it), the stream's destructor releases it.
    auto* retrying =
        new detail::RetryingStream(core, method, context, core->retry_buffer_per_call(),
                                   std::move(observer), kind == RpcKind::kUnary);
    ClientStream stream(retrying, core->loop());
    co_await retrying->start(request);
    co_return stream;
  }
  detail::Ref<detail::ClientCall> call =
      co_await core->start_call(method, context, 0, kind == RpcKind::kUnary);
  // A call without a retry policy is its one attempt; the attempt starts before its request
  // goes, so that the interceptors' attempt (A72's Attempt span) sees the request as its first
  // message, as a unary call's and a retried stream's do.
  if (observer != nullptr) observer->attempt_started(false);
  if (request != nullptr && !call->done()) {
    // A request that cannot be sent (over the send limit) ends the call with the write's
    // status: the server would otherwise wait for it forever.
    absl::Status written = call->send_request(*request);
    if (!written.ok()) call->cancel(written);
  }
  // Told at once when the call is over already (it could not start).
  if (observer != nullptr) call->set_observer(std::move(observer));
  co_return ClientStream(call.release(), core->loop());
}

BlockingClientStream Channel::open_blocking(std::string_view method, ClientContext& context) {
  return open_blocking(method, RpcKind::kBidiStreaming, context);
}

BlockingClientStream Channel::open_blocking(std::string_view method, RpcKind kind,
                                            ClientContext& context) {
  return BlockingClientStream(
      executor(), detail::wait_blocking(
                      executor(), [&](auto token) { return open(method, kind, context, token); },
                      [] { return ClientStream(); }));
}

BlockingClientStream Channel::open_blocking(std::string_view method, ClientContext& context,
                                            const google::protobuf::MessageLite& request) {
  return BlockingClientStream(
      executor(), detail::wait_blocking(
                      executor(), [&](auto token) { return open(method, context, request, token); },
                      [] { return ClientStream(); }));
}

absl::Status Channel::call_blocking(std::string_view method, ClientContext& context,
                                    const google::protobuf::MessageLite& request,
                                    google::protobuf::MessageLite& response) {
  return detail::wait_blocking(
      executor(), [&](auto token) { return call(method, context, request, response, token); },
      [] {
        return absl::FailedPreconditionError(
            "call_blocking on the channel's own thread would deadlock");
      });
}

}  // namespace ferry
