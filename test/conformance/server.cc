// ferry_conformance_server: the server under test for connectrpc's conformance suite
// (connectconformance --mode server). Reads a ServerCompatRequest from stdin, serves
// connectrpc.conformance.v1.ConformanceService on ferry's server at 127.0.0.1 (a free port; TLS,
// client certificates and the receive limit as the request says), writes a ServerCompatResponse to
// stdout, and runs until SIGTERM or SIGINT. Each method follows its request's response definition
// (docs/testing_servers.md in the suite's module): headers, trailers, delays, response data, an
// error whose details echo what the request looked like.
#include "ferry/server.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "conformance/compat_io.h"
#include "connectrpc/conformance/v1/server_compat.pb.h"
#include "connectrpc/conformance/v1/service.ferry.h"
#include "ferry/tls.h"
#include "google/protobuf/any.pb.h"

namespace ferry::conformance {
namespace {

using Any = google::protobuf::Any;
using Requests = std::vector<Any>;
using RequestInfo = v1::ConformancePayload::RequestInfo;

template <class Message>
Any as_any(const Message& msg) {
  Any any;
  any.PackFrom(msg);
  return any;
}

// The one request of a unary or server-streaming call. (A named vector: GCC 12 miscompiles a
// braced temporary passed to a coroutine.)
template <class Message>
Requests one_request(const Message& msg) {
  Requests requests;
  requests.push_back(as_any(msg));
  return requests;
}

// What the handler saw of its call: the client's metadata, its timeout, the requests so far.
RequestInfo request_info(const ServerContext& ctx, const Requests& requests) {
  RequestInfo info;
  append_headers(ctx.client_metadata(), *info.mutable_request_headers());
  if (ctx.deadline() != std::chrono::steady_clock::time_point::max()) {
    const auto left = ctx.deadline() - std::chrono::steady_clock::now();
    info.set_timeout_ms(std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(left).count()));
  }
  for (const Any& request : requests) *info.add_requests() = request;
  return info;
}

void add_response_metadata(ServerContext& ctx, const Headers& headers, const Headers& trailers) {
  for_each_header_value(headers, [&](const std::string& key, const std::string& value) {
    ctx.add_initial_metadata(key, value);
  });
  for_each_header_value(trailers, [&](const std::string& key, const std::string& value) {
    ctx.add_trailing_metadata(key, value);
  });
}

// Answers compressed when the request came compressed, as grpc-go's server does.
void mirror_compression(ServerContext& ctx) {
  if (ctx.last_message_compressed()) ctx.set_compression(Compression::kGzip);
}

asio::awaitable<void> sleep_ms(std::uint32_t ms) {
  if (ms == 0) co_return;
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(ms));
  co_await timer.async_wait(asio::use_awaitable);
}

// The suite's error, with the request info appended to its details when no response carried it.
absl::Status error_status(const v1::Error& error, const RequestInfo* info) {
  if (info == nullptr) return to_status(error);
  v1::Error with_info = error;
  with_info.add_details()->PackFrom(*info);
  return to_status(with_info);
}

// Unary and client-streaming calls: one payload or an error, after the definition's delay.
asio::awaitable<absl::Status> respond_once(ServerContext& ctx,
                                           const v1::UnaryResponseDefinition* definition,
                                           const Requests& requests,
                                           v1::ConformancePayload& payload) {
  mirror_compression(ctx);
  if (definition != nullptr) {
    add_response_metadata(ctx, definition->response_headers(), definition->response_trailers());
    ctx.send_initial_metadata();
    co_await sleep_ms(definition->response_delay_ms());
  }
  RequestInfo info = request_info(ctx, requests);
  if (definition != nullptr && definition->has_error()) {
    co_return error_status(definition->error(), &info);
  }
  if (definition != nullptr) payload.set_data(definition->response_data());
  *payload.mutable_request_info() = std::move(info);
  co_return absl::OkStatus();
}

