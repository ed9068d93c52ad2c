// Implementation of src/tls/handshake.h, and reading a peer's identity out of its certificate.
#include "tls/handshake.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "asio/associated_cancellation_slot.hpp"
#include "asio/async_result.hpp"
#include "asio/ip/address.hpp"
#include "asio/redirect_error.hpp"
#include "asio/use_awaitable.hpp"
#include "tls/credentials.h"

namespace ferry::tls {
namespace {

std::string_view negotiated(SSL* ssl) {
  const unsigned char* protocol = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(ssl, &protocol, &len);
  return {reinterpret_cast<const char*>(protocol), len};
}

bool negotiated_h2(SSL* ssl) { return negotiated(ssl) == "h2"; }

std::string_view asn1_text(const ASN1_STRING* s) {
  return {reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
          static_cast<std::size_t>(ASN1_STRING_length(s))};
}

std::shared_ptr<const PeerIdentity> peer_identity(SSL* ssl) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) return nullptr;
  auto id = std::make_shared<PeerIdentity>();
  if (BIO* mem = BIO_new(BIO_s_mem())) {
    X509_NAME_print_ex(mem, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
    char* data = nullptr;
    const long n = BIO_get_mem_data(mem, &data);
    if (n > 0) id->subject.assign(data, static_cast<std::size_t>(n));
    BIO_free(mem);
  }
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS) id->dns_names.emplace_back(asn1_text(name->d.dNSName));
    if (name->type == GEN_URI) id->uris.emplace_back(asn1_text(name->d.uniformResourceIdentifier));
  }
  GENERAL_NAMES_free(names);
  return id;
}

}  // namespace

absl::Status expect_name(SSL* ssl, const std::string& name) {
  auto refuse = [&name](const char* why) {
    return absl::UnavailableError(
        absl::StrCat("TLS: cannot verify the server as \"", name, "\": ", why));
  };
  if (name.empty()) return refuse("no name to check its certificate against");
  // An IPv6 literal may carry a zone ("fe80::1%eth0", "::1%1"): it says which interface
  // reaches the address, and is no part of what a certificate names.
  const std::string address = name.substr(0, name.find('%'));
  asio::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(address, ec);
  if (!ec) {  // an address: matched against IP SANs; SNI carries host names only (RFC 6066 §3)
    if (address.size() != name.size() && !ip.is_v6()) return refuse("a zone on an IPv4 address");
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), address.c_str()) != 1) {
      return refuse("not an IP address OpenSSL can match");
    }
    return absl::OkStatus();
  }
  if (address.size() != name.size()) return refuse("a zone ('%') outside an IPv6 address");
  if (SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) return refuse("not a valid SNI name");
  if (SSL_set1_host(ssl, name.c_str()) != 1) return refuse("not a host name OpenSSL can match");
  return absl::OkStatus();
}

ServerHandshake::ServerHandshake(std::unique_ptr<http2::ByteStream> stream,
                                 const ServerCredentials& creds, Done done)
    : timer_(stream->executor()), done_(std::move(done)) {
  std::shared_ptr<const ServerCredentials::State> state = creds.current();
  SSL* ssl = SSL_new(state->context.native_handle());
  SSL_set_accept_state(ssl);
  tls_ = std::make_unique<http2::TlsStream>(std::move(stream), ssl);
  timer_.expires_after(state->handshake_timeout);
  timer_.async_wait([this](const asio::error_code& ec) {
    // Cancelled (this may be gone), or the handshake ended in the loop pass where the wait
    // completed: on_handshake's cancel comes too late for a handler already queued, and the
    // stream may have been handed on. This object is deleted only by a post, after this runs.
    if (ec || !done_) return;
    timed_out_ = true;
    tls_->close();
  });
  tls_->async_handshake([this](const asio::error_code& ec) { on_handshake(ec); });
}

ServerHandshake::~ServerHandshake() = default;

void ServerHandshake::close() {
  if (tls_ != nullptr) tls_->close();
}

