// ferry/channel.h: a client's channel to a gRPC service (client layer, public). It resolves its
// target lazily on the first call (ferry/resolver.h) into addresses, keeps one HTTP/2 connection
// per address it uses (a subchannel), and spreads calls over them by its load-balancing policy
// (pick_first or round_robin, ferry/connectivity.h). A lost or draining (GOAWAY) connection stops
// taking calls at once and is reconnected with gRPC's back-off. A call that finds no connection
// fails with UNAVAILABLE once every address failed, or waits (ClientContext::wait_for_ready).
//
//   asio::io_context io;
//   ferry::Channel channel(io, "127.0.0.1:50051");
//   ferry::ClientContext ctx;
//   ctx.set_timeout(std::chrono::seconds(1));
//   absl::Status s = co_await channel.call("/helloworld.Greeter/SayHello", ctx, request, reply);
//
// Threading: the connection and its calls live on the channel's executor (a single-threaded
// io_context). A Channel constructed without one runs its own I/O thread; its blocking API may
// then be used from any other thread. A Channel on the caller's io_context keeps it busy (the
// connection's read is always pending), so io_context::run() returns only after the channel is
// destroyed; drive it with run_one()/poll() or destroy the channel when done.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "asio/io_context.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/blocking_stream.h"
#include "ferry/client_context.h"
#include "ferry/client_stream.h"
#include "ferry/completion.h"
#include "ferry/connection_policy.h"
#include "ferry/connectivity.h"
#include "ferry/limits.h"
#include "ferry/method_config.h"
#include "ferry/resolver.h"
#include "ferry/retry.h"
#include "ferry/rpc_kind.h"
#include "ferry/tls.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry {

class ClientInterceptor;  // ferry/interceptor.h

// The protocol a channel's calls speak to the server (docs/protocols.md).
enum class ChannelProtocol {
  kGrpc,     // gRPC: application/grpc, trailers as HTTP/2 trailers
  kGrpcWeb,  // gRPC-Web: application/grpc-web+proto, trailers as the body's last frame
  // The Connect protocol: a unary call is a plain POST of the bare message (application/proto),
  // or a GET when its context asks (ClientContext::set_http_get); streams are enveloped
  // (application/connect+proto) and end with an end-of-stream message.
  kConnect,
};

// The HTTP version a channel's calls go over: HTTP/2 (one connection, every call a stream of
// it), or HTTP/1.1 for proxies and servers that pass only HTTP/1.1 (a connection per call in
// flight, kept alive between calls; over TLS, ALPN http/1.1). HTTP/1.1 carries gRPC-Web and
// Connect, and client and bidi streams half-duplex only (the response follows the request's
// end); gRPC itself needs HTTP/2's trailers, and its calls fail with UNIMPLEMENTED over HTTP/1.1.
enum class ChannelHttpVersion {
  kHttp2,
  kHttp1,
};

// How a channel's messages are encoded: protobuf's binary form, or its JSON mapping (protobuf's
// util/json_util; only messages with descriptors, not LITE_RUNTIME ones, can be sent in JSON).
enum class ChannelCodec {
  kProto,
  kJson,
};

