// ferry/server.h: a gRPC server over HTTP/2 cleartext (h2c, prior knowledge) (server layer,
// public). It runs N I/O threads, one io_context each; an acceptor hands each new connection to
// the next thread, and the connection, its calls and their handlers stay on that thread.
//
//   ferry::Service greeter("helloworld.Greeter");
//   greeter.add_unary<HelloRequest, HelloReply>("SayHello",
//       [](ferry::ServerContext&, const HelloRequest& req, HelloReply& reply)
//           -> asio::awaitable<absl::Status> {
//         reply.set_message("hello " + req.name());
//         co_return absl::OkStatus();
//       });
//   ferry::Server server;
//   server.add_service(greeter);
//   absl::StatusOr<int> port = server.start("127.0.0.1", 50051);
//   ...
//   server.shutdown(std::chrono::seconds(5));
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/connection_policy.h"
#include "ferry/limits.h"
#include "ferry/service.h"
#include "ferry/tls.h"

namespace ferry {

class ServerInterceptor;  // ferry/interceptor.h

// Limits (MessageLimits, ConnectionLimits: ferry/limits.h) and the connections' lifecycle
// (ServerConnectionPolicy: handshake timeout, idle and age limits, keepalive, PING policing,
// max_connections; ferry/connection_policy.h) are on by default.
struct ServerOptions : MessageLimits, ConnectionLimits, ServerConnectionPolicy {
  // I/O threads; 0 means one per hardware thread.
  unsigned num_threads = 0;
  // TLS (ferry/tls.h): null serves cleartext HTTP/2 (h2c).
  std::shared_ptr<ServerCredentials> credentials;
  // Interceptors around every call's handler (ferry/interceptor.h), in order. Default: none,
  // and then the call path is exactly as without the feature.
  std::vector<std::shared_ptr<ServerInterceptor>> interceptors;
  // Browsers on these origins ("https://app.example.com", or "*" for any) may call the server
  // with gRPC-Web and the Connect protocol across origins (CORS): preflight OPTIONS requests are
  // answered, and responses carry Access-Control-Allow-Origin and expose the headers those
  // clients read. Default: none (a browser then calls only from the server's own origin).
  std::vector<std::string> cors_allowed_origins;
};

class Server {
 public:
  explicit Server(ServerOptions options = {});
  // Shuts down (with no grace period) if still running.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Registers the service's methods; before start(). The service must outlive the server.
  void add_service(const Service& service);

  // Binds host:port (port 0 picks a free one), starts the I/O threads and accepts connections.
  // host may also name a Unix domain socket, "unix:/path" or "unix-abstract:name" (port is then
  // ignored and 0 returned; a stale socket file at path is replaced, and removed at shutdown).
  // Returns the bound port, or UNAVAILABLE when binding fails.
  [[nodiscard]] absl::StatusOr<int> start(const std::string& host, int port);

  // Graceful shutdown: stops accepting, sends GOAWAY on every connection, lets calls in flight
  // finish for up to `grace`, then cancels the rest (their handlers see is_cancelled() and their
  // reads and writes fail), closes every connection and joins the threads. Blocks until done:
  // until work handlers gave ferry::offload has returned (it cannot be interrupted, and hands its
  // result back to the handler's thread), then at most 2 s more for handlers that ignore
  // cancellation, for all threads together. Call it from a thread that is not one of the
  // server's.
  void shutdown(std::chrono::milliseconds grace = std::chrono::seconds(5));

  // The services added so far, in order (server reflection lists them). Fixed once started.
  const std::vector<const Service*>& services() const;

  // Calls currently running (for tests and monitoring).
  std::size_t active_calls() const;

 private:
  struct Impl;  // src/server/server.cc
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry
