// TLS and mutual TLS end to end (ferry/tls.h): calls of every kind over TLS, the client's
// verified identity as a handler sees it, each way a handshake must fail (wrong CA, expired
// certificate, wrong host name, a host named in the CN only, an IPv6 zone, missing client
// certificate, cleartext against TLS both ways) failing with UNAVAILABLE before any handler
// runs, ALPN (a client that offers no "h2" refused, and the server saying why; HTTP/1.1 turned
// off), the server's suite order, session resumption with mutual TLS, a scan with
// `openssl s_client` (protocols, suites, groups, renegotiation, resumption), a truncated
// HTTP/1.1 body refused, an idle connection's buffers given back, and certificate rotation
// under load. The certificates are test/certs' (generate.sh).
#include "ferry/tls.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "ferry/buffer_pool.h"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "support/echo_service.h"
#include "support/wait.h"
#include "tls/handshake.h"

namespace ferry::tls_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;

Pem cert(const std::string& name) { return Pem::file(FERRY_TEST_CERTS "/" + name); }

std::shared_ptr<ServerCredentials> server_creds(const std::string& name = "server",
                                                bool mutual = false, bool require = true,
                                                bool http1 = true) {
  ServerTlsConfig config{.certificate_chain = cert(name + ".pem"),
                         .private_key = cert(name + ".key")};
  if (mutual) config.client_ca = cert("ca.pem");
  config.require_client_certificate = require;
  config.http1 = http1;
  auto creds = ServerCredentials::create(std::move(config));
  EXPECT_TRUE(creds.ok()) << creds.status();
  return creds.ok() ? *creds : nullptr;
}

std::shared_ptr<ChannelCredentials> channel_creds(const std::string& ca = "ca.pem",
                                                  bool with_client_cert = false,
                                                  std::string host_override = "") {
  ChannelTlsConfig config{.root_certificates = cert(ca)};
  if (with_client_cert) {
    config.certificate_chain = cert("client.pem");
    config.private_key = cert("client.key");
  }
  config.server_name_override = std::move(host_override);
  auto creds = ChannelCredentials::create(std::move(config));
  EXPECT_TRUE(creds.ok()) << creds.status();
  return creds.ok() ? *creds : nullptr;
}

ServerOptions two_threads() {
  ServerOptions options;
  options.num_threads = 2;
  return options;
}

// A server with Echo and Who (answers with the client's verified identity: subject, then each
// DNS name and URI, one per line; "none" without one).
class TlsServer {
 public:
  explicit TlsServer(std::shared_ptr<ServerCredentials> creds,
                     ServerOptions options = two_threads(), std::string host = "127.0.0.1")
      : service_(&probe_), who_("tls.Who"), host_(std::move(host)) {
    who_.add_unary<EchoRequest, EchoResponse>(
        "Who",
        [this](ServerContext& ctx, const EchoRequest&,
               EchoResponse& reply) -> asio::awaitable<absl::Status> {
          who_calls_.fetch_add(1);
          const PeerIdentity* id = ctx.peer_identity();
          std::string out = id == nullptr ? "none" : id->subject;
          if (id != nullptr) {
            for (const std::string& n : id->dns_names) out += "\ndns:" + n;
            for (const std::string& u : id->uris) out += "\nuri:" + u;
          }
          reply.set_payload(out);
          co_return absl::OkStatus();
        });
    options.credentials = std::move(creds);
    server_ = std::make_unique<Server>(options);
    server_->add_service(service_);
    server_->add_service(who_);
    absl::StatusOr<int> port = server_->start(host_, 0);
    EXPECT_TRUE(port.ok()) << port.status();
    port_ = port.ok() ? *port : 0;
  }
  ~TlsServer() { stop(); }
  // Shuts the server down: its I/O threads have printed every log line once this returns.
  void stop() { server_->shutdown(std::chrono::milliseconds(100)); }

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  int handlers_run() const { return probe_.started.load() + who_calls_.load(); }

 private:
  testing::EchoProbe probe_;
  testing::EchoService service_;
  Service who_;
  std::atomic<int> who_calls_{0};
  std::string host_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

absl::Status echo(Channel& channel, const std::string& payload, EchoResponse* out = nullptr) {
  testing::Echo::BlockingStub stub(channel);
  EchoRequest request;
  request.set_payload(payload);
  EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(std::chrono::seconds(10));
  absl::Status s = stub.Echo(ctx, request, response);
  if (s.ok() && response.payload() != payload) return absl::DataLossError("payload differs");
  if (out != nullptr) *out = response;
  return s;
}

std::string who(Channel& channel) {
  EchoRequest request;
  EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(std::chrono::seconds(10));
  absl::Status s = channel.call_blocking("/tls.Who/Who", ctx, request, response);
  return s.ok() ? response.payload() : "error: " + s.ToString();
}

ChannelOptions with(std::shared_ptr<ChannelCredentials> creds) {
  ChannelOptions options;
  options.credentials = std::move(creds);
  options.connect_timeout = std::chrono::seconds(10);
  return options;
}

TEST(Tls, UnaryAndStreamingCalls) {
  TlsServer server(server_creds());
  Channel channel(server.target(), with(channel_creds()));
  ASSERT_TRUE(echo(channel, "hello").ok());
  // Large messages: several records per flush and more than one encryption batch.
  ASSERT_TRUE(echo(channel, std::string(1 << 20, 'x')).ok());

  testing::Echo::BlockingStub stub(channel);
  ClientContext ctx;
  ctx.set_timeout(std::chrono::seconds(10));
  EchoRequest request;
  request.set_response_count(20);
  request.set_response_size(100000);
  auto reader = stub.Expand(ctx, request);
  EchoResponse response;
  int n = 0;
  while (reader.read(response)) {
    EXPECT_EQ(response.payload().size(), 100000u);
    ++n;
  }
  EXPECT_TRUE(reader.finish().ok());
  EXPECT_EQ(n, 20);

  ClientContext chat_ctx;
  chat_ctx.set_timeout(std::chrono::seconds(10));
  auto chat = stub.Chat(chat_ctx);
  for (int i = 0; i < 50; ++i) {
    EchoRequest r;
    r.set_payload(std::string(static_cast<std::size_t>(i) * 997, 'c'));
    ASSERT_TRUE(chat.write(r).ok());
    ASSERT_TRUE(chat.read(response));
    EXPECT_EQ(response.payload(), r.payload());
  }
  chat.writes_done();
  EXPECT_FALSE(chat.read(response));
  EXPECT_TRUE(chat.finish().ok());
  EXPECT_EQ(who(channel), "none");  // server-only TLS: no client identity
}

TEST(Tls, MutualTlsHandlerSeesTheClientsIdentity) {
  TlsServer server(server_creds("server", /*mutual=*/true));
  Channel channel(server.target(), with(channel_creds("ca.pem", /*with_client_cert=*/true)));
  EXPECT_EQ(who(channel),
            "CN=ferry test client,O=ferry test\ndns:client.ferry.test\n"
            "uri:spiffe://ferry.test/ns/default/sa/client");
  EXPECT_TRUE(echo(channel, "mutual").ok());
}

TEST(Tls, OptionalClientCertificate) {
  TlsServer server(server_creds("server", /*mutual=*/true, /*require=*/false));
  Channel anonymous(server.target(), with(channel_creds()));
  EXPECT_EQ(who(anonymous), "none");
  Channel known(server.target(), with(channel_creds("ca.pem", true)));
  EXPECT_NE(who(known).find("CN=ferry test client"), std::string::npos);
}

// Each failure: UNAVAILABLE whose message contains `why`, and no handler ran.
void expect_refused(TlsServer& server, Channel& channel, const std::string& why) {
  absl::Status s = echo(channel, "must not arrive");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find(why), std::string_view::npos) << s;
  EXPECT_EQ(server.handlers_run(), 0);
}

