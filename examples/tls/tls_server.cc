// tls_server: serves helloworld.Greeter's SayHello (examples/greeter/greeter.proto) over TLS,
// and lets in only clients whose certificate chains to the example's CA (mutual TLS); a client
// without one fails its handshake and no handler runs. Each greeting names the verified
// certificate (ServerContext::peer_identity). With --policy, a gRPC authorization policy
// (ferry/authz.h, docs/authorization.md) decides who may call what before any handler runs,
// reread every 5 s (policy.json here lets the example's client say hello, unless it sends an
// x-robot header). Runs until SIGINT or SIGTERM.
//   tls_server [--certs=certs] [--host=127.0.0.1] [--port=50051] [--policy=policy.json]
// --certs: the directory make_certs.sh filled (ca.pem, server.pem, server.key). Prints
// "tls_server: listening on HOST:PORT" once it accepts calls (--port=0 picks a free port).
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "ferry/authz.h"
#include "ferry/server.h"
#include "ferry/tls.h"
#include "greeter.ferry.h"

ABSL_FLAG(std::string, certs, "certs", "directory with ca.pem, server.pem and server.key");
ABSL_FLAG(std::string, host, "127.0.0.1", "address to listen on");
ABSL_FLAG(int, port, 50051, "port to listen on; 0 picks a free one");
ABSL_FLAG(std::string, policy, "",
          "an authorization policy file (gRFC A43 JSON); none: any "
          "client with a certificate may call");

namespace {

class GreeterImpl final : public helloworld::Greeter::Service {
 public:
  asio::awaitable<absl::Status> SayHello(ferry::ServerContext& context,
                                         const helloworld::HelloRequest& request,
                                         helloworld::HelloReply& reply) override {
    // Never null here: the server requires a client certificate, so every call has one.
    const ferry::PeerIdentity* client = context.peer_identity();
    if (client == nullptr) co_return absl::UnauthenticatedError("no client certificate");
    std::printf("tls_server: SayHello from %s (%s)\n", client->subject.c_str(),
                context.peer().c_str());
    reply.set_message("Hello " + request.name() + ", your certificate says " + client->subject);
    co_return absl::OkStatus();
  }
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a watching script sees each line at once

  // The server's certificate and key, and the CA its clients' certificates must chain to.
  // create() reads and checks the files now: a missing file or a key that does not match the
  // certificate is reported here, not at the first handshake.
  const std::string certs = absl::GetFlag(FLAGS_certs);
  ferry::ServerTlsConfig tls;
  tls.certificate_chain = ferry::Pem::file(certs + "/server.pem");
  tls.private_key = ferry::Pem::file(certs + "/server.key");
  tls.client_ca = ferry::Pem::file(certs + "/ca.pem");  // asks clients for a certificate
  tls.require_client_certificate = true;                // and refuses those without one
  absl::StatusOr<std::shared_ptr<ferry::ServerCredentials>> credentials =
      ferry::ServerCredentials::create(tls);
  if (!credentials.ok()) {
    std::fprintf(stderr, "tls_server: %s\n", credentials.status().ToString().c_str());
    return 1;
  }

  // SIGINT/SIGTERM are blocked here, so in every thread the server starts, and taken by sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ferry::ServerOptions options;
  options.num_threads = 1;
  options.credentials = *credentials;
  if (const std::string policy = absl::GetFlag(FLAGS_policy); !policy.empty()) {
    // First in the chain: a denied call reaches no other interceptor and no handler. A policy
    // file that does not parse is an error now; later, a bad edit keeps the policy in force.
    auto authz = ferry::AuthorizationInterceptor::from_file(policy, std::chrono::seconds(5));
    if (!authz.ok()) {
      std::fprintf(stderr, "tls_server: %s\n", authz.status().ToString().c_str());
      return 1;
    }
    std::printf("tls_server: enforcing authorization policy \"%s\"\n",
                (*authz)->policy()->name().c_str());
    options.interceptors.push_back(*std::move(authz));
  }
  GreeterImpl greeter;
  ferry::Server server(options);
  server.add_service(greeter);
  const std::string host = absl::GetFlag(FLAGS_host);
  absl::StatusOr<int> port = server.start(host, absl::GetFlag(FLAGS_port));
  if (!port.ok()) {
    std::fprintf(stderr, "tls_server: %s\n", port.status().ToString().c_str());
    return 1;
  }
  std::printf("tls_server: listening on %s:%d\n", host.c_str(), *port);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server.shutdown(std::chrono::seconds(5));
  std::printf("tls_server: stopped\n");
  return 0;
}
