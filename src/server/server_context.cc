// Implementation of ferry/server_context.h: forwards to the private ServerCall.
#include "ferry/server_context.h"

#include "server/server_call.h"

namespace ferry {

std::string_view ServerContext::method() const { return call_->path(); }
const Metadata& ServerContext::client_metadata() const { return call_->client_metadata(); }
std::chrono::steady_clock::time_point ServerContext::deadline() const { return call_->deadline(); }
bool ServerContext::is_cancelled() const { return call_->is_cancelled(); }
std::string ServerContext::peer() const { return std::string(call_->peer()); }
std::uint64_t ServerContext::connection_id() const { return call_->connection_id(); }
const PeerIdentity* ServerContext::peer_identity() const { return call_->peer_identity(); }
const CallAuthorization& ServerContext::authorization() const { return call_->authorization(); }
void ServerContext::set_authorization(const CallAuthorization& result,
                                      std::shared_ptr<const void> owner) {
  call_->set_authorization(result, std::move(owner));
}
const TraceContext& ServerContext::trace_context() const { return call_->trace_context(); }
void ServerContext::set_trace_context(const TraceContext& context) {
  call_->set_trace_context(context);
}
void ServerContext::defer_trace_context(TraceContextResolver resolve, const void* state) {
  call_->defer_trace_context(resolve, state);
}
void ServerContext::set_call_tracer(std::shared_ptr<CallTracer> tracer) {
  call_->set_call_tracer(std::move(tracer));
}
CallTracer* ServerContext::call_tracer() const { return call_->call_tracer(); }
google::protobuf::Arena* ServerContext::arena() const { return call_->arena(); }

void ServerContext::add_initial_metadata(std::string_view key, std::string_view value) {
  call_->initial_metadata().add(key, value);
}

void ServerContext::send_initial_metadata() { call_->send_initial_metadata(); }

void ServerContext::add_trailing_metadata(std::string_view key, std::string_view value) {
  call_->trailing_metadata().add(key, value);
}

const asio::any_io_executor& ServerContext::executor() const { return call_->executor(); }

CancellationRegistration ServerContext::on_cancel(std::function<void(const absl::Status&)> fn) {
  std::shared_ptr<detail::CancellationLink> link = cancellation_link();
  const std::uint64_t id = link->add(std::move(fn));
  return CancellationRegistration(std::move(link), id);
}

void CancellationRegistration::reset() {
  if (link_ != nullptr) link_->remove(std::exchange(id_, 0));
  link_.reset();
}

std::shared_ptr<detail::CancellationLink> ServerContext::cancellation_link() {
  return call_->cancellation_link();
}

asio::awaitable<bool> ServerContext::read_awaitable(google::protobuf::MessageLite& msg) {
  return call_->read(msg);
}

bool ServerContext::take_request(google::protobuf::MessageLite& msg) {
  return call_->take_request(msg);
}

void ServerContext::set_compression(Compression compression) {
  call_->set_compression(compression);
}

bool ServerContext::last_message_compressed() const { return call_->last_message_compressed(); }

asio::awaitable<absl::Status> ServerContext::write_awaitable(
    const google::protobuf::MessageLite& msg, WriteOptions options) {
  return call_->write(msg, options);
}

asio::awaitable<bool> ServerContext::read_raw_awaitable(SliceChain& message) {
  return call_->read_raw(message);
}

asio::awaitable<absl::Status> ServerContext::write_raw_awaitable(const SliceChain& message) {
  return call_->write_raw(message);
}

absl::Status ServerContext::queue_response(const google::protobuf::MessageLite& msg) {
  return call_->queue_response(msg);
}

void ServerContext::finish(const absl::Status& status, const google::protobuf::MessageLite* msg) {
  call_->finish(status, msg);
}

}  // namespace ferry