TEST(TlsRefused, WrongCa) {
  TlsServer server(server_creds());
  Channel channel(server.target(), with(channel_creds("other_ca.pem")));
  expect_refused(server, channel, "unable to get local issuer certificate");
}

TEST(TlsRefused, ExpiredCertificate) {
  TlsServer server(server_creds("expired"));
  Channel channel(server.target(), with(channel_creds()));
  expect_refused(server, channel, "certificate has expired");
}

TEST(TlsRefused, WrongHostName) {
  TlsServer server(server_creds());
  Channel channel(server.target(), with(channel_creds("ca.pem", false, "wrong.example.com")));
  expect_refused(server, channel, "hostname mismatch");
}

TEST(TlsRefused, HostNameOverrideMatchingTheCertificateIsAccepted) {
  TlsServer server(server_creds());
  Channel channel(server.target(), with(channel_creds("ca.pem", false, "foo.test.google.fr")));
  EXPECT_TRUE(echo(channel, "override").ok());
}

// A certificate that names the host in its subject's CN only, with no subjectAltName, matches
// no host name (as Go since 1.15 and browsers): it chains to the CA and would pass otherwise.
TEST(TlsRefused, CertificateNamingTheHostInItsCnOnly) {
  TlsServer server(server_creds("cn_only"));
  Channel channel(server.target(), with(channel_creds("ca.pem", false, "localhost")));
  absl::Status s = echo(channel, "cn");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("hostname mismatch"), std::string_view::npos) << s;
  EXPECT_EQ(server.handlers_run(), 0);
}

// An IPv6 target with a zone ("[::1%251]", "[::1%25lo]": the zone's % written %25): the zone
// is left out of the name checked, and the address still is checked against the certificate's
// IP SANs. (OpenSSL takes no zone:
// when its refusal was ignored, any certificate chaining to the CA passed.)
TEST(TlsRefused, Ipv6TargetWithAZoneIsStillVerified) {
  for (const char* zone : {"%251", "%25lo"}) {  // the zone's '%' percent-encoded, as in a URI
    SCOPED_TRACE(zone);
    TlsServer wrong(server_creds("wrong_name"), two_threads(), "::1");
    Channel refused("ipv6:[::1" + std::string(zone) + "]:" + std::to_string(wrong.port()),
                    with(channel_creds()));
    absl::Status s = echo(refused, "zone");
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_NE(s.message().find("certificate verify failed"), std::string_view::npos) << s;
    EXPECT_EQ(wrong.handlers_run(), 0);
    // The right certificate (IP SAN ::1) passes through the same zone.
    TlsServer right(server_creds(), two_threads(), "::1");
    Channel accepted("ipv6:[::1" + std::string(zone) + "]:" + std::to_string(right.port()),
                     with(channel_creds()));
    EXPECT_TRUE(echo(accepted, "zone").ok());
  }
}

// What the client checks the server's certificate against, for each form of name: an IPv6
// zone is left out of the address, and a name OpenSSL cannot take is refused (never left
// unchecked).
TEST(TlsNames, ZoneLeftOutAndEveryFailureRefuses) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  auto expect = [ctx](const std::string& name) {
    SSL* ssl = SSL_new(ctx);
    const absl::Status s = tls::expect_name(ssl, name);
    char* ip = X509_VERIFY_PARAM_get1_ip_asc(SSL_get0_param(ssl));
    std::string out = s.ok() ? (ip != nullptr ? std::string("ip ") + ip : "host") : s.ToString();
    OPENSSL_free(ip);
    SSL_free(ssl);
    return out;
  };
  EXPECT_EQ(expect("fe80::1%eth0"), "ip FE80:0:0:0:0:0:0:1");
  EXPECT_EQ(expect("::1%1"), "ip 0:0:0:0:0:0:0:1");
  EXPECT_EQ(expect("::1"), "ip 0:0:0:0:0:0:0:1");
  EXPECT_EQ(expect("127.0.0.1"), "ip 127.0.0.1");
  EXPECT_EQ(expect("localhost"), "host");
  for (const std::string& bad :
       std::vector<std::string>{"", "127.0.0.1%1", "localhost%eth0", std::string(300, 'a')}) {
    const std::string got = expect(bad);
    EXPECT_NE(got.find("UNAVAILABLE: TLS: cannot verify the server"), std::string::npos) << got;
  }
  SSL_CTX_free(ctx);
}

TEST(TlsRefused, ClientWithoutCertificateWhenOneIsRequired) {
  TlsServer server(server_creds("server", /*mutual=*/true));
  Channel channel(server.target(), with(channel_creds()));
  expect_refused(server, channel, "certificate required");
}

TEST(TlsRefused, ClientCertificateFromAnotherCa) {
  // The server trusts only other_ca for clients; the client's certificate is from ca.
  auto creds =
      ServerCredentials::create({cert("server.pem"), cert("server.key"), cert("other_ca.pem")});
  ASSERT_TRUE(creds.ok()) << creds.status();
  TlsServer server(*creds);
  Channel channel(server.target(), with(channel_creds("ca.pem", true)));
  expect_refused(server, channel, "unknown ca");
}

