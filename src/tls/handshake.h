// TLS handshakes (tls module, private): a server's, on an accepted connection before its HTTP/2
// connection starts, and a channel's, in ChannelCore::connect. Both wrap the connection's byte
// stream (TCP or Unix) in an http2::TlsStream, so that the HTTP/2 layer above is the same for
// every transport. Everything runs on the stream's executor.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "asio/awaitable.hpp"
#include "asio/steady_timer.hpp"
#include "ferry/tls.h"
#include "transport/byte_stream.h"
#include "transport/tls_stream.h"

namespace ferry::tls {

// A server connection after its handshake: the TLS stream, and the client's verified identity
// (null when it presented no certificate).
struct Accepted {
  std::unique_ptr<http2::ByteStream> stream;
  std::shared_ptr<const PeerIdentity> identity;
  bool http1 = false;  // ALPN chose http/1.1 (else h2)
};

class ServerHandshake {
 public:
  // done: called once, from the loop, with the stream or why the handshake failed (the
  // failure is also logged to stderr, one line); it may delete this object only by posting.
  using Done = std::function<void(absl::StatusOr<Accepted>)>;

  // Wraps stream with the configuration creds holds now (later rotations do not affect it)
  // and starts the handshake, bounded by the configured handshake timeout.
  ServerHandshake(std::unique_ptr<http2::ByteStream> stream, const ServerCredentials& creds,
                  Done done);
  ~ServerHandshake();

  // Aborts the handshake (done then reports the failure).
  void close();

 private:
  void on_handshake(const asio::error_code& ec);

  std::unique_ptr<http2::TlsStream> tls_;
  asio::steady_timer timer_;
  bool timed_out_ = false;
  Done done_;
};

// Sets what the server's certificate must name: an IP address (an IPv6 one's zone, "%eth0",
// left out) in its IP SANs, else a host name in its DNS SANs (never its subject's CN: the
// credentials set X509_CHECK_FLAG_NEVER_CHECK_SUBJECT), also sent as SNI. UNAVAILABLE saying
// why when OpenSSL takes none of it: the handshake must not go on without a name to check.
absl::Status expect_name(SSL* ssl, const std::string& name);

// The client's handshake over stream: verifies the server's certificate for host (or the
// credentials' server_name_override, also sent as SNI) and requires ALPN h2 (http1: offers and
// accepts http/1.1 instead); gives up at deadline. UNAVAILABLE saying why on failure.
asio::awaitable<absl::StatusOr<std::unique_ptr<http2::ByteStream>>> client_handshake(
    std::unique_ptr<http2::ByteStream> stream, const ChannelCredentials& creds, std::string host,
    std::chrono::steady_clock::time_point deadline, bool http1 = false);

}  // namespace ferry::tls
