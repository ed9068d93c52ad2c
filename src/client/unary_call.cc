// Implementation of src/client/unary_call.h.
#include "client/unary_call.h"

#include <optional>

#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/use_awaitable.hpp"
#include "client/channel_core.h"
#include "client/client_call.h"

namespace ferry::detail {

absl::Status single_response_status(absl::Status status, bool got_response) {
  if (status.ok() && !got_response) {
    // A response cardinality violation: UNIMPLEMENTED, as gRPC's status code table says.
    return absl::UnimplementedError("the server sent no response message");
  }
  return status;
}

namespace {

// A retry's wait: its own coroutine, so that the unary call's frame (the hot path's, recycled
// per thread by size) does not carry a timer.
// The channel's close() ends it early (ChannelCore::backoff).
asio::awaitable<void> retry_wait(ChannelCore& core, std::chrono::milliseconds wait) {
  asio::steady_timer timer(core.executor());
  co_await core.backoff(timer, wait);
}

}  // namespace

asio::awaitable<absl::Status> unary_call(std::shared_ptr<ChannelCore> core, std::string_view method,
                                         ClientContext& context,
                                         const google::protobuf::MessageLite& request,
                                         google::protobuf::MessageLite& response,
                                         ClientCallObserver* observer) {
  // Two kinds of retry, neither of which buffers anything: the request stays the caller's until
  // the call completes. A call the server never processed (refused, or above a GOAWAY's last
  // stream id) is sent again at once on whatever connection the picker gives next (gRPC's
  // transparent retry; bounded, should a server refuse everything). A failed attempt is retried
  // as the method's RetryPolicy says (client/retry.h), with grpc-previous-rpc-attempts.
  constexpr int kTransparentRetries = 8;
  int transparent = 0;
  int attempts = 0;  // completed attempts that count for the retry policy
  int backoff_step = 0;
  bool transparent_retry = false;  // the attempt about to start is a transparent retry
  // On a routing resolver's channel: the call's route and cluster, chosen by its first attempt
  // and kept by the others (gRFC A31); untouched on other channels.
  CallRoute route;
  while (true) {
    // Inline: a unary call is the hot path, and a nested coroutine would cost it one more frame
    // per call.
    Ref<ClientCall> call = core->try_start_call(method, context, attempts, /*unary=*/true, &route);
    if (!call) call = co_await core->start_call(method, context, attempts, /*unary=*/true, &route);
    call->expect_single_message();
    if (observer != nullptr) observer->attempt_started(transparent_retry);
    if (!call->done()) {
      absl::Status written = call->send_request(request);
      if (!written.ok()) call->cancel(written);  // e.g. over the send limit: the write's status
    }
    // call->read(response) inlined too: its frame would stay alive while the call waits for
    // the response, a third frame per call in flight where asio's per-thread cache recycles two.
    std::optional<bool> got = false;
    if (!call->done()) {  // done already: it failed to start or to send, and nothing will come
      while (!(got = call->next_message(response))) co_await call->inbound_progress();
    }
    // call->finish() inlined as well: once this coroutine is cancelled (say the losing side of
    // `||`), asio throws on awaiting a nested coroutine, and the call would never be released.
    while (!call->done()) co_await call->done_progress();
    call->publish_to(context);
    absl::Status status = call->status();
    const bool never_processed = call->never_processed();
    const bool committed = call->committed() || *got;
    const std::int64_t pushback_ms = call->retry_pushback_ms();
    std::optional<std::chrono::milliseconds> wait;
    bool again = false;
    if (status.ok()) {
      core->on_call_succeeded();
    } else if (never_processed && transparent < kTransparentRetries) {
      ++transparent;
      again = true;
      transparent_retry = true;
    } else {
      ++attempts;
      wait = core->retry_after(method, status, committed, attempts, pushback_ms, backoff_step,
                               context.deadline(), &route);
      again = wait.has_value();
      transparent_retry = false;
    }
    if (observer != nullptr) {
      if (again) {
        observer->attempt_ended(*call);
      } else {
        observer->on_call_done(*call);
      }
    }
    // This coroutine runs on the call's executor, resumed from its queue: nothing of the
    // call's is below it on the stack, so the last reference may delete the call at once.
    call.reset_inline();
    if (!again) co_return single_response_status(std::move(status), *got);
    if (!wait) continue;  // transparent: at once
    if (wait->count() > 0) co_await retry_wait(*core, *wait);
  }
}

}  // namespace ferry::detail
