// ferry's authorization engine judged against grpc-go's (ferry/authz.h): every row of
// test/authz_agreement/cases.txt is a call from ferry's client, over TLS with the row's client
// certificate, to a ferry server and to grpc-go's (test/peers/authz_go: authz.NewStatic)
// enforcing the same policy file; both must answer with the row's code, and the audited policy's
// stdout_logger lines (gRFC A59) must be the same from both but for the time. Every policy of
// test/authz_agreement/malformed/ must be refused by both, with grpc-go's words where they are
// not its JSON decoder's.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ferry/authz.h"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "support/echo_service.h"

namespace ferry::authz_agreement_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
namespace fs = std::filesystem;

const fs::path kDir = FERRY_AUTHZ_AGREEMENT_DIR;
const std::string kCerts = FERRY_TEST_CERTS;

std::string peer_path() {
  if (const char* p = std::getenv("FERRY_AUTHZ_PEER")) return p;  // a peer built by hand
  return std::string(FERRY_PEERS_DIR) + "/bin/authz_peer_go";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> json_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Row {
  int line = 0;
  std::string policy, cert, method, metadata, expect;
};

std::vector<Row> read_cases() {
  std::vector<Row> rows;
  std::ifstream in(kDir / "cases.txt");
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (text.empty() || text[0] == '#') continue;
    std::istringstream fields(text);
    Row r;
    r.line = line;
    fields >> r.policy >> r.cert >> r.method >> r.metadata >> r.expect;
    EXPECT_FALSE(r.expect.empty()) << "cases.txt:" << line << ": five columns wanted";
    rows.push_back(r);
  }
  return rows;
}

// grpc-go's server, one port per policy; its stdin is the pipe that keeps it running.
class GoPeer {
 public:
  explicit GoPeer(const std::vector<fs::path>& policies) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    std::vector<std::string> args = {
        peer_path(), "-cert",           kCerts + "/server.pem", "-key", kCerts + "/server.key",
        "-ca",       kCerts + "/ca.pem"};
    for (const fs::path& p : policies) args.push_back(p.string());
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    from_ = fdopen(out[0], "r");
    for (std::size_t i = 0; i < policies.size(); ++i) {
      std::string line;
      if (!read_line(line)) break;
      lines_.push_back(line);
    }
  }
  // The next line the peer writes (its audit log, once the ports are out); false at its end.
  bool read_line(std::string& line) {
    char buf[4096];
    if (from_ == nullptr || std::fgets(buf, sizeof(buf), from_) == nullptr) return false;
    line = buf;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return true;
  }
  ~GoPeer() {
    if (from_ != nullptr) std::fclose(from_);
    if (stdin_ >= 0) close(stdin_);
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  // The port of policy i, or "error <why>".
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  FILE* from_ = nullptr;
  std::vector<std::string> lines_;
};