TEST(TlsRefused, CleartextClientAgainstTlsServer) {
  TlsServer server(server_creds());
  Channel channel(server.target(), with(nullptr));
  absl::Status s = echo(channel, "plain");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(server.handlers_run(), 0);
}

TEST(TlsRefused, TlsClientAgainstCleartextServer) {
  testing::EchoProbe probe;
  testing::EchoService service(&probe);
  Server server;
  server.add_service(service);
  absl::StatusOr<int> port = server.start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  Channel channel("127.0.0.1:" + std::to_string(*port), with(channel_creds()));
  absl::Status s = echo(channel, "tls");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("TLS handshake failed"), std::string_view::npos) << s;
  EXPECT_EQ(probe.started.load(), 0);
  server.shutdown(std::chrono::milliseconds(100));
}

// A client of the test's own (OpenSSL over a blocking socket) that offers the ALPN protocols
// `alpn` (wire format; no ALPN extension at all when empty), then, if the handshake passes,
// sends an HTTP/2 request for Echo/Echo and a GOAWAY, and reads until the server closes.
struct RawClientResult {
  bool handshake_ok = false;
  std::string error;                     // OpenSSL's reason when the handshake failed
  std::size_t answered = 0;              // bytes of application data the server sent back
  std::string answer;                    // those bytes
  std::string cipher;                    // the suite negotiated
  bool resumed = false;                  // the session was resumed
  bool clean_end = false;                // the server's last word was a close_notify
  std::shared_ptr<SSL_SESSION> session;  // the session at the end, if any
};

struct RawClientOptions {
  std::string_view alpn = std::string_view("\x02h2", 3);
  int version = 0;                // the only TLS version offered; 0: 1.2 and 1.3
  const char* ciphers = nullptr;  // TLS 1.2 suites offered, in the client's order
  const char* suites = nullptr;   // TLS 1.3 suites offered, in the client's order
  bool client_cert = false;       // presents client.pem
  SSL_SESSION* resume = nullptr;  // a session to resume
  std::string path = "/ferry.testing.Echo/Echo";
  std::string http1_request;  // sent instead of the HTTP/2 call when not empty
};

// Sends o.http1_request when given, else an HTTP/2 gRPC call, and reads until the server closes.
RawClientResult raw_tls_client(const std::string& target, const RawClientOptions& o) {
  RawClientResult result;
  std::signal(SIGPIPE, SIG_IGN);  // the server may close before the request is written
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, FERRY_TEST_CERTS "/ca.pem", nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (!o.alpn.empty()) {
    SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(o.alpn.data()),
                            static_cast<unsigned>(o.alpn.size()));
  }
  if (o.version != 0) {
    SSL_CTX_set_min_proto_version(ctx, o.version);
    SSL_CTX_set_max_proto_version(ctx, o.version);
  }
  if (o.ciphers != nullptr) {
    EXPECT_EQ(SSL_CTX_set_cipher_list(ctx, o.ciphers), 1);
  }
  if (o.suites != nullptr) {
    EXPECT_EQ(SSL_CTX_set_ciphersuites(ctx, o.suites), 1);
  }
  if (o.client_cert) {
    EXPECT_EQ(SSL_CTX_use_certificate_chain_file(ctx, FERRY_TEST_CERTS "/client.pem"), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx, FERRY_TEST_CERTS "/client.key", SSL_FILETYPE_PEM),
              1);
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(target.substr(target.find(':') + 1))));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set1_host(ssl, "localhost");
  if (o.resume != nullptr) SSL_set_session(ssl, o.resume);
  ERR_clear_error();
  if (SSL_connect(ssl) == 1) {
    result.handshake_ok = true;
    result.cipher = SSL_get_cipher_name(ssl);
    result.resumed = SSL_session_reused(ssl) == 1;
    // Preface, empty SETTINGS, HEADERS (POST https PATH, content-type application/grpc, te
    // trailers; HPACK literals without indexing), DATA with an empty message and END_STREAM.
    const std::string& path = o.path;
    std::string block = "\x83\x87";
    block += '\x04' + std::string(1, static_cast<char>(path.size())) + path;
    block += std::string("\x01\x09localhost", 11);
    block += std::string("\x0f\x10\x10", 3) + "application/grpc";
    block += std::string("\x00\x02te\x08trailers", 13);
    std::string request = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    request += std::string("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
    request += std::string("\x00\x00", 2) + static_cast<char>(block.size()) +
               std::string("\x01\x04\x00\x00\x00\x01", 6) + block;
    request += std::string("\x00\x00\x05\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00", 14);
    // GOAWAY: nothing more from this end, so that the server closes once it has answered.
    request += std::string("\x00\x00\x08\x07\x00\x00\x00\x00\x00", 9) + std::string(8, '\0');
    if (!o.http1_request.empty()) request = o.http1_request;
    SSL_write(ssl, request.data(), static_cast<int>(request.size()));
    char buf[4096];
    int n;
    while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0) {
      result.answered += n;
      result.answer.append(buf, static_cast<std::size_t>(n));
    }
    result.clean_end = SSL_get_error(ssl, n) == SSL_ERROR_ZERO_RETURN;
    // Our close_notify too: OpenSSL marks a session freed without one not resumable.
    SSL_shutdown(ssl);
    // With TLS 1.3, once its tickets were read.
    if (SSL_SESSION* session = SSL_get1_session(ssl)) {
      result.session = std::shared_ptr<SSL_SESSION>(session, SSL_SESSION_free);
    }
  } else if (unsigned long e = ERR_get_error(); e != 0) {
    const char* reason = ERR_reason_error_string(e);
    result.error = reason != nullptr ? reason : "unknown";
  }
  SSL_free(ssl);
  ::close(fd);
  SSL_CTX_free(ctx);
  return result;
}

// The raw client itself, offering h2: the server answers its request (so that the refusals
// below are the ALPN's doing, not the raw client's).
TEST(TlsAlpn, RawClientOfferingH2IsServed) {
  TlsServer server(server_creds());
  const RawClientResult r = raw_tls_client(server.target(), {});
  EXPECT_TRUE(r.handshake_ok) << r.error;
  EXPECT_GT(r.answered, 0u);
  EXPECT_EQ(server.handlers_run(), 1);
}

