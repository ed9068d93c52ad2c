// The fault suite's network side (test support): a toxiproxy server started for the test on a
// free port, driven through its HTTP API (proxies in front of ferry servers, toxics on them), and
// child processes the suite starts and kills (toxiproxy itself, a server to SIGKILL).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ferry::testing {

// A child process, started with posix_spawn; killed (SIGKILL) and reaped on destruction if it is
// still running. stdin is /dev/null; stderr goes to stderr_path (or /dev/null); stdout to a pipe
// the test reads lines from when capture_stdout, else where stderr goes.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, bool capture_stdout,
               const std::string& stderr_path = "/dev/null");
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Sends sig and waits for the process to end (at most limit; then SIGKILL). Returns its wait
  // status, or -1 when it had already been reaped.
  int stop(int sig, std::chrono::milliseconds limit = std::chrono::seconds(10));
  // Whether it has exited (reaps it when it has).
  bool exited();
  // The next line of its stdout, without the newline; nullopt at EOF or after limit.
  std::optional<std::string> read_line(std::chrono::milliseconds limit);

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
};

// A port free on 127.0.0.1 right now (bound to port 0, then closed): for a program that cannot
// bind port 0 and report it. Racy by nature; callers retry when the bind then fails.
int free_port();

// toxiproxy-server on 127.0.0.1 (its API on a free port), for one test. Every method is
// blocking and throws std::runtime_error when the API answers an error.
class Toxiproxy {
 public:
  // The binary FERRY_PEERS_DIR/bin/toxiproxy-server (scripts/install_peers.sh installs it).
  static std::string binary();
  static bool installed();

  Toxiproxy();  // starts it and waits until its API answers
  ~Toxiproxy();

  // A proxy named name on 127.0.0.1 (a free port) forwarding to 127.0.0.1:upstream_port; returns
  // the port it listens on.
  int create_proxy(const std::string& name, int upstream_port);
  // Enabling or disabling a proxy; disabling closes its connections and stops listening.
  void set_enabled(const std::string& proxy, bool enabled);
  // Adds a toxic: type ("timeout", "reset_peer", "latency", "bandwidth", "slicer", "limit_data",
  // ...), stream "upstream" (client to server) or "downstream", and its integer attributes.
  void add_toxic(const std::string& proxy, const std::string& name, const std::string& type,
                 const std::string& stream, const std::map<std::string, long>& attributes,
                 double toxicity = 1.0);
  // Changes an existing toxic's attributes.
  void update_toxic(const std::string& proxy, const std::string& name,
                    const std::map<std::string, long>& attributes);
  void remove_toxic(const std::string& proxy, const std::string& name);

  // One HTTP/1.1 request to the API; returns {status, body}.
  std::pair<int, std::string> request(const std::string& method, const std::string& path,
                                      const std::string& body = "");

 private:
  int api_port_ = 0;
  std::optional<ChildProcess> process_;
};

}  // namespace ferry::testing
