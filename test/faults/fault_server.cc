// The fault suite's server in a process of its own (test/faults), for the cases that SIGKILL a
// server and start it again on the same port, and those that count what vanished connections
// leave behind in it: FaultService and StatsService on 127.0.0.1.
//   fault_server --port=N (0: a free one) [--log=PATH] [--threads=N (default 1)]
//                [--pool-idle-period-ms=N (the buffer pool's idle trim; default its own, 10 s)]
// Prints "port N" once listening; appends the id of every unary call its handler receives to
// PATH (O_APPEND, one write per call, so the ids survive a SIGKILL); SIGTERM or SIGINT shut it
// down gracefully (1 s grace). Its descriptor limit is raised to the hard limit.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "faults/fault_service.h"
#include "ferry/buffer_pool.h"
#include "ferry/server.h"

int main(int argc, char** argv) {
  int port = 0;
  int threads = 1;
  std::string log_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--port=", 7) == 0) {
      port = std::atoi(argv[i] + 7);
    } else if (std::strncmp(argv[i], "--log=", 6) == 0) {
      log_path = argv[i] + 6;
    } else if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      threads = std::atoi(argv[i] + 10);
    } else if (std::strncmp(argv[i], "--pool-idle-period-ms=", 22) == 0) {
      ferry::BufferPoolOptions pool = ferry::BufferPool::instance().options();
      pool.idle_period = std::chrono::milliseconds(std::atoi(argv[i] + 22));
      ferry::BufferPool::instance().configure(pool);
    } else {
      std::fprintf(stderr,
                   "usage: fault_server --port=N [--log=PATH] [--threads=N] "
                   "[--pool-idle-period-ms=N]\n");
      return 2;
    }
  }
  int log_fd = -1;
  if (!log_path.empty()) {
    log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      std::perror(log_path.c_str());
      return 1;
    }
  }
  // Thousands of connections at once (the reset cases).
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  // Blocked before the server's threads start, so that they inherit the mask and sigwait gets it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ferry::testing::CallLedger ledger;
  ferry::testing::EchoProbe probe;
  ferry::testing::FaultService service(&ledger, &probe, log_fd);
  ferry::testing::StatsService stats(&ledger, &probe);
  ferry::ServerOptions options;
  options.num_threads = static_cast<unsigned>(threads);
  options.client_pings.min_interval = std::chrono::milliseconds(100);
  options.client_pings.permit_without_calls = true;
  ferry::Server server(options);
  server.add_service(service);
  server.add_service(stats);
  absl::StatusOr<int> bound = server.start("127.0.0.1", port);
  if (!bound.ok()) {
    std::fprintf(stderr, "fault_server: %s\n", bound.status().ToString().c_str());
    return 1;
  }
  std::printf("port %d\n", *bound);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.shutdown(std::chrono::seconds(1));
  if (log_fd >= 0) ::close(log_fd);
  return 0;
}
