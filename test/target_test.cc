// Channel targets (src/client/target.h): every form channel.h documents parses to the host,
// port and authority expected, malformed ones are refused with a reason, and a channel reaches
// a real server through each accepted form.
#include "client/target.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "ferry/channel.h"
#include "ferry/server.h"
#include "support/echo_service.h"

namespace ferry::target_test {
namespace {

using detail::canonical_target;
using detail::parse_target;

struct Form {
  std::string target;
  std::string host;
  std::string port;
  std::string authority;
};

class TargetForms : public ::testing::TestWithParam<Form> {};

TEST_P(TargetForms, Parse) {
  const Form& f = GetParam();
  absl::StatusOr<detail::Target> t = parse_target(f.target);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, f.host);
  EXPECT_EQ(t->port, f.port);
  EXPECT_EQ(t->authority, f.authority);
}

INSTANTIATE_TEST_SUITE_P(
    Documented, TargetForms,
    ::testing::Values(Form{"127.0.0.1:50051", "127.0.0.1", "50051", "127.0.0.1:50051"},
                      Form{"localhost:8080", "localhost", "8080", "localhost:8080"},
                      Form{"example.com", "example.com", "443", "example.com"},
                      Form{"[::1]:50051", "::1", "50051", "[::1]:50051"},
                      Form{"[::1]", "::1", "443", "[::1]"},
                      Form{"dns:///localhost:50051", "localhost", "50051", "localhost:50051"},
                      Form{"dns:///example.com", "example.com", "443", "example.com"},
                      Form{"dns:localhost:7", "localhost", "7", "localhost:7"},
                      Form{"ipv4:127.0.0.1:9", "127.0.0.1", "9", "127.0.0.1:9"},
                      Form{"ipv6:[::1]:9", "::1", "9", "[::1]:9"},
                      // RFC 3986 and gRPC's naming: one slash starts the path, not the host
                      // (the host was "/localhost"), and the host and port are percent-decoded.
                      Form{"dns:/localhost:7", "localhost", "7", "localhost:7"},
                      Form{"dns:///my%2Dhost:80", "my-host", "80", "my-host:80"},
                      Form{"dns:///localhost:%35%30", "localhost", "50", "localhost:50"},
                      Form{"[fe80::1%25lo]:80", "fe80::1%lo", "80", "[fe80::1%lo]:80"},
                      Form{"ipv6:[fe80::1%25eth0]:9", "fe80::1%eth0", "9", "[fe80::1%eth0]:9"},
                      Form{"dns:///[fe80::1%25lo]", "fe80::1%lo", "443", "[fe80::1%lo]"}));

// gRFC A66's grpc.target: a target with a scheme as written, any other with dns:/// before it.
TEST(Target, CanonicalFormForMetrics) {
  EXPECT_EQ(canonical_target("localhost:50051"), "dns:///localhost:50051");
  EXPECT_EQ(canonical_target("[::1]:50051"), "dns:///[::1]:50051");
  EXPECT_EQ(canonical_target("example.com"), "dns:///example.com");
  EXPECT_EQ(canonical_target("dns:///example.com:443"), "dns:///example.com:443");
  EXPECT_EQ(canonical_target("dns:example.com:443"), "dns:example.com:443");
  EXPECT_EQ(canonical_target("unix:///tmp/s.sock"), "unix:///tmp/s.sock");
  EXPECT_EQ(canonical_target("unix-abstract:name"), "unix-abstract:name");
  EXPECT_EQ(canonical_target("ipv4:10.0.0.1:80,10.0.0.2:80"), "ipv4:10.0.0.1:80,10.0.0.2:80");
  EXPECT_EQ(canonical_target("ipv6:[::1]:80"), "ipv6:[::1]:80");
}

TEST(Target, MalformedOnesSayWhy) {
  for (const char* bad : {"", "dns:///", ":50051", "host:", "host:port", "host:99999", "::1:50051",
                          "[::1", "[::1]x", "dns://8.8.8.8", "dns://8.8.8.8:x/h:1", "dns://::1/h:1",
                          "dns://unix:/x/h:1", "dns://[::1/h:1"}) {
    absl::StatusOr<detail::Target> t = parse_target(bad);
    EXPECT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(t.status().message().find("bad target"), std::string_view::npos) << bad;
  }
}

// A '%' without two hex digits after it is refused in every form, saying which escape and how
// to write a '%' (an unencoded IPv6 zone included: "%eth0" is not an escape).
TEST(Target, MalformedPercentEscapesAreRefused) {
  for (const char* bad : {"unix:/tmp/%zz", "unix:/tmp/a%2", "unix:/tmp/a%", "unix-abstract:%G0",
                          "dns:///host%", "dns:///ho%st:80", "[fe80::1%eth0]:80",
                          "ipv6:[fe80::1%eth0]:80", "localhost:8%0", "dns:/%%41"}) {
    absl::StatusOr<detail::Target> t = parse_target(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(t.status().message().find("malformed percent-escape"), std::string_view::npos)
        << t.status();
  }
  // An escape cannot smuggle a separator into a form that refuses it.
  EXPECT_FALSE(parse_target("dns:///a%3A1%3A2").ok());  // "a:1:2": an IPv6 address unbracketed
}

// dns://dnsserver/host parses (the server's port defaults to 53), but the built-in resolver
// cannot ask a chosen server: every call fails with UNIMPLEMENTED naming the reason, at once.
TEST(Target, DnsServerAuthorityParsesButCallsFailUnimplemented) {
  for (const auto& [target, server] :
       {std::pair<std::string, std::string>{"dns://8.8.8.8/example.com:1", "8.8.8.8"},
        {"dns://8.8.8.8:5353/example.com", "8.8.8.8:5353"},
        {"dns://[::1]:53/example.com:1", "[::1]:53"},
        {"dns://ns1.example.net/example.com:1", "ns1.example.net"}}) {
    absl::StatusOr<detail::Target> t = parse_target(target);
    ASSERT_TRUE(t.ok()) << target << ": " << t.status();
    EXPECT_EQ(t->dns_authority, server);
    EXPECT_EQ(t->host, "example.com");
  }
  EXPECT_EQ(parse_target("dns:///example.com:1")->dns_authority, "");
  Channel channel("dns://8.8.8.8/localhost:1");
  testing::Echo::BlockingStub stub(channel);
  testing::EchoRequest request;
  testing::EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(std::chrono::seconds(5));
  ctx.set_wait_for_ready(true);  // not a transient failure: no waiting either
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = stub.Echo(ctx, request, response);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("DNS server '8.8.8.8'"), std::string_view::npos) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

// Each accepted form reaches the same server through a real connection.
TEST(Target, ChannelConnectsThroughEveryForm) {
  testing::EchoProbe probe;
  testing::EchoService service(&probe);
  Server server;
  server.add_service(service);
  absl::StatusOr<int> port = server.start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string p = std::to_string(*port);
  for (const std::string& target :
       {"127.0.0.1:" + p, "localhost:" + p, "dns:///127.0.0.1:" + p, "dns:///localhost:" + p,
        "dns:127.0.0.1:" + p, "ipv4:127.0.0.1:" + p}) {
    Channel channel(target);
    testing::Echo::BlockingStub stub(channel);
    testing::EchoRequest request;
    request.set_payload(target);
    testing::EchoResponse response;
    ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(5));
    absl::Status s = stub.Echo(ctx, request, response);
    EXPECT_TRUE(s.ok()) << target << ": " << s;
    EXPECT_EQ(response.payload(), target);
  }
  server.shutdown(std::chrono::milliseconds(100));
}

TEST(Target, UnixForms) {
  struct UnixForm {
    std::string target;
    std::string path;
  };
  for (const UnixForm& f : {UnixForm{"unix:/tmp/ferry.sock", "/tmp/ferry.sock"},
                            UnixForm{"unix:relative.sock", "relative.sock"},
                            UnixForm{"unix:///tmp/ferry.sock", "/tmp/ferry.sock"},
                            UnixForm{"unix-abstract:ferry", std::string("\0ferry", 6)},
                            UnixForm{"unix-abstract:", std::string(1, '\0')}}) {
    absl::StatusOr<detail::Target> t = parse_target(f.target);
    ASSERT_TRUE(t.ok()) << f.target << ": " << t.status();
    EXPECT_EQ(t->unix_path, f.path) << f.target;
    EXPECT_EQ(t->authority, "localhost") << f.target;
    EXPECT_TRUE(t->host.empty()) << f.target;
  }
  // Percent-decoded (RFC 3986 §2.1): a space, a '%' itself, a NUL in an abstract name.
  for (const UnixForm& f :
       {UnixForm{"unix:/tmp/a%20b.sock", "/tmp/a b.sock"},
        UnixForm{"unix:///tmp/100%25.sock", "/tmp/100%.sock"}, UnixForm{"unix:rel%2fx", "rel/x"},
        UnixForm{"unix-abstract:a%00b%20", std::string("\0a\0b ", 5)}}) {
    absl::StatusOr<detail::Target> t = parse_target(f.target);
    ASSERT_TRUE(t.ok()) << f.target << ": " << t.status();
    EXPECT_EQ(t->unix_path, f.path) << f.target;
  }
  EXPECT_EQ(parse_target("unix-abstract:" + std::string(106, 'x'))->unix_path.size(), 107u);
  EXPECT_TRUE(parse_target("unix-abstract:" + std::string(100, 'x') + "%41%41%41").ok());
  for (const char* bad : {"unix:", "unix://relative", "unix://", "unix:/tmp/a%00b"}) {
    EXPECT_EQ(parse_target(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(parse_target("unix:/" + std::string(200, 'x')).ok());
}

// A ferry server on a Unix socket (a path, and an abstract name) and a channel to it; the
// handler's peer() names the socket.
TEST(Target, UnixDomainSockets) {
  const std::string path = ::testing::TempDir() + "ferry_target_test.sock";
  for (const std::string& address :
       {"unix:" + path, "unix-abstract:ferry_target_test_" + std::to_string(::getpid())}) {
    Service peer_service("test.Peer");
    peer_service.add_unary<testing::EchoRequest, testing::EchoResponse>(
        "Peer",
        [](ServerContext& ctx, const testing::EchoRequest&,
           testing::EchoResponse& reply) -> asio::awaitable<absl::Status> {
          reply.set_payload(ctx.peer());
          co_return absl::OkStatus();
        });
    Server server;
    server.add_service(peer_service);
    absl::StatusOr<int> port = server.start(address, 0);
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_EQ(*port, 0);
    Channel channel(address);
    testing::EchoRequest request;
    testing::EchoResponse response;
    ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(5));
    absl::Status s = channel.call_blocking("/test.Peer/Peer", ctx, request, response);
    ASSERT_TRUE(s.ok()) << address << ": " << s;
    EXPECT_EQ(response.payload(), address);
    server.shutdown(std::chrono::milliseconds(100));
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the socket file is removed at shutdown";
}

// A target that does not parse fails calls with UNAVAILABLE, naming the problem.
TEST(Target, UnusableTargetFailsCallsWithTheReason) {
  Channel channel("host:port");
  testing::Echo::BlockingStub stub(channel);
  testing::EchoRequest request;
  testing::EchoResponse response;
  ClientContext ctx;
  absl::Status s = stub.Echo(ctx, request, response);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("the port is not a number"), std::string_view::npos) << s;
}

}  // namespace
}  // namespace ferry::target_test
