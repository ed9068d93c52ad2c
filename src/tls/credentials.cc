// Implementation of ferry/tls.h's credentials: PEM loading (files or text, through asio's
// OpenSSL context), the protocol policy both ends share (TLS 1.2+, modern ciphers, ALPN h2),
// and rotation as an atomic swap of the server's state.
#include "tls/credentials.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

constexpr unsigned char kAlpnH2[] = {2, 'h', '2'};
// What the server accepts, in its order of preference: HTTP/2, else HTTP/1.1 (gRPC-Web and the
// Connect protocol from browsers and HTTP/1.1 clients).
constexpr unsigned char kAlpnServer[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// TLS 1.2 suites with forward secrecy and AEAD only; TLS 1.3's are all of that already.
constexpr char kCiphers[] = "ECDHE+AESGCM:ECDHE+CHACHA20";

absl::Status bad(const char* what, const Pem& pem, const asio::error_code& ec) {
  return absl::InvalidArgumentError(
      absl::StrCat("TLS: cannot load the ", what,
                   pem.path.empty() ? "" : absl::StrCat(" from ", pem.path), ": ", ec.message()));
}

void apply_policy(SSL_CTX* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_cipher_list(ctx, kCiphers);
  // TLS 1.3: AES-128-GCM first (with AES-NI the cheapest per byte; OpenSSL's default puts
  // AES-256 first).
  SSL_CTX_set_ciphersuites(ctx,
                           "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                           "TLS_CHACHA20_POLY1305_SHA256");
  // A certificate names its host in its subjectAltName only (RFC 6125 §6.4.4, as browsers and
  // Go since 1.15): a certificate with a CN and no DNS SAN matches no host name.
  X509_VERIFY_PARAM_set_hostflags(SSL_CTX_get0_param(ctx), X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
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

// ALPN on the server: h2 when the client offers it, else http/1.1, else nothing. (A client that
// sends no ALPN at all is refused after the handshake, src/tls/handshake.cc.)
int select_protocol(SSL*, const unsigned char** out, unsigned char* out_len,
                    const unsigned char* in, unsigned in_len, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, kAlpnServer, sizeof(kAlpnServer), in, in_len) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  std::fprintf(stderr,
               "ferry: TLS handshake refused: the client offered neither ALPN \"h2\" nor "
               "\"http/1.1\"\n");
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

absl::StatusOr<std::shared_ptr<const ServerCredentials::State>> build(
    const ServerTlsConfig& config) {
  if (config.certificate_chain.empty() || config.private_key.empty()) {
    return absl::InvalidArgumentError("TLS: a server needs a certificate chain and a key");
  }
  auto state = std::make_shared<ServerCredentials::State>();
  state->handshake_timeout = config.handshake_timeout;
  SSL_CTX* ctx = state->context.native_handle();
  apply_policy(ctx);
  SSL_CTX_set_alpn_select_cb(ctx, select_protocol, nullptr);
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
  apply_policy(ctx);
  SSL_CTX_set_alpn_protos(ctx, kAlpnH2, sizeof(kAlpnH2));  // 0 is success
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
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
