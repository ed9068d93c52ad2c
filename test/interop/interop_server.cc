// ferry_interop_server: grpc.testing.TestService over h2c, with the flags of gRPC's interop
// servers (interop tests). It prints one "listening on HOST:PORT" line once it accepts
// connections, and on SIGTERM or SIGINT shuts down gracefully and exits 0.
//
//   ferry_interop_server --port=10000 [--host=127.0.0.1] [--threads=2]
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ferry/server.h"
#include "interop/flags.h"
#include "interop/test_service.h"

int main(int argc, char** argv) {
  ferry::interop::Flags flags;
  flags.define("port", "10000", "port to listen on (0 picks a free one)");
  flags.define("host", "127.0.0.1", "address to listen on");
  flags.define("threads", "2", "I/O threads");
  flags.define("use_tls", "false", "serve TLS (with --tls_cert_file and --tls_key_file)");
  flags.define("tls_cert_file", FERRY_TEST_CERTS "/server.pem", "certificate chain (PEM)");
  flags.define("tls_key_file", FERRY_TEST_CERTS "/server.key", "private key (PEM)");
  flags.define("tls_client_ca_file", "",
               "ferry's own: require client certificates issued by these CAs (mutual TLS)");
  flags.define("unix_socket", "", "ferry's own: listen on this Unix socket path instead");
  if (!flags.parse(argc, argv)) return 2;

  // Block the stop signals before the server's threads start, so that they inherit the mask and
  // only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Only TestService: grpc.testing.UnimplementedService stays unserved, so that the
  // unimplemented_service case gets UNIMPLEMENTED from the router, as from other gRPC servers.
  ferry::interop::TestServiceImpl test_service;
  ferry::ServerOptions options;
  options.num_threads = static_cast<unsigned>(flags.get_int("threads"));
  if (flags.get_bool("use_tls")) {
    ferry::ServerTlsConfig tls;
    tls.certificate_chain = ferry::Pem::file(flags.get("tls_cert_file"));
    tls.private_key = ferry::Pem::file(flags.get("tls_key_file"));
    if (!flags.get("tls_client_ca_file").empty()) {
      tls.client_ca = ferry::Pem::file(flags.get("tls_client_ca_file"));
    }
    absl::StatusOr<std::shared_ptr<ferry::ServerCredentials>> creds =
        ferry::ServerCredentials::create(std::move(tls));
    if (!creds.ok()) {
      std::fprintf(stderr, "ferry_interop_server: %s\n", creds.status().ToString().c_str());
      return 2;
    }
    options.credentials = *creds;
  }
  ferry::Server server(options);
  server.add_service(test_service);
  const std::string host =
      flags.get("unix_socket").empty() ? flags.get("host") : "unix:" + flags.get("unix_socket");
  absl::StatusOr<int> port = server.start(host, static_cast<int>(flags.get_int("port")));
  if (!port.ok()) {
    std::fprintf(stderr, "ferry_interop_server: %s\n", port.status().ToString().c_str());
    return 1;
  }
  std::printf("ferry_interop_server listening on %s:%d\n", host.c_str(), *port);
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server.shutdown(std::chrono::seconds(2));
  return 0;
}
