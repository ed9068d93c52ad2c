// Closing a socket without a reset (transport layer, private). A TCP socket closed while bytes it
// received are still unread sends the peer a reset instead of a FIN, and a peer that reads the
// reset (or fails a write on it) may lose what we sent last: the GOAWAY that tells it which of
// its calls were never processed and can be retried. A client that sent a request just before
// our GOAWAY reached it is the usual case. So a closing socket sends its FIN, then reads and
// drops what the peer still sends until the peer closes too, for a short bounded time.
#pragma once

#include <chrono>

#include "asio/any_io_executor.hpp"

namespace ferry::http2 {

// How long a closed connection's socket waits at most for the peer's end.
inline constexpr std::chrono::milliseconds kLingerLimit{500};

// Takes the connected stream socket `fd` (released from its asio socket, so that no operation
// or reactor registration is left on it), half-closes it (FIN) and reads from it on `executor`,
// dropping the bytes, until the peer's end, an error, or kLingerLimit; then closes it. The
// connection is gone at once; only the descriptor stays open a little longer (and is closed
// should the executor's context be destroyed first).
void linger_then_close(const asio::any_io_executor& executor, int fd);

}  // namespace ferry::http2
