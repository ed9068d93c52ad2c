// Implementation of src/client/client_interceptors.h.
#include "client/client_interceptors.h"

#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "call/recycled_frame.h"
#include "client/channel_core.h"
#include "client/client_call.h"
#include "client/unary_call.h"
#include "ferry/client_interceptor.h"

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

// The on_start decisions made without a coroutine (ClientInterceptor::start_now), in order from
// *entered: true once they all ran or one rejected (status), false at an interceptor whose
// on_start must run (*entered still at it). *entered counts those that ran.
bool start_hooks_now(const ChannelCore& core, ClientContext& context, const CallInfo& info,
                     std::size_t* entered, absl::Status& status) {
  const auto& interceptors = core.interceptors();
  while (*entered < interceptors.size() && status.ok()) {
    std::optional<absl::Status> now;
    try {
      now = interceptors[*entered]->start_now(context, info);
    } catch (...) {
      ++*entered;
      status = thrown();
      return true;
    }
    if (!now.has_value()) return false;
    ++*entered;
    status = *std::move(now);
  }
  return true;
}

// The rest of the on_start hooks, from an interceptor whose on_start must run (*entered), until
// one rejects. The chain's coroutines take recycled frames (call/recycled_frame.h): the call's
// own keep asio's.
asio::awaitable<absl::Status> start_hooks(RecycledFrame, const ChannelCore& core,
                                          ClientContext& context, const CallInfo& info,
                                          std::size_t* entered) {
  const auto& interceptors = core.interceptors();
  absl::Status status;
  while (true) {
    try {
      status = co_await interceptors[(*entered)++]->on_start(context, info);
    } catch (...) {
      status = thrown();
    }
    if (start_hooks_now(core, context, info, entered, status)) co_return status;
  }
}

// A clock reading when the channel's interceptors read durations, else none (the epoch).
Clock::time_point now_if(bool timed) { return timed ? Clock::now() : Clock::time_point(); }

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

// What one attempt (or the last attempt of a call) carried.
CallOutcome outcome_of(const ClientCall& call, Clock::duration duration) {
  CallOutcome outcome;
  outcome.status = call.status();
  outcome.duration = duration;
  outcome.messages_sent = call.messages_sent();
  outcome.messages_received = call.messages_received();
  outcome.bytes_sent = call.message_bytes_sent();
  outcome.bytes_received = call.message_bytes_received();
  return outcome;
}

// A call's hooks after on_start: the attempt hooks as each attempt starts and ends, then the
// on_finish hooks, of the interceptors whose on_start ran. A stream's call (or its last attempt)
// owns it; a unary call keeps it in its frame. own_method: keep a copy of method (a stream's
// caller need not keep its string after open()); a unary call's lasts as long as its frame, and
// a copy would be an allocation per call.
class InterceptedCall final : public ClientCallObserver {
 public:
  InterceptedCall(std::shared_ptr<ChannelCore> core, ClientContext* context,
                  std::string_view method, bool own_method, RpcKind kind, Clock::time_point started,
                  std::size_t entered)
      : core_(std::move(core)),
        context_(context),
        owned_method_(own_method ? method : std::string_view()),
        method_(own_method ? std::string_view(owned_method_) : method),
        kind_(kind),
        timed_(core_->interceptors_use_duration()),
        started_(started),
        entered_(entered) {}

  void attempt_started(bool transparent) override {
    std::lock_guard<std::mutex> lock(context_mutex_);
    attempt_started_ = now_if(timed_);
    if (attempts_ > 0) {
      // A retry (gRFC A96): counted by kind, and the time since the last attempt ended is delay.
      ++(transparent ? transparent_retries_ : retries_);
      if (!attempt_open_) retry_delay_ += attempt_started_ - attempt_ended_;
    }
    ++attempts_;
    attempt_open_ = true;
    const CallInfo info{method_, kind_, core_->canonical_target(), retries_, transparent};
    const auto& interceptors = core_->interceptors();
    for (std::size_t i = 0; i < entered_; ++i) {
      try {
        interceptors[i]->on_attempt_start(*context_, info);
      } catch (...) {
        // An observer's failure must not take the call down.
      }
    }
  }

  void attempt_ended(ClientCall& attempt) override {
    std::lock_guard<std::mutex> lock(context_mutex_);
    end_attempt(attempt);
  }