// Limits (MessageLimits, ConnectionLimits: ferry/limits.h) are on by default.
struct ChannelOptions : MessageLimits, ConnectionLimits {
  // gRPC, gRPC-Web (for a server or proxy that answers gRPC-Web only) or Connect. Same calls,
  // same API.
  ChannelProtocol protocol = ChannelProtocol::kGrpc;
  // Binary protobuf, or JSON (application/grpc+json, application/json...).
  ChannelCodec codec = ChannelCodec::kProto;
  // HTTP/2, or HTTP/1.1 (with protocol kGrpcWeb or kConnect).
  ChannelHttpVersion http_version = ChannelHttpVersion::kHttp2;
  // HTTP/1.1 only: at most this many connections to each server (one call in flight on each;
  // further calls wait for one to be free). Browsers keep 6 per host.
  std::size_t max_http1_connections = 100;
  // How long establishing a connection may take at least (gRPC's minimum connect timeout; an
  // attempt may take the current back-off delay when that is longer).
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(20);
  // The delays between failed connection attempts to one address.
  BackoffOptions backoff;
  // pick_first or round_robin.
  LoadBalancingPolicy load_balancing = LoadBalancingPolicy::kPickFirst;
  // The resolver; null uses the built-in one the target's scheme names (then the target only
  // provides the default :authority).
  std::shared_ptr<Resolver> resolver;
  // Re-resolution (after a connection was lost or every address failed) comes at most this
  // often.
  std::chrono::milliseconds min_resolve_interval = std::chrono::seconds(30);
  // Re-resolution every period even while every connection is fine, so that replicas added
  // behind a DNS name get calls without waiting for a connection to fail (still at most once per
  // min_resolve_interval). 0 (the default, as in gRPC): only when a connection is lost or fails.
  std::chrono::milliseconds resolve_period = std::chrono::milliseconds(0);
  // Per-method settings (ferry/method_config.h: timeout, wait_for_ready, retry policy, message
  // limits), keyed "/package.Service/Method", "/package.Service/" for a whole service; methods
  // without an entry use method_config (empty by default: no timeout, fail fast, no retries,
  // the limits above). The most specific entry applies whole. Looked up per call only when some
  // entry is set.
  std::map<std::string, MethodConfig, std::less<>> method_configs;
  MethodConfig method_config;
  // Stops retries while most calls fail (ferry/retry.h); off by default.
  RetryThrottling retry_throttling;
  // A streaming call with a retry policy keeps copies of its request messages until it commits
  // (response headers or a message came), to send them again on a retry; past this many bytes
  // (protobuf size) per call it commits early and is not retried. gRPC's per-RPC default.
  std::size_t retry_buffer_per_call = 256 * 1024;
  // :authority; empty means the target's host:port.
  std::string authority;
  std::string user_agent = "ferry/0.1";
  // Keepalive PINGs on the channel's connections (off by default; a server may refuse PINGs
  // more frequent than its policy allows: grpc-go's and ferry's default minimum is 5 minutes).
  KeepaliveOptions keepalive;
  // TLS (ferry/tls.h): null connects in cleartext (h2c). The target string is the same either
  // way.
  std::shared_ptr<ChannelCredentials> credentials;
  // Interceptors around every call (ferry/interceptor.h), in order. Default: none.
  std::vector<std::shared_ptr<ClientInterceptor>> interceptors;
};

namespace detail {
class ChannelLoop;
class ChannelCore;
}  // namespace detail

class Channel {
 public:
  // target, as gRPC's naming document writes it: "host:port", "host" (port 443),
  // "[v6addr]:port", "dns:///host:port", "dns:host:port", "ipv4:addr:port", "ipv6:[addr]:port",
  // "unix:/path", "unix:///path", "unix-abstract:name".
  // A target that does not parse fails every call with UNAVAILABLE, saying why.
  // "dns://dnsserver[:port]/host:port" (a chosen DNS server) parses but fails every call with
  // UNIMPLEMENTED: the built-in resolver asks the system's servers (getaddrinfo) and cannot be
  // pointed at another; use "dns:///host:port" or ChannelOptions::resolver.
  Channel(asio::io_context& io, std::string target, ChannelOptions options = {});
  // Runs its own I/O thread.
  explicit Channel(std::string target, ChannelOptions options = {});
  // Closes the connection (calls still running fail, those waiting in a retry's back-off
  // included) and joins the own thread, if any. On that thread itself (the last reference
  // dropped by a completion handler), the thread is not joined: it ends by itself once it has
  // run what the close set off.
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  asio::io_context::executor_type executor() const;

  // The channel's connectivity state, from any thread. try_to_connect: an IDLE channel starts
  // resolving and connecting (as a call would).
  ConnectivityState state(bool try_to_connect = false);
  // Completes when the state is no longer last_observed (true) or at deadline (false).
  // Completion signature: void(bool).
  template <class Token = const asio::use_awaitable_t<>&>
  auto wait_for_state_change(ConnectivityState last_observed,
                             std::chrono::steady_clock::time_point deadline,
                             Token&& token = asio::use_awaitable) {
    return detail::initiate_on<bool>(
        executor(),
        [core = core_, last_observed, deadline] {
          return wait_for_state_change_on(core, last_observed, deadline);
        },
        std::forward<Token>(token));
  }

  // The asynchronous operations below are asio initiating functions (ferry/completion.h): the
  // last argument is a completion token, asio::use_awaitable by default. The method name, the
  // context and the messages must outlive the operation.
  //
  // Per-Operation Cancellation: terminal and partial cancellation through the completion
  // handler's cancellation slot cancel the call (RST_STREAM(CANCEL) to the server); it completes
  // with CANCELLED. Awaited with `co_await (channel.call(...) || timer.async_wait(...))`, the
  // timer's win cancels the call this way.

