// bench/echo_server: the tests' ferry.testing.Echo service on a ferry server, for load generators
// outside the process (h2load, ghz; see bench/h2load_echo.sh). Prints "listening on PORT" once it
// accepts connections and runs until SIGTERM or SIGINT.
//
//   echo_server [PORT [THREADS]]      (PORT 0 picks a free one; THREADS defaults to 1)
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ferry/server.h"
#include "support/echo_service.h"

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 0;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;

  // Block the stop signals before the server's threads start, so only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ferry::testing::EchoService echo;
  ferry::ServerOptions options;
  options.num_threads = static_cast<unsigned>(threads);
  ferry::Server server(options);
  server.add_service(echo);
  absl::StatusOr<int> bound = server.start("127.0.0.1", port);
  if (!bound.ok()) {
    std::fprintf(stderr, "echo_server: %s\n", bound.status().ToString().c_str());
    return 1;
  }
  std::printf("listening on %d\n", *bound);
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server.shutdown(std::chrono::seconds(2));
  return 0;
}
