// A streaming call retried by its method's retry policy (client layer, private), after gRPC's
// retry design (A6): until the call commits, every request message is also kept (a copy, up to
// ChannelOptions::retry_buffer_per_call bytes), so that an attempt that fails with a retryable
// status is followed by another to which the kept messages are sent again (and the half-close);
// the caller's operations carry on over the new attempt. The call commits once response
// headers or a response message arrive, or the kept messages outgrow the bound; then it is an
// ordinary call (the copies are dropped). Calls whose method has no policy never come here.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "asio/steady_timer.hpp"
#include "call/event.h"
#include "client/call_router.h"
#include "client/stream_call.h"
#include "common/ref.h"
#include "ferry/client_context.h"
#include "ferry/compression.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry::detail {

class ChannelCore;
class ClientCall;
class ClientCallObserver;

class RetryingStream final : public StreamCall {
 public:
  // On the channel's executor. The creator holds one reference (ClientStream adopts it).
  // observer (the interceptors' on_finish hooks; may be null) is given to the last attempt, the
  // one whose status is the call's, once no further attempt can follow.
  // unary: the call is unary (RpcKind::kUnary), which the Connect protocol sends unenveloped.
  RetryingStream(std::shared_ptr<ChannelCore> core, std::string_view method, ClientContext& context,
                 std::size_t buffer_limit, std::unique_ptr<ClientCallObserver> observer = nullptr,
                 bool unary = false);
  ~RetryingStream();
  RetryingStream(const RetryingStream&) = delete;
  RetryingStream& operator=(const RetryingStream&) = delete;

  // StreamCall: from any thread; the last unref deletes it (later, on its executor).
  void ref() override { refs_.fetch_add(1, std::memory_order_relaxed); }
  void unref() override;
  void unref_inline() override {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  const asio::any_io_executor& executor() const override { return executor_; }

  // Starts the first attempt; request (a server-streaming call's one message), when not null,
  // is kept and sent with the half-close. Everything below runs on the executor.
  asio::awaitable<void> start(const google::protobuf::MessageLite* request);

  // ClientStream's operations (their documentation is there), over the current attempt.
  asio::awaitable<absl::Status> write(const google::protobuf::MessageLite& msg, bool last,
                                      WriteOptions options) override;
  void writes_done() override;
  asio::awaitable<bool> read(google::protobuf::MessageLite& msg) override;
  asio::awaitable<absl::Status> finish() override;
  asio::awaitable<absl::Status> finish_with_response(
      google::protobuf::MessageLite& response) override;
  void cancel(absl::Status why) override;
  void expect_single_message() override;
  bool last_message_compressed() const override;
  // Raw messages are not kept for replay: until the call commits, write_raw fails with
  // UNIMPLEMENTED, and read_raw ends the call with that status and returns false; once it has
  // committed (at its start when its route has no retry policy), they go through as on any call.
  asio::awaitable<absl::Status> write_raw(const SliceChain& message) override;
  asio::awaitable<bool> read_raw(SliceChain& message) override;
  void drop() override { cancel(absl::CancelledError("the client dropped the call")); }
  void detach_context() override;

 private:
  struct Kept {
    std::unique_ptr<google::protobuf::MessageLite> message;
    WriteOptions options;
  };

  // Keeps a copy of msg unless committed; over the bound, commits instead.
  void keep(const google::protobuf::MessageLite& msg, WriteOptions options);
  // The call is committed: no more attempts, the kept messages go.
  void commit();
  // Whether the current attempt shows a reason to commit (response headers).
  void check_commit();
  // The current attempt is done and failed: starts further attempts (with the policy's waits)
  // until one is under way with the kept messages sent, true, or no attempt is allowed, false.
  // Another operation finding a failure meanwhile waits for this one's outcome.
  asio::awaitable<bool> retry();
  // Whether attempt (the current one) ended in a way that retry() may follow: done, failed, not
  // cancelled, the call not committed.
  bool may_retry(const ClientCall& attempt) const;
  // Waits while a retry is under way.
  asio::awaitable<void> wait_for_retry();
  // No attempt follows the current one (committed, cancelled, succeeded, out of attempts, or
  // dropped): it gets the observer, which it tells when its status is final.
  void last_attempt();

  std::atomic<int> refs_{1};
  asio::any_io_executor executor_;
  std::shared_ptr<ChannelCore> core_;
  std::string method_;
  ClientContext* context_;
  Ref<ClientCall> call_;                           // the current attempt
  std::unique_ptr<ClientCallObserver> observer_;   // until the last attempt takes it
  ClientCallObserver* const detachable_observer_;  // observer_ as given, for detach_context()
  std::vector<Kept> kept_;
  std::size_t kept_bytes_ = 0;
  std::size_t buffer_limit_;
  bool committed_ = false;
  bool half_closed_ = false;
  bool unary_ = false;
  bool single_message_ = false;
  bool cancelled_ = false;
  bool retrying_ = false;
  int attempts_ = 0;     // failed attempts counted by the retry policy
  int transparent_ = 0;  // transparent retries (never processed by the server)
  int backoff_step_ = 0;
  CallRoute route_;  // on a routing resolver's channel: chosen by the first attempt, kept
  asio::steady_timer backoff_timer_;
  Signal retried_;  // a retry ended
};

}  // namespace ferry::detail
