// ferry/channel.h: a client's connection to one gRPC server (client layer, public). It connects
// lazily on the first call, multiplexes every call over one HTTP/2 connection, and reconnects on
// a later call once that connection is lost or draining (GOAWAY). A call that cannot connect
// fails with UNAVAILABLE.
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
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "asio/io_context.hpp"
#include "ferry/blocking_stream.h"
#include "ferry/client_context.h"
#include "ferry/client_stream.h"
#include "ferry/limits.h"
#include "ferry/tls.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry {

// Limits (MessageLimits, ConnectionLimits: ferry/limits.h) are on by default.
struct ChannelOptions : MessageLimits, ConnectionLimits {
  // How long establishing a connection may take before calls fail with UNAVAILABLE.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(20);
  // :authority; empty means the target's host:port.
  std::string authority;
  std::string user_agent = "ferry/0.1";
  // TLS (ferry/tls.h): null connects in cleartext (h2c). The target string is the same either
  // way.
  std::shared_ptr<ChannelCredentials> credentials;
};

namespace detail {
struct ChannelCore;
}

class Channel {
 public:
  // target, as gRPC's naming document writes it: "host:port", "host" (port 443),
  // "[v6addr]:port", "dns:///host:port", "dns:host:port", "ipv4:addr:port", "ipv6:[addr]:port",
  // "unix:/path", "unix:///path", "unix-abstract:name".
  // A target that does not parse fails every call with UNAVAILABLE, saying why.
  Channel(asio::io_context& io, std::string target, ChannelOptions options = {});
  // Runs its own I/O thread.
  explicit Channel(std::string target, ChannelOptions options = {});
  // Closes the connection (calls still running fail) and joins the own thread, if any.
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  asio::io_context::executor_type executor() const;

  // A unary call: sends request, receives response. method: "/package.Service/Method".
  asio::awaitable<absl::Status> call(std::string_view method, ClientContext& context,
                                     const google::protobuf::MessageLite& request,
                                     google::protobuf::MessageLite& response);

  // Starts a streaming call (any kind). Failures (cannot connect, deadline already passed)
  // surface as the status from finish(); reads return false and writes fail before that.
  asio::awaitable<ClientStream> open(std::string_view method, ClientContext& context);
  // Starts a server-streaming call: opens it, sends request and half-closes. A request that
  // cannot be sent (e.g. over the send limit) ends the call with that status.
  asio::awaitable<ClientStream> open(std::string_view method, ClientContext& context,
                                     const google::protobuf::MessageLite& request);

  // Blocking unary call, for simple programs: from any thread but the channel's own.
  absl::Status call_blocking(std::string_view method, ClientContext& context,
                             const google::protobuf::MessageLite& request,
                             google::protobuf::MessageLite& response);
  // Blocking streaming calls, as open() above. From the channel's own thread the stream's
  // operations fail with FAILED_PRECONDITION instead of deadlocking.
  BlockingClientStream open_blocking(std::string_view method, ClientContext& context);
  BlockingClientStream open_blocking(std::string_view method, ClientContext& context,
                                     const google::protobuf::MessageLite& request);

 private:
  std::unique_ptr<asio::io_context> own_io_;
  std::shared_ptr<detail::ChannelCore> core_;
  std::thread own_thread_;
};

}  // namespace ferry
