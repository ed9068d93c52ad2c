// Implementation of src/client/unary_call.h.
#include "client/unary_call.h"

#include "client/channel_core.h"
#include "client/client_call.h"

namespace ferry::detail {

absl::Status single_response_status(absl::Status status, bool got_response) {
  if (status.ok() && !got_response) {
    return absl::InternalError("the server sent no response message");
  }
  return status;
}

asio::awaitable<ClientCall*> start_with_request(std::shared_ptr<ChannelCore> core,
                                                std::string_view method, ClientContext& context,
                                                const google::protobuf::MessageLite& request) {
  ClientCall* call = co_await core->start_call(method, context);
  if (!call->done()) {
    absl::Status written = call->send_request(request);
    if (!written.ok()) call->cancel(written);
  }
  co_return call;
}

asio::awaitable<absl::Status> unary_call(std::shared_ptr<ChannelCore> core, std::string_view method,
                                         ClientContext& context,
                                         const google::protobuf::MessageLite& request,
                                         google::protobuf::MessageLite& response) {
  // A call the server never processed (refused, or above a GOAWAY's last stream id) is sent
  // again on whatever connection the picker gives next (gRPC's transparent retry): the request
  // is still the caller's, so nothing is buffered for it. Bounded, should a server refuse
  // everything.
  constexpr int kTransparentRetries = 8;
  for (int attempt = 0;; ++attempt) {
    // start_with_request inlined: a unary call is the hot path, and a nested coroutine would
    // cost it one more frame per call.
    ClientCall* call = core->try_start_call(method, context);
    if (call == nullptr) call = co_await core->start_call(method, context);
    call->expect_single_message();
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
    absl::Status status = call->status();
    const bool retry = call->never_processed() && attempt < kTransparentRetries;
    // This coroutine runs on the call's executor, resumed from its queue: nothing of the
    // call's is below it on the stack, so the last reference may delete the call at once.
    call->unref_inline();
    if (!retry) co_return single_response_status(std::move(status), *got);
  }
}

}  // namespace ferry::detail
