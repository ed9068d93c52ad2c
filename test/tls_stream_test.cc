// The TLS byte stream alone (src/transport/tls_stream.h), its server end over a loopback TCP
// socket against a peer of the test's own (OpenSSL over a blocking socket, in a thread): records
// OpenSSL makes while reading (a TLS 1.3 KeyUpdate's answer, a refusal to renegotiate) during a
// large write must leave in order and intact (also with both ends ours, over memory), records
// handed over one byte per read and an attacker's bytes after the handshake, and how the peer's
// end reads: close_notify as a clean end, a bare TCP close as a truncation.
#include "transport/tls_stream.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <csignal>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/ssl/error.hpp"
#include "transport/memory_stream.h"
#include "transport/socket_stream.h"

namespace ferry::http2::tls_stream_test {
namespace {

using namespace std::chrono_literals;

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    if (!out.empty()) out += "; ";
    out += reason != nullptr ? reason : "unknown";
  }
  return out;
}

std::uint8_t pattern(std::size_t i) { return static_cast<std::uint8_t>((i * 131) >> 7); }

// The server end: a TlsStream over an accepted loopback socket, on io. The client end is a
// connected blocking socket descriptor, for the peer's own OpenSSL.
struct Loopback {
  asio::io_context io;
  asio::ip::tcp::socket client{io};
  std::unique_ptr<TlsStream> server;
  SSL_CTX* server_ctx;

  Loopback() {
    std::signal(SIGPIPE, SIG_IGN);
    server_ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate_chain_file(server_ctx, FERRY_TEST_CERTS "/server.pem");
    SSL_CTX_use_PrivateKey_file(server_ctx, FERRY_TEST_CERTS "/server.key", SSL_FILETYPE_PEM);
    SSL_CTX_set_options(server_ctx, SSL_OP_NO_RENEGOTIATION);
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    client.connect(acceptor.local_endpoint());
    asio::ip::tcp::socket accepted(io);
    acceptor.accept(accepted);
    SSL* ssl = SSL_new(server_ctx);
    SSL_set_accept_state(ssl);
    server = std::make_unique<TlsStream>(make_tcp_stream(std::move(accepted)), ssl);
  }
  ~Loopback() {
    server.reset();
    SSL_CTX_free(server_ctx);
  }
};

// The peer: a client over the blocking socket fd, at TLS version `version` only.
struct Peer {
  SSL_CTX* ctx;
  SSL* ssl;
  explicit Peer(int fd, int version) {
    ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, version);
    SSL_CTX_set_max_proto_version(ctx, version);
    SSL_CTX_load_verify_locations(ctx, FERRY_TEST_CERTS "/ca.pem", nullptr);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_set1_host(ssl, "localhost");
  }
  ~Peer() {
    SSL_free(ssl);
    SSL_CTX_free(ctx);
  }
};

// Writes `total` bytes of pattern with async_write, 1 MiB at a time, while a read is pending
// (the reads find no data, only the peer's handshake messages): done(error) at the end.
class Writer final : public ByteStreamClient, public std::enable_shared_from_this<Writer> {
 public:
  Writer(TlsStream& stream, std::size_t total) : stream_(stream), total_(total) {
    data_.resize(total);
    for (std::size_t i = 0; i < total; ++i) data_[i] = pattern(i);
  }
  void start() {
    stream_.async_read_some(asio::buffer(read_buf_), shared_from_this());
    next();
  }
  void on_read(const asio::error_code& ec, std::size_t) override {
    read_end = ec;
    if (!ec) stream_.async_read_some(asio::buffer(read_buf_), shared_from_this());
  }
  void on_written(const asio::error_code& ec) override {
    if (ec) {
      write_error = ec;
      return;
    }
    sent_ += chunk_;
    next();
  }
  asio::error_code write_error;
  asio::error_code read_end;
  bool written_all() const { return sent_ == total_; }

 private:
  void next() {
    if (sent_ == total_) return;
    chunk_ = std::min<std::size_t>(1 << 20, total_ - sent_);
    buffer_ = asio::buffer(data_.data() + sent_, chunk_);
    stream_.async_write({&buffer_, 1}, shared_from_this());
  }
  TlsStream& stream_;
  std::size_t total_;
  std::size_t sent_ = 0;
  std::size_t chunk_ = 0;
  std::vector<std::uint8_t> data_;
  asio::const_buffer buffer_;
  std::array<std::uint8_t, 4096> read_buf_{};
};

struct PeerResult {
  std::size_t received = 0;
  bool intact = true;
  std::string error;
};

// The peer reads `total` bytes, checking each, and every `every` bytes calls poke (a KeyUpdate,
// a renegotiation); it stops at the first failure.
template <typename Poke>
PeerResult read_all(Peer& peer, std::size_t total, std::size_t every, Poke poke) {
  PeerResult r;
  ERR_clear_error();
  if (SSL_connect(peer.ssl) != 1) {
    r.error = "handshake: " + openssl_errors();
    return r;
  }
  std::vector<std::uint8_t> buf(16384);
  std::size_t next_poke = every;
  while (r.received < total) {
    const int n = SSL_read(peer.ssl, buf.data(), static_cast<int>(buf.size()));
    if (n <= 0) {
      r.error = "read after " + std::to_string(r.received) + " bytes: " + openssl_errors();
      return r;
    }
    for (int i = 0; i < n; ++i) {
      if (buf[i] != pattern(r.received + i)) r.intact = false;
    }
    r.received += static_cast<std::size_t>(n);
    if (!r.intact) return r;
    if (r.received >= next_poke) {
      next_poke += every;
      if (!poke()) {
        r.error = "poke after " + std::to_string(r.received) + " bytes: " + openssl_errors();
        return r;
      }
    }
  }
  return r;
}

// Runs the server's handshake, then writer, until the peer's result is in.
PeerResult run(Loopback& lb, std::shared_ptr<Writer> writer, std::future<PeerResult>& result) {
  lb.server->async_handshake([&lb, writer](const asio::error_code& ec) {
    EXPECT_FALSE(ec) << ec.message() << " " << lb.server->error();
    if (!ec) writer->start();
  });
  while (result.wait_for(0s) != std::future_status::ready) lb.io.run_for(10ms);
  return result.get();
}

// TLS 1.3: the peer asks for a key update every 64 KiB of a 24 MiB write. The server's answer
// (its own KeyUpdate, made while reading, while a write is being sent) must leave after the
// records being sent and before any under its new key: dropped or misplaced, the peer fails
// with "bad record mac"/"decryption failed" at its next record.
TEST(TlsStream, KeyUpdatesDuringALargeWriteKeepTheStreamIntact) {
  Loopback lb;
  constexpr std::size_t kTotal = 24 << 20;
  Peer peer(lb.client.native_handle(), TLS1_3_VERSION);
  auto result = std::async(std::launch::async, [&] {
    return read_all(peer, kTotal, 64 * 1024, [&] {
      return SSL_key_update(peer.ssl, SSL_KEY_UPDATE_REQUESTED) == 1 &&
             SSL_do_handshake(peer.ssl) == 1;  // sends it now
    });
  });
  const PeerResult r = run(lb, std::make_shared<Writer>(*lb.server, kTotal), result);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.intact);
  EXPECT_EQ(r.received, kTotal);
}

// TLS 1.2: the peer tries to renegotiate during the write. The server refuses (its
// no_renegotiation alert, made while reading); the peer then fails the connection itself, with
// that reason, but nothing it received before was corrupt.
TEST(TlsStream, RenegotiationDuringALargeWriteIsRefusedCleanly) {
  Loopback lb;
  constexpr std::size_t kTotal = 24 << 20;
  Peer peer(lb.client.native_handle(), TLS1_2_VERSION);
  auto result = std::async(std::launch::async, [&] {
    return read_all(peer, kTotal, 1 << 20, [&] { return SSL_renegotiate(peer.ssl) == 1; });
  });
  const PeerResult r = run(lb, std::make_shared<Writer>(*lb.server, kTotal), result);
  EXPECT_TRUE(r.intact);
  EXPECT_GE(r.received, std::size_t{1} << 20);
  EXPECT_NE(r.error.find("no renegotiation"), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find("bad record mac"), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find("decryption failed"), std::string::npos) << r.error;
}