void ServerHandshake::on_handshake(const asio::error_code& ec) {
  timer_.cancel();
  const std::string peer = tls_->peer_address();
  std::string why;
  if (timed_out_) {
    why = "TLS handshake timed out";
  } else if (ec) {
    why = tls_->error().empty() ? "TLS handshake failed: " + ec.message() : tls_->error();
  } else if (negotiated(tls_->ssl()).empty()) {
    why = "TLS handshake refused: the client did not negotiate ALPN \"h2\" or \"http/1.1\"";
  }
  Done done = std::exchange(done_, nullptr);  // empty: the timer's handler looks
  if (!why.empty()) {
    std::fprintf(stderr, "ferry: connection from %s closed: %s\n", peer.c_str(), why.c_str());
    tls_->close();
    done(absl::UnavailableError(why));
    return;
  }
  Accepted accepted{nullptr, peer_identity(tls_->ssl()), negotiated(tls_->ssl()) == "http/1.1"};
  accepted.stream = std::move(tls_);
  done(std::move(accepted));
}

asio::awaitable<absl::StatusOr<std::unique_ptr<http2::ByteStream>>> client_handshake(
    std::unique_ptr<http2::ByteStream> stream, const ChannelCredentials& creds, std::string host,
    std::chrono::steady_clock::time_point deadline, bool http1) {
  const std::string& name =
      creds.server_name_override().empty() ? host : creds.server_name_override();
  SSL* ssl = SSL_new(creds.state().context.native_handle());
  SSL_set_connect_state(ssl);
  if (http1) {
    static constexpr unsigned char kAlpnHttp1[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_set_alpn_protos(ssl, kAlpnHttp1, sizeof(kAlpnHttp1));
  }
  // What the server must choose: h2, or for HTTP/1.1 http/1.1 (or nothing, HTTP/1.1 being what
  // a TLS server without ALPN speaks).
  auto negotiated_ours = [http1](SSL* s) {
    return http1 ? negotiated(s) == "http/1.1" || negotiated(s).empty() : negotiated_h2(s);
  };
  // What the server's certificate must match. Every setting is checked: one that failed would
  // leave the name unchecked, and any certificate chaining to the roots would pass.
  if (absl::Status s = expect_name(ssl, name); !s.ok()) {
    SSL_free(ssl);
    co_return s;
  }
  asio::error_code ec;
  auto tls = std::make_unique<http2::TlsStream>(std::move(stream), ssl);

  asio::steady_timer timer(tls->executor(), deadline);
  bool timed_out = false;
  timer.async_wait([&tls, &timed_out](const asio::error_code& e) {
    if (e) return;
    timed_out = true;
    tls->close();
  });
  // The handshake, then the server's first data (see TlsStream::async_wait_for_data); an
  // HTTP/1.1 server says nothing before a request.
  for (const bool handshake : {true, false}) {
    if (!handshake && http1) break;
    ec = {};
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    co_await asio::async_initiate<decltype(token), void(asio::error_code)>(
        [&tls, handshake](auto handler) {
          // A cancellation of the awaiting coroutine (the subchannel shutting down) abandons
          // the handshake: the stream then holds no handler that holds this coroutine.
          asio::cancellation_slot slot = asio::get_associated_cancellation_slot(handler);
          if (slot.is_connected()) {
            slot.assign([t = tls.get()](asio::cancellation_type) { t->cancel_handshake(); });
          }
          auto h = std::make_shared<decltype(handler)>(std::move(handler));
          auto done = [h, slot](const asio::error_code& e) mutable {
            if (slot.is_connected()) slot.clear();
            std::move (*h)(e);
          };
          handshake ? tls->async_handshake(done) : tls->async_wait_for_data(done);
        },
        token);
    if (ec || timed_out || !negotiated_ours(tls->ssl())) break;
  }
  timer.cancel();
  const std::string peer = tls->peer_address();
  if (timed_out) co_return absl::UnavailableError("TLS handshake with " + peer + " timed out");
  if (ec) {
    co_return absl::UnavailableError(
        absl::StrCat(tls->error().empty() ? "TLS handshake failed: " + ec.message() : tls->error(),
                     " (server ", peer, ", verifying it as \"", name, "\")"));
  }
  if (!negotiated_ours(tls->ssl())) {
    co_return absl::UnavailableError(absl::StrCat(
        "TLS: the server ", peer, " did not negotiate ALPN \"", http1 ? "http/1.1" : "h2", "\""));
  }
  co_return std::unique_ptr<http2::ByteStream>(std::move(tls));
}

}  // namespace ferry::tls