  // A unary call: sends request, receives response. method: "/package.Service/Method".
  // Completion signature: void(absl::Status). With asio::use_awaitable, no heap allocation and
  // one coroutine frame per call when awaited on the channel's executor.
  template <class Token = const asio::use_awaitable_t<>&>
  auto call(std::string_view method, ClientContext& context,
            const google::protobuf::MessageLite& request, google::protobuf::MessageLite& response,
            Token&& token = asio::use_awaitable) {
    return detail::async_operation<absl::Status>(
        std::forward<Token>(token), executor(),
        [core = core_, method, &context, &request, &response]() mutable {
          return call_awaitable(std::move(core), method, context, request, response);
        });
  }

  // Starts a streaming call (any kind). Failures (cannot connect, deadline already passed)
  // surface as the status from finish(); reads return false and writes fail before that.
  // Completion signature: void(ClientStream).
  template <class Token = const asio::use_awaitable_t<>&>
    requires(!std::is_convertible_v<Token&, const google::protobuf::MessageLite&>)
  auto open(std::string_view method, ClientContext& context, Token&& token = asio::use_awaitable) {
    return open(method, RpcKind::kBidiStreaming, context, std::forward<Token>(token));
  }
  // The same, saying what kind of method it is (kClientStreaming or kBidiStreaming; the
  // generated stubs pass theirs), which the interceptors see (CallInfo::kind): open() without a
  // kind reports kBidiStreaming. Nothing else differs.
  template <class Token = const asio::use_awaitable_t<>&>
  auto open(std::string_view method, RpcKind kind, ClientContext& context,
            Token&& token = asio::use_awaitable) {
    return detail::async_operation<ClientStream>(
        std::forward<Token>(token), executor(), [core = core_, method, kind, &context] {
          return open_awaitable(core, method, context, nullptr, kind);
        });
  }
  // Starts a server-streaming call: opens it, sends request and half-closes. A request that
  // cannot be sent (e.g. over the send limit) ends the call with that status.
  // Completion signature: void(ClientStream).
  template <class Token = const asio::use_awaitable_t<>&>
  auto open(std::string_view method, ClientContext& context,
            const google::protobuf::MessageLite& request, Token&& token = asio::use_awaitable) {
    return detail::async_operation<ClientStream>(
        std::forward<Token>(token), executor(), [core = core_, method, &context, &request] {
          return open_awaitable(core, method, context, &request, RpcKind::kServerStreaming);
        });
  }

  // Blocking unary call, for simple programs: from any thread but the channel's own.
  absl::Status call_blocking(std::string_view method, ClientContext& context,
                             const google::protobuf::MessageLite& request,
                             google::protobuf::MessageLite& response);
  // Blocking streaming calls, as open() above. From the channel's own thread the stream's
  // operations fail with FAILED_PRECONDITION instead of deadlocking.
  BlockingClientStream open_blocking(std::string_view method, ClientContext& context);
  BlockingClientStream open_blocking(std::string_view method, RpcKind kind, ClientContext& context);
  BlockingClientStream open_blocking(std::string_view method, ClientContext& context,
                                     const google::protobuf::MessageLite& request);

 private:
  // The operations, awaitable from any executor: they hop to the channel's (request null: none
  // to send).
  static asio::awaitable<absl::Status> call_awaitable(std::shared_ptr<detail::ChannelCore> core,
                                                      std::string_view method,
                                                      ClientContext& context,
                                                      const google::protobuf::MessageLite& request,
                                                      google::protobuf::MessageLite& response);
  static asio::awaitable<ClientStream> open_awaitable(std::shared_ptr<detail::ChannelCore> core,
                                                      std::string_view method,
                                                      ClientContext& context,
                                                      const google::protobuf::MessageLite* request,
                                                      RpcKind kind);
  // open_awaitable's part on the channel's executor.
  static asio::awaitable<ClientStream> open_on(std::shared_ptr<detail::ChannelCore> core,
                                               std::string_view method, ClientContext& context,
                                               const google::protobuf::MessageLite* request,
                                               RpcKind kind);

  static asio::awaitable<bool> wait_for_state_change_on(
      std::shared_ptr<detail::ChannelCore> core, ConnectivityState last_observed,
      std::chrono::steady_clock::time_point deadline);

  // Channel(target)'s loop, which its streams share (they may outlive the channel); null for a
  // channel on the caller's io_context.
  std::shared_ptr<detail::ChannelLoop> own_loop_;
  std::shared_ptr<detail::ChannelCore> core_;
  std::thread own_thread_;
};

}  // namespace ferry
