// tls_client: calls helloworld.Greeter's SayHello on tls_server over TLS: it checks the server's
// certificate against the example's CA and, for mutual TLS, presents its own.
//   tls_client [--certs=certs] [--target=localhost:50051] [--name=tls] [--no_client_cert]
//              [--server_name=NAME] [--header=KEY:VALUE]
// --certs: the directory make_certs.sh filled (ca.pem, client.pem, client.key).
// --no_client_cert: present none, to see the server refuse the connection.
// --server_name: the name the server's certificate must match (default: the target's host).
// --header: metadata to send, which an authorization policy may look at (policy.json denies
// calls with an x-robot header).
// Exits 0 when the call succeeded, 1 otherwise (printing the status).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "ferry/channel.h"
#include "ferry/tls.h"
#include "greeter.ferry.h"

ABSL_FLAG(std::string, certs, "certs", "directory with ca.pem, client.pem and client.key");
ABSL_FLAG(std::string, target, "localhost:50051", "the server, as a gRPC target");
ABSL_FLAG(std::string, name, "tls", "the name to greet");
ABSL_FLAG(bool, no_client_cert, false, "present no client certificate");
ABSL_FLAG(std::string, server_name, "", "the name the server's certificate must match");
ABSL_FLAG(std::string, header, "", "KEY:VALUE metadata to send with the call");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);

  const std::string certs = absl::GetFlag(FLAGS_certs);
  ferry::ChannelTlsConfig tls;
  tls.root_certificates = ferry::Pem::file(certs + "/ca.pem");  // not the system's store
  if (!absl::GetFlag(FLAGS_no_client_cert)) {
    tls.certificate_chain = ferry::Pem::file(certs + "/client.pem");
    tls.private_key = ferry::Pem::file(certs + "/client.key");
  }
  tls.server_name_override = absl::GetFlag(FLAGS_server_name);
  absl::StatusOr<std::shared_ptr<ferry::ChannelCredentials>> credentials =
      ferry::ChannelCredentials::create(tls);
  if (!credentials.ok()) {
    std::fprintf(stderr, "tls_client: %s\n", credentials.status().ToString().c_str());
    return 1;
  }

  ferry::ChannelOptions options;
  options.credentials = *credentials;  // the target is written as for cleartext
  ferry::Channel channel(absl::GetFlag(FLAGS_target), options);
  helloworld::Greeter::BlockingStub stub(channel);

  ferry::ClientContext context;
  context.set_timeout(std::chrono::seconds(10));
  if (const std::string header = absl::GetFlag(FLAGS_header); !header.empty()) {
    const std::size_t colon = header.find(':');
    context.add_metadata(header.substr(0, colon),
                         colon == std::string::npos ? "" : header.substr(colon + 1));
  }
  helloworld::HelloRequest request;
  request.set_name(absl::GetFlag(FLAGS_name));
  helloworld::HelloReply reply;
  // A failed handshake (no certificate, an untrusted or mismatched one on either side) fails the
  // call with UNAVAILABLE, saying why.
  const absl::Status status = stub.SayHello(context, request, reply);
  if (!status.ok()) {
    std::fprintf(stderr, "tls_client: SayHello failed: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("SayHello: %s\n", reply.message().c_str());
  std::printf("tls_client: OK\n");
  return 0;
}