// Server- and bidi-streaming calls: the responses the definition lists from index `sent` on,
// then its error if it has one. Only the first response of the call carries the request info.
template <class Response, class Writer>
asio::awaitable<absl::Status> stream_responses(ServerContext& ctx,
                                               const v1::StreamResponseDefinition& definition,
                                               const Requests& requests, int sent, Writer& writer) {
  Response response;
  for (; sent < definition.response_data_size(); ++sent) {
    response.Clear();
    v1::ConformancePayload& payload = *response.mutable_payload();
    payload.set_data(definition.response_data(sent));
    if (sent == 0) *payload.mutable_request_info() = request_info(ctx, requests);
    co_await sleep_ms(definition.response_delay_ms());
    if (absl::Status s = co_await writer.write(response); !s.ok()) {
      co_return absl::InternalError("error sending on stream: " + std::string(s.message()));
    }
  }
  if (!definition.has_error()) co_return absl::OkStatus();
  if (sent > 0) co_return error_status(definition.error(), nullptr);
  const RequestInfo info = request_info(ctx, requests);
  co_return error_status(definition.error(), &info);
}

// Unary and IdempotentUnary: their request and response types differ, their handling does not.
template <class Request, class Response>
asio::awaitable<absl::Status> unary(ServerContext& ctx, const Request& request,
                                    Response& response) {
  const Requests requests = one_request(request);
  co_return co_await respond_once(
      ctx, request.has_response_definition() ? &request.response_definition() : nullptr, requests,
      *response.mutable_payload());
}

class ConformanceImpl final : public v1::ConformanceService::Service {
 public:
  asio::awaitable<absl::Status> Unary(ServerContext& ctx, const v1::UnaryRequest& request,
                                      v1::UnaryResponse& response) override {
    return unary(ctx, request, response);
  }

  asio::awaitable<absl::Status> IdempotentUnary(ServerContext& ctx,
                                                const v1::IdempotentUnaryRequest& request,
                                                v1::IdempotentUnaryResponse& response) override {
    return unary(ctx, request, response);
  }

  asio::awaitable<absl::Status> ClientStream(ServerContext& ctx,
                                             ServerReader<v1::ClientStreamRequest>& reader,
                                             v1::ClientStreamResponse& response) override {
    Requests requests;
    v1::ClientStreamRequest request;
    std::unique_ptr<v1::UnaryResponseDefinition> definition;
    while (co_await reader.read(request)) {
      if (requests.empty() && request.has_response_definition()) {
        definition = std::make_unique<v1::UnaryResponseDefinition>(request.response_definition());
      }
      requests.push_back(as_any(request));
    }
    if (ctx.is_cancelled()) co_return absl::CancelledError("the call was cancelled");
    co_return co_await respond_once(ctx, definition.get(), requests, *response.mutable_payload());
  }

  asio::awaitable<absl::Status> ServerStream(
      ServerContext& ctx, const v1::ServerStreamRequest& request,
      ServerWriter<v1::ServerStreamResponse>& writer) override {
    if (!request.has_response_definition()) co_return absl::OkStatus();
    const v1::StreamResponseDefinition& definition = request.response_definition();
    mirror_compression(ctx);
    add_response_metadata(ctx, definition.response_headers(), definition.response_trailers());
    ctx.send_initial_metadata();  // the client sees them before any delay
    const Requests requests = one_request(request);
    co_return co_await stream_responses<v1::ServerStreamResponse>(ctx, definition, requests, 0,
                                                                  writer);
  }

