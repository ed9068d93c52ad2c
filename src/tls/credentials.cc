// Implementation of ferry/tls.h's credentials: PEM loading (files or text, through asio's
// OpenSSL context), the protocol policy both ends share (TLS 1.2+, AEAD suites with forward
// secrecy, no renegotiation, SAN-only names), ALPN, and rotation as an atomic swap of the
// server's state.
#include "tls/credentials.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "tls/crl.h"

namespace ferry {
namespace {

constexpr unsigned char kAlpnH2[] = {2, 'h', '2'};
// What the server accepts, in its order of preference: HTTP/2, else HTTP/1.1 (gRPC-Web and the
// Connect protocol from browsers and HTTP/1.1 clients).
constexpr unsigned char kAlpnServer[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// TLS 1.2 suites with forward secrecy and AEAD only, in grpc-go's (Go's crypto/tls) order on a
// machine with AES in hardware: AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305; ECDSA before RSA.
constexpr char kCiphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// TLS 1.3: all three suites, AES-128-GCM first (with AES-NI the cheapest per byte; OpenSSL's
// default puts AES-256 first).
constexpr char kCipherSuites[] =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
// Key exchange groups, as Go's default (less its post-quantum hybrid, which OpenSSL 3.0 lacks):
// no finite-field groups.
constexpr char kGroups[] = "X25519:P-256:P-384:P-521";
// Sessions resumed on a server that verifies clients must have been made under the same
// verification (OpenSSL refuses to resume without a context when it verifies peers: a fatal
// "session id context uninitialized"). Each credentials' state has its own SSL_CTX, hence its
// own session cache and ticket keys: one context name does for all.
constexpr unsigned char kSessionContext[] = "ferry";

absl::Status bad(const char* what, const Pem& pem, const asio::error_code& ec) {
  return absl::InvalidArgumentError(
      absl::StrCat("TLS: cannot load the ", what,
                   pem.path.empty() ? "" : absl::StrCat(" from ", pem.path), ": ", ec.message()));
}

// The protocol policy both ends share (docs/tls_and_unix_sockets.md lists it beside grpc-go's).
// Fixed strings: a failure here is a bug, reported as INTERNAL rather than left half-applied.
absl::Status apply_policy(SSL_CTX* ctx) {
  // Renegotiation (TLS 1.2) is refused: a peer's ClientHello mid-connection gets a
  // no_renegotiation alert (CVE-2009-3555, and a CPU cost the peer chooses).
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_cipher_list(ctx, kCiphers) != 1 ||
      SSL_CTX_set_ciphersuites(ctx, kCipherSuites) != 1 ||
      SSL_CTX_set1_groups_list(ctx, kGroups) != 1) {
    return absl::InternalError("TLS: OpenSSL refused ferry's protocol policy");
  }
  // A certificate names its host in its subjectAltName only (RFC 6125 §6.4.4, as browsers and
  // Go since 1.15): a certificate with a CN and no DNS SAN matches no host name.
  X509_VERIFY_PARAM_set_hostflags(SSL_CTX_get0_param(ctx), X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
  return absl::OkStatus();
}

absl::Status load_identity(asio::ssl::context& context, const Pem& chain, const Pem& key) {
  asio::error_code ec;
  if (!chain.path.empty()) {
    context.use_certificate_chain_file(chain.path, ec);
  } else {
    context.use_certificate_chain(asio::buffer(chain.text), ec);
  }
  if (ec) return bad("certificate chain", chain, ec);
  if (!key.path.empty()) {
    context.use_private_key_file(key.path, asio::ssl::context::pem, ec);
  } else {
    context.use_private_key(asio::buffer(key.text), asio::ssl::context::pem, ec);
  }
  if (ec) return bad("private key", key, ec);
  if (SSL_CTX_check_private_key(context.native_handle()) != 1) {
    return absl::InvalidArgumentError("TLS: the private key does not match the certificate");
  }
  return absl::OkStatus();
}

absl::Status load_cas(asio::ssl::context& context, const Pem& cas) {
  asio::error_code ec;
  if (!cas.path.empty()) {
    context.load_verify_file(cas.path, ec);
  } else {
    context.add_certificate_authority(asio::buffer(cas.text), ec);
  }
  if (ec) return bad("CA certificates", cas, ec);
  return absl::OkStatus();
}

// ALPN on the server: h2 when the client offers it, else http/1.1 (unless the server turned
// HTTP/1.1 off: arg is non-null), else nothing. (A client that sends no ALPN at all is refused
// after the handshake, src/tls/handshake.cc.)
int select_protocol(SSL*, const unsigned char** out, unsigned char* out_len,
                    const unsigned char* in, unsigned in_len, void* h2_only) {
  unsigned char* selected = nullptr;
  const unsigned server_len = h2_only != nullptr ? sizeof(kAlpnH2) : sizeof(kAlpnServer);
  if (SSL_select_next_proto(&selected, out_len, kAlpnServer, server_len, in, in_len) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  std::fprintf(stderr, h2_only != nullptr
                           ? "ferry: TLS handshake refused: the client did not offer ALPN "
                             "\"h2\" (HTTP/1.1 is off)\n"
                           : "ferry: TLS handshake refused: the client offered neither ALPN "
                             "\"h2\" nor \"http/1.1\"\n");
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

// With a CRL directory: loads it (INVALID_ARGUMENT if it cannot be read) and makes ctx check
// peers' chains against it.
absl::Status revocation(SSL_CTX* ctx, int verify_mode, const std::string& directory,
                        std::chrono::milliseconds refresh) {
  if (directory.empty()) return absl::OkStatus();
  auto crls = std::make_shared<tls::CrlDirectory>(directory, refresh);
  if (absl::Status s = crls->load(); !s.ok()) return s;
  tls::check_revocation(ctx, verify_mode, std::move(crls));
  // A resumed session is not verified again: sessions last no longer than a revocation takes
  // to be read (the refresh interval, a second at least), rather than OpenSSL's two hours.
  const auto seconds = std::chrono::ceil<std::chrono::seconds>(refresh).count();
  SSL_CTX_set_timeout(ctx, static_cast<long>(std::max<std::int64_t>(1, seconds)));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ServerCredentials::State>> build(
    const ServerTlsConfig& config) {
  if (config.certificate_chain.empty() || config.private_key.empty()) {
    return absl::InvalidArgumentError("TLS: a server needs a certificate chain and a key");
  }
  auto state = std::make_shared<ServerCredentials::State>();
  state->handshake_timeout = config.handshake_timeout;
  SSL_CTX* ctx = state->context.native_handle();
  if (absl::Status s = apply_policy(ctx); !s.ok()) return s;
  // The server's order of suites, not the client's (as grpc-go), except that a client that puts
  // ChaCha20 first (no AES in its hardware) gets it.
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
  // Any non-null argument means h2 only.
  SSL_CTX_set_alpn_select_cb(ctx, select_protocol,
                             config.http1 ? nullptr : const_cast<unsigned char*>(kAlpnH2));
  if (SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1) != 1) {
    return absl::InternalError("TLS: cannot set the session id context");
  }
  if (absl::Status s = load_identity(state->context, config.certificate_chain, config.private_key);
      !s.ok()) {
    return s;
  }
  if (!config.client_ca.empty()) {
    if (absl::Status s = load_cas(state->context, config.client_ca); !s.ok()) return s;
    // Tell clients which CAs we accept (some pick their certificate by it).
    STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx));
    for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i) {
      if (X509* ca = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i))) {
        SSL_CTX_add_client_CA(ctx, ca);
      }
    }
    int mode = SSL_VERIFY_PEER;
    if (config.require_client_certificate) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, nullptr);
    if (absl::Status s = revocation(ctx, mode, config.crl_directory, config.crl_refresh_interval);
        !s.ok()) {
      return s;
    }
  } else if (!config.crl_directory.empty()) {
    return absl::InvalidArgumentError(
        "TLS: crl_directory checks client certificates: it needs client_ca");
  }
  return state;
}

}  // namespace

