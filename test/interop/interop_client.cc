// ferry_interop_client: gRPC's interop client cases on ferry, calling through the stubs that
// protoc-gen-ferry generates from test.proto (interop tests). Flags and checks follow gRPC's
// interop-test-descriptions and grpc-go's interop client, so it runs against any
// grpc.testing.TestService server (grpc-go's, grpc-java's, ferry's own).
//
//   ferry_interop_client --server_host=127.0.0.1 --server_port=10000 --test_case=large_unary
//
// Prints "PASS <case>" and exits 0, or "FAIL <case>: <why>" and exits 1 (2 for bad flags). The
// cases run as coroutines on one io_context on the main thread.
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "asio/co_spawn.hpp"
#include "asio/io_context.hpp"
#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "asio/use_future.hpp"
#include "ferry/channel.h"
#include "ferry/compression.h"
#include "grpc/testing/empty.pb.h"
#include "grpc/testing/messages.pb.h"
#include "grpc/testing/test.ferry.h"
#include "interop/flags.h"

namespace ferry::interop {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using grpc::testing::Empty;
using grpc::testing::Payload;
using grpc::testing::SimpleRequest;
using grpc::testing::SimpleResponse;
using grpc::testing::StreamingInputCallRequest;
using grpc::testing::StreamingInputCallResponse;
using grpc::testing::StreamingOutputCallRequest;
using grpc::testing::StreamingOutputCallResponse;
using grpc::testing::TestService;
using grpc::testing::UnimplementedService;

constexpr int kRequestSizes[] = {27182, 8, 1828, 45904};
constexpr int kResponseSizes[] = {31415, 9, 2653, 58979};
constexpr int kLargeRequestSize = 271828;
constexpr int kLargeResponseSize = 314159;

constexpr std::string_view kEchoInitialKey = "x-grpc-test-echo-initial";
constexpr std::string_view kEchoInitialValue = "test_initial_metadata_value";
constexpr std::string_view kEchoTrailingKey = "x-grpc-test-echo-trailing-bin";
constexpr std::string_view kEchoTrailingValue = "\x0a\x0b\x0a\x0b\x0a\x0b";

// Everything a case may use.
struct Env {
  std::string target;  // "host:port"
  Channel* channel;
  TestService::Stub stub;  // on *channel
  const Flags* flags;
  ChannelOptions options;  // TLS credentials, for channel_soak's fresh channels
};

// ---- helpers --------------------------------------------------------------------------------

std::string str(absl::string_view s) { return std::string(s.data(), s.size()); }
// Debian's abseil has its own string_view type, distinct from std's.
absl::string_view ab(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status fail(std::string why) { return absl::AbortedError(std::move(why)); }

// "CODE: message" of a status, with the message's control characters escaped.
std::string describe(const absl::Status& s) {
  return absl::StrCat(absl::StatusCodeToString(s.code()), ": \"", absl::CEscape(s.message()), "\"");
}

Payload make_payload(int size) {
  Payload p;
  p.set_type(grpc::testing::COMPRESSABLE);
  p.mutable_body()->assign(static_cast<std::size_t>(size), '\0');
  return p;
}

// The payload has type COMPRESSABLE and `size` zero bytes.
absl::Status check_payload(const Payload& p, int size, const std::string& what) {
  if (p.type() != grpc::testing::COMPRESSABLE) {
    return fail(absl::StrCat(what, ": payload type ", static_cast<int>(p.type()),
                             ", want COMPRESSABLE (0)"));
  }
  if (p.body().size() != static_cast<std::size_t>(size)) {
    return fail(absl::StrCat(what, ": payload length ", p.body().size(), ", want ", size));
  }
  if (p.body().find_first_not_of('\0') != std::string::npos) {
    return fail(absl::StrCat(what, ": payload body is not all zero bytes"));
  }
  return absl::OkStatus();
}

absl::Status expect_status(const absl::Status& got, absl::StatusCode code,
                           const std::string& what) {
  if (got.code() != code) {
    return fail(
        absl::StrCat(what, ": got ", describe(got), ", want ", absl::StatusCodeToString(code)));
  }
  return absl::OkStatus();
}

// ---- cases ------------------------------------------------------------------------------------

asio::awaitable<absl::Status> empty_unary(Env& env) {
  Empty request, response;
  ClientContext ctx;
  absl::Status s = co_await env.stub.EmptyCall(ctx, request, response);
  if (!s.ok()) co_return fail("EmptyCall failed: " + describe(s));
  if (response.ByteSizeLong() != 0) {
    co_return fail(absl::StrCat("EmptyCall response is ", response.ByteSizeLong(),
                                " bytes, want an empty message"));
  }
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> large_unary(Env& env) {
  SimpleRequest request;
  request.set_response_type(grpc::testing::COMPRESSABLE);
  request.set_response_size(kLargeResponseSize);
  *request.mutable_payload() = make_payload(kLargeRequestSize);
  SimpleResponse response;
  ClientContext ctx;
  absl::Status s = co_await env.stub.UnaryCall(ctx, request, response);
  if (!s.ok()) co_return fail("UnaryCall failed: " + describe(s));
  co_return check_payload(response.payload(), kLargeResponseSize, "UnaryCall response");
}

// server_compressed_unary: the response is compressed exactly when response_compressed asks.
asio::awaitable<absl::Status> server_compressed_unary(Env& env) {
  for (const bool compressed : {true, false}) {
    SimpleRequest request;
    request.set_response_type(grpc::testing::COMPRESSABLE);
    request.set_response_size(kLargeResponseSize);
    request.mutable_response_compressed()->set_value(compressed);
    *request.mutable_payload() = make_payload(kLargeRequestSize);
    SimpleResponse response;
    ClientContext ctx;
    const std::string what = absl::StrCat("UnaryCall with response_compressed=", compressed);
    absl::Status s = co_await env.stub.UnaryCall(ctx, request, response);
    if (!s.ok()) co_return fail(what + " failed: " + describe(s));
    if (ctx.response_compressed() != compressed) {
      co_return fail(absl::StrCat(what, ": the response's compressed flag is ",
                                  ctx.response_compressed() ? 1 : 0));
    }
    if (absl::Status c = check_payload(response.payload(), kLargeResponseSize, what); !c.ok()) {
      co_return c;
    }
  }
  co_return absl::OkStatus();
}

// server_compressed_streaming: two responses, the first compressed, the second not.
asio::awaitable<absl::Status> server_compressed_streaming(Env& env) {
  constexpr int kSizes[] = {31415, 92653};
  constexpr bool kCompressed[] = {true, false};
  StreamingOutputCallRequest request;
  request.set_response_type(grpc::testing::COMPRESSABLE);
  for (std::size_t i = 0; i < std::size(kSizes); ++i) {
    auto* p = request.add_response_parameters();
    p->set_size(kSizes[i]);
    p->mutable_compressed()->set_value(kCompressed[i]);
  }
  ClientContext ctx;
  // A request that cannot be sent ends the call: its status shows in finish().
  ClientReader<StreamingOutputCallResponse> reader =
      co_await env.stub.StreamingOutputCall(ctx, request);
  std::size_t count = 0;
  StreamingOutputCallResponse response;
  while (co_await reader.read(response)) {
    if (count >= std::size(kSizes)) co_return fail("more than 2 responses");
    const std::string what = absl::StrCat("response ", count);
    if (reader.last_message_compressed() != kCompressed[count]) {
      co_return fail(absl::StrCat(what, ": compressed flag ",
                                  reader.last_message_compressed() ? 1 : 0, ", want ",
                                  kCompressed[count] ? 1 : 0));
    }
    if (absl::Status c = check_payload(response.payload(), kSizes[count], what); !c.ok()) {
      co_return c;
    }
    ++count;
  }
  absl::Status s = co_await reader.finish();
  if (!s.ok()) co_return fail("StreamingOutputCall failed: " + describe(s));
  if (count != std::size(kSizes)) co_return fail(absl::StrCat("got ", count, " responses, want 2"));
  co_return absl::OkStatus();
}

// client_compressed_unary[_noprobe]: the server sees which requests came compressed. The probe
// (an uncompressed request that expects compression) must fail with INVALID_ARGUMENT.
asio::awaitable<absl::Status> client_compressed_unary(Env& env, bool probe) {
  auto make_request = [](bool expect) {
    SimpleRequest request;
    request.set_response_type(grpc::testing::COMPRESSABLE);
    request.set_response_size(kLargeResponseSize);
    request.mutable_expect_compressed()->set_value(expect);
    *request.mutable_payload() = make_payload(kLargeRequestSize);
    return request;
  };
  if (probe) {
    SimpleResponse response;
    ClientContext ctx;
    // Named, not a temporary in the co_await (GCC 12 destroys such temporaries twice).
    const SimpleRequest request = make_request(true);
    absl::Status s = co_await env.stub.UnaryCall(ctx, request, response);
    if (absl::Status c = expect_status(s, absl::StatusCode::kInvalidArgument,
                                       "the probe (uncompressed, expect_compressed=true)");
        !c.ok()) {
      co_return c;
    }
  }
  for (const bool compressed : {true, false}) {
    SimpleResponse response;
    ClientContext ctx;
    ctx.set_compression(compressed ? Compression::kGzip : Compression::kIdentity);
    const std::string what = absl::StrCat(compressed ? "compressed" : "uncompressed",
                                          " UnaryCall with expect_compressed=", compressed);
    const SimpleRequest request = make_request(compressed);
    absl::Status s = co_await env.stub.UnaryCall(ctx, request, response);
    if (!s.ok()) co_return fail(what + " failed: " + describe(s));
    if (absl::Status c = check_payload(response.payload(), kLargeResponseSize, what); !c.ok()) {
      co_return c;
    }
  }
  co_return absl::OkStatus();
}

// client_compressed_streaming[_noprobe]: one compressed and one uncompressed request on a
// compressed call; the probe is a call whose uncompressed first request expects compression.
asio::awaitable<absl::Status> client_compressed_streaming(Env& env, bool probe) {
  auto make_request = [](bool expect, int size) {
    StreamingInputCallRequest request;
    request.mutable_expect_compressed()->set_value(expect);
    *request.mutable_payload() = make_payload(size);
    return request;
  };
  if (probe) {
    ClientContext ctx;
    // Not half-closed: the server must fail the call on this message alone. The stub's
    // ClientWriter cannot wait for the status without half-closing first (finish() does), so
    // the probe takes the untyped stream on the generated path.
    ClientStream stream = co_await env.channel->open(TestService::kStreamingInputCallPath, ctx);
    const StreamingInputCallRequest request = make_request(true, 27182);
    (void)co_await stream.write(request);
    absl::Status s = co_await stream.finish();
    if (absl::Status c = expect_status(s, absl::StatusCode::kInvalidArgument,
                                       "the probe (uncompressed, expect_compressed=true)");
        !c.ok()) {
      co_return c;
    }
  }
  ClientContext ctx;
  ctx.set_compression(Compression::kGzip);
  ClientWriter<StreamingInputCallRequest> writer = co_await env.stub.StreamingInputCall(ctx);
  const StreamingInputCallRequest first = make_request(true, 27182);
  const StreamingInputCallRequest second = make_request(false, 45904);
  absl::Status w = co_await writer.write(first);
  if (w.ok()) {
    WriteOptions uncompressed;
    uncompressed.no_compression = true;
    w = co_await writer.write(second, uncompressed);
  }
  StreamingInputCallResponse response;
  absl::Status s = co_await writer.finish(response);
  if (!s.ok()) {
    co_return fail("StreamingInputCall failed: " + describe(s) +
                   (w.ok() ? "" : "; a write failed: " + describe(w)));
  }
  if (response.aggregated_payload_size() != 27182 + 45904) {
    co_return fail(absl::StrCat("aggregated_payload_size ", response.aggregated_payload_size(),
                                ", want ", 27182 + 45904));
  }
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> client_compressed_unary_probe(Env& env) {
  return client_compressed_unary(env, true);
}
asio::awaitable<absl::Status> client_compressed_unary_noprobe(Env& env) {
  return client_compressed_unary(env, false);
}
asio::awaitable<absl::Status> client_compressed_streaming_probe(Env& env) {
  return client_compressed_streaming(env, true);
}
asio::awaitable<absl::Status> client_compressed_streaming_noprobe(Env& env) {
  return client_compressed_streaming(env, false);
}

asio::awaitable<absl::Status> client_streaming(Env& env) {
  ClientContext ctx;
  ClientWriter<StreamingInputCallRequest> writer = co_await env.stub.StreamingInputCall(ctx);
  int sum = 0;
  for (int size : kRequestSizes) {
    StreamingInputCallRequest request;
    *request.mutable_payload() = make_payload(size);
    absl::Status s = co_await writer.write(request);
    if (!s.ok()) co_return fail(absl::StrCat("sending the ", size, "-byte request: ", describe(s)));
    sum += size;
  }
  StreamingInputCallResponse response;
  absl::Status s = co_await writer.finish(response);
  if (!s.ok()) co_return fail("StreamingInputCall failed: " + describe(s));
  if (response.aggregated_payload_size() != sum) {
    co_return fail(absl::StrCat("aggregated_payload_size ", response.aggregated_payload_size(),
                                ", want ", sum));
  }
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> server_streaming(Env& env) {
  StreamingOutputCallRequest request;
  request.set_response_type(grpc::testing::COMPRESSABLE);
  for (int size : kResponseSizes) request.add_response_parameters()->set_size(size);
  ClientContext ctx;
  // A failed write shows in the status below.
  ClientReader<StreamingOutputCallResponse> reader =
      co_await env.stub.StreamingOutputCall(ctx, request);
  std::size_t count = 0;
  StreamingOutputCallResponse response;
  while (co_await reader.read(response)) {
    if (count >= std::size(kResponseSizes)) {
      co_return fail(absl::StrCat("more than ", std::size(kResponseSizes), " responses"));
    }
    absl::Status c =
        check_payload(response.payload(), kResponseSizes[count], absl::StrCat("response ", count));
    if (!c.ok()) co_return c;
    ++count;
  }
  absl::Status s = co_await reader.finish();
  if (!s.ok()) co_return fail("StreamingOutputCall failed: " + describe(s));
  if (count != std::size(kResponseSizes)) {
    co_return fail(absl::StrCat("got ", count, " responses, want ", std::size(kResponseSizes)));
  }
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> ping_pong(Env& env) {
  ClientContext ctx;
  ClientReaderWriter<StreamingOutputCallRequest, StreamingOutputCallResponse> stream =
      co_await env.stub.FullDuplexCall(ctx);
  for (std::size_t i = 0; i < std::size(kRequestSizes); ++i) {
    StreamingOutputCallRequest request;
    request.set_response_type(grpc::testing::COMPRESSABLE);
    request.add_response_parameters()->set_size(kResponseSizes[i]);
    *request.mutable_payload() = make_payload(kRequestSizes[i]);
    absl::Status w = co_await stream.write(request);
    if (!w.ok()) {
      co_return fail(absl::StrCat("sending request ", i, ": ", describe(w),
                                  "; call status: ", describe(co_await stream.finish())));
    }
    StreamingOutputCallResponse response;
    if (!co_await stream.read(response)) {
      co_return fail(
          absl::StrCat("no response ", i, "; call status: ", describe(co_await stream.finish())));
    }
    absl::Status c =
        check_payload(response.payload(), kResponseSizes[i], absl::StrCat("response ", i));
    if (!c.ok()) co_return c;
  }
  co_await stream.writes_done();
  StreamingOutputCallResponse extra;
  if (co_await stream.read(extra)) co_return fail("a response after the last request");
  absl::Status s = co_await stream.finish();
  if (!s.ok()) co_return fail("FullDuplexCall failed: " + describe(s));
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> empty_stream(Env& env) {
  ClientContext ctx;
  ClientReaderWriter<StreamingOutputCallRequest, StreamingOutputCallResponse> stream =
      co_await env.stub.FullDuplexCall(ctx);
  co_await stream.writes_done();
  StreamingOutputCallResponse response;
  if (co_await stream.read(response)) co_return fail("got a response, want none");
  absl::Status s = co_await stream.finish();
  if (!s.ok()) co_return fail("FullDuplexCall failed: " + describe(s));
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> timeout_on_sleeping_server(Env& env) {
  ClientContext ctx;
  ctx.set_timeout(1ms);
  ClientReaderWriter<StreamingOutputCallRequest, StreamingOutputCallResponse> stream =
      co_await env.stub.FullDuplexCall(ctx);
  StreamingOutputCallRequest request;
  request.set_response_type(grpc::testing::COMPRESSABLE);
  *request.mutable_payload() = make_payload(27182);
  // The write may fail once the deadline has passed (grpc-go's Send then returns io.EOF); the
  // status is what counts. The request stream stays open: the server must not see its end.
  (void)co_await stream.write(request);
  StreamingOutputCallResponse response;
  if (co_await stream.read(response)) co_return fail("got a response, want DEADLINE_EXCEEDED");
  co_return expect_status(co_await stream.finish(), absl::StatusCode::kDeadlineExceeded,
                          "FullDuplexCall");
}

asio::awaitable<absl::Status> cancel_after_begin(Env& env) {
  ClientContext ctx;
  ctx.add_metadata("key1", "value1");
  ctx.add_metadata("key2", "value2");
  ClientWriter<StreamingInputCallRequest> writer = co_await env.stub.StreamingInputCall(ctx);
  writer.cancel();
  StreamingInputCallResponse response;
  co_return expect_status(co_await writer.finish(response), absl::StatusCode::kCancelled,
                          "StreamingInputCall");
}

asio::awaitable<absl::Status> cancel_after_first_response(Env& env) {
  ClientContext ctx;
  ClientReaderWriter<StreamingOutputCallRequest, StreamingOutputCallResponse> stream =
      co_await env.stub.FullDuplexCall(ctx);
  StreamingOutputCallRequest request;
  request.set_response_type(grpc::testing::COMPRESSABLE);
  request.add_response_parameters()->set_size(31415);
  *request.mutable_payload() = make_payload(27182);
  absl::Status w = co_await stream.write(request);
  if (!w.ok()) co_return fail("sending the request: " + describe(w));
  StreamingOutputCallResponse response;
  if (!co_await stream.read(response)) {
    co_return fail("no first response; call status: " + describe(co_await stream.finish()));
  }
  stream.cancel();
  if (co_await stream.read(response)) co_return fail("a response after cancel()");
  co_return expect_status(co_await stream.finish(), absl::StatusCode::kCancelled, "FullDuplexCall");
}

// Checks that exactly one echoed value of each key came back.
absl::Status check_echoed_metadata(const ClientContext& ctx, const std::string& what) {
  auto initial = ctx.initial_metadata().get_all(kEchoInitialKey);
  if (initial.size() != 1) {
    return fail(absl::StrCat(what, ": ", initial.size(), " values of ", ab(kEchoInitialKey),
                             " in the response headers, want 1"));
  }
  if (initial[0] != kEchoInitialValue) {
    return fail(absl::StrCat(what, ": ", ab(kEchoInitialKey), " = \"",
                             absl::CEscape(ab(initial[0])), "\", want \"", ab(kEchoInitialValue),
                             "\""));
  }
  auto trailing = ctx.trailing_metadata().get_all(kEchoTrailingKey);
  if (trailing.size() != 1) {
    return fail(absl::StrCat(what, ": ", trailing.size(), " values of ", ab(kEchoTrailingKey),
                             " in the trailers, want 1"));
  }
  if (trailing[0] != kEchoTrailingValue) {
    return fail(absl::StrCat(what, ": ", ab(kEchoTrailingKey), " = \"",
                             absl::CEscape(ab(trailing[0])), "\", want \"",
                             absl::CEscape(ab(kEchoTrailingValue)), "\""));
  }
  return absl::OkStatus();
}

void add_echo_metadata(ClientContext& ctx) {
  ctx.add_metadata(kEchoInitialKey, kEchoInitialValue);
  ctx.add_metadata(kEchoTrailingKey, kEchoTrailingValue);
}

asio::awaitable<absl::Status> custom_metadata(Env& env) {
  {  // Unary.
    SimpleRequest request;
    request.set_response_type(grpc::testing::COMPRESSABLE);
    request.set_response_size(1);
    *request.mutable_payload() = make_payload(1);
    SimpleResponse response;
    ClientContext ctx;
    add_echo_metadata(ctx);
    absl::Status s = co_await env.stub.UnaryCall(ctx, request, response);
    if (!s.ok()) co_return fail("UnaryCall failed: " + describe(s));
    if (absl::Status c = check_payload(response.payload(), 1, "UnaryCall response"); !c.ok()) {
      co_return c;
    }
    if (absl::Status c = check_echoed_metadata(ctx, "UnaryCall"); !c.ok()) co_return c;
  }
  {  // Full duplex.
    ClientContext ctx;
    add_echo_metadata(ctx);
    ClientReaderWriter<StreamingOutputCallRequest, StreamingOutputCallResponse> stream =
        co_await env.stub.FullDuplexCall(ctx);
    StreamingOutputCallRequest request;
    request.set_response_type(grpc::testing::COMPRESSABLE);
    request.add_response_parameters()->set_size(1);
    *request.mutable_payload() = make_payload(1);
    absl::Status w = co_await stream.write(request);
    if (!w.ok()) co_return fail("FullDuplexCall: sending the request: " + describe(w));
    StreamingOutputCallResponse response;
    if (!co_await stream.read(response)) {
      co_return fail("FullDuplexCall: no response; call status: " +
                     describe(co_await stream.finish()));
    }
    if (absl::Status c = check_payload(response.payload(), 1, "FullDuplexCall response"); !c.ok()) {
      co_return c;
    }
    co_await stream.writes_done();
    if (co_await stream.read(response)) co_return fail("FullDuplexCall: a second response");
    absl::Status s = co_await stream.finish();
    if (!s.ok()) co_return fail("FullDuplexCall failed: " + describe(s));
    if (absl::Status c = check_echoed_metadata(ctx, "FullDuplexCall"); !c.ok()) co_return c;
  }
  co_return absl::OkStatus();
}

// The status must be exactly code 2 (UNKNOWN) with `message`.
absl::Status expect_echoed_status(const absl::Status& got, std::string_view message,
                                  const std::string& what) {
  if (got.code() != absl::StatusCode::kUnknown || str(got.message()) != message) {
    return fail(absl::StrCat(what, ": got ", describe(got), ", want UNKNOWN: \"",
                             absl::CEscape(ab(message)), "\""));
  }
  return absl::OkStatus();
}

asio::awaitable<absl::Status> status_code_and_message(Env& env) {
  constexpr std::string_view kMessage = "test status message";
  {  // Unary.
    SimpleRequest request;
    request.mutable_response_status()->set_code(2);
    request.mutable_response_status()->set_message(std::string(kMessage));
    SimpleResponse response;
    ClientContext ctx;
    absl::Status s = co_await env.stub.UnaryCall(ctx, request, response);
    if (absl::Status c = expect_echoed_status(s, kMessage, "UnaryCall"); !c.ok()) co_return c;
  }
  {  // Full duplex.
    ClientContext ctx;
    ClientReaderWriter<StreamingOutputCallRequest, StreamingOutputCallResponse> stream =
        co_await env.stub.FullDuplexCall(ctx);
    StreamingOutputCallRequest request;
    request.mutable_response_status()->set_code(2);
    request.mutable_response_status()->set_message(std::string(kMessage));
    (void)co_await stream.write(request);  // a failure shows in the status
    co_await stream.writes_done();
    StreamingOutputCallResponse response;
    if (co_await stream.read(response)) co_return fail("FullDuplexCall: got a response");
    absl::Status s = co_await stream.finish();
    if (absl::Status c = expect_echoed_status(s, kMessage, "FullDuplexCall"); !c.ok()) {
      co_return c;
    }
  }
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> special_status_message(Env& env) {
  constexpr std::string_view kMessage =
      "\t\ntest with whitespace\r\nand Unicode BMP \xE2\x98\xBA and non-BMP \xF0\x9F\x98\x88\t\n";
  SimpleRequest request;
  request.mutable_response_status()->set_code(2);
  request.mutable_response_status()->set_message(std::string(kMessage));
  SimpleResponse response;
  ClientContext ctx;
  ctx.set_timeout(10s);
  absl::Status s = co_await env.stub.UnaryCall(ctx, request, response);
  co_return expect_echoed_status(s, kMessage, "UnaryCall");
}

asio::awaitable<absl::Status> unimplemented_method(Env& env) {
  Empty request, response;
  ClientContext ctx;
  co_return expect_status(co_await env.stub.UnimplementedCall(ctx, request, response),
                          absl::StatusCode::kUnimplemented, "TestService/UnimplementedCall");
}

asio::awaitable<absl::Status> unimplemented_service(Env& env) {
  UnimplementedService::Stub stub(*env.channel);
  Empty request, response;
  ClientContext ctx;
  co_return expect_status(co_await stub.UnimplementedCall(ctx, request, response),
                          absl::StatusCode::kUnimplemented,
                          "UnimplementedService/UnimplementedCall");
}

// rpc_soak and channel_soak: large unary calls, each within a latency bound, on one channel or
// on a new channel (connection) each.
struct SoakConfig {
  int iterations;
  int max_failures;
  Clock::duration max_latency;
  Clock::duration overall_timeout;
  Clock::duration min_time_between_rpcs;
  int request_size;
  int response_size;
  int workers;
  bool new_channel_per_call;
};

struct SoakResults {
  int succeeded = 0;
  int failed = 0;
};

asio::awaitable<void> soak_worker(Env& env, const SoakConfig& config, Clock::time_point start,
                                  int worker, SoakResults& results) {
  asio::steady_timer pace(co_await asio::this_coro::executor);
  asio::io_context::executor_type io_ex = env.channel->executor();
  const int per_worker = config.iterations / config.workers;
  for (int i = 0; i < per_worker; ++i) {
    if (Clock::now() - start >= config.overall_timeout) {
      std::fprintf(stderr, "worker %d: the soak test exceeded its overall timeout, stopping\n",
                   worker);
      co_return;
    }
    const Clock::time_point earliest_next = Clock::now() + config.min_time_between_rpcs;
    std::unique_ptr<Channel> fresh;
    Channel* channel = env.channel;
    if (config.new_channel_per_call) {
      fresh = std::make_unique<Channel>(io_ex.context(), env.target, env.options);
      channel = fresh.get();
    }
    TestService::Stub stub(*channel);
    SimpleRequest request;
    request.set_response_type(grpc::testing::COMPRESSABLE);
    request.set_response_size(config.response_size);
    *request.mutable_payload() = make_payload(config.request_size);
    SimpleResponse response;
    ClientContext ctx;
    ctx.set_deadline(start + config.overall_timeout);
    const Clock::time_point call_start = Clock::now();
    absl::Status s = co_await stub.UnaryCall(ctx, request, response);
    if (s.ok()) s = check_payload(response.payload(), config.response_size, "UnaryCall response");
    const auto latency =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - call_start);
    fresh.reset();
    if (!s.ok()) {
      ++results.failed;
      std::fprintf(stderr, "worker %d: soak iteration %d failed: %s\n", worker, i,
                   describe(s).c_str());
    } else if (latency > config.max_latency) {
      ++results.failed;
      std::fprintf(
          stderr, "worker %d: soak iteration %d took %lld ms, over the %lld ms bound\n", worker, i,
          static_cast<long long>(latency.count()),
          static_cast<long long>(
              std::chrono::duration_cast<std::chrono::milliseconds>(config.max_latency).count()));
    } else {
      ++results.succeeded;
      std::fprintf(stderr, "worker %d: soak iteration %d: %lld ms\n", worker, i,
                   static_cast<long long>(latency.count()));
    }
    if (Clock::now() < earliest_next) {
      pace.expires_at(earliest_next);
      co_await pace.async_wait(asio::use_awaitable);
    }
  }
}

asio::awaitable<absl::Status> soak(Env& env, bool new_channel_per_call) {
  const Flags& f = *env.flags;
  SoakConfig config{
      .iterations = static_cast<int>(f.get_int("soak_iterations")),
      .max_failures = static_cast<int>(f.get_int("soak_max_failures")),
      .max_latency =
          std::chrono::milliseconds(f.get_int("soak_per_iteration_max_acceptable_latency_ms")),
      .overall_timeout = std::chrono::seconds(f.get_int("soak_overall_timeout_seconds")),
      .min_time_between_rpcs =
          std::chrono::milliseconds(f.get_int("soak_min_time_ms_between_rpcs")),
      .request_size = static_cast<int>(f.get_int("soak_request_size")),
      .response_size = static_cast<int>(f.get_int("soak_response_size")),
      .workers = static_cast<int>(f.get_int("soak_num_threads")),
      .new_channel_per_call = new_channel_per_call,
  };
  if (config.workers < 1) co_return fail("--soak_num_threads must be at least 1");
  if (config.iterations % config.workers != 0) {
    std::fprintf(stderr, "soak_iterations must be evenly divisible by soak_num_threads\n");
  }
  const Clock::time_point start = Clock::now();
  std::vector<SoakResults> results(static_cast<std::size_t>(config.workers));
  // The workers run concurrently on this thread; wait for all of them.
  auto ex = co_await asio::this_coro::executor;
  int running = config.workers;
  asio::steady_timer all_done(ex, Clock::time_point::max());
  for (int w = 0; w < config.workers; ++w) {
    asio::co_spawn(ex, soak_worker(env, config, start, w, results[static_cast<std::size_t>(w)]),
                   [&running, &all_done](std::exception_ptr) {
                     if (--running == 0) all_done.cancel();
                   });
  }
  while (running > 0) {
    asio::error_code ignored;
    co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
  SoakResults total;
  for (const SoakResults& r : results) {
    total.succeeded += r.succeeded;
    total.failed += r.failed;
  }
  std::fprintf(stderr, "soak test successes: %d / %d iterations, failures: %d\n", total.succeeded,
               config.iterations, total.failed);
  if (total.succeeded + total.failed != config.iterations) {
    co_return fail(absl::StrCat("the soak test ran out of its overall time: ran ",
                                total.succeeded + total.failed, " of ", config.iterations,
                                " iterations"));
  }
  if (total.failed > config.max_failures) {
    co_return fail(absl::StrCat(total.failed, " soak iterations failed, over the limit of ",
                                config.max_failures));
  }
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> rpc_soak(Env& env) { return soak(env, false); }
asio::awaitable<absl::Status> channel_soak(Env& env) { return soak(env, true); }

using Case = asio::awaitable<absl::Status> (*)(Env&);

const std::map<std::string, Case, std::less<>>& cases() {
  static const auto* const kCases = new std::map<std::string, Case, std::less<>>{
      {"empty_unary", empty_unary},
      {"large_unary", large_unary},
      {"client_streaming", client_streaming},
      {"server_streaming", server_streaming},
      {"ping_pong", ping_pong},
      {"empty_stream", empty_stream},
      {"timeout_on_sleeping_server", timeout_on_sleeping_server},
      {"cancel_after_begin", cancel_after_begin},
      {"cancel_after_first_response", cancel_after_first_response},
      {"status_code_and_message", status_code_and_message},
      {"special_status_message", special_status_message},
      {"custom_metadata", custom_metadata},
      {"unimplemented_method", unimplemented_method},
      {"unimplemented_service", unimplemented_service},
      {"rpc_soak", rpc_soak},
      {"channel_soak", channel_soak},
      {"server_compressed_unary", server_compressed_unary},
      {"server_compressed_streaming", server_compressed_streaming},
      {"client_compressed_unary", client_compressed_unary_probe},
      {"client_compressed_unary_noprobe", client_compressed_unary_noprobe},
      {"client_compressed_streaming", client_compressed_streaming_probe},
      {"client_compressed_streaming_noprobe", client_compressed_streaming_noprobe},
  };
  return *kCases;
}

}  // namespace
}  // namespace ferry::interop

int main(int argc, char** argv) {
  using namespace ferry::interop;
  Flags flags;
  flags.define("server_host", "localhost", "server host name or address");
  flags.define("server_port", "10000", "server port");
  flags.define("test_case", "large_unary", "the case to run");
  flags.define("use_tls", "false", "connect with TLS");
  flags.define("use_test_ca", "false", "trust ferry's test CA (test/certs/ca.pem)");
  flags.define("ca_file", "", "trust the CAs in this PEM file (default: the system's)");
  flags.define("server_host_override", "",
               "the name the server's certificate must match, also sent as SNI");
  flags.define("tls_cert_file", "", "ferry's own: client certificate (PEM), for mutual TLS");
  flags.define("tls_key_file", "", "ferry's own: the client certificate's key (PEM)");
  flags.define("target", "",
               "ferry's own: the channel's whole target (e.g. ipv4:127.0.0.1:1,127.0.0.1:2), in "
               "place of server_host and server_port");
  flags.define("lb_policy", "pick_first", "ferry's own: pick_first or round_robin");
  flags.define("soak_iterations", "10", "iterations of rpc_soak and channel_soak");
  flags.define("soak_max_failures", "0", "soak iterations allowed to fail");
  flags.define("soak_per_iteration_max_acceptable_latency_ms", "1000",
               "latency over which a soak iteration fails");
  flags.define("soak_overall_timeout_seconds", "10", "time bound of a whole soak test");
  flags.define("soak_min_time_ms_between_rpcs", "0", "pacing of soak iterations");
  flags.define("soak_request_size", "271828", "request payload of a soak iteration");
  flags.define("soak_response_size", "314159", "response payload of a soak iteration");
  flags.define("soak_num_threads", "1", "concurrent soak workers");
  if (!flags.parse(argc, argv)) return 2;
  ferry::ChannelOptions options;
  if (flags.get("lb_policy") == "round_robin") {
    options.load_balancing = ferry::LoadBalancingPolicy::kRoundRobin;
  } else if (flags.get("lb_policy") != "pick_first") {
    std::fprintf(stderr, "ferry_interop_client: unknown --lb_policy '%s'\n",
                 flags.get("lb_policy").c_str());
    return 2;
  }
  if (flags.get_bool("use_tls")) {
    ferry::ChannelTlsConfig tls;
    if (!flags.get("ca_file").empty()) {
      tls.root_certificates = ferry::Pem::file(flags.get("ca_file"));
    } else if (flags.get_bool("use_test_ca")) {
      tls.root_certificates = ferry::Pem::file(FERRY_TEST_CERTS "/ca.pem");
    }
    if (!flags.get("tls_cert_file").empty()) {
      tls.certificate_chain = ferry::Pem::file(flags.get("tls_cert_file"));
      tls.private_key = ferry::Pem::file(flags.get("tls_key_file"));
    }
    tls.server_name_override = flags.get("server_host_override");
    absl::StatusOr<std::shared_ptr<ferry::ChannelCredentials>> creds =
        ferry::ChannelCredentials::create(std::move(tls));
    if (!creds.ok()) {
      std::fprintf(stderr, "ferry_interop_client: %s\n", creds.status().ToString().c_str());
      return 2;
    }
    options.credentials = *creds;
  }
  const std::string test_case = flags.get("test_case");
  auto it = cases().find(test_case);
  if (it == cases().end()) {
    std::fprintf(stderr,
                 "ferry_interop_client: unknown --test_case '%s'; cases:", test_case.c_str());
    for (const auto& [name, fn] : cases()) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }

  std::string host = flags.get("server_host");
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  const std::string target =
      flags.get("target").empty() ? host + ":" + flags.get("server_port") : flags.get("target");

  absl::Status result;
  {
    asio::io_context io(1);
    auto channel = std::make_unique<ferry::Channel>(io, target, options);
    Env env{target, channel.get(), TestService::Stub(*channel), &flags, options};
    std::future<absl::Status> future = asio::co_spawn(io, it->second(env), asio::use_future);
    // The channel's connection keeps the loop busy; turn it until the case is done.
    while (future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      io.run_one_for(std::chrono::milliseconds(50));
    }
    try {
      result = future.get();
    } catch (const std::exception& e) {
      result = absl::InternalError(std::string("the case threw: ") + e.what());
    }
    channel.reset();
    // Let the channel close its connection before the loop goes.
    for (int i = 0; i < 100 && io.poll() > 0; ++i) {
    }
  }
  if (!result.ok()) {
    std::printf("FAIL %s: %s\n", test_case.c_str(), str(result.message()).c_str());
    return 1;
  }
  std::printf("PASS %s\n", test_case.c_str());
  return 0;
}
