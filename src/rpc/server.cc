// Implementation of ferry/server.h: I/O threads, the acceptor, per-connection dispatch of calls
// to handlers, and graceful shutdown.
#include "ferry/server.h"

#include <atomic>
#include <deque>
#include <list>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/post.hpp"
#include "http2/connection.h"
#include "rpc/server_call.h"
#include "rpc/wire_format.h"

namespace ferry {
namespace {


}  // namespace

struct IoThread {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  // The coroutines handlers run on; destroyed before io (members go in reverse order).
  detail::HandlerRunners runners{io.get_executor()};
  // The deadlines of this thread's calls, on one timer.
  detail::DeadlineQueue deadlines{io.get_executor()};
  std::thread thread;
  // This thread's connections; touched only on this thread.
  std::list<std::unique_ptr<struct ServerConnection>> connections;
};

struct Server::Impl {
  ServerOptions options;
  std::deque<Method> method_storage;  // stable addresses for the map below
  absl::flat_hash_map<std::string, const Method*> methods;  // "/pkg.Service/Method"
  absl::flat_hash_set<std::string> services;
  std::vector<std::unique_ptr<IoThread>> threads;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor;
  std::size_t next_thread = 0;
  std::atomic<std::size_t> live_connections{0};
  std::atomic<std::size_t> active_calls{0};
  std::atomic<bool> shutting_down{false};
  bool started = false;
  bool stopped = false;

  void accept_next();
  void adopt(IoThread& thread, asio::ip::tcp::socket socket);
};

struct ServerConnection final : http2::ConnectionObserver, detail::ServerCall::Owner {
  Server::Impl& server;
  IoThread& thread;
  std::list<std::unique_ptr<ServerConnection>>::iterator self;
  std::shared_ptr<http2::Connection> connection;
  std::string peer_address;
  std::string_view last_path_;  // find_method's last answer: a key of server.methods
  const Method* last_method_ = nullptr;
  std::string last_accept_encoding_;  // accepts_gzip's last question and answer
  bool last_accepts_gzip_ = false;

  ServerConnection(Server::Impl& s, IoThread& t) : server(s), thread(t) {}

  http2::Stream* on_stream_open(std::int32_t) override {
    server.active_calls.fetch_add(1, std::memory_order_relaxed);
    const detail::CallLimits limits{server.options.max_receive_message_size,
                                    server.options.max_send_message_size};
    return new detail::ServerCall(this, connection.get(), &thread.runners, &thread.deadlines,
                                  limits, server.options.max_header_list_size);
  }

  void call_closed() override { server.active_calls.fetch_sub(1, std::memory_order_relaxed); }
  const std::string& peer() const override { return peer_address; }
  void on_goaway(std::int32_t, std::uint32_t) override {}

  void on_connection_closed() override {
    // Deleted from the loop, not from inside the connection's own call stack.
    asio::post(thread.io, [this] {
      server.live_connections.fetch_sub(1, std::memory_order_acq_rel);
      thread.connections.erase(self);
    });
  }

  void dispatch(detail::ServerCall* call) override {
    if (!call->is_post()) {
      call->reject_http(405);
      return;
    }
    if (!call->has_grpc_content_type()) {
      call->reject_http(415);
      return;
    }
    if (absl::Status s = call->check_timeout(); !s.ok()) {
      call->finish(s, nullptr);
      return;
    }
    if (absl::Status s = call->negotiate_encoding(); !s.ok()) {
      call->finish(s, nullptr);
      return;
    }
    const Method* method = call->method_entry();
    if (method == nullptr) {
      call->finish(absl::UnimplementedError(unknown_method_message(call->path())), nullptr);
      return;
    }
    call->start_deadline();
    if (method->kind == RpcKind::kUnary || method->kind == RpcKind::kServerStreaming) {
      call->run_when_ready(method);
    } else {
      call->run(method);
    }
  }

  const Method* find_method(std::string_view path, std::string_view* stable_path) override {
    // A connection tends to call one method over and over: compare with the last one found
    // before hashing (the map's keys are fixed once the server started, so the view holds).
    if (path == last_path_ && last_method_ != nullptr) {
      *stable_path = last_path_;
      return last_method_;
    }
    auto it = server.methods.find(detail::to_absl(path));
    if (it == server.methods.end()) return nullptr;
    last_path_ = *stable_path = std::string_view(it->first);
    last_method_ = it->second;
    return it->second;
  }

  bool accepts_gzip(std::string_view accept_encoding) override {
    // Every request of a client carries the same grpc-accept-encoding: parse each new value once.
    if (accept_encoding != last_accept_encoding_) {
      last_accept_encoding_.assign(accept_encoding);
      last_accepts_gzip_ = detail::accepts_encoding(accept_encoding, Compression::kGzip);
    }
    return last_accepts_gzip_;
  }

