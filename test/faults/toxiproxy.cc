// Implementation of test/faults/toxiproxy.h: posix_spawn for the children, a minimal blocking
// HTTP/1.1 client (one request per connection) for toxiproxy's API.
#include "faults/toxiproxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace ferry::testing {
namespace {

std::runtime_error error(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw error("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, bool capture_stdout,
                           const std::string& stderr_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  int pipe_fds[2] = {-1, -1};
  if (capture_stdout) {
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw error("pipe2");
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  } else {
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (capture_stdout) {
    ::close(pipe_fds[1]);
    stdout_fd_ = pipe_fds[0];
  }
  if (rc != 0) {
    pid_ = -1;
    errno = rc;
    throw error("posix_spawn " + argv[0]);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) stop(SIGKILL);
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

int ChildProcess::stop(int sig, std::chrono::milliseconds limit) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, sig);
  const auto until = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  pid_ = -1;
  return status;
}

bool ChildProcess::exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return true;
  }
  return false;
}

std::optional<std::string> ChildProcess::read_line(std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (std::size_t nl = buffered_.find('\n'); nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (stdout_fd_ < 0 || left.count() <= 0) return std::nullopt;
    pollfd p{stdout_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[512];
    const ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    buffered_.append(buf, static_cast<std::size_t>(n));
  }
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw error("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw error("bind");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string Toxiproxy::binary() { return std::string(FERRY_PEERS_DIR) + "/bin/toxiproxy-server"; }

bool Toxiproxy::installed() { return ::access(binary().c_str(), X_OK) == 0; }

Toxiproxy::Toxiproxy() {
  // The API port is picked free and may be taken before toxiproxy binds it: then it exits, and
  // another port is tried.
  for (int attempt = 0; attempt < 5; ++attempt) {
    api_port_ = free_port();
    process_.emplace(std::vector<std::string>{binary(), "-host", "127.0.0.1", "-port",
                                              std::to_string(api_port_)},
                     /*capture_stdout=*/false);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until && !process_->exited()) {
      int fd = connect_loopback(api_port_);
      if (fd >= 0) {
        ::close(fd);
        if (request("GET", "/version").first == 200) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    process_.reset();
  }
  throw std::runtime_error("toxiproxy-server did not start");
}

Toxiproxy::~Toxiproxy() {
  if (process_) process_->stop(SIGTERM, std::chrono::seconds(5));
}

std::pair<int, std::string> Toxiproxy::request(const std::string& method, const std::string& path,
                                               const std::string& body) {
  int fd = connect_loopback(api_port_);
  if (fd < 0) throw error("connect to toxiproxy's API");
  std::string out = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                    "Content-Type: application/json\r\nConnection: close\r\n" +
                    "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  for (std::size_t sent = 0; sent < out.size();) {
    const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      throw error("send to toxiproxy's API");
    }
    sent += static_cast<std::size_t>(n);
  }
  std::string in;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
    in.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
  if (in.size() < 12 || in.compare(0, 5, "HTTP/") != 0) {
    throw std::runtime_error("toxiproxy's API: no HTTP response to " + method + " " + path);
  }
  const int status = std::stoi(in.substr(9, 3));
  const std::size_t head_end = in.find("\r\n\r\n");
  return {status, head_end == std::string::npos ? std::string() : in.substr(head_end + 4)};
}

namespace {

void expect_status(const std::pair<int, std::string>& response, int low, int high,
                   const std::string& what) {
  if (response.first < low || response.first > high) {
    throw std::runtime_error("toxiproxy's API: " + what + ": HTTP " +
                             std::to_string(response.first) + " " + response.second);
  }
}

std::string json_attributes(const std::map<std::string, long>& attributes) {
  std::string json = "{";
  for (const auto& [key, value] : attributes) {
    if (json.size() > 1) json += ",";
    json += "\"" + key + "\":" + std::to_string(value);
  }
  return json + "}";
}

}  // namespace

int Toxiproxy::create_proxy(const std::string& name, int upstream_port) {
  auto response = request("POST", "/proxies",
                          "{\"name\":\"" + name +
                              "\",\"listen\":\"127.0.0.1:0\",\"upstream\":"
                              "\"127.0.0.1:" +
                              std::to_string(upstream_port) + "\",\"enabled\":true}");
  expect_status(response, 200, 201, "create proxy " + name);
  // The answer holds "listen":"127.0.0.1:PORT", the port the proxy bound.
  const std::string key = "\"listen\":\"127.0.0.1:";
  const std::size_t at = response.second.find(key);
  if (at == std::string::npos) {
    throw std::runtime_error("toxiproxy: no listen address in " + response.second);
  }
  return std::stoi(response.second.substr(at + key.size()));
}

void Toxiproxy::set_enabled(const std::string& proxy, bool enabled) {
  expect_status(request("POST", "/proxies/" + proxy,
                        std::string("{\"enabled\":") + (enabled ? "true" : "false") + "}"),
                200, 200, "enable proxy " + proxy);
}

void Toxiproxy::add_toxic(const std::string& proxy, const std::string& name,
                          const std::string& type, const std::string& stream,
                          const std::map<std::string, long>& attributes, double toxicity) {
  expect_status(request("POST", "/proxies/" + proxy + "/toxics",
                        "{\"name\":\"" + name + "\",\"type\":\"" + type + "\",\"stream\":\"" +
                            stream + "\",\"toxicity\":" + std::to_string(toxicity) +
                            ",\"attributes\":" + json_attributes(attributes) + "}"),
                200, 200, "add toxic " + name);
}

void Toxiproxy::update_toxic(const std::string& proxy, const std::string& name,
                             const std::map<std::string, long>& attributes) {
  expect_status(request("POST", "/proxies/" + proxy + "/toxics/" + name,
                        "{\"attributes\":" + json_attributes(attributes) + "}"),
                200, 200, "update toxic " + name);
}

void Toxiproxy::remove_toxic(const std::string& proxy, const std::string& name) {
  expect_status(request("DELETE", "/proxies/" + proxy + "/toxics/" + name), 200, 204,
                "remove toxic " + name);
}

}  // namespace ferry::testing