  void on_call_done(ClientCall& call) override {
    std::lock_guard<std::mutex> lock(context_mutex_);
    end_attempt(call);  // the last attempt, unless a retry that never started reported it
    CallOutcome outcome = outcome_of(call, now_if(timed_) - started_);
    outcome.retries = retries_;
    outcome.transparent_retries = transparent_retries_;
    outcome.retry_delay = retry_delay_;
    finish_locked(outcome);
  }

  void detach_context() override {
    std::lock_guard<std::mutex> lock(context_mutex_);
    if (own_context_ != nullptr) return;
    // What the hooks still to come see: the settings the application gave, and what the call
    // publishes into it from here on.
    own_context_ = std::make_unique<ClientContext>(*context_);
    context_ = own_context_.get();
  }

  // The on_finish hooks (once): with the call's outcome, or a rejection's.
  void finish(const CallOutcome& outcome) {
    std::lock_guard<std::mutex> lock(context_mutex_);
    finish_locked(outcome);
  }

 private:
  // With context_mutex_ held.
  void end_attempt(ClientCall& attempt) {
    // The server's metadata is in the context for the hooks (ferry/interceptor.h).
    attempt.publish_to(*context_);
    if (!attempt_open_) return;
    attempt_open_ = false;
    attempt_ended_ = now_if(timed_);
    const CallOutcome outcome = outcome_of(attempt, attempt_ended_ - attempt_started_);
    const CallInfo info{method_, kind_, core_->canonical_target()};
    const auto& interceptors = core_->interceptors();
    for (std::size_t i = entered_; i > 0; --i) {
      try {
        interceptors[i - 1]->on_attempt_end(*context_, info, outcome);
      } catch (...) {
      }
    }
  }
  void finish_locked(const CallOutcome& outcome) {
    finish_hooks(*core_, *context_, CallInfo{method_, kind_, core_->canonical_target()},
                 std::exchange(entered_, 0), outcome);
  }

  std::shared_ptr<ChannelCore> core_;  // keeps the interceptors
  // The hooks run on the call's thread and detach_context() on the application's; the lock
  // keeps the application's context alive for a hook that has begun.
  std::mutex context_mutex_;
  ClientContext* context_;  // the application's, or own_context_ once detached
  std::unique_ptr<ClientContext> own_context_;
  std::string owned_method_;
  std::string_view method_;  // owned_method_, or the unary caller's
  RpcKind kind_;
  const bool timed_;           // an interceptor reads durations: the clock is read for them
  Clock::time_point started_;  // the epoch when !timed_, as the attempts' times
  Clock::time_point attempt_started_;
  Clock::time_point attempt_ended_;
  bool attempt_open_ = false;
  int attempts_ = 0;
  int retries_ = 0;
  int transparent_retries_ = 0;
  Clock::duration retry_delay_{};
  std::size_t entered_;
};

asio::awaitable<absl::Status> unary_with_hooks(RecycledFrame, std::shared_ptr<ChannelCore> core,
                                               std::string_view method, ClientContext& context,
                                               const google::protobuf::MessageLite& request,
                                               google::protobuf::MessageLite& response) {
  const auto started = now_if(core->interceptors_use_duration());
  std::size_t entered = 0;
  absl::Status status;
  const CallInfo info{method, RpcKind::kUnary, core->canonical_target()};
  if (!start_hooks_now(*core, context, info, &entered, status)) {
    status = co_await start_hooks(RecycledFrame{}, *core, context, info, &entered);
  }
  InterceptedCall hooks(core, &context, method, /*own_method=*/false, RpcKind::kUnary, started,
                        entered);
  if (!status.ok()) {
    CallOutcome rejected;
    rejected.status = status;
    rejected.duration = now_if(core->interceptors_use_duration()) - started;
    hooks.finish(rejected);
    co_return status;
  }
  // unary_call tells hooks of each attempt, and of the last one (on_call_done) before it returns.
  co_return co_await unary_call(core, method, context, request, response, &hooks);
}

asio::awaitable<StreamHooks> stream_hooks(RecycledFrame, std::shared_ptr<ChannelCore> core,
                                          std::string_view method, ClientContext& context,
                                          RpcKind kind) {
  const auto started = now_if(core->interceptors_use_duration());
  std::size_t entered = 0;
  StreamHooks hooks;
  const CallInfo info{method, kind, core->canonical_target()};
  if (!start_hooks_now(*core, context, info, &entered, hooks.status)) {
    hooks.status = co_await start_hooks(RecycledFrame{}, *core, context, info, &entered);
  }
  hooks.observer = std::make_unique<InterceptedCall>(core, &context, method, /*own_method=*/true,
                                                     kind, started, entered);
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
