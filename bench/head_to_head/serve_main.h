// The shared shell of the head-to-head servers: reads the port from argv[1] (0 or absent picks a
// free one), blocks SIGINT/SIGTERM (and SIGUSR1) in every thread the server will start, prints
// "listening on <port>" once bound (the benchmark script reads it) and waits for a stop signal.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>

namespace h2h {

// The port asked for on the command line: argv[1], or 0 (any free port).
inline int requested_port(int argc, char** argv) { return argc > 1 ? std::atoi(argv[1]) : 0; }

// Blocks SIGINT, SIGTERM and SIGUSR1 in the calling thread (and so in threads it starts
// afterwards); call it first in main, before the server starts its threads.
inline sigset_t block_stop_signals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  return stop;
}

// Announces the bound port on stdout, then blocks until SIGINT or SIGTERM arrives. Each SIGUSR1
// meanwhile calls report(), which prints a line of figures for run.py (none: the signal is
// ignored).
inline void announce_and_wait(const char* name, int port, const sigset_t& stop,
                              void (*report)() = nullptr) {
  std::printf("%s: listening on %d\n", name, port);
  std::fflush(stdout);
  int signal_number = 0;
  while (sigwait(&stop, &signal_number) == 0 && signal_number == SIGUSR1) {
    if (report != nullptr) report();
  }
}

}  // namespace h2h