// Both ends ferry's, over memory (where ciphertext is read into the stream's own buffer, not
// OpenSSL's): the client asks for a key update every 256 KiB of an 8 MiB write, each carried by
// a byte it writes, while the server's writes wait for a pipe of 64 KiB to drain.
TEST(TlsStream, KeyUpdatesBothEndsOursOverMemory) {
  asio::io_context io;
  auto pipe = MemoryPipe::create(io.get_executor(), 64 * 1024);
  SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX_use_certificate_chain_file(server_ctx, FERRY_TEST_CERTS "/server.pem");
  SSL_CTX_use_PrivateKey_file(server_ctx, FERRY_TEST_CERTS "/server.key", SSL_FILETYPE_PEM);
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(client_ctx, TLS1_3_VERSION);
  SSL_CTX_load_verify_locations(client_ctx, FERRY_TEST_CERTS "/ca.pem", nullptr);
  SSL_CTX_set_verify(client_ctx, SSL_VERIFY_PEER, nullptr);
  SSL* server_ssl = SSL_new(server_ctx);
  SSL_set_accept_state(server_ssl);
  SSL* client_ssl = SSL_new(client_ctx);
  SSL_set_connect_state(client_ssl);
  SSL_set1_host(client_ssl, "localhost");
  auto server = std::make_unique<TlsStream>(pipe->end(0), server_ssl);
  auto client = std::make_unique<TlsStream>(pipe->end(1), client_ssl);

  constexpr std::size_t kTotal = 8 << 20;
  // The client: reads and checks everything; every 256 KiB a key update and a byte to carry it.
  struct Client final : ByteStreamClient, std::enable_shared_from_this<Client> {
    TlsStream* stream;
    std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(64 * 1024);
    std::size_t received = 0;
    std::size_t next_update = 256 * 1024;
    bool intact = true;
    bool writing = false;
    int updates = 0;
    asio::error_code error;
    std::uint8_t byte = 'k';
    asio::const_buffer out{&byte, 1};
    void start() { stream->async_read_some(asio::buffer(buf), shared_from_this()); }
    void on_read(const asio::error_code& ec, std::size_t n) override {
      if (ec) {
        error = ec;
        return;
      }
      for (std::size_t i = 0; i < n; ++i) intact = intact && buf[i] == pattern(received + i);
      received += n;
      if (received >= next_update && !writing && received < kTotal) {
        next_update += 256 * 1024;
        ++updates;
        EXPECT_EQ(SSL_key_update(stream->ssl(), SSL_KEY_UPDATE_REQUESTED), 1);
        writing = true;
        stream->async_write({&out, 1}, shared_from_this());
      }
      if (received < kTotal) start();
    }
    void on_written(const asio::error_code& ec) override {
      writing = false;
      if (ec) error = ec;
    }
  };
  auto reader = std::make_shared<Client>();
  reader->stream = client.get();
  auto writer = std::make_shared<Writer>(*server, kTotal);
  server->async_handshake([&](const asio::error_code& ec) {
    EXPECT_FALSE(ec) << server->error();
    if (!ec) writer->start();
  });
  client->async_handshake([&](const asio::error_code& ec) {
    EXPECT_FALSE(ec) << client->error();
    if (!ec) reader->start();
  });
  for (auto until = std::chrono::steady_clock::now() + 60s;
       reader->received < kTotal && !reader->error && !writer->write_error &&
       std::chrono::steady_clock::now() < until;) {
    io.run_for(10ms);
  }
  EXPECT_FALSE(reader->error) << reader->error.message() << " " << client->error();
  EXPECT_FALSE(writer->write_error) << writer->write_error.message();
  EXPECT_EQ(reader->received, kTotal);
  EXPECT_TRUE(reader->intact);
  EXPECT_GE(reader->updates, 20);
  server.reset();
  client.reset();
  SSL_CTX_free(server_ctx);
  SSL_CTX_free(client_ctx);
}

