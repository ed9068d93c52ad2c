// test/conformance/client.cc: the client under test for connectrpc's conformance suite
// (connectconformance --mode client), on ferry's Channel. It reads ClientCompatRequests from
// stdin, makes each call to the suite's reference server as the request says (headers, timeout,
// compression, TLS, receive limit, delays, cancellation at the requested point), and writes a
// ClientCompatResponse with what it saw to stdout: the suite's docs/testing_clients.md.
//
// The calls run as coroutines on one io_context thread, at most kMaxCallsInFlight at once; the
// main thread reads stdin. Each call has a Channel of its own (the requests differ in server,
// TLS and receive limit), destroyed when the call ends. Results go out in completion order.
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <semaphore>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "asio/bind_cancellation_slot.hpp"
#include "asio/cancellation_signal.hpp"
#include "asio/co_spawn.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "conformance/compat_io.h"
#include "connectrpc/conformance/v1/client_compat.pb.h"
#include "connectrpc/conformance/v1/service.pb.h"
#include "ferry/channel.h"
#include "ferry/client_context.h"
#include "ferry/client_stream.h"
#include "ferry/connectivity.h"
#include "ferry/tls.h"

namespace ferry::conformance {
namespace {

using Result = v1::ClientResponseResult;
using Messages = google::protobuf::RepeatedPtrField<google::protobuf::Any>;

constexpr char kService[] = "connectrpc.conformance.v1.ConformanceService";
// Calls in flight at once. The suite's cases mostly wait (delays, timeouts), so more than the
// cores; bounded so that a long input does not open hundreds of connections.
constexpr std::ptrdiff_t kMaxCallsInFlight = 16;

// Runs action once after delay, unless the Alarm is destroyed first: the suite's timed
// cancellations. The timer's handler may already be queued when the call ends and the Alarm
// goes, so the handler reads the shared state, never the caller's frame. One thread only.
class Alarm {
 public:
  Alarm(const asio::any_io_executor& executor, std::chrono::milliseconds delay,
        std::function<void()> action)
      : state_(std::make_shared<State>(executor, std::move(action))) {
    state_->timer.expires_after(delay);
    state_->timer.async_wait([state = state_](const asio::error_code& error) {
      if (!error && state->action) std::exchange(state->action, nullptr)();
    });
  }
  ~Alarm() {
    state_->action = nullptr;
    state_->timer.cancel();
  }
  Alarm(const Alarm&) = delete;
  Alarm& operator=(const Alarm&) = delete;

