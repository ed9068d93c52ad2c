// The shared shell of the head-to-head echo servers: reads the port from argv[1] (0 or absent
// picks a free one), blocks SIGINT/SIGTERM in every thread the server will start, prints
// "listening on <port>" once bound (the benchmark script reads it) and waits for a stop signal.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>

namespace h2h {

// The port asked for on the command line: argv[1], or 0 (any free port).
inline int requested_port(int argc, char** argv) { return argc > 1 ? std::atoi(argv[1]) : 0; }

// Blocks SIGINT and SIGTERM in the calling thread (and so in threads it starts afterwards);
// call it first in main, before the server starts its threads.
inline sigset_t block_stop_signals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  return stop;
}

// Announces the bound port on stdout, then blocks until SIGINT or SIGTERM arrives.
inline void announce_and_wait(const char* name, int port, const sigset_t& stop) {
  std::printf("%s: listening on %d\n", name, port);
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&stop, &signal_number);
}

}  // namespace h2h