TEST(TlsAlpn, ClientOfferingOnlyHttp11IsServedHttp11) {
  // gRPC-Web and Connect clients may speak HTTP/1.1 over TLS: the handshake passes, and the
  // raw client's HTTP/2 bytes get an HTTP/1.1 answer (400), not a handler.
  TlsServer server(server_creds());
  const RawClientResult r = raw_tls_client(server.target(), {.alpn = "\x08http/1.1"});
  EXPECT_TRUE(r.handshake_ok) << r.error;
  EXPECT_GT(r.answered, 0u);
  EXPECT_EQ(server.handlers_run(), 0);
}

// Issue #40: over TLS with ALPN http/1.1 a CONNECT may be a connection's first request (cleartext
// ports send it to HTTP/2). A CONNECT whose body is a whole POST is refused at its head (405),
// and the POST is never read as a request: no handler runs, one response.
TEST(TlsAlpn, Http11ConnectWithABodyNeverRunsItsBody) {
  TlsServer server(server_creds());
  const std::string body = "{}";
  const std::string hidden =
      "POST /ferry.testing.Echo/Echo HTTP/1.1\r\nhost: localhost\r\ncontent-type: "
      "application/json\r\ncontent-length: 2\r\n\r\n" +
      body;
  const RawClientResult r = raw_tls_client(
      server.target(),
      {.alpn = "\x08http/1.1",
       .http1_request = "CONNECT localhost:443 HTTP/1.1\r\nhost: localhost\r\ncontent-length: " +
                        std::to_string(hidden.size()) + "\r\n\r\n" + hidden});
  EXPECT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(r.answer.substr(0, 12), "HTTP/1.1 405") << r.answer;
  EXPECT_EQ(r.answer.find("HTTP/1.1", 1), std::string::npos) << r.answer;
  EXPECT_EQ(server.handlers_run(), 0);
}

TEST(TlsAlpn, ClientOfferingNeitherH2NorHttp11IsRefused) {
  TlsServer server(server_creds());
  ::testing::internal::CaptureStderr();
  const RawClientResult r = raw_tls_client(server.target(), {.alpn = "\x08spdy/3.1"});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(r.handshake_ok);
  EXPECT_NE(r.error.find("no application protocol"), std::string::npos) << r.error;
  EXPECT_NE(log.find("offered neither ALPN"), std::string::npos) << log;
  EXPECT_EQ(r.answered, 0u);
  EXPECT_EQ(server.handlers_run(), 0);
}

TEST(TlsAlpn, ClientOfferingNoAlpnIsRefused) {
  TlsServer server(server_creds());
  ::testing::internal::CaptureStderr();
  const RawClientResult r = raw_tls_client(server.target(), {.alpn = ""});
  const std::string log = ::testing::internal::GetCapturedStderr();
  // The handshake itself passes (the server learns only at its end that nothing was chosen);
  // then the server closes without a byte of HTTP/2, and logs why.
  EXPECT_EQ(r.answered, 0u);
  EXPECT_NE(log.find("did not negotiate ALPN \"h2\" or \"http/1.1\""), std::string::npos) << log;
  EXPECT_EQ(server.handlers_run(), 0);
}

TEST(TlsAlpn, Http1OffRefusesAClientOfferingOnlyHttp11) {
  TlsServer server(server_creds("server", false, true, /*http1=*/false));
  ::testing::internal::CaptureStderr();
  const RawClientResult r = raw_tls_client(server.target(), {.alpn = "\x08http/1.1"});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(r.handshake_ok);
  EXPECT_NE(r.error.find("no application protocol"), std::string::npos) << r.error;
  EXPECT_NE(log.find("HTTP/1.1 is off"), std::string::npos) << log;
  EXPECT_EQ(server.handlers_run(), 0);
  // h2 still is served, also to a client that offers both.
  const RawClientResult both = raw_tls_client(server.target(), {.alpn = "\x08http/1.1\x02h2"});
  EXPECT_TRUE(both.handshake_ok) << both.error;
  EXPECT_EQ(server.handlers_run(), 1);
}

// The server's order of suites wins over the client's (it prefers AES-128-GCM), except for a
// client that puts ChaCha20 first (no AES in its hardware), as grpc-go's server does.
TEST(TlsPolicy, ServerChoosesTheSuiteByItsOwnOrder) {
  TlsServer server(server_creds());
  RawClientResult r = raw_tls_client(
      server.target(), {.version = TLS1_2_VERSION,
                        .ciphers = "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256"});
  EXPECT_EQ(r.cipher, "ECDHE-ECDSA-AES128-GCM-SHA256") << r.error;
  r = raw_tls_client(server.target(), {.version = TLS1_3_VERSION,
                                       .suites = "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"});
  EXPECT_EQ(r.cipher, "TLS_AES_128_GCM_SHA256") << r.error;
  r = raw_tls_client(
      server.target(),
      {.version = TLS1_3_VERSION, .suites = "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"});
  EXPECT_EQ(r.cipher, "TLS_CHACHA20_POLY1305_SHA256") << r.error;
  r = raw_tls_client(server.target(),
                     {.version = TLS1_2_VERSION,
                      .ciphers = "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256"});
  EXPECT_EQ(r.cipher, "ECDHE-ECDSA-CHACHA20-POLY1305") << r.error;
}

// A client that resumes its session (as Go, Java, curl and browsers do on every reconnect) with
// a server that verifies client certificates: the resumption succeeds, and the handler still
// sees the identity of the certificate the full handshake verified. (Without a session id
// context OpenSSL fails every such resumption with a fatal alert.)
TEST(TlsSessions, ResumptionWithMutualTlsKeepsThePeerIdentity) {
  TlsServer server(server_creds("server", /*mutual=*/true));
  for (const int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    SCOPED_TRACE(version == TLS1_2_VERSION ? "TLS 1.2" : "TLS 1.3");
    RawClientOptions options{.version = version, .client_cert = true, .path = "/tls.Who/Who"};
    const RawClientResult first = raw_tls_client(server.target(), options);
    ASSERT_TRUE(first.handshake_ok) << first.error;
    EXPECT_FALSE(first.resumed);
    EXPECT_NE(first.answer.find("CN=ferry test client"), std::string::npos);
    ASSERT_NE(first.session, nullptr);
    options.resume = first.session.get();
    const RawClientResult again = raw_tls_client(server.target(), options);
    EXPECT_TRUE(again.handshake_ok) << again.error;
    EXPECT_TRUE(again.resumed);
    EXPECT_NE(again.answer.find("CN=ferry test client"), std::string::npos);
    EXPECT_NE(again.answer.find("spiffe://ferry.test/ns/default/sa/client"), std::string::npos);
  }
}