 private:
  struct State {
    State(const asio::any_io_executor& executor, std::function<void()> a)
        : timer(executor), action(std::move(a)) {}
    asio::steady_timer timer;
    std::function<void()> action;
  };
  std::shared_ptr<State> state_;
};

asio::awaitable<void> sleep_for(std::chrono::milliseconds delay) {
  if (delay.count() <= 0) co_return;
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  co_await timer.async_wait(asio::use_awaitable);
}

std::chrono::milliseconds request_delay(const v1::ClientCompatRequest& req) {
  return std::chrono::milliseconds(req.request_delay_ms());
}

// The response count after which to cancel; -1: never.
int cancel_after_responses(const v1::ClientCompatRequest& req) {
  return req.cancel().has_after_num_responses()
             ? static_cast<int>(req.cancel().after_num_responses())
             : -1;
}

// Arms the cancellation "after close send", when the request asks for it.
void arm_cancel_after_close_send(const v1::ClientCompatRequest& req,
                                 const asio::any_io_executor& executor,
                                 std::function<void()> cancel, std::optional<Alarm>& alarm) {
  if (!req.cancel().has_after_close_send_ms()) return;
  alarm.emplace(executor, std::chrono::milliseconds(req.cancel().after_close_send_ms()),
                std::move(cancel));
}

// The request messages, each checked to be a Request (the Any's type) and parsed.
template <class Request>
absl::StatusOr<std::vector<Request>> unpack_all(const Messages& messages) {
  std::vector<Request> requests(static_cast<std::size_t>(messages.size()));
  for (int i = 0; i < messages.size(); ++i) {
    if (!messages[i].UnpackTo(&requests[static_cast<std::size_t>(i)])) {
      return absl::InvalidArgumentError(absl::StrCat("request message ", i, " is a ",
                                                     messages[i].type_url(), ", not a ",
                                                     Request::descriptor()->full_name()));
    }
  }
  return requests;
}

// The one request message of a unary or server-streaming call.
template <class Request>
absl::StatusOr<Request> unpack_one(const Messages& messages) {
  if (messages.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("this kind of call takes 1 request message, not ", messages.size()));
  }
  absl::StatusOr<std::vector<Request>> all = unpack_all<Request>(messages);
  if (!all.ok()) return all.status();
  return std::move(all->front());
}

// The call's context: the request's headers (-bin ones decoded from the Header's base64),
// compression and timeout. The deadline starts counting here, right before the call.
void prepare_context(const v1::ClientCompatRequest& req, ClientContext& context) {
  for_each_header_value(
      req.request_headers(),
      [&](const std::string& key, const std::string& value) { context.add_metadata(key, value); });
  if (req.compression() == v1::COMPRESSION_GZIP) context.set_compression(Compression::kGzip);
  if (req.has_timeout_ms()) context.set_timeout(std::chrono::milliseconds(req.timeout_ms()));
  context.set_http_get(req.use_get_http_method());
}

template <class Response>
void add_payload(const Response& response, Result& result) {
  *result.add_payloads() = response.payload();
}
// UnimplementedResponse has no payload (and that call never succeeds anyway).
void add_payload(const v1::UnimplementedResponse&, Result&) {}

// What the call ended with: its status (unless OK) and the server's headers and trailers.
void record_end(const absl::Status& status, const ClientContext& context, Result& result) {
  append_headers(context.initial_metadata(), *result.mutable_response_headers());
  append_headers(context.trailing_metadata(), *result.mutable_response_trailers());
  if (!status.ok()) *result.mutable_error() = to_error(status);
}

// Unary, IdempotentUnary, Unimplemented. The cancellation "after close send" cancels the call
// through the operation's cancellation slot (the call has no other handle).
template <class Request, class Response>
asio::awaitable<absl::StatusOr<Result>> unary(Channel& channel, std::string method,
                                              const v1::ClientCompatRequest& req) {
  absl::StatusOr<Request> request = unpack_one<Request>(req.request_messages());
  if (!request.ok()) co_return request.status();
  ClientContext context;
  prepare_context(req, context);
  asio::cancellation_signal cancel;
  std::optional<Alarm> alarm;
  arm_cancel_after_close_send(
      req, channel.executor(), [&cancel] { cancel.emit(asio::cancellation_type::terminal); },
      alarm);
  Response response;
  const absl::Status status =
      co_await channel.call(method, context, *request, response,
                            asio::bind_cancellation_slot(cancel.slot(), asio::use_awaitable));
  Result result;
  if (status.ok()) add_payload(response, result);
  record_end(status, context, result);
  co_return result;
}

// Sends the requests in order, each after the request delay. Returns how many were not sent: a
// write fails once the call is over, and the call's status (finish) then says why.
template <class Request>
asio::awaitable<int> send_all(ClientStream& stream, const std::vector<Request>& requests,
                              std::chrono::milliseconds delay) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    co_await sleep_for(delay);
    const absl::Status written = co_await stream.write(requests[i]);
    if (!written.ok()) co_return static_cast<int>(requests.size() - i);
  }
  co_return 0;
}

// Reads responses until the server's stream ends, recording each payload; cancels the call
// after the response the request names (received counts those read before).
template <class Response>
asio::awaitable<void> receive_all(ClientStream& stream, const v1::ClientCompatRequest& req,
                                  int& received, Result& result) {
  while (true) {
    Response response;
    if (!co_await stream.read(response)) co_return;
    add_payload(response, result);
    if (++received == cancel_after_responses(req)) stream.cancel();
  }
}

