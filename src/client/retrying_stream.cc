// Implementation of src/client/retrying_stream.h.
#include "client/retrying_stream.h"

#include <google/protobuf/message_lite.h>

#include <optional>

#include "asio/post.hpp"
#include "asio/redirect_error.hpp"
#include "asio/use_awaitable.hpp"
#include "client/channel_core.h"
#include "client/channel_loop.h"
#include "client/client_call.h"
#include "client/unary_call.h"

namespace ferry::detail {

RetryingStream::RetryingStream(std::shared_ptr<ChannelCore> core, std::string_view method,
                               ClientContext& context, std::size_t buffer_limit,
                               std::unique_ptr<ClientCallObserver> observer, bool unary)
    : executor_(core->executor()),
      core_(std::move(core)),
      method_(method),
      context_(&context),
      observer_(std::move(observer)),
      detachable_observer_(observer_.get()),
      buffer_limit_(buffer_limit),
      unary_(unary),
      backoff_timer_(executor_),
      retried_(executor_) {}

RetryingStream::~RetryingStream() {
  if (!call_) return;
  last_attempt();  // dropped: nothing follows the current attempt
  call_->settle();
  // Deleted by the thread that dropped the stream once the channel's own loop has ended (its
  // last release ran there, inline): the attempt's deletion would be posted to a loop that no
  // longer runs, and leak. Nothing else touches the call by then (the close ended it).
  if (const std::shared_ptr<ChannelLoop>& loop = core_->loop(); loop != nullptr && loop->ended()) {
    call_.reset_inline();
  }
}

void RetryingStream::detach_context() {
  if (detachable_observer_ != nullptr) detachable_observer_->detach_context();
}

void RetryingStream::last_attempt() {
  if (observer_ != nullptr && call_) call_->set_observer(std::move(observer_));
}

void RetryingStream::unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // Deleted from the executor's queue: nothing of this stream's is then below on the stack.
  asio::post(executor_, [this] { delete this; });
}

asio::awaitable<void> RetryingStream::start(const google::protobuf::MessageLite* request) {
  Ref<RetryingStream> hold(this);
  call_ = co_await core_->start_call(method_, *context_, 0, unary_, &route_);
  if (observer_ != nullptr) observer_->attempt_started(/*transparent=*/false);
  // A routed call whose route has no retry policy (and its method none): committed at once,
  // so that its messages are not kept for attempts that will never come.
  if (core_->retry_policy_for(method_, &route_) == nullptr) commit();
  if (request != nullptr) {
    keep(*request, WriteOptions{});
    half_closed_ = true;
    if (!call_->done()) {
      absl::Status written = call_->send_request(*request);
      if (!written.ok()) {
        // Over the send limit: the server would wait for it forever; the call ends with it.
        commit();
        call_->cancel(written);
      }
    }
  }
  // An attempt that could not even start (no connection, fail fast) is retried by the first
  // operation that finds it failed, like one that fails later.
}

void RetryingStream::keep(const google::protobuf::MessageLite& msg, WriteOptions options) {
  if (committed_) return;
  const std::size_t size = msg.ByteSizeLong();
  if (kept_bytes_ + size > buffer_limit_) {
    commit();  // the retry design: a call whose messages outgrow the buffer commits
    return;
  }
  std::unique_ptr<google::protobuf::MessageLite> copy(msg.New());
  copy->CheckTypeAndMergeFrom(msg);
  kept_.push_back(Kept{std::move(copy), options});
  kept_bytes_ += size;
}

void RetryingStream::commit() {
  committed_ = true;
  last_attempt();
  kept_.clear();
  kept_.shrink_to_fit();
  kept_bytes_ = 0;
}

void RetryingStream::check_commit() {
  if (!committed_ && call_->committed()) commit();
}