// A scan of a ferry server with OpenSSL's own client (`openssl s_client`, the openssl package),
// as testssl.sh makes one: protocols, TLS 1.2 suites, TLS 1.3 suites and groups, each offered
// alone, accepted or refused as docs/tls_and_unix_sockets.md lists them; renegotiation refused.
// Without the system's openssl.cnf (its floor would refuse the old protocols on the client's
// side), and at security level 0, so that each refusal is the server's.
struct SClient {
  std::string output;
  // "TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256" after "New, " or "Reused, "; "(NONE)..." when
  // the handshake failed.
  std::string outcome() const {
    for (const char* tag : {"\nNew, ", "\nReused, "}) {
      const std::size_t at = output.find(tag);
      if (at != std::string::npos) {
        const std::size_t from = at + std::strlen(tag);
        return output.substr(from, output.find('\n', from) - from);
      }
    }
    return "no summary";
  }
  bool reused() const { return output.find("\nReused, ") != std::string::npos; }
};

// input goes to s_client after `before` seconds (so that what the server sends first, its
// HTTP/2 SETTINGS, has arrived), then s_client lingers `linger` seconds for the answers.
SClient s_client(int port, const std::string& args, const std::string& input = "",
                 const char* linger = "0", const char* before = "0") {
#ifndef FERRY_OPENSSL_CLI
  ADD_FAILURE() << "the openssl command was not found at configure time";
  return {};
#else
  const std::string command =
      "(sleep " + std::string(before) + "; printf '" + input + "'; sleep " + linger +
      ") | OPENSSL_CONF=/dev/null timeout 20 " + FERRY_OPENSSL_CLI +
      " s_client -connect 127.0.0.1:" + std::to_string(port) +
      " -servername localhost -CAfile " FERRY_TEST_CERTS "/ca.pem -verify_return_error " +
      "-alpn h2 " + args + " 2>&1";
  SClient out;
  FILE* p = ::popen(command.c_str(), "r");
  char buf[4096];
  for (std::size_t n; p != nullptr && (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) {
    out.output.append(buf, n);
  }
  if (p != nullptr) ::pclose(p);
  return out;
#endif
}

TEST(TlsScan, ProtocolsSuitesAndGroupsOfferedAndRefused) {
  TlsServer server(server_creds());
  const int port = server.port();
  ::testing::internal::CaptureStderr();  // the server's log lines for the refused handshakes
  // Protocols: TLS 1.0 and 1.1 refused (protocol_version alert), 1.2 and 1.3 accepted.
  for (const char* old : {"-tls1", "-tls1_1"}) {
    const SClient r = s_client(port, std::string(old) + " -cipher DEFAULT@SECLEVEL=0");
    EXPECT_EQ(r.outcome(), "(NONE), Cipher is (NONE)") << old << "\n" << r.output;
    EXPECT_NE(r.output.find("alert protocol version"), std::string::npos) << r.output;
  }
  EXPECT_EQ(s_client(port, "-tls1_2").outcome(),
            "TLSv1.2, Cipher is ECDHE-ECDSA-AES128-GCM-SHA256");
  EXPECT_EQ(s_client(port, "-tls1_3").outcome(), "TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256");
  // TLS 1.2: the AEAD suites with ECDHE only (the server's key is ECDSA).
  for (const char* suite : {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                            "ECDHE-ECDSA-CHACHA20-POLY1305"}) {
    EXPECT_EQ(s_client(port, std::string("-tls1_2 -cipher ") + suite).outcome(),
              std::string("TLSv1.2, Cipher is ") + suite);
  }
  for (const char* weak :
       {"ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA", "ECDHE-ECDSA-AES128-SHA256",
        "ECDHE-ECDSA-AES256-SHA384", "ECDHE-ECDSA-AES128-CCM", "ECDHE-ECDSA-ARIA128-GCM-SHA256",
        "ECDHE-ECDSA-CAMELLIA128-SHA256", "ECDHE-ECDSA-NULL-SHA", "AES128-GCM-SHA256", "AES128-SHA",
        "DHE-RSA-AES128-GCM-SHA256", "PSK-AES128-GCM-SHA256"}) {
    const SClient r = s_client(port, std::string("-tls1_2 -cipher ") + weak + "@SECLEVEL=0");
    EXPECT_EQ(r.outcome(), "(NONE), Cipher is (NONE)") << weak << "\n" << r.output;
  }
  // TLS 1.3: the three suites, not the CCM ones.
  for (const char* suite :
       {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}) {
    EXPECT_EQ(s_client(port, std::string("-tls1_3 -ciphersuites ") + suite).outcome(),
              std::string("TLSv1.3, Cipher is ") + suite);
  }
  for (const char* suite : {"TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}) {
    const SClient r = s_client(port, std::string("-tls1_3 -ciphersuites ") + suite);
    EXPECT_EQ(r.outcome(), "(NONE), Cipher is (NONE)") << suite << "\n" << r.output;
  }
  // Groups: X25519 and the NIST curves; no X448, no finite-field groups. (Each accepted one
  // with TLS 1.3 only: a TLS 1.2 client's groups also name the curves an ECDSA certificate may
  // use, and the server's is P-256.)
  const std::pair<const char*, const char*> groups[] = {{"X25519", "X25519"},
                                                        {"P-256", "ECDH, prime256v1"},
                                                        {"P-384", "ECDH, secp384r1"},
                                                        {"P-521", "ECDH, secp521r1"}};
  for (const auto& [group, shown] : groups) {
    const SClient r = s_client(port, std::string("-tls1_3 -groups ") + group);
    EXPECT_EQ(r.outcome(), "TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256") << group << "\n"
                                                                        << r.output;
    EXPECT_NE(r.output.find(std::string("Server Temp Key: ") + shown), std::string::npos)
        << group << "\n"
        << r.output;
  }
  for (const char* version : {"-tls1_2", "-tls1_3"}) {
    for (const char* group : {"ffdhe2048", "X448"}) {
      const SClient r = s_client(port, std::string(version) + " -groups " + group);
      EXPECT_EQ(r.outcome(), "(NONE), Cipher is (NONE)") << group << "\n" << r.output;
    }
  }
  ::testing::internal::GetCapturedStderr();
}

TEST(TlsScan, RenegotiationIsRefused) {
  TlsServer server(server_creds());
  // s_client renegotiates when a line of its input is "R" (TLS 1.2): once the server's SETTINGS
  // are in, or a slow server's (the sanitizers') SETTINGS arrive in the middle of the
  // renegotiation and s_client fails on an "unexpected record" before the server's answer.
  const SClient r = s_client(server.port(), "-tls1_2", "R\n", "1", "0.5");
  EXPECT_EQ(r.outcome(), "TLSv1.2, Cipher is ECDHE-ECDSA-AES128-GCM-SHA256") << r.output;
  EXPECT_NE(r.output.find("RENEGOTIATING"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no renegotiation"), std::string::npos) << r.output;
}

// Session resumption with a server that verifies client certificates, through s_client's
// saved sessions (-sess_out, then -sess_in), both versions.
TEST(TlsScan, SessionsResumeWithMutualTls) {
  TlsServer server(server_creds("server", /*mutual=*/true));
  char dir[] = "/tmp/ferry_tls_sessXXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string client =
      " -cert " FERRY_TEST_CERTS "/client.pem -key " FERRY_TEST_CERTS "/client.key";
  for (const char* version : {"-tls1_2", "-tls1_3"}) {
    const std::string session = std::string(dir) + "/session" + version;
    // TLS 1.3 sends its tickets after the handshake: s_client waits a moment for them.
    const SClient first =
        s_client(server.port(), version + client + " -sess_out " + session, "", "0.3");
    EXPECT_FALSE(first.reused()) << first.output;
    EXPECT_EQ(first.outcome().find("(NONE)"), std::string::npos) << first.output;
    const SClient again = s_client(server.port(), version + client + " -sess_in " + session);
    EXPECT_TRUE(again.reused()) << version << "\n" << again.output;
    EXPECT_EQ(again.output.find("alert"), std::string::npos) << again.output;
    std::remove(session.c_str());
  }
  ::rmdir(dir);
}

// A TLS server of the test's own (OpenSSL over a blocking socket, one connection) that answers
// one HTTP/1.1 request with a Connect unary response delimited by the connection's end (no
// content-length, not chunked), then closes: after a close_notify, or with a bare TCP close
// (what a cut connection looks like).
std::string close_delimited_answer(bool close_notify, std::string payload) {
  std::signal(SIGPIPE, SIG_IGN);
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX_use_certificate_chain_file(ctx, FERRY_TEST_CERTS "/server.pem");
  SSL_CTX_use_PrivateKey_file(ctx, FERRY_TEST_CERTS "/server.key", SSL_FILETYPE_PEM);
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::listen(listener, 1);
  socklen_t len = sizeof(addr);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread server([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const int n = SSL_read(ssl, buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, static_cast<std::size_t>(n));
      }
      // The request's body is small and came with its head (or does not matter: the answer is
      // canned).
      EchoResponse response;
      response.set_payload(payload);
      const std::string answer =
          "HTTP/1.1 200 OK\r\ncontent-type: application/proto\r\nconnection: close\r\n\r\n" +
          response.SerializeAsString();
      SSL_write(ssl, answer.data(), static_cast<int>(answer.size()));
      if (close_notify) SSL_shutdown(ssl);
    }
    ::shutdown(fd, SHUT_WR);
    char drain[256];
    while (::read(fd, drain, sizeof(drain)) > 0) {
    }
    SSL_free(ssl);
    ::close(fd);
  });
  ChannelOptions options = with(channel_creds());
  options.http_version = ChannelHttpVersion::kHttp1;
  options.protocol = ChannelProtocol::kConnect;
  std::string out;
  {
    Channel channel("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), options);
    EchoRequest request;
    EchoResponse response;
    ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(10));
    const absl::Status s =
        channel.call_blocking("/ferry.testing.Echo/Echo", ctx, request, response);
    out = s.ok() ? "ok: " + response.payload() : s.ToString();
  }
  server.join();
  ::close(listener);
  SSL_CTX_free(ctx);
  return out;
}

// A response body delimited by the connection's end is whole only if the server's close_notify
// says so: a bare close may be a cut (an attacker's, a middlebox's), and the call fails rather
// than take a truncated body as complete.
TEST(TlsTruncation, CloseDelimitedHttp1BodyNeedsTheServersCloseNotify) {
  EXPECT_EQ(close_delimited_answer(/*close_notify=*/true, "whole"), "ok: whole");
  const std::string cut = close_delimited_answer(/*close_notify=*/false, "cut");
  EXPECT_EQ(cut.find("ok:"), std::string::npos) << cut;
  EXPECT_NE(cut.find("UNAVAILABLE"), std::string::npos) << cut;
}

// ferry's own server ends its connections with a close_notify: an HTTP/1.1 client over TLS that
// waits for the end reads a clean one. (Here: a raw client's last read is SSL_ERROR_ZERO_RETURN
// after the server's answer to its request and GOAWAY.)
TEST(TlsTruncation, ServerClosesWithCloseNotify) {
  TlsServer server(server_creds());
  const RawClientResult r = raw_tls_client(server.target(), {});
  EXPECT_TRUE(r.handshake_ok) << r.error;
  EXPECT_GT(r.answered, 0u);
  EXPECT_TRUE(r.clean_end) << r.error;
}

// Certificate revocation lists made by the openssl command (`openssl ca -revoke`, then
// `-gencrl`) into a directory of their own, as an operator would: write(certs...) replaces the
// test CA's CRL with one that revokes those certificates (none: a CRL that revokes nothing).
class CrlDir {
 public:
  CrlDir() {
    char dir[] = "/tmp/ferry_crlXXXXXX";
    EXPECT_NE(::mkdtemp(dir), nullptr);
    root_ = dir;
    std::filesystem::create_directories(root_ + "/crls");
  }
  ~CrlDir() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  std::string path() const { return root_ + "/crls"; }

  void write(std::vector<std::string> revoked, const std::string& name = "ca.crl") {
#ifndef FERRY_OPENSSL_CLI
    ADD_FAILURE() << "the openssl command was not found at configure time";
#else
    const std::string work = root_ + "/ca" + std::to_string(++round_);
    std::filesystem::create_directories(work);
    std::FILE* cnf = std::fopen((work + "/ca.cnf").c_str(), "w");
    std::fprintf(cnf,
                 "[ca]\ndefault_ca = test\n[test]\ndatabase = %s/index.txt\n"
                 "default_md = sha256\ndefault_crl_days = 1\n",
                 work.c_str());
    std::fclose(cnf);
    std::fclose(std::fopen((work + "/index.txt").c_str(), "w"));
    const std::string ca = std::string(FERRY_OPENSSL_CLI) + " ca -config " + work +
                           "/ca.cnf -keyfile " FERRY_TEST_CERTS "/ca.key -cert " FERRY_TEST_CERTS
                           "/ca.pem";
    for (const std::string& cert : revoked) {
      ASSERT_EQ(
          std::system((ca + " -revoke " FERRY_TEST_CERTS "/" + cert + " 2>/dev/null").c_str()), 0);
    }
    // Written beside, then renamed in: a reload never reads half a file.
    const std::string out = work + "/" + name;
    ASSERT_EQ(std::system((ca + " -gencrl -out " + out + " 2>/dev/null").c_str()), 0);
    std::filesystem::rename(out, path() + "/" + name);
#endif
  }

 private:
  std::string root_;
  int round_ = 0;
};

std::shared_ptr<ServerCredentials> crl_server_creds(const std::string& crls,
                                                    std::chrono::milliseconds refresh) {
  auto creds = ServerCredentials::create({.certificate_chain = cert("server.pem"),
                                          .private_key = cert("server.key"),
                                          .client_ca = cert("ca.pem"),
                                          .crl_directory = crls,
                                          .crl_refresh_interval = refresh});
  EXPECT_TRUE(creds.ok()) << creds.status();
  return creds.ok() ? *creds : nullptr;
}

std::shared_ptr<ChannelCredentials> crl_channel_creds(const std::string& crls) {
  auto creds = ChannelCredentials::create({.root_certificates = cert("ca.pem"),
                                           .certificate_chain = cert("client.pem"),
                                           .private_key = cert("client.key"),
                                           .crl_directory = crls});
  EXPECT_TRUE(creds.ok()) << creds.status();
  return creds.ok() ? *creds : nullptr;
}

// The server checks the client's chain: a revoked client certificate fails the handshake, with
// the reason in the server's log and in the client's status; one the CRL does not list passes.
TEST(TlsRevocation, ServerRefusesARevokedClientCertificate) {
  CrlDir crls;
  crls.write({"client.pem"});
  TlsServer server(crl_server_creds(crls.path(), std::chrono::seconds(60)));
  ::testing::internal::CaptureStderr();
  Channel channel(server.target(), with(channel_creds("ca.pem", /*with_client_cert=*/true)));
  const absl::Status s = echo(channel, "revoked");
  server.stop();  // the client may hear of the failed handshake before the server logs it
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("certificate revoked"), std::string_view::npos) << s;
  EXPECT_NE(log.find("certificate revoked"), std::string::npos) << log;
  EXPECT_EQ(server.handlers_run(), 0);

  CrlDir none;
  none.write({});
  TlsServer open(crl_server_creds(none.path(), std::chrono::seconds(60)));
  Channel ok(open.target(), with(channel_creds("ca.pem", /*with_client_cert=*/true)));
  EXPECT_TRUE(echo(ok, "not revoked").ok());
}

// The client checks the server's chain the same way.
TEST(TlsRevocation, ClientRefusesARevokedServerCertificate) {
  TlsServer server(server_creds("server", /*mutual=*/true));
  CrlDir crls;
  crls.write({"server.pem"});
  Channel channel(server.target(), with(crl_channel_creds(crls.path())));
  const absl::Status s = echo(channel, "revoked");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("certificate revoked"), std::string_view::npos) << s;
  EXPECT_EQ(server.handlers_run(), 0);

  CrlDir none;
  none.write({"client.pem"});  // another certificate's revocation does not matter here
  Channel ok(server.target(), with(crl_channel_creds(none.path())));
  EXPECT_TRUE(echo(ok, "not revoked").ok());
}