asio::awaitable<absl::StatusOr<Result>> client_stream(Channel& channel, std::string method,
                                                      const v1::ClientCompatRequest& req) {
  absl::StatusOr<std::vector<v1::ClientStreamRequest>> requests =
      unpack_all<v1::ClientStreamRequest>(req.request_messages());
  if (!requests.ok()) co_return requests.status();
  ClientContext context;
  prepare_context(req, context);
  ClientStream stream = co_await channel.open(method, RpcKind::kClientStreaming, context);
  stream.expect_single_response();
  Result result;
  result.set_num_unsent_requests(co_await send_all(stream, *requests, request_delay(req)));
  std::optional<Alarm> alarm;
  // After a failed write the call is over: no cancellation to try, only its outcome to read.
  if (result.num_unsent_requests() == 0) {
    if (req.cancel().has_before_close_send()) stream.cancel();
    arm_cancel_after_close_send(
        req, channel.executor(), [&stream] { stream.cancel(); }, alarm);
  }
  v1::ClientStreamResponse response;
  const absl::Status status = co_await stream.finish_with_response(response);
  if (status.ok()) add_payload(response, result);
  record_end(status, context, result);
  co_return result;
}

asio::awaitable<absl::StatusOr<Result>> server_stream(Channel& channel, std::string method,
                                                      const v1::ClientCompatRequest& req) {
  absl::StatusOr<v1::ServerStreamRequest> request =
      unpack_one<v1::ServerStreamRequest>(req.request_messages());
  if (!request.ok()) co_return request.status();
  ClientContext context;
  prepare_context(req, context);
  // Sends the request and half-closes.
  ClientStream stream = co_await channel.open(method, context, *request);
  std::optional<Alarm> alarm;
  arm_cancel_after_close_send(
      req, channel.executor(), [&stream] { stream.cancel(); }, alarm);
  Result result;
  int received = 0;
  co_await receive_all<v1::ServerStreamResponse>(stream, req, received, result);
  const absl::Status status = co_await stream.finish();
  record_end(status, context, result);
  co_return result;
}

// Full duplex: each request is followed by reading one response. Returns how many requests
// were not sent, when the call ended (a write failed or the responses ended) before all were.
asio::awaitable<int> exchange_all(ClientStream& stream,
                                  const std::vector<v1::BidiStreamRequest>& requests,
                                  const v1::ClientCompatRequest& req, int& received,
                                  Result& result) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    co_await sleep_for(request_delay(req));
    const absl::Status written = co_await stream.write(requests[i]);
    if (!written.ok()) co_return static_cast<int>(requests.size() - i);
    v1::BidiStreamResponse response;
    if (!co_await stream.read(response)) co_return static_cast<int>(requests.size() - i - 1);
    add_payload(response, result);
    if (++received == cancel_after_responses(req)) stream.cancel();
  }
  co_return 0;
}

// Half duplex (all requests, then all responses) or full duplex (stream_type).
asio::awaitable<absl::StatusOr<Result>> bidi_stream(Channel& channel, std::string method,
                                                    const v1::ClientCompatRequest& req) {
  absl::StatusOr<std::vector<v1::BidiStreamRequest>> requests =
      unpack_all<v1::BidiStreamRequest>(req.request_messages());
  if (!requests.ok()) co_return requests.status();
  const bool full_duplex = req.stream_type() == v1::STREAM_TYPE_FULL_DUPLEX_BIDI_STREAM;
  ClientContext context;
  prepare_context(req, context);
  ClientStream stream = co_await channel.open(method, RpcKind::kBidiStreaming, context);
  Result result;
  int received = 0;
  // An if, not a conditional expression: with a co_await in each arm, GCC 12 built code that
  // ran neither and never resumed.
  int unsent = 0;
  if (full_duplex) {
    unsent = co_await exchange_all(stream, *requests, req, received, result);
  } else {
    unsent = co_await send_all(stream, *requests, request_delay(req));
  }
  result.set_num_unsent_requests(unsent);
  std::optional<Alarm> alarm;
  if (result.num_unsent_requests() == 0) {
    if (req.cancel().has_before_close_send()) stream.cancel();
    co_await stream.writes_done();
    arm_cancel_after_close_send(
        req, channel.executor(), [&stream] { stream.cancel(); }, alarm);
  }
  // Even when the call ended early, the responses that came before its end are reported.
  co_await receive_all<v1::BidiStreamResponse>(stream, req, received, result);
  const absl::Status status = co_await stream.finish();
  record_end(status, context, result);
  co_return result;
}