  std::string unknown_method_message(std::string_view path) const {
    // "/pkg.Service/Method": say which part is unknown, as other gRPC servers do.
    const std::size_t slash = path.rfind('/');
    if (path.empty() || path[0] != '/' || slash == 0 || slash == std::string_view::npos) {
      return absl::StrCat("malformed method name '", detail::to_absl(path), "'");
    }
    const std::string_view service = path.substr(1, slash - 1);
    const std::string_view method = path.substr(slash + 1);
    if (!server.services.contains(detail::to_absl(service))) {
      return absl::StrCat("unknown service ", detail::to_absl(service));
    }
    return absl::StrCat("unknown method ", detail::to_absl(method), " for service ",
                        detail::to_absl(service));
  }
};

void Server::Impl::accept_next() {
  IoThread& target = *threads[next_thread];
  next_thread = (next_thread + 1) % threads.size();
  acceptor->async_accept(target.io, [this, &target](const asio::error_code& ec,
                                                    asio::ip::tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || shutting_down.load()) return;
      accept_next();  // a transient failure (e.g. out of descriptors): keep accepting
      return;
    }
    if (shutting_down.load()) return;
    live_connections.fetch_add(1, std::memory_order_acq_rel);
    asio::post(target.io, [this, &target, s = std::move(socket)]() mutable {
      adopt(target, std::move(s));
    });
    accept_next();
  });
}

void Server::Impl::adopt(IoThread& thread, asio::ip::tcp::socket socket) {
  if (shutting_down.load()) {  // accepted as shutdown began: refuse rather than serve
    asio::error_code ignored;
    socket.close(ignored);
    live_connections.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
  auto owned = std::make_unique<ServerConnection>(*this, thread);
  ServerConnection* conn = owned.get();
  thread.connections.push_front(std::move(owned));
  conn->self = thread.connections.begin();
  http2::ConnectionSettings settings;
  settings.max_concurrent_streams = options.max_concurrent_streams;
  settings.stream_window = options.stream_window;
  settings.connection_window = options.connection_window;
  settings.max_header_list_size = options.max_header_list_size;
  conn->connection = std::make_shared<http2::Connection>(std::move(socket), http2::Role::kServer,
                                                         settings, conn);
  conn->peer_address = conn->connection->peer_address();  // once per connection, not per call
  conn->connection->start();
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}

Server::~Server() { shutdown(std::chrono::milliseconds(0)); }

void Server::add_service(const Service& service) {
  impl_->services.insert(service.full_name());
  for (const Method& method : service.methods()) {
    impl_->method_storage.push_back(method);
    impl_->methods[absl::StrCat("/", service.full_name(), "/", method.name)] =
        &impl_->method_storage.back();
  }
}

absl::StatusOr<int> Server::start(const std::string& host, int port) {
  if (impl_->started) return absl::FailedPreconditionError("server already started");
  unsigned n = impl_->options.num_threads;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < n; ++i) impl_->threads.push_back(std::make_unique<IoThread>());

  asio::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("bad listen address '", host, "'"));
  const asio::ip::tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  auto acceptor = std::make_unique<asio::ip::tcp::acceptor>(impl_->threads[0]->io);
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    impl_->threads.clear();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, ":", port, ": ", ec.message()));
  }
  const int bound = acceptor->local_endpoint().port();
  impl_->acceptor = std::move(acceptor);
  impl_->started = true;
  impl_->accept_next();
  for (auto& t : impl_->threads) {
    t->thread = std::thread([io = &t->io] { io->run(); });
  }
  return bound;
}

void Server::shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return;
  s.stopped = true;
  s.shutting_down.store(true);
  const auto deadline = std::chrono::steady_clock::now() + grace;

  auto on_every_connection = [&s](auto fn) {
    for (auto& t : s.threads) {
      asio::post(t->io, [t = t.get(), fn] {
        for (auto& conn : t->connections) fn(*conn);
      });
    }
  };
  asio::post(s.threads[0]->io, [&s] {
    asio::error_code ignored;
    s.acceptor->close(ignored);
  });
  // GOAWAY: calls in flight go on, new streams are refused, idle connections close.
  on_every_connection([](ServerConnection& c) { c.connection->shutdown(); });

  auto wait_until = [&s](std::chrono::steady_clock::time_point until) {
    while (s.live_connections.load() > 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  wait_until(deadline);
  // Past the grace period: cancel what is left (handlers see is_cancelled, their reads and
  // writes fail) and close.
  on_every_connection([](ServerConnection& c) { c.connection->close(); });
  wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(2));

  for (auto& t : s.threads) {
    asio::post(t->io, [t = t.get()] {
      t->runners.stop();
      t->deadlines.stop();
    });
    t->work.reset();
  }
  for (auto& t : s.threads) {
    // Handlers that ignore cancellation would keep the loop alive: stop it after a bound.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!t->io.stopped() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    t->io.stop();
    if (t->thread.joinable()) t->thread.join();
  }
  s.acceptor.reset();
}

std::size_t Server::active_calls() const { return impl_->active_calls.load(); }

}  // namespace ferry