// No CRL for the issuer (an empty directory): revocation is undetermined, which passes (A69).
TEST(TlsRevocation, NoCrlForTheIssuerPasses) {
  CrlDir empty;
  TlsServer server(crl_server_creds(empty.path(), std::chrono::seconds(60)));
  Channel channel(server.target(), with(crl_channel_creds(empty.path())));
  EXPECT_TRUE(echo(channel, "undetermined").ok());
}

// The directory is read again when it changes: a revocation written while the server runs
// refuses the next connection, its withdrawal lets the one after in, and a file that is no CRL
// keeps the CRLs in force (said on stderr).
TEST(TlsRevocation, DirectoryChangesAreReloaded) {
  using namespace std::chrono_literals;
  CrlDir crls;
  crls.write({});
  TlsServer server(crl_server_creds(crls.path(), 50ms));
  auto call = [&] {
    Channel channel(server.target(), with(channel_creds("ca.pem", /*with_client_cert=*/true)));
    return echo(channel, "reload");
  };
  ASSERT_TRUE(call().ok());
  ::testing::internal::CaptureStderr();
  crls.write({"client.pem"});
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(call().code(), absl::StatusCode::kUnavailable);
  {
    std::FILE* junk = std::fopen((crls.path() + "/junk.crl").c_str(), "w");
    std::fputs("not a CRL\n", junk);
    std::fclose(junk);
  }
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(call().code(), absl::StatusCode::kUnavailable);  // the revocation stays in force
  std::remove((crls.path() + "/junk.crl").c_str());
  crls.write({});
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(call().ok());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("CRLs not reloaded"), std::string::npos) << log;
  EXPECT_NE(log.find("no PEM CRL in " + crls.path() + "/junk.crl"), std::string::npos) << log;
}