// What the suite may ask of ferry's client that it cannot do (config.yaml keeps such requests
// away; this catches a configuration that does not).
absl::Status check_supported(const v1::ClientCompatRequest& req) {
  if (req.protocol() != v1::PROTOCOL_GRPC && req.protocol() != v1::PROTOCOL_GRPC_WEB &&
      req.protocol() != v1::PROTOCOL_CONNECT) {
    return absl::UnimplementedError(
        absl::StrCat("protocol ", v1::Protocol_Name(req.protocol()), " is not supported"));
  }
  if (req.codec() != v1::CODEC_PROTO && req.codec() != v1::CODEC_JSON &&
      req.codec() != v1::CODEC_UNSPECIFIED) {
    return absl::UnimplementedError(
        absl::StrCat("codec ", v1::Codec_Name(req.codec()), " is not supported"));
  }
  if (req.http_version() != v1::HTTP_VERSION_2 && req.http_version() != v1::HTTP_VERSION_1 &&
      req.http_version() != v1::HTTP_VERSION_UNSPECIFIED) {
    return absl::UnimplementedError(absl::StrCat(
        "HTTP version ", v1::HTTPVersion_Name(req.http_version()), " is not supported"));
  }
  if (req.compression() != v1::COMPRESSION_IDENTITY && req.compression() != v1::COMPRESSION_GZIP &&
      req.compression() != v1::COMPRESSION_UNSPECIFIED) {
    return absl::UnimplementedError(
        absl::StrCat("compression ", v1::Compression_Name(req.compression()), " is not supported"));
  }
  if (req.service() != kService) {
    return absl::InvalidArgumentError(absl::StrCat("unknown service ", req.service()));
  }
  return absl::OkStatus();
}

// The channel's options: TLS when the request gives the server's certificate (trusted as the
// root; with a client certificate for mutual TLS), and the receive limit.
absl::StatusOr<ChannelOptions> channel_options(const v1::ClientCompatRequest& req) {
  ChannelOptions options;
  if (req.protocol() == v1::PROTOCOL_GRPC_WEB) options.protocol = ChannelProtocol::kGrpcWeb;
  if (req.protocol() == v1::PROTOCOL_CONNECT) options.protocol = ChannelProtocol::kConnect;
  if (req.codec() == v1::CODEC_JSON) options.codec = ChannelCodec::kJson;
  if (req.http_version() == v1::HTTP_VERSION_1) options.http_version = ChannelHttpVersion::kHttp1;
  if (req.message_receive_limit() > 0) {
    options.max_receive_message_size = req.message_receive_limit();
  }
  if (!req.server_tls_cert().empty()) {
    ChannelTlsConfig tls{.root_certificates = Pem::content(req.server_tls_cert())};
    if (req.has_client_tls_creds()) {
      tls.certificate_chain = Pem::content(req.client_tls_creds().cert());
      tls.private_key = Pem::content(req.client_tls_creds().key());
    }
    absl::StatusOr<std::shared_ptr<ChannelCredentials>> credentials =
        ChannelCredentials::create(std::move(tls));
    if (!credentials.ok()) return credentials.status();
    options.credentials = *std::move(credentials);
  }
  return options;
}

std::string target(const v1::ClientCompatRequest& req) {
  const bool ipv6 = req.host().find(':') != std::string::npos;
  return ipv6 ? absl::StrCat("[", req.host(), "]:", req.port())
              : absl::StrCat(req.host(), ":", req.port());
}