bool RetryingStream::may_retry(const ClientCall& attempt) const {
  // A cancelled call (by the caller, its operation's slot or the channel) is never retried; and
  // once an operation's slot has cancelled it, awaiting retry() (a coroutine) would throw.
  return !committed_ && !cancelled_ && attempt.done() && !attempt.status().ok() &&
         attempt.status().code() != absl::StatusCode::kCancelled;
}

asio::awaitable<void> RetryingStream::wait_for_retry() {
  while (retrying_) co_await retried_.wait();
}

asio::awaitable<bool> RetryingStream::retry() {
  if (retrying_) {
    const ClientCall* before = call_.get();
    co_await wait_for_retry();
    co_return call_.get() != before && !call_->done();
  }
  retrying_ = true;
  Ref<RetryingStream> hold(this);
  bool started = false;
  while (true) {
    Ref<ClientCall> failed = call_;
    check_commit();
    const absl::Status status = failed->status();
    // A cancelled call (by the caller, its slot or the channel) is never retried.
    if (cancelled_ || status.ok() || status.code() == absl::StatusCode::kCancelled) break;
    if (committed_) {
      // Not retried, but a retryable failure still counts against the throttle (gRFC A6).
      (void)core_->retry_after(method_, status, /*committed=*/true, attempts_ + 1,
                               failed->retry_pushback_ms(), backoff_step_, context_->deadline(),
                               &route_);
      break;
    }
    bool transparent = false;
    if (failed->never_processed() && transparent_ < 8) {
      ++transparent_;
      transparent = true;  // the server never saw it: at once, whatever the policy (see unary_call)
      if (observer_ != nullptr) observer_->attempt_ended(*failed);
    } else {
      ++attempts_;
      std::optional<std::chrono::milliseconds> wait = core_->retry_after(
          method_, status, /*committed=*/false, attempts_, failed->retry_pushback_ms(),
          backoff_step_, context_->deadline(), &route_);
      if (!wait) break;
      // Over: another attempt follows (the observer ignores a second report of it, should
      // a cancellation during the wait make it the last after all).
      if (observer_ != nullptr) observer_->attempt_ended(*failed);
      if (wait->count() > 0) {
        co_await core_->backoff(backoff_timer_, *wait);  // cancel() and the channel's close end it
        if (cancelled_) break;
      }
    }
    Ref<ClientCall> next =
        co_await core_->start_call(method_, *context_, attempts_, unary_, &route_);
    if (single_message_) next->expect_single_message();
    if (observer_ != nullptr) observer_->attempt_started(transparent);
    call_ = next;
    failed.reset();
    if (cancelled_) {
      next->cancel(absl::CancelledError("cancelled by the client"));
      break;
    }
    // Send the kept messages again (an operation waiting meanwhile adds none), then the end.
    for (const Kept& k : kept_) {
      if (next->done()) break;
      if (!(co_await next->write(*k.message, false, k.options)).ok()) break;
    }
    if (!next->done()) {
      if (half_closed_) next->writes_done();
      started = true;
      break;
    }
    // next failed too (could not connect, refused, failed at once): decide again.
  }
  if (!started) last_attempt();
  retrying_ = false;
  retried_.notify_all();
  co_return started;
}

asio::awaitable<absl::Status> RetryingStream::write(const google::protobuf::MessageLite& msg,
                                                    bool last, WriteOptions options) {
  Ref<RetryingStream> hold(this);
  if (retrying_) co_await wait_for_retry();
  check_commit();
  keep(msg, options);
  const bool kept = !committed_;
  if (last) half_closed_ = true;
  Ref<ClientCall> attempt = call_;
  absl::Status status = co_await attempt->write(msg, last, options);
  if (!status.ok() && kept) {
    if (!attempt->done()) {
      // Refused before it was sent (over the send limit); the call goes on without it.
      if (!committed_ && !kept_.empty()) {
        kept_bytes_ -= kept_.back().message->ByteSizeLong();
        kept_.pop_back();
      }
    } else {
      // The attempt failed: msg is kept, so the next attempt sends it again. Another operation
      // may have started that attempt already.
      bool retried = false;
      if (attempt.get() != call_.get()) {
        if (retrying_) co_await wait_for_retry();
        retried = !call_->done();
      } else if (may_retry(*attempt)) {
        retried = co_await retry();
      }
      if (retried) status = absl::OkStatus();
    }
  }
  co_return status;
}

