// Rich error details (ferry/rich_status.h, ferry/status_details.h): a google.rpc.Status with
// details round-trips through grpc-status-details-bin between ferry's server and client, and
// both ways with grpcio (test/peers/rich_status_peer.py) and with grpc-go
// (test/peers/rich_status_go, built by scripts/install_peers.sh); skipped when the peers are not
// installed.
#include "ferry/rich_status.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "ferry/service.h"
#include "ferry/status_details.h"
#include "ferry/testing/echo.pb.h"
#include "google/rpc/status.pb.h"
#include "support/loopback.h"

namespace ferry::rich_status_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;

constexpr std::string_view kFail = "/ferry.testing.Errors/Fail";

google::rpc::Status sample_details() {
  google::rpc::Status details;
  details.set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
  details.set_message("name is empty");
  EchoResponse detail;
  detail.set_payload("field: name");
  details.add_details()->PackFrom(detail);
  return details;
}

// Errors/Fail answers every call with sample_details().
class ErrorsService : public Service {
 public:
  ErrorsService() : Service("ferry.testing.Errors") {
    add_unary<EchoRequest, EchoResponse>(
        "Fail",
        [](ServerContext&, const EchoRequest&, EchoResponse&) -> asio::awaitable<absl::Status> {
          co_return to_status(sample_details());
        });
  }
};

TEST(RichStatus, ToStatusCarriesCodeMessageAndDetails) {
  absl::Status s = to_status(sample_details());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "name is empty");
  google::rpc::Status back;
  ASSERT_TRUE(rich_status(s, &back));
  EXPECT_EQ(back.SerializeAsString(), sample_details().SerializeAsString());
  // OK carries nothing; a plain status has no details.
  google::rpc::Status ok;
  EXPECT_TRUE(to_status(ok).ok());
  EXPECT_FALSE(rich_status(absl::InternalError("plain"), &back));
}

TEST(RichStatus, RoundTripsBetweenFerryServerAndClient) {
  ErrorsService errors;
  Loopback loop({}, {}, &errors);
  ClientContext ctx;
  EchoRequest request;
  EchoResponse response;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.channel().call(kFail, ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), "name is empty");
  google::rpc::Status got;
  ASSERT_TRUE(rich_status(s, &got));
  ASSERT_EQ(got.details_size(), 1);
  EchoResponse detail;
  ASSERT_TRUE(got.details(0).UnpackTo(&detail));
  EXPECT_EQ(detail.payload(), "field: name");
  // The trailer is not custom metadata.
  EXPECT_FALSE(ctx.trailing_metadata().get("grpc-status-details-bin").has_value());
}

TEST(RichStatus, AnErrorWithoutDetailsHasNone) {
  Loopback loop;
  ClientContext ctx;
  EchoRequest request;
  request.set_status_code(static_cast<int>(absl::StatusCode::kNotFound));
  EchoResponse response;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(status_details(s).has_value());
}

// --- with grpcio -------------------------------------------------------------------------------

std::string peer_python() { return std::string(FERRY_PEERS_DIR) + "/venv/bin/python"; }

std::string peer_command(const std::string& args) {
  return absl::StrCat("timeout 60 ", peer_python(), " ", FERRY_SOURCE_DIR,
                      "/test/peers/rich_status_peer.py --proto-dir ", FERRY_SOURCE_DIR,
                      "/proto --out-dir ", ::testing::TempDir(), "/rich_status_py ", args);
}

bool have_grpcio() {
  return std::system((peer_python() + " -c 'import grpc, grpc_tools' 2>/dev/null").c_str()) == 0;
}

// Runs command, returns its stdout (bounded by the command's own timeout).
std::string run_capture(const std::string& command, int* exit_code) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  *exit_code = pclose(pipe);
  return out;
}

// Serves ErrorsService and runs a peer's client (make_command(port) runs it; it prints CODE,
// MESSAGE and DETAILS as hex); checks it read ferry's status and details.
template <class MakeCommand>
void expect_peer_reads_details(MakeCommand make_command) {
  ErrorsService errors;
  Loopback loop({}, {}, &errors);
  int rc = -1;
  const std::string out = run_capture(make_command(loop.port()), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("CODE 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("MESSAGE name is empty\n"), std::string::npos) << out;
  const std::size_t at = out.find("DETAILS ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string hex = out.substr(at + 8, out.find('\n', at) - at - 8);
  google::rpc::Status parsed;
  ASSERT_TRUE(parsed.ParseFromString(absl::HexStringToBytes(hex))) << hex;
  EXPECT_EQ(parsed.SerializeAsString(), sample_details().SerializeAsString());
}

TEST(RichStatus, GrpcioClientReadsFerrysDetails) {
  if (!have_grpcio()) GTEST_SKIP() << "grpcio not installed in " << FERRY_PEERS_DIR;
  expect_peer_reads_details(
      [](int port) { return peer_command(absl::StrCat("call --port ", port)); });
}

// Starts a peer's server (command prints "PORT n", serves one call to kFail, then exits), calls
// it with ferry's client and checks the status and its one EchoResponse detail.
void expect_peer_details(const std::string& command, const std::string& message,
                         const std::string& detail_payload) {
  FILE* server = popen(command.c_str(), "r");
  ASSERT_NE(server, nullptr);
  char line[256] = {};
  int port = 0;
  if (std::fgets(line, sizeof(line), server) != nullptr) std::sscanf(line, "PORT %d", &port);
  ASSERT_GT(port, 0) << line;

  Channel channel("127.0.0.1:" + std::to_string(port));
  ClientContext ctx;
  ctx.set_timeout(std::chrono::seconds(10));
  EchoRequest request;
  EchoResponse response;
  absl::Status s = channel.call_blocking(kFail, ctx, request, response);
  pclose(server);  // it exits after the one call
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), message);
  google::rpc::Status got;
  ASSERT_TRUE(rich_status(s, &got));
  EXPECT_EQ(got.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(got.message(), message);
  ASSERT_EQ(got.details_size(), 1);
  EchoResponse detail;
  ASSERT_TRUE(got.details(0).UnpackTo(&detail));
  EXPECT_EQ(detail.payload(), detail_payload);
}

TEST(RichStatus, FerryClientReadsGrpciosDetails) {
  if (!have_grpcio()) GTEST_SKIP() << "grpcio not installed in " << FERRY_PEERS_DIR;
  expect_peer_details(peer_command("serve"), "from python", "python says");
}

// --- with grpc-go -------------------------------------------------------------------------------

std::string peer_go() { return std::string(FERRY_PEERS_DIR) + "/bin/rich_status_peer_go"; }

bool have_go_peer() { return access(peer_go().c_str(), X_OK) == 0; }

TEST(RichStatus, GrpcGoClientReadsFerrysDetails) {
  if (!have_go_peer()) GTEST_SKIP() << "rich_status_peer_go not installed in " << FERRY_PEERS_DIR;
  expect_peer_reads_details(
      [](int port) { return absl::StrCat("timeout 60 ", peer_go(), " call ", port); });
}

TEST(RichStatus, FerryClientReadsGrpcGosDetails) {
  if (!have_go_peer()) GTEST_SKIP() << "rich_status_peer_go not installed in " << FERRY_PEERS_DIR;
  expect_peer_details(absl::StrCat("timeout 60 ", peer_go(), " serve"), "from go", "go says!");
}

}  // namespace
}  // namespace ferry::rich_status_test
