// Implementation of src/http1/client_pool.h.
#include "http1/client_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "asio/post.hpp"
#include "common/strings.h"

namespace ferry::http1 {

ClientPool::ClientPool(std::unique_ptr<http2::ByteStream> first, Dial dial,
                       const ConnectionLimits& limits, http2::ConnectionObserver* observer,
                       std::size_t max_connections)
    : executor_(first->executor()),
      dial_(std::move(dial)),
      limits_(limits),
      observer_(observer),
      max_connections_(std::max<std::size_t>(max_connections, 1)) {
  connections_.push_back(
      std::make_shared<ClientConnection>(std::move(first), limits_, static_cast<Owner*>(this)));
}

ClientPool::~ClientPool() {
  for (const auto& c : connections_) c->release_owner();
}

void ClientPool::start() {
  for (const auto& c : connections_) c->start();
  observer_->on_peer_settings();
}

std::int32_t ClientPool::submit_request(http2::Stream* stream,
                                        std::span<const http2::HeaderField> headers) {
  if (!accepts_new_streams()) return -1;
  // The head: the request line from the pseudo-headers, host from :authority, then the rest.
  std::string_view method = "POST";
  std::string_view path = "/";
  std::string_view authority;
  for (const http2::HeaderField& f : headers) {
    if (f.name == ":method") method = f.value;
    if (f.name == ":path") path = f.value;
    if (f.name == ":authority") authority = f.value;
  }
  std::string head = absl::StrCat(detail::to_absl(method), " ", detail::to_absl(path),
                                  " HTTP/1.1\r\nhost: ", detail::to_absl(authority), "\r\n");
  for (const http2::HeaderField& f : headers) {
    if (f.name.empty() || f.name[0] == ':' || f.name == "te") continue;  // HTTP/2's own
    absl::StrAppend(&head, detail::to_absl(f.name), ": ", detail::to_absl(f.value), "\r\n");
  }
  // A GET (the Connect protocol's, for methods without side effects) may run twice, and so may a
  // call its context says is idempotent (its method's idempotency_level).
  const bool idempotent = method == "GET" || stream->idempotent_request;
  stream->id_ = next_id_;
  next_id_ = next_stream_id(next_id_);
  for (const auto& c : connections_) {
    if (!c->busy() && !c->closed()) {
      c->begin(stream, std::move(head), idempotent);
      return stream->id_;
    }
  }
  waiting_.push_back(Waiting{stream, std::move(head), idempotent});
  if (connections_.size() + dialing_ < max_connections_ && dialing_ < waiting_.size()) dial_one();
  return stream->id_;
}

void ClientPool::dial_one() {
  ++dialing_;
  dial_([self = shared_from_this()](Dialed dialed) { self->on_dialed(std::move(dialed)); });
}

void ClientPool::on_dialed(Dialed dialed) {
  --dialing_;
  if (closed_) {
    if (dialed.ok()) (*dialed)->close();
    return;
  }
  if (!dialed.ok()) {
    // The server is gone (or refuses more connections): with nothing else to wait for, the pool
    // closes, its waiting calls fail as never sent, and the channel reconnects with back-off.
    if (connections_.empty() && dialing_ == 0) close();
    return;
  }
  auto c =
      std::make_shared<ClientConnection>(*std::move(dialed), limits_, static_cast<Owner*>(this));
  connections_.push_back(c);
  c->start();
  on_idle(c.get());
}

void ClientPool::on_idle(ClientConnection* connection) {
  if (!waiting_.empty()) {
    Waiting next = std::move(waiting_.front());
    waiting_.pop_front();
    connection->begin(next.stream, std::move(next.head), next.idempotent);
    return;
  }
  if (shutting_down_) connection->close();
}

void ClientPool::on_connection_closed(ClientConnection* connection) {
  std::erase_if(connections_, [connection](const auto& c) { return c.get() == connection; });
  if (closed_) return;
  if (!waiting_.empty() && dialing_ == 0 && !shutting_down_) dial_one();
  close_if_done();
}

ClientConnection* ClientPool::connection_of(const http2::Stream* stream) const {
  for (const auto& c : connections_) {
    if (c->stream() == stream) return c.get();
  }
  return nullptr;
}

void ClientPool::resume(http2::Stream* stream) {
  // A call still waiting for a connection sends what it queued once it has one.
  if (ClientConnection* c = connection_of(stream)) c->resume();
}

void ClientPool::reset(http2::Stream* stream, http2::ErrorCode error) {
  if (ClientConnection* c = connection_of(stream)) {
    c->reset(error);
    return;
  }
  auto waiting = std::find_if(waiting_.begin(), waiting_.end(),
                              [stream](const Waiting& w) { return w.stream == stream; });
  if (waiting == waiting_.end()) return;
  waiting_.erase(waiting);
  // Not from inside the stream's own call: told from the loop.
  asio::post(executor_, [self = shared_from_this(), stream, error] { stream->on_closed(error); });
}

void ClientPool::consume(http2::Stream* stream, std::size_t n) {
  if (ClientConnection* c = connection_of(stream)) c->consume(n);
}

void ClientPool::shutdown() {
  if (closed_ || shutting_down_) return;
  shutting_down_ = true;
  // Idle connections go now, busy ones after their exchange (on_idle); waiting calls still get
  // theirs.
  std::vector<std::shared_ptr<ClientConnection>> idle;
  for (const auto& c : connections_) {
    if (!c->busy()) idle.push_back(c);
  }
  for (const auto& c : idle) c->close();
  close_if_done();
}

void ClientPool::close_if_done() {
  if (shutting_down_ && !closed_ && connections_.empty() && waiting_.empty() && dialing_ == 0) {
    close();
  }
}

void ClientPool::close() {
  if (closed_) return;
  closed_ = true;
  auto keep = shared_from_this();
  std::vector<std::shared_ptr<ClientConnection>> connections = std::move(connections_);
  connections_.clear();
  for (const auto& c : connections) {
    c->release_owner();
    c->close();
  }
  // Never sent: a retry elsewhere is safe.
  std::deque<Waiting> waiting = std::move(waiting_);
  waiting_.clear();
  for (const Waiting& w : waiting) w.stream->on_closed(http2::ErrorCode::kRefusedStream);
  observer_->on_connection_closed();
}

}  // namespace ferry::http1