  asio::awaitable<absl::Status> BidiStream(
      ServerContext& ctx,
      ServerReaderWriter<v1::BidiStreamRequest, v1::BidiStreamResponse>& stream) override {
    Requests requests;
    v1::BidiStreamRequest request;
    std::unique_ptr<v1::StreamResponseDefinition> definition;
    bool full_duplex = false;
    bool first = true;
    int sent = 0;
    while (co_await stream.read(request)) {
      requests.push_back(as_any(request));
      if (std::exchange(first, false)) {
        full_duplex = request.full_duplex();
        mirror_compression(ctx);
        if (request.has_response_definition()) {
          definition =
              std::make_unique<v1::StreamResponseDefinition>(request.response_definition());
          add_response_metadata(ctx, definition->response_headers(),
                                definition->response_trailers());
          // Half duplex must not answer before the client is done sending.
          if (full_duplex) ctx.send_initial_metadata();
        }
      }
      if (!full_duplex) continue;
      if (definition == nullptr || sent >= definition->response_data_size()) break;
      // One response per request; the first carries the whole request info, later ones only
      // the requests received since the previous response.
      v1::BidiStreamResponse response;
      v1::ConformancePayload& payload = *response.mutable_payload();
      payload.set_data(definition->response_data(sent));
      if (sent == 0) {
        *payload.mutable_request_info() = request_info(ctx, requests);
      } else {
        for (const Any& r : requests) *payload.mutable_request_info()->add_requests() = r;
      }
      co_await sleep_ms(definition->response_delay_ms());
      if (absl::Status s = co_await stream.write(response); !s.ok()) {
        co_return absl::InternalError("error sending on stream: " + std::string(s.message()));
      }
      ++sent;
      requests.clear();
    }
    if (ctx.is_cancelled()) co_return absl::CancelledError("the call was cancelled");
    if (definition == nullptr) co_return absl::OkStatus();
    // Half duplex: every response now. Full duplex: those left when the requests ran out.
    co_return co_await stream_responses<v1::BidiStreamResponse>(ctx, *definition, requests, sent,
                                                                stream);
  }
  // Unimplemented is left to the generated base, which answers UNIMPLEMENTED.
};

absl::StatusOr<std::shared_ptr<ServerCredentials>> credentials_for(
    const v1::ServerCompatRequest& request) {
  ServerTlsConfig tls{.certificate_chain = Pem::content(request.server_creds().cert()),
                      .private_key = Pem::content(request.server_creds().key())};
  if (!request.client_tls_cert().empty()) {
    tls.client_ca = Pem::content(request.client_tls_cert());
    tls.require_client_certificate = true;
  }
  return ServerCredentials::create(std::move(tls));
}

int run() {
  v1::ServerCompatRequest request;
  bool eof = false;
  if (absl::Status s = read_delimited(stdin, request, &eof); !s.ok() || eof) {
    std::fprintf(stderr, "ferry_conformance_server: no ServerCompatRequest on stdin: %s\n",
                 s.ToString().c_str());
    return 1;
  }
  ServerOptions options;
  options.num_threads = 1;
  if (request.message_receive_limit() > 0) {
    options.max_receive_message_size = request.message_receive_limit();
  }
  v1::ServerCompatResponse response;
  if (request.use_tls()) {
    absl::StatusOr<std::shared_ptr<ServerCredentials>> creds = credentials_for(request);
    if (!creds.ok()) {
      std::fprintf(stderr, "ferry_conformance_server: %s\n", creds.status().ToString().c_str());
      return 1;
    }
    options.credentials = *creds;
    response.set_pem_cert(request.server_creds().cert());
  }

  // SIGTERM/SIGINT are blocked here, so in every thread the server starts, and taken by sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ConformanceImpl service;
  Server server(std::move(options));
  server.add_service(service);
  absl::StatusOr<int> port = server.start("127.0.0.1", 0);
  if (!port.ok()) {
    std::fprintf(stderr, "ferry_conformance_server: %s\n", port.status().ToString().c_str());
    return 1;
  }
  response.set_host("127.0.0.1");
  response.set_port(static_cast<std::uint32_t>(*port));
  if (absl::Status s = write_delimited(stdout, response); !s.ok()) return 1;

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server.shutdown(std::chrono::seconds(1));
  return 0;
}

}  // namespace
}  // namespace ferry::conformance

int main() { return ferry::conformance::run(); }
