// What ferry's TLS credentials hold (tls module, private): an OpenSSL context each, configured
// once (protocol versions, ciphers, ALPN, verification) and shared by the connections that
// start while it is in force. Built by src/tls/credentials.cc; used by src/tls/handshake.cc.
#pragma once

#include <chrono>

#include "asio/ssl/context.hpp"
#include "ferry/tls.h"

namespace ferry {

struct ServerCredentials::State {
  mutable asio::ssl::context context{asio::ssl::context::tls_server};
  std::chrono::milliseconds handshake_timeout{10000};
};

struct ChannelCredentials::State {
  mutable asio::ssl::context context{asio::ssl::context::tls_client};
};

}  // namespace ferry