void RetryingStream::writes_done() {
  half_closed_ = true;
  // During a retry, the new attempt's replay ends with the half-close.
  if (!retrying_) call_->writes_done();
}

asio::awaitable<bool> RetryingStream::read(google::protobuf::MessageLite& msg) {
  Ref<RetryingStream> hold(this);
  bool got = false;
  while (true) {
    if (retrying_) co_await wait_for_retry();
    Ref<ClientCall> attempt = call_;
    got = co_await attempt->read(msg);
    if (got) {
      commit();  // a response message: the retry design's commit point
      break;
    }
    while (!attempt->done()) co_await attempt->done_progress();
    const bool replaced = attempt.get() != call_.get();
    const bool retryable = may_retry(*attempt);
    attempt.reset();
    if (replaced) continue;  // another operation retried meanwhile: read from the new attempt
    if (!retryable || !co_await retry()) break;
  }
  co_return got;
}

asio::awaitable<absl::Status> RetryingStream::finish() {
  Ref<RetryingStream> hold(this);
  absl::Status status;
  while (true) {
    if (retrying_) co_await wait_for_retry();
    Ref<ClientCall> attempt = call_;
    while (!attempt->done()) co_await attempt->done_progress();
    status = attempt->status();
    const bool replaced = attempt.get() != call_.get();
    const bool retryable = may_retry(*attempt);
    attempt.reset();
    if (replaced) continue;
    if (status.ok()) {
      core_->on_call_succeeded();
      last_attempt();
      break;
    }
    if (!retryable) last_attempt();  // (retry() says so itself when it starts none)
    if (!retryable || !co_await retry()) break;
  }
  call_->publish_to(*context_);
  call_->settle();  // the status the application takes
  co_return status;
}

asio::awaitable<absl::Status> RetryingStream::finish_with_response(
    google::protobuf::MessageLite& response) {
  Ref<RetryingStream> hold(this);
  writes_done();
  const bool got = co_await read(response);
  absl::Status status = single_response_status(co_await finish(), got);
  co_return status;
}

void RetryingStream::cancel(absl::Status why) {
  cancelled_ = true;
  backoff_timer_.cancel();
  // During a retry, retry() sees cancelled_ and gives the observer to where it ends.
  if (!retrying_) last_attempt();
  if (call_) call_->cancel(std::move(why));
}

void RetryingStream::expect_single_message() {
  single_message_ = true;
  if (call_) call_->expect_single_message();
}

bool RetryingStream::last_message_compressed() const {
  return call_ && call_->last_message_compressed();
}

namespace {

absl::Status no_raw_on_retried_calls() {
  return absl::UnimplementedError(
      "raw messages on a call retried by its method's retry policy: they are not kept for replay");
}

}  // namespace

// A committed call is an ordinary one, whose raw messages go as they are: one whose route (an
// xDS channel's) has no retry policy commits as it starts.
asio::awaitable<absl::Status> RetryingStream::write_raw(const SliceChain& message) {
  if (committed_) {
    Ref<RetryingStream> hold(this);
    if (retrying_) co_await wait_for_retry();
    Ref<ClientCall> attempt = call_;
    co_return co_await attempt->write_raw(message);
  }
  co_return no_raw_on_retried_calls();
}

asio::awaitable<bool> RetryingStream::read_raw(SliceChain& message) {
  if (committed_) {
    Ref<RetryingStream> hold(this);
    if (retrying_) co_await wait_for_retry();
    Ref<ClientCall> attempt = call_;
    co_return co_await attempt->read_raw(message);
  }
  cancel(no_raw_on_retried_calls());
  co_return false;
}

}  // namespace ferry::detail