// Makes the call the request describes on a channel of its own.
asio::awaitable<absl::StatusOr<Result>> invoke(asio::io_context& io,
                                               const v1::ClientCompatRequest& req) {
  if (absl::Status supported = check_supported(req); !supported.ok()) co_return supported;
  absl::StatusOr<ChannelOptions> options = channel_options(req);
  if (!options.ok()) co_return options.status();
  const bool http2 = options->http_version == ChannelHttpVersion::kHttp2;
  Channel channel(io, target(req), *std::move(options));
  // A case with a timeout gets a connected channel first (HTTP/2; HTTP/1.1 connects per call):
  // the suite checks the grpc-timeout the server saw against the case's, with 500 ms of grace,
  // and a lazy connect (TCP, TLS, SETTINGS) on a loaded machine under the sanitizers took more
  // than that (1,460 ms of 2,000 left). The connect is not what the case is about; the deadline's
  // propagation is. Bounded: a channel that cannot connect makes its call fail as it would.
  if (http2 && req.has_timeout_ms()) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (ConnectivityState state = channel.state(true);
         state == ConnectivityState::kIdle || state == ConnectivityState::kConnecting;
         state = channel.state()) {
      if (!co_await channel.wait_for_state_change(state, give_up)) break;
    }
  }
  std::string method = absl::StrCat("/", kService, "/", req.method());
  const std::string& name = req.method();
  if (name == "Unary") {
    co_return co_await unary<v1::UnaryRequest, v1::UnaryResponse>(channel, method, req);
  }
  if (name == "IdempotentUnary") {
    co_return co_await unary<v1::IdempotentUnaryRequest, v1::IdempotentUnaryResponse>(channel,
                                                                                      method, req);
  }
  if (name == "Unimplemented") {
    co_return co_await unary<v1::UnimplementedRequest, v1::UnimplementedResponse>(channel, method,
                                                                                  req);
  }
  if (name == "ServerStream") co_return co_await server_stream(channel, method, req);
  if (name == "ClientStream") co_return co_await client_stream(channel, method, req);
  if (name == "BidiStream") co_return co_await bidi_stream(channel, method, req);
  co_return absl::InvalidArgumentError(absl::StrCat("unknown method ", name, " of ", kService));
}

// The ClientCompatResponse for a request: the call's result, or an error result when the call
// could not be made as asked.
asio::awaitable<v1::ClientCompatResponse> run_case(asio::io_context& io,
                                                   v1::ClientCompatRequest req) {
  v1::ClientCompatResponse out;
  out.set_test_name(req.test_name());
  absl::StatusOr<Result> result = co_await invoke(io, req);
  if (result.ok()) {
    *out.mutable_response() = *std::move(result);
  } else {
    out.mutable_error()->set_message(result.status().ToString());
  }
  co_return out;
}

int run() {
  asio::io_context io(1);
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&io] { io.run(); });
  std::counting_semaphore<kMaxCallsInFlight> slots(kMaxCallsInFlight);
  bool output_failed = false;  // io thread only, read after it joined
  int exit_code = 0;
  while (true) {
    v1::ClientCompatRequest req;
    bool eof = false;
    if (absl::Status read = read_delimited(stdin, req, &eof); !read.ok()) {
      std::fprintf(stderr, "ferry_conformance_client: %s\n", read.ToString().c_str());
      exit_code = 1;
      break;
    }
    if (eof) break;
    slots.acquire();
    std::string name = req.test_name();
    // The completion runs on the io thread, the only one that writes to stdout.
    asio::co_spawn(io, run_case(io, std::move(req)),
                   [&slots, &output_failed, name = std::move(name)](std::exception_ptr error,
                                                                    v1::ClientCompatResponse out) {
                     if (error) {
                       out.set_test_name(name);
                       try {
                         std::rethrow_exception(error);
                       } catch (const std::exception& e) {
                         out.mutable_error()->set_message(absl::StrCat("exception: ", e.what()));
                       } catch (...) {
                         out.mutable_error()->set_message("an exception of unknown type");
                       }
                     }
                     if (absl::Status s = write_delimited(stdout, out); !s.ok()) {
                       output_failed = true;
                     }
                     slots.release();
                   });
  }
  // At the end of the input, wait for the calls in flight.
  for (std::ptrdiff_t i = 0; i < kMaxCallsInFlight; ++i) slots.acquire();
  io.stop();
  io_thread.join();
  if (output_failed) {
    std::fprintf(stderr, "ferry_conformance_client: writing a result failed\n");
    exit_code = 1;
  }
  return exit_code;
}

}  // namespace
}  // namespace ferry::conformance

// SIGTERM keeps its default action: the runner wants the program gone at once.
int main() { return ferry::conformance::run(); }