// A session made before a revocation cannot be resumed past the refresh interval: resumption
// skips verification, so the server's sessions last no longer than a revocation takes to be
// read.
TEST(TlsRevocation, SessionsOutliveNoRevocation) {
  using namespace std::chrono_literals;
  CrlDir crls;
  crls.write({});
  TlsServer server(crl_server_creds(crls.path(), 1s));
  RawClientOptions options{.client_cert = true, .path = "/tls.Who/Who"};
  const RawClientResult first = raw_tls_client(server.target(), options);
  ASSERT_TRUE(first.handshake_ok) << first.error;
  ASSERT_NE(first.session, nullptr);
  options.resume = first.session.get();
  const RawClientResult soon = raw_tls_client(server.target(), options);
  EXPECT_TRUE(soon.resumed);  // resumption works with CRLs too
  crls.write({"client.pem"});
  std::this_thread::sleep_for(2100ms);  // past the session's lifetime, counted in whole seconds
  ::testing::internal::CaptureStderr();
  const RawClientResult later = raw_tls_client(server.target(), options);
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(later.resumed);
  EXPECT_EQ(later.answer.find("CN=ferry test client"), std::string::npos);
}

TEST(TlsRevocation, BadDirectoryIsRefusedAtCreation) {
  CrlDir crls;
  auto missing = ServerCredentials::create({.certificate_chain = cert("server.pem"),
                                            .private_key = cert("server.key"),
                                            .client_ca = cert("ca.pem"),
                                            .crl_directory = crls.path() + "/none"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("CRL directory"), std::string_view::npos)
      << missing.status();
  std::FILE* junk = std::fopen((crls.path() + "/junk").c_str(), "w");
  std::fputs("not a CRL\n", junk);
  std::fclose(junk);
  auto bad = ChannelCredentials::create(
      {.root_certificates = cert("ca.pem"), .crl_directory = crls.path()});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("junk"), std::string_view::npos) << bad.status();
  auto without_ca = ServerCredentials::create({.certificate_chain = cert("server.pem"),
                                               .private_key = cert("server.key"),
                                               .crl_directory = crls.path()});
  EXPECT_EQ(without_ca.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TlsCredentials, BadInputIsRefusedWithTheReason) {
  auto missing = ServerCredentials::create(
      {.certificate_chain = cert("nonexistent.pem"), .private_key = cert("server.key")});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  auto mismatch = ServerCredentials::create(
      {.certificate_chain = cert("server.pem"), .private_key = cert("client.key")});
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("private key"), std::string_view::npos)
      << mismatch.status();
  auto garbage = ServerCredentials::create(
      {.certificate_chain = Pem::content("not PEM"), .private_key = Pem::content("nor this")});
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  auto half = ChannelCredentials::create(
      {.root_certificates = cert("ca.pem"), .certificate_chain = cert("client.pem")});
  EXPECT_EQ(half.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TlsCredentials, InMemoryPem) {
  auto read = [](const std::string& name) {
    std::string text;
    FILE* f = std::fopen((std::string(FERRY_TEST_CERTS) + "/" + name).c_str(), "rb");
    char buf[4096];
    for (std::size_t n; f != nullptr && (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) {
      text.append(buf, n);
    }
    if (f != nullptr) std::fclose(f);
    return Pem::content(text);
  };
  auto server = ServerCredentials::create({read("server.pem"), read("server.key"), read("ca.pem")});
  ASSERT_TRUE(server.ok()) << server.status();
  TlsServer s(*server);
  auto client = ChannelCredentials::create({.root_certificates = read("ca.pem"),
                                            .certificate_chain = read("client.pem"),
                                            .private_key = read("client.key")});
  ASSERT_TRUE(client.ok()) << client.status();
  Channel channel(s.target(), with(*client));
  EXPECT_NE(who(channel).find("CN=ferry test client"), std::string::npos);
}

// An idle TLS connection gives its read and output blocks back to the pool (and OpenSSL its
// record buffers), waits for the client's next bytes without them, and serves the next call.
TEST(TlsLifecycle, IdleConnectionReleasesItsBuffersAndStillServes) {
  using namespace std::chrono_literals;
  ServerOptions options;
  options.num_threads = 1;
  options.release_idle_buffers_after = 300ms;
  TlsServer server(server_creds(), options);
  Channel channel(server.target(), with(channel_creds()));
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(echo(channel, std::string(100000, 'i')).ok());
    // A short fixed pause: the call's own blocks go back first, so that only the connection's
    // count below (nothing shows when the last of them has).
    std::this_thread::sleep_for(50ms);
    const std::int64_t busy = BufferPool::instance().stats().blocks_in_use;
    std::int64_t idle = busy;
    for (auto until = std::chrono::steady_clock::now() + 3s;
         std::chrono::steady_clock::now() < until && idle > busy - 2;) {
      std::this_thread::sleep_for(20ms);
      idle = BufferPool::instance().stats().blocks_in_use;
    }
    EXPECT_LE(idle, busy - 2) << "round " << round;
  }
  ASSERT_TRUE(echo(channel, "after").ok());
}

// Rotation while calls run: established connections keep working (a stream open across the
// swap, unary calls in a loop), new connections get the new certificate.
TEST(TlsRotation, NewConnectionsUseTheNewCertificate) {
  std::shared_ptr<ServerCredentials> creds = server_creds();
  TlsServer server(creds);
  Channel old_ca(server.target(), with(channel_creds("ca.pem")));
  ASSERT_TRUE(echo(old_ca, "before").ok());

  testing::Echo::BlockingStub stub(old_ca);
  ClientContext chat_ctx;
  chat_ctx.set_timeout(std::chrono::seconds(30));
  auto chat = stub.Chat(chat_ctx);
  EchoRequest r;
  EchoResponse response;
  r.set_payload("across the swap");
  ASSERT_TRUE(chat.write(r).ok());
  ASSERT_TRUE(chat.read(response));

  std::atomic<bool> stop{false};
  std::atomic<int> ok_calls{0}, failed_calls{0};
  std::thread load([&] {
    while (!stop.load()) (echo(old_ca, "load").ok() ? ok_calls : failed_calls).fetch_add(1);
  });
  // Calls run before the swap, and after it (below) on the same connection.
  ASSERT_TRUE(testing::eventually([&] { return ok_calls.load() > 0; }));
  ASSERT_TRUE(creds
                  ->update({.certificate_chain = cert("other_server.pem"),
                            .private_key = cert("other_server.key")})
                  .ok());
  // An invalid update leaves the new one in force.
  EXPECT_FALSE(creds
                   ->update({.certificate_chain = cert("other_server.pem"),
                             .private_key = cert("server.key")})
                   .ok());
  const int before_swap = ok_calls.load();
  EXPECT_TRUE(testing::eventually([&] { return ok_calls.load() > before_swap; }));

  Channel new_ca(server.target(), with(channel_creds("other_ca.pem")));
  EXPECT_TRUE(echo(new_ca, "after").ok());
  Channel stale(server.target(), with(channel_creds("ca.pem")));
  EXPECT_EQ(echo(stale, "after").code(), absl::StatusCode::kUnavailable);

  ASSERT_TRUE(chat.write(r).ok());
  ASSERT_TRUE(chat.read(response));
  EXPECT_EQ(response.payload(), r.payload());
  chat.writes_done();
  EXPECT_TRUE(chat.finish().ok());
  stop.store(true);
  load.join();
  EXPECT_GT(ok_calls.load(), 0);
  EXPECT_EQ(failed_calls.load(), 0);
}

}  // namespace
}  // namespace ferry::tls_test
