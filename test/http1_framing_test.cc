// RequestFraming (src/http1/request_framing.h): RFC 9112's framing rules on a request's bytes,
// each vector fed whole and one byte at a time, with what follows the request (a pipelined one)
// left unread. The same rules reach the wire in http1_test (ferry's server) and in
// test/http1_smuggling (against Go's and Node's servers). Also message_parts.h's stream ids.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "http1/message_parts.h"
#include "http1/request_framing.h"

namespace ferry::http1::http1_framing_test {
namespace {

struct Result {
  std::size_t consumed = 0;  // bytes accepted up to the first request's end or the error
  bool ended = false;
  int status = 0;
};

// Feeds bytes in pieces of `step` (0: whole) and stops at the first request's end or an error.
Result feed(const std::string& bytes, std::size_t step, std::size_t max_head = 16384) {
  RequestFraming framing(max_head);
  Result out;
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::size_t n = step == 0 ? bytes.size() - at : std::min(step, bytes.size() - at);
    const RequestFraming::Scan scan = framing.scan(data + at, n);
    at += scan.accepted;
    if (scan.status != 0) {
      out.status = scan.status;
      break;
    }
    if (scan.message_end) {
      out.ended = true;
      break;
    }
  }
  out.consumed = at;
  return out;
}

const std::string kNext = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

void expect_request(const std::string& request) {
  for (const std::size_t step : {std::size_t{0}, std::size_t{1}, std::size_t{7}}) {
    const Result r = feed(request + kNext, step);
    EXPECT_TRUE(r.ended) << "step " << step << ": " << request;
    EXPECT_EQ(r.status, 0) << "step " << step << ": " << request;
    EXPECT_EQ(r.consumed, request.size()) << "step " << step << ": " << request;
  }
}

void expect_refused(const std::string& request, int status) {
  for (const std::size_t step : {std::size_t{0}, std::size_t{1}, std::size_t{7}}) {
    const Result r = feed(request + kNext, step);
    EXPECT_EQ(r.status, status) << "step " << step << ": " << request;
    EXPECT_FALSE(r.ended) << "step " << step << ": " << request;
  }
}

std::string post(const std::string& fields, const std::string& body) {
  return "POST /p HTTP/1.1\r\nHost: x\r\n" + fields + "\r\n" + body;
}

TEST(RequestFraming, ValidRequestsEndWhereTheirFramingSays) {
  expect_request("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  expect_request("\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");  // an empty line before: ignored
  expect_request("GET / HTTP/1.0\r\n\r\n");                 // HTTP/1.0 needs no Host
  expect_request(post("Content-Length: 5\r\n", "hello"));
  expect_request(post("content-length:5\r\n", "hello"));
  expect_request(post("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"));
  expect_request(post("Transfer-Encoding:\tCHUNKED \r\n", "5\r\nhello\r\n0\r\n\r\n"));
  expect_request(post("Transfer-Encoding: chunked\r\n",
                      "5;a=b;c\r\nhello\r\nA\r\n0123456789\r\n0\r\nx-t: 1\r\n\r\n"));
  expect_request(post("X-Obs: caf\xc3\xa9\r\nContent-Length: 0\r\n", ""));
}

TEST(RequestFraming, TransferEncodingAndContentLengthRules) {
  // RFC 9112 §6.1: both (CL.TE and TE.CL), in either order.
  expect_refused(post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 400);
  expect_refused(post("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n"), 400);
  // §6.3: chunked not last, or repeated; another coding before it is not decoded here (501).
  expect_refused(post("Transfer-Encoding: chunked, identity\r\n", "0\r\n\r\n"), 400);
  expect_refused(post("Transfer-Encoding: gzip\r\n", "0\r\n\r\n"), 400);
  expect_refused(post("Transfer-Encoding: xchunked\r\n", "0\r\n\r\n"), 400);
  expect_refused(post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"),
                 400);
  expect_refused(post("Transfer-Encoding: identity, chunked\r\n", "0\r\n\r\n"), 501);
  // §6.1: Transfer-Encoding in HTTP/1.0.
  expect_refused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
  // Content-Length: repeated (even equal), a list, a sign, hexadecimal, empty, too long.
  expect_refused(post("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"), 400);
  expect_refused(post("Content-Length: 5, 5\r\n", "hello"), 400);
  expect_refused(post("Content-Length: +5\r\n", "hello"), 400);
  expect_refused(post("Content-Length: 0x5\r\n", "hello"), 400);
  expect_refused(post("Content-Length: \r\n", ""), 400);
  expect_refused(post("Content-Length: 1234567890123456789\r\n", ""), 400);
}

TEST(RequestFraming, LineAndFieldRules) {
  // §5.1: whitespace before the colon; names are tokens.
  expect_refused(post("Content-Length : 5\r\n", "hello"), 400);
  expect_refused(post("Transfer-Encoding : chunked\r\n", "0\r\n\r\n"), 400);
  expect_refused(post("Content Length: 5\r\n", "hello"), 400);
  expect_refused(post("X@Y: 1\r\nContent-Length: 0\r\n", ""), 400);
  expect_refused(post(": empty name\r\nContent-Length: 0\r\n", ""), 400);
  expect_refused(post("no colon\r\nContent-Length: 0\r\n", ""), 400);
  // §2.2: bare LF and bare CR, in the request line, a field, the head's end.
  expect_refused("GET / HTTP/1.1\nHost: x\r\n\r\n", 400);
  expect_refused(post("X: a\nContent-Length: 0\r\n", ""), 400);
  expect_refused(post("X: a\rb\r\nContent-Length: 0\r\n", ""), 400);
  expect_refused("GET / HTTP/1.1\r\nHost: x\r\n\n", 400);
  // §5.2: obs-fold (and a space before the first field).
  expect_refused(post("X: a\r\n b\r\nContent-Length: 0\r\n", ""), 400);
  expect_refused(post("Transfer-Encoding:\r\n chunked\r\n", "0\r\n\r\n"), 400);
  expect_refused("GET / HTTP/1.1\r\n Host: x\r\n\r\n", 400);
  // RFC 9110 §5.5: control characters in values.
  expect_refused(post(std::string("X: a") + '\0' + "b\r\nContent-Length: 0\r\n", ""), 400);
  expect_refused(post("X: a\x7f\r\nContent-Length: 0\r\n", ""), 400);
  // §3.2: Host missing or repeated in HTTP/1.1.
  expect_refused("GET / HTTP/1.1\r\n\r\n", 400);
  expect_refused("GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400);
  // The request line.
  expect_refused("GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505);
  expect_refused("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505);
  expect_refused("GET / HTTP/1.1 \r\nHost: x\r\n\r\n", 400);
  expect_refused("GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
  expect_refused("G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
  expect_refused("GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 400);
}

TEST(RequestFraming, ChunkRules) {
  const std::string te = "Transfer-Encoding: chunked\r\n";
  expect_refused(post(te, "0x5\r\nhello\r\n0\r\n\r\n"), 400);
  expect_refused(post(te, "5 \r\nhello\r\n0\r\n\r\n"), 400);
  expect_refused(post(te, "-5\r\nhello\r\n0\r\n\r\n"), 400);
  expect_refused(post(te, "\r\nhello\r\n0\r\n\r\n"), 400);
  expect_refused(post(te, "10000000000000005\r\nhello\r\n0\r\n\r\n"), 400);  // over 64 bits
  expect_refused(post(te, "5\r\nhelloXX0\r\n\r\n"), 400);         // no CRLF after the data
  expect_refused(post(te, "5\r\nhello\n0\r\n\r\n"), 400);         // a bare LF after it
  expect_refused(post(te, "5\nhello\r\n0\r\n\r\n"), 400);         // after the size
  expect_refused(post(te, "5;a\rb\r\nhello\r\n0\r\n\r\n"), 400);  // a bare CR in an extension
  expect_refused(post(te, "5;a\x01\r\nhello\r\n0\r\n\r\n"), 400);
  expect_refused(post(te, "5\r\nhello\r\n0\r\nx: a\r\n b\r\n\r\n"), 400);  // obs-fold, trailer
  expect_refused(post(te, "5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n"), 400);
  expect_refused(post(te, "5;" + std::string(5000, 'a') + "\r\nhello\r\n0\r\n\r\n"), 400);
}

TEST(RequestFraming, ConnectAndUpgradeAreRefusedAtTheirHead) {
  expect_refused("CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", 405);
  expect_refused("CONNECT x:443 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 405);
  expect_refused(post("Connection: upgrade\r\nUpgrade: websocket\r\nContent-Length: 0\r\n", ""),
                 400);
  expect_refused(post("Upgrade: h2c\r\nContent-Length: 0\r\n", ""), 400);
}

TEST(RequestFraming, HeadAndTrailersAreBounded) {
  const Result head = feed(post("X: " + std::string(2000, 'a') + "\r\n", ""), 1, 1024);
  EXPECT_EQ(head.status, 431);
  EXPECT_LE(head.consumed, 1024u + 32u) << "refused as soon as the bound is passed";
  const Result trailers =
      feed(post("Transfer-Encoding: chunked\r\n", "0\r\nX: " + std::string(2000, 'a') + "\r\n\r\n"),
           0, 1024);
  EXPECT_EQ(trailers.status, 431);
  // Empty lines before a request count too.
  std::string blank_lines;
  for (int i = 0; i < 1000; ++i) blank_lines += "\r\n";
  EXPECT_EQ(feed(blank_lines + kNext, 0, 1024).status, 431);
}

TEST(RequestFraming, PipelinedRequestsEachEndInTurn) {
  const std::string one = post("Content-Length: 5\r\n", "hello");
  const std::string two = post("Transfer-Encoding: chunked\r\n", "2\r\nhi\r\n0\r\n\r\n");
  const std::string bytes = one + two + kNext;
  RequestFraming framing(16384);
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  std::vector<std::size_t> ends;
  std::size_t at = 0;
  while (at < bytes.size()) {
    const RequestFraming::Scan scan = framing.scan(data + at, bytes.size() - at);
    ASSERT_EQ(scan.status, 0);
    at += scan.accepted;
    if (scan.message_end) ends.push_back(at);
  }
  EXPECT_EQ(ends, (std::vector<std::size_t>{one.size(), one.size() + two.size(), bytes.size()}));
  // After an error, every scan repeats it and accepts nothing.
  RequestFraming failed(16384);
  const std::string bad = "GET / HTTP/1.1\nHost: x\r\n\r\n";
  EXPECT_EQ(failed.scan(reinterpret_cast<const std::uint8_t*>(bad.data()), bad.size()).status, 400);
  const RequestFraming::Scan again = failed.scan(data, bytes.size());
  EXPECT_EQ(again.status, 400);
  EXPECT_EQ(again.accepted, 0u);
}

// Issue #40: an HTTP/1.1 connection's stream ids go 1, 3, 5... and wrap to 1 instead of
// overflowing int32 (signed overflow after ~10^9 requests on one connection).
TEST(NextStreamId, WrapsBeforeInt32Max) {
  EXPECT_EQ(next_stream_id(1), 3);
  constexpr std::int32_t kMax = std::numeric_limits<std::int32_t>::max();
  EXPECT_EQ(next_stream_id(kMax - 4), kMax - 2);
  EXPECT_EQ(next_stream_id(kMax - 2), kMax);
  EXPECT_EQ(next_stream_id(kMax), 1);
}

}  // namespace
}  // namespace ferry::http1::http1_framing_test
