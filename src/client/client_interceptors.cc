// Implementation of src/client/client_interceptors.h.
#include "client/client_interceptors.h"

#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "call/recycled_frame.h"
#include "client/channel_core.h"
#include "client/client_call.h"
#include "client/unary_call.h"
#include "ferry/interceptor.h"

namespace ferry::detail {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status thrown() {
  try {
    throw;
  } catch (const std::exception& e) {
    return absl::UnknownError(absl::StrCat("interceptor on_start threw: ", e.what()));
  } catch (...) {
    return absl::UnknownError("interceptor on_start threw an exception");
  }
}

// Runs the on_start hooks in order until one rejects; *entered counts those that ran. The
// chain's coroutines take recycled frames (call/recycled_frame.h): the call's own keep asio's.
asio::awaitable<absl::Status> start_hooks(RecycledFrame, const ChannelCore& core,
                                          ClientContext& context,
                                          const CallInfo& info, std::size_t* entered) {
  const auto& interceptors = core.interceptors();
  absl::Status status;
  while (*entered < interceptors.size() && status.ok()) {
    try {
      status = co_await interceptors[(*entered)++]->on_start(context, info);
    } catch (...) {
      status = thrown();
    }
  }
  co_return status;
}

// The on_finish hooks of the entered interceptors, last first.
void finish_hooks(const ChannelCore& core, ClientContext& context, const CallInfo& info,
                  std::size_t entered, const CallOutcome& outcome) {
  const auto& interceptors = core.interceptors();
  while (entered > 0) {
    try {
      interceptors[--entered]->on_finish(context, info, outcome);
    } catch (...) {
      // An observer's failure must not take the call down.
    }
  }
}

// A streaming call's on_finish hooks, run by the call when it is done.
class InterceptedStream final : public ClientCallObserver {
 public:
  InterceptedStream(std::shared_ptr<ChannelCore> core, ClientContext* context,
                    std::string_view method, RpcKind kind, Clock::time_point started,
                    std::size_t entered)
      : core_(std::move(core)),
        context_(context),
        method_(method),
        kind_(kind),
        started_(started),
        entered_(entered) {}

  void on_call_done(const ClientCall& call) override {
    CallOutcome outcome;
    outcome.status = call.status();
    outcome.duration = Clock::now() - started_;
    outcome.messages_sent = call.messages_sent();
    outcome.messages_received = call.messages_received();
    outcome.bytes_sent = call.message_bytes_sent();
    outcome.bytes_received = call.message_bytes_received();
    finish_hooks(*core_, *context_, CallInfo{method_, kind_}, std::exchange(entered_, 0),
                 outcome);
  }

 private:
  std::shared_ptr<ChannelCore> core_;  // keeps the interceptors
  ClientContext* context_;
  std::string method_;  // the caller's string need not outlive open()
  RpcKind kind_;
  Clock::time_point started_;
  std::size_t entered_;
};

asio::awaitable<absl::Status> unary_with_hooks(RecycledFrame, std::shared_ptr<ChannelCore> core,
                                               std::string_view method, ClientContext& context,
                                               const google::protobuf::MessageLite& request,
                                               google::protobuf::MessageLite& response) {
  const auto started = Clock::now();
  const CallInfo info{method, RpcKind::kUnary};
  std::size_t entered = 0;
  absl::Status status = co_await start_hooks(RecycledFrame{}, *core, context, info, &entered);
  CallOutcome outcome;
  if (status.ok()) {
    AttemptTraffic traffic;
    status = co_await unary_call(core, method, context, request, response, &traffic);
    outcome.messages_sent = traffic.messages_sent;
    outcome.messages_received = traffic.messages_received;
    outcome.bytes_sent = traffic.bytes_sent;
    outcome.bytes_received = traffic.bytes_received;
  }
  outcome.status = status;
  outcome.duration = Clock::now() - started;
  finish_hooks(*core, context, info, entered, outcome);
  co_return status;
}

asio::awaitable<StreamHooks> stream_hooks(RecycledFrame, std::shared_ptr<ChannelCore> core,
                                          std::string_view method, ClientContext& context,
                                          RpcKind kind) {
  const auto started = Clock::now();
  std::size_t entered = 0;
  StreamHooks hooks;
  hooks.status =
      co_await start_hooks(RecycledFrame{}, *core, context, CallInfo{method, kind}, &entered);
  hooks.observer =
      std::make_unique<InterceptedStream>(core, &context, method, kind, started, entered);
  co_return hooks;
}

}  // namespace

asio::awaitable<absl::Status> intercepted_unary_call(std::shared_ptr<ChannelCore> core,
                                                     std::string_view method,
                                                     ClientContext& context,
                                                     const google::protobuf::MessageLite& request,
                                                     google::protobuf::MessageLite& response) {
  return unary_with_hooks(RecycledFrame{}, std::move(core), method, context, request, response);
}

asio::awaitable<StreamHooks> start_stream_hooks(std::shared_ptr<ChannelCore> core,
                                                std::string_view method, ClientContext& context,
                                                RpcKind kind) {
  return stream_hooks(RecycledFrame{}, std::move(core), method, context, kind);
}

}  // namespace ferry::detail
