// The server's interceptor chain (server layer, private): wraps each registered method's
// handler, once, when the server starts with interceptors, so that a server without any runs
// exactly the code it ran before (no branch on the call path).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "call/recycled_frame.h"
#include "ferry/server_interceptor.h"
#include "ferry/service.h"

namespace ferry::detail {

class ServerInterceptorChain {
 public:
  explicit ServerInterceptorChain(std::vector<std::shared_ptr<ServerInterceptor>> interceptors)
      : interceptors_(std::move(interceptors)) {
    for (const auto& interceptor : interceptors_) timed_ = timed_ || interceptor->uses_duration();
  }

  // handler with the chain around it. The chain must outlive the returned handler.
  MethodHandler wrap(MethodHandler handler, RpcKind kind) const;

 private:
  // One call: the on_start hooks, the handler unless one rejected, then the on_finish hooks.
  // Exceptions from any of them end the call with UNKNOWN, as the handler runners do. Its
  // frame is recycled per thread (call/recycled_frame.h): the call's own frames keep asio's.
  static asio::awaitable<absl::Status> run(RecycledFrame, const ServerInterceptorChain& chain,
                                           ServerContext& ctx, RpcKind kind,
                                           const MethodHandler& handler);

  std::vector<std::shared_ptr<ServerInterceptor>> interceptors_;
  bool timed_ = false;  // an interceptor reads CallOutcome::duration: the chain times calls
};

}  // namespace ferry::detail
