// The xDS tests' real control plane (test support): go-control-plane's snapshot cache served by
// test/peers/xds_control_plane_go (installed by scripts/install_peers.sh), driven one command a
// line on its stdin, and Echo servers as its endpoints. Used by the CSDS and example tests.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/server.h"
#include "support/echo_service.h"

namespace ferry::testing::xds_peers {

inline std::string peer_path() {
  return std::string(FERRY_PEERS_DIR) + "/bin/xds_control_plane_go";
}
inline bool peer_missing() { return access(peer_path().c_str(), X_OK) != 0; }

// A peer program: one command a line on its stdin, one answer line on its stdout. Ends (SIGTERM)
// with this object.
class PeerProcess {
 public:
  // env: "NAME=value" entries added to the peer's environment.
  explicit PeerProcess(std::vector<std::string> argv_strings, std::vector<std::string> env = {}) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      // Nothing else of this process's: a backend's listening socket inherited by the peer would
      // keep its port bound (and accepting, unanswered) after the backend stops.
      close_range(3, ~0U, 0);
      for (std::string& e : env) putenv(e.data());
      std::vector<char*> argv;
      for (std::string& a : argv_strings) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
  }
  ~PeerProcess() {
    if (to_ != nullptr) std::fclose(to_);  // the peer ends when its stdin does
    if (from_ != nullptr) std::fclose(from_);
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  std::string command(const std::string& line) {
    if (to_ == nullptr) return "no peer";
    std::fprintf(to_, "%s\n", line.c_str());
    std::fflush(to_);
    return read_line();
  }
  // Polls `what` until its answer is want (or 10 s pass); returns the last answer.
  std::string await(const std::string& what, const std::string& want) {
    std::string answer;
    for (int i = 0; i < 200; ++i) {
      answer = command(what);
      if (answer == want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return answer;
  }
  std::string read_line() {
    char buf[8192];
    if (from_ == nullptr || std::fgets(buf, sizeof(buf), from_) == nullptr) return "";
    std::string line = buf;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

// The control plane; its first line is its port.
class ControlPlane : public PeerProcess {
 public:
  explicit ControlPlane(std::vector<std::string> args = {})
      : PeerProcess(with_path(std::move(args))) {
    const std::string first = read_line();
    if (first.rfind("port ", 0) == 0) port_ = std::atoi(first.c_str() + 5);
  }
  int port() const { return port_; }

 private:
  static std::vector<std::string> with_path(std::vector<std::string> args) {
    args.insert(args.begin(), peer_path());
    return args;
  }
  int port_ = 0;
};

// An endpoint: a ferry Echo server that counts the calls it served.
class EchoBackend {
 public:
  EchoBackend() : service_(&probe_) {
    server_.add_service(service_);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    port_ = port.ok() ? *port : 0;
  }
  ~EchoBackend() { server_.shutdown(std::chrono::milliseconds(100)); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int calls() const { return probe_.started.load(); }

 private:
  EchoProbe probe_;
  EchoService service_;
  Server server_;
  int port_ = 0;
};

}  // namespace ferry::testing::xds_peers