// A ferry server enforcing one policy, answering every method the rows name.
class FerryServer {
 public:
  FerryServer(std::shared_ptr<ServerInterceptor> authz, const std::set<std::string>& methods) {
    std::map<std::string, Service*> services;
    for (const std::string& m : methods) {  // "/svc/Method"
      const std::size_t slash = m.rfind('/');
      const std::string svc = m.substr(1, slash - 1);
      Service*& s = services[svc];
      if (s == nullptr) s = &services_.emplace_back(svc);
      s->add_unary<EchoRequest, EchoResponse>(
          m.substr(slash + 1),
          [](ServerContext&, const EchoRequest&, EchoResponse&) -> asio::awaitable<absl::Status> {
            co_return absl::OkStatus();
          });
    }
    ServerOptions options;
    options.num_threads = 1;
    ServerTlsConfig tls{.certificate_chain = Pem::file(kCerts + "/server.pem"),
                        .private_key = Pem::file(kCerts + "/server.key")};
    tls.client_ca = Pem::file(kCerts + "/ca.pem");
    tls.require_client_certificate = false;
    options.credentials = *ServerCredentials::create(std::move(tls));
    options.interceptors.push_back(std::move(authz));
    server_ = std::make_unique<Server>(options);
    for (Service& s : services_) server_->add_service(s);
    absl::StatusOr<int> port = server_->start("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status();
    port_ = port.ok() ? *port : 0;
  }
  ~FerryServer() { server_->shutdown(std::chrono::milliseconds(100)); }
  int port() const { return port_; }

 private:
  std::deque<Service> services_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

class Clients {
 public:
  Channel& get(int port, const std::string& cert) {
    std::unique_ptr<Channel>& ch = channels_[{port, cert}];
    if (ch == nullptr) {
      ChannelTlsConfig tls{.root_certificates = Pem::file(kCerts + "/ca.pem")};
      if (cert != "none") {
        tls.certificate_chain = Pem::file(kCerts + "/" + cert + ".pem");
        tls.private_key = Pem::file(kCerts + "/" + cert + ".key");
      }
      ChannelOptions options;
      options.credentials = *ChannelCredentials::create(std::move(tls));
      ch = std::make_unique<Channel>("127.0.0.1:" + std::to_string(port), options);
    }
    return *ch;
  }

 private:
  std::map<std::pair<int, std::string>, std::unique_ptr<Channel>> channels_;
};

absl::Status call(Channel& ch, const Row& row) {
  ClientContext ctx;
  ctx.set_timeout(std::chrono::seconds(10));
  if (row.metadata != "-") {
    std::istringstream entries(row.metadata);
    std::string entry;
    while (std::getline(entries, entry, ';')) {
      const std::size_t eq = entry.find('=');
      ctx.add_metadata(entry.substr(0, eq), entry.substr(eq + 1));
    }
  }
  EchoRequest request;
  request.set_payload("x");
  EchoResponse response;
  return ch.call_blocking(row.method, ctx, request, response);
}

TEST(AuthzAgreement, FerryAndGrpcGoDecideEveryRowAlike) {
  if (access(peer_path().c_str(), X_OK) != 0) {
    GTEST_SKIP() << "authz_peer_go not installed: " << peer_path();
  }
  const std::vector<Row> rows = read_cases();
  ASSERT_GE(rows.size(), 60u);
  const std::vector<fs::path> policies = json_files(kDir / "policies");
  const std::vector<fs::path> malformed = json_files(kDir / "malformed");
  std::vector<fs::path> all = policies;
  all.insert(all.end(), malformed.begin(), malformed.end());
  GoPeer go(all);
  ASSERT_EQ(go.lines().size(), all.size()) << "grpc-go's peer did not start";

  std::set<std::string> methods;
  for (const Row& r : rows) methods.insert(r.method);
  std::map<std::string, int> go_port;
  std::map<std::string, std::unique_ptr<FerryServer>> ferry;
  for (std::size_t i = 0; i < policies.size(); ++i) {
    const std::string name = policies[i].stem().string();
    ASSERT_EQ(go.lines()[i].rfind("error", 0), std::string::npos)
        << name << ": grpc-go refuses it: " << go.lines()[i];
    go_port[name] = std::stoi(go.lines()[i]);
    auto authz = AuthorizationInterceptor::from_policy(read_file(policies[i]));
    ASSERT_TRUE(authz.ok()) << name << ": " << authz.status();
    ferry[name] = std::make_unique<FerryServer>(*authz, methods);
  }

  Clients clients;
  std::string disagreements;
  std::set<std::string> policies_used;
  // The stdout audit lines of both: ferry's server writes them here, in this process.
  ::testing::internal::CaptureStdout();
  std::size_t audited_calls = 0;
  for (const Row& r : rows) {
    ASSERT_TRUE(ferry.count(r.policy)) << "cases.txt:" << r.line << ": no policy " << r.policy;
    policies_used.insert(r.policy);
    const absl::Status from_ferry = call(clients.get(ferry[r.policy]->port(), r.cert), r);
    const absl::Status from_go = call(clients.get(go_port[r.policy], r.cert), r);
    const std::string f = absl::StatusCodeToString(from_ferry.code());
    const std::string g = absl::StatusCodeToString(from_go.code());
    if (f != r.expect || g != r.expect) {
      disagreements += "cases.txt:" + std::to_string(r.line) + " " + r.policy + " " + r.cert + " " +
                       r.method + " " + r.metadata + ": expected " + r.expect + ", ferry " + f +
                       " (" + std::string(from_ferry.message()) + "), grpc-go " + g + " (" +
                       std::string(from_go.message()) + ")\n";
    }
    if (!from_ferry.ok() && !from_go.ok()) {
      EXPECT_EQ(from_ferry.message(), from_go.message()) << "cases.txt:" << r.line;
    }
    if (r.policy == "audited") ++audited_calls;
  }
  const std::string ferry_stdout = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(disagreements, "");

  // gRFC A59's stdout_logger: the same lines from both, in the same order, but for the time.
  const auto without_time = [](std::string line) {
    const std::size_t at = line.find(",\"timestamp\":");
    return at == std::string::npos ? line : line.substr(0, at);
  };
  std::vector<std::string> ferry_lines;
  std::istringstream ferry_in(ferry_stdout);
  for (std::string line; std::getline(ferry_in, line);) {
    if (line.rfind("{\"grpc_audit_log\"", 0) == 0) ferry_lines.push_back(without_time(line));
  }
  std::vector<std::string> go_lines;
  for (std::string line; go_lines.size() < audited_calls && go.read_line(line);) {
    if (line.rfind("{\"grpc_audit_log\"", 0) == 0) go_lines.push_back(without_time(line));
  }
  ASSERT_GT(audited_calls, 0u);
  EXPECT_EQ(ferry_lines.size(), audited_calls);  // ON_DENY_AND_ALLOW: one line per call
  EXPECT_EQ(ferry_lines, go_lines);
  if (std::getenv("FERRY_AUTHZ_SHOW_AUDIT") != nullptr) {
    for (const std::string& line : go_lines) std::printf("grpc-go: %s\n", line.c_str());
  }
  EXPECT_EQ(policies_used.size(), policies.size()) << "a policy no row uses";

  // Refused by both; where grpc-go's reason is not its JSON decoder's, in its words.
  for (std::size_t i = 0; i < malformed.size(); ++i) {
    const std::string& go_line = go.lines()[policies.size() + i];
    const std::string name = malformed[i].filename().string();
    ASSERT_EQ(go_line.rfind("error ", 0), 0u) << name << ": grpc-go accepts it";
    const std::string go_error = go_line.substr(6);
    auto parsed = AuthorizationPolicy::parse(read_file(malformed[i]));
    ASSERT_FALSE(parsed.ok()) << name << ": ferry accepts it; grpc-go says " << go_error;
    const std::string ferry_error(parsed.status().message());
    constexpr std::string_view kDecoder = "failed to unmarshal policy: ";
    if (go_error.rfind(kDecoder, 0) == 0) {
      EXPECT_EQ(ferry_error.rfind(kDecoder, 0), 0u) << name << ": " << ferry_error;
    } else {
      EXPECT_EQ(ferry_error, go_error) << name;
    }
  }
}

}  // namespace
}  // namespace ferry::authz_agreement_test
