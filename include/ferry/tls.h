// ferry/tls.h: TLS for servers and channels (public): certificates and keys, client
// certificates (mutual TLS), and the verified identity a handler sees. TLS 1.2 and 1.3 only, no
// renegotiation, ECDHE with AES-GCM or ChaCha20 for TLS 1.2 (TLS 1.3: its three suites), host
// names matched against subjectAltNames only. ALPN: a channel offers and requires "h2"; a server
// selects "h2", else "http/1.1" (gRPC-Web and Connect over HTTP/1.1; ServerTlsConfig::http1 turns
// that off), and refuses a client that negotiates neither. Implemented over OpenSSL (src/tls/);
// docs/tls_and_unix_sockets.md lists the suites and groups beside grpc-go's.
//
//   auto creds = ferry::ServerCredentials::create({
//       .certificate_chain = ferry::Pem::file("server.pem"),
//       .private_key = ferry::Pem::file("server.key")});
//   ferry::ServerOptions options;
//   options.credentials = *creds;                  // a server without credentials speaks h2c
//
//   ferry::ChannelOptions copts;
//   copts.credentials = *ferry::ChannelCredentials::create({.root_certificates =
//       ferry::Pem::file("ca.pem")});              // no roots given: the system's
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ferry {

// PEM text, or the path of a file holding it (read when the credentials are created).
struct Pem {
  static Pem file(std::string path) { return Pem{std::move(path), {}}; }
  static Pem content(std::string pem) { return Pem{{}, std::move(pem)}; }
  bool empty() const { return path.empty() && text.empty(); }

  std::string path;
  std::string text;
};

// What a server serves: its certificate and key, and whom it lets in. (Every member has a
// default, so that designated initializers may name only those they set.)
struct ServerTlsConfig {
  // The server's certificate first, then any intermediates.
  Pem certificate_chain{};
  Pem private_key{};
  // Mutual TLS: CA certificates a client's certificate must chain to. Empty: no client
  // certificate is asked for.
  Pem client_ca{};
  // With client_ca: refuse a client that presents no certificate (the handshake fails, no
  // handler runs). False: a client may present none; one it presents must verify.
  bool require_client_certificate = true;
  // A connection whose handshake has not completed by then is closed.
  std::chrono::milliseconds handshake_timeout = std::chrono::seconds(10);
  // ALPN "http/1.1" accepted from a client that does not offer "h2" (gRPC-Web and the Connect
  // protocol over HTTP/1.1). False: "h2" only, as grpc-go; a client offering only "http/1.1"
  // gets a no_application_protocol alert.
  bool http1 = true;
  // Certificate revocation (gRFC A69), with client_ca: a directory of PEM CRLs (every regular
  // file in it; each may hold several) that every certificate of a client's chain but the
  // trust anchor is checked against. A revoked one fails the handshake ("certificate
  // revoked", logged). No CRL for an issuer, or one past its next update, leaves revocation
  // undetermined, which passes (A69's default), though a certificate such a CRL lists is
  // refused. The directory is looked at again at most once per crl_refresh_interval, by a
  // handshake, and reloaded when its files changed; a reload that fails keeps the CRLs in force
  // and says why on stderr. A resumed session is not checked again: with CRLs, sessions last
  // crl_refresh_interval (a second at least), so that a revocation reaches resumptions as soon
  // as new handshakes. Empty: no revocation check.
  std::string crl_directory{};
  std::chrono::milliseconds crl_refresh_interval = std::chrono::seconds(60);
};

// A server's TLS configuration, shared by its connections. Thread-safe: update() may be called
// from any thread while the server runs; connections accepted afterwards use the new
// certificate, key and client CAs, established ones keep theirs.
class ServerCredentials {
 public:
  // Loads and checks the certificate chain against the key: INVALID_ARGUMENT saying what is
  // wrong (unreadable file, bad PEM, key does not match).
  static absl::StatusOr<std::shared_ptr<ServerCredentials>> create(ServerTlsConfig config);

  // Certificate rotation: replaces the configuration (validated as create() does; on error the
  // old one stays in force).
  absl::Status update(ServerTlsConfig config);

  struct State;  // src/tls/credentials.h
  // The configuration now in force (for the server's connections).
  std::shared_ptr<const State> current() const;

  ~ServerCredentials();

 private:
  ServerCredentials();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What a channel trusts and, for mutual TLS, presents.
struct ChannelTlsConfig {
  // CA certificates the server's certificate must chain to; empty: the system's store.
  Pem root_certificates{};
  // Optional client certificate (mutual TLS): both or neither.
  Pem certificate_chain{};
  Pem private_key{};
  // The name the server's certificate must match and the SNI sent; empty: the target's host.
  // (gRPC's ssl_target_name_override.) An IP address is matched against IP SANs, without SNI.
  std::string server_name_override{};
  // Certificate revocation for the server's chain: as ServerTlsConfig::crl_directory.
  std::string crl_directory{};
  std::chrono::milliseconds crl_refresh_interval = std::chrono::seconds(60);
};

class ChannelCredentials {
 public:
  static absl::StatusOr<std::shared_ptr<ChannelCredentials>> create(ChannelTlsConfig config);

  struct State;  // src/tls/credentials.h
  const State& state() const { return *state_; }
  const std::string& server_name_override() const { return server_name_override_; }

  ~ChannelCredentials();

 private:
  ChannelCredentials() = default;
  std::shared_ptr<const State> state_;
  std::string server_name_override_;
};

// The verified identity of a TLS peer's certificate (a server's handler sees its client's, with
// mutual TLS: ServerContext::peer_identity()).
struct PeerIdentity {
  std::string subject;                 // RFC 2253: "CN=ferry test client,O=ferry test"
  std::vector<std::string> dns_names;  // subjectAltName DNS entries
  std::vector<std::string> uris;       // subjectAltName URIs, e.g. a SPIFFE ID
};

}  // namespace ferry