struct ServerCredentials::Impl {
  mutable std::mutex mu;
  std::shared_ptr<const State> state;
};

ServerCredentials::ServerCredentials() : impl_(std::make_unique<Impl>()) {}
ServerCredentials::~ServerCredentials() = default;

absl::StatusOr<std::shared_ptr<ServerCredentials>> ServerCredentials::create(
    ServerTlsConfig config) {
  std::shared_ptr<ServerCredentials> creds(new ServerCredentials());
  if (absl::Status s = creds->update(std::move(config)); !s.ok()) return s;
  return creds;
}

absl::Status ServerCredentials::update(ServerTlsConfig config) {
  absl::StatusOr<std::shared_ptr<const State>> state = build(config);
  if (!state.ok()) return state.status();
  std::lock_guard lock(impl_->mu);
  impl_->state = *std::move(state);
  return absl::OkStatus();
}

std::shared_ptr<const ServerCredentials::State> ServerCredentials::current() const {
  std::lock_guard lock(impl_->mu);
  return impl_->state;
}

ChannelCredentials::~ChannelCredentials() = default;

absl::StatusOr<std::shared_ptr<ChannelCredentials>> ChannelCredentials::create(
    ChannelTlsConfig config) {
  auto state = std::make_shared<State>();
  SSL_CTX* ctx = state->context.native_handle();
  if (absl::Status s = apply_policy(ctx); !s.ok()) return s;
  SSL_CTX_set_alpn_protos(ctx, kAlpnH2, sizeof(kAlpnH2));  // 0 is success
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (absl::Status s =
          revocation(ctx, SSL_VERIFY_PEER, config.crl_directory, config.crl_refresh_interval);
      !s.ok()) {
    return s;
  }
  if (config.root_certificates.empty()) {
    asio::error_code ec;
    state->context.set_default_verify_paths(ec);
    if (ec) return bad("system's CA certificates", config.root_certificates, ec);
  } else if (absl::Status s = load_cas(state->context, config.root_certificates); !s.ok()) {
    return s;
  }
  if (config.certificate_chain.empty() != config.private_key.empty()) {
    return absl::InvalidArgumentError(
        "TLS: a client certificate needs its key, and a key its "
        "certificate");
  }
  if (!config.certificate_chain.empty()) {
    if (absl::Status s =
            load_identity(state->context, config.certificate_chain, config.private_key);
        !s.ok()) {
      return s;
    }
  }
  std::shared_ptr<ChannelCredentials> creds(new ChannelCredentials());
  creds->state_ = std::move(state);
  creds->server_name_override_ = std::move(config.server_name_override);
  return creds;
}

}  // namespace ferry