// Reads until the stream ends: the bytes and the error it ended with.
class Reader final : public ByteStreamClient, public std::enable_shared_from_this<Reader> {
 public:
  explicit Reader(TlsStream& stream) : stream_(stream) {}
  void start() { stream_.async_read_some(asio::buffer(buf_), shared_from_this()); }
  void on_read(const asio::error_code& ec, std::size_t n) override {
    if (ec) {
      end = ec;
      done = true;
      return;
    }
    data.append(reinterpret_cast<const char*>(buf_.data()), n);
    start();
  }
  void on_written(const asio::error_code&) override {}
  std::string data;
  asio::error_code end;
  bool done = false;

 private:
  TlsStream& stream_;
  std::array<std::uint8_t, 4096> buf_{};
};

// A client played byte by byte (OpenSSL over memory BIOs, its ciphertext handed to the server
// one byte per read): the server's stream reassembles records across reads and across its
// buffer's end; then what an attacker might send after the handshake (a record header claiming
// more than TLS allows, bytes that are no record) ends the stream with an error, never a crash
// or a hang, and never as data.
class BytePlayedClient {
 public:
  BytePlayedClient() {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, FERRY_TEST_CERTS "/ca.pem", nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    ssl_ = SSL_new(ctx_);
    SSL_set1_host(ssl_, "localhost");
    SSL_set_bio(ssl_, in_ = BIO_new(BIO_s_mem()), out_ = BIO_new(BIO_s_mem()));
    SSL_set_connect_state(ssl_);
  }
  ~BytePlayedClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
  }
  // Moves bytes both ways until the client's handshake is done: the server's as they come, the
  // client's one byte per loop pass.
  bool handshake(asio::io_context& io, MemoryPipe& pipe) {
    for (int i = 0; i < 100000; ++i) {
      const std::string from_server = pipe.take_written(0);
      BIO_write(in_, from_server.data(), static_cast<int>(from_server.size()));
      if (SSL_do_handshake(ssl_) == 1 && BIO_ctrl_pending(out_) == 0) return true;
      send_one_byte(io, pipe);
    }
    return false;
  }
  void write(const std::string& data) {
    SSL_write(ssl_, data.data(), static_cast<int>(data.size()));
  }
  // Hands the server all the client wrote, one byte per read.
  void flush(asio::io_context& io, MemoryPipe& pipe) {
    while (BIO_ctrl_pending(out_) > 0) send_one_byte(io, pipe);
  }

 private:
  void send_one_byte(asio::io_context& io, MemoryPipe& pipe) {
    char byte;
    if (BIO_read(out_, &byte, 1) == 1) pipe.inject(0, std::string_view(&byte, 1));
    io.poll();
    io.restart();
  }
  SSL_CTX* ctx_;
  SSL* ssl_;
  BIO* in_;
  BIO* out_;
};

TEST(TlsStream, RecordsSplitOneBytePerReadThenGarbageFailsCleanly) {
  const std::string records = std::string("\x17\x03\x03\xff\xff", 5) + std::string(64, 'x');
  const std::string garbage = "GET / HTTP/1.1\r\n\r\n";
  for (const std::string& attack : {records, garbage}) {
    asio::io_context io;
    auto pipe = MemoryPipe::create(io.get_executor());
    SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate_chain_file(server_ctx, FERRY_TEST_CERTS "/server.pem");
    SSL_CTX_use_PrivateKey_file(server_ctx, FERRY_TEST_CERTS "/server.key", SSL_FILETYPE_PEM);
    SSL* ssl = SSL_new(server_ctx);
    SSL_set_accept_state(ssl);
    auto server = std::make_unique<TlsStream>(pipe->end(0), ssl);
    auto reader = std::make_shared<Reader>(*server);
    bool handshaken = false;
    server->async_handshake([&](const asio::error_code& ec) {
      EXPECT_FALSE(ec) << server->error();
      handshaken = !ec;
      if (!ec) reader->start();
    });
    io.poll();
    io.restart();
    BytePlayedClient client;
    ASSERT_TRUE(client.handshake(io, *pipe));
    for (int i = 0; i < 200 && !handshaken; ++i) {
      io.poll();
      io.restart();
    }
    ASSERT_TRUE(handshaken);
    // 70 KB: records across the 64 KiB read buffer's end, one byte at a time.
    std::string data(70000, '\0');
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(pattern(i));
    client.write(data);
    client.flush(io, *pipe);
    io.poll();
    EXPECT_EQ(reader->data.size(), data.size());
    EXPECT_TRUE(reader->data == data);
    EXPECT_FALSE(reader->done);
    pipe->inject(0, attack);
    io.restart();
    io.poll();
    EXPECT_TRUE(reader->done);
    EXPECT_TRUE(reader->end) << "the attack read as data";
    EXPECT_NE(server->error().find("TLS read failed"), std::string::npos) << server->error();
    EXPECT_EQ(reader->data.size(), data.size());
    server.reset();
    SSL_CTX_free(server_ctx);
  }
}

// How the peer's end reads: after its close_notify, eof; a bare TCP close (no close_notify, as
// an attacker cutting the connection would make it) is a truncation, not a clean end.
TEST(TlsStream, PeersEndReadsAsEofOnlyAfterItsCloseNotify) {
  for (const bool close_notify : {true, false}) {
    SCOPED_TRACE(close_notify ? "close_notify" : "bare close");
    Loopback lb;
    Peer peer(lb.client.native_handle(), TLS1_3_VERSION);
    auto peer_done = std::async(std::launch::async, [&] {
      if (SSL_connect(peer.ssl) != 1) return "handshake: " + openssl_errors();
      if (SSL_write(peer.ssl, "hello", 5) != 5) return "write: " + openssl_errors();
      if (close_notify) SSL_shutdown(peer.ssl);
      ::shutdown(lb.client.native_handle(), SHUT_WR);
      return std::string();
    });
    auto reader = std::make_shared<Reader>(*lb.server);
    lb.server->async_handshake([&](const asio::error_code& ec) {
      EXPECT_FALSE(ec) << lb.server->error();
      if (!ec) reader->start();
    });
    for (auto until = std::chrono::steady_clock::now() + 10s;
         !reader->done && std::chrono::steady_clock::now() < until;) {
      lb.io.run_for(10ms);
    }
    EXPECT_EQ(peer_done.get(), "");
    EXPECT_EQ(reader->data, "hello");
    if (close_notify) {
      EXPECT_EQ(reader->end, asio::error::eof) << reader->end.message();
    } else {
      EXPECT_EQ(reader->end, asio::ssl::error::stream_truncated) << reader->end.message();
    }
  }
}

// close_gracefully() ends with a close_notify: the peer reads a clean end (SSL_ERROR_ZERO_RETURN).
TEST(TlsStream, GracefulCloseSendsCloseNotify) {
  Loopback lb;
  Peer peer(lb.client.native_handle(), TLS1_3_VERSION);
  auto peer_end = std::async(std::launch::async, [&] {
    if (SSL_connect(peer.ssl) != 1) return -1;
    char byte;
    const int n = SSL_read(peer.ssl, &byte, 1);
    return n > 0 ? -2 : SSL_get_error(peer.ssl, n);
  });
  bool closed = false;
  lb.server->async_handshake([&](const asio::error_code& ec) {
    EXPECT_FALSE(ec) << lb.server->error();
    lb.server->close_gracefully();
    closed = true;
  });
  while (peer_end.wait_for(0s) != std::future_status::ready) lb.io.run_for(10ms);
  EXPECT_TRUE(closed);
  EXPECT_EQ(peer_end.get(), SSL_ERROR_ZERO_RETURN);
}

}  // namespace
}  // namespace ferry::http2::tls_stream_test
