// ferry/write_policy.h: when a connection writes what it has produced (public). A field of
// ConnectionLimits (ferry/limits.h), so ServerOptions and ChannelOptions carry it and the HTTP/2
// layer takes it as it is. docs/design/write_policy.md has the measurements behind the defaults.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry {

// A connection answers what one read delivered with one gathered write: one syscall however
// many calls the read held. With many calls in flight on one connection that alone makes the
// two ends take turns: the peer's next batch comes only once it has read and worked through the
// whole previous answer, and each end idles while the other works. So a read holding more calls
// than calls_per_write is answered in parts: once that many calls (streams the peer ended:
// requests on a server, responses on a client) are parsed and more of the read remains, their
// answers are written before the rest is parsed, and the peer works on them meanwhile. A read
// holding fewer calls (one call in flight, small batches spread over many connections) is still
// answered by one write, and costs nothing more.
struct WritePolicy {
  // Calls parsed from one read before what they produced is written; 0 keeps one write per
  // read. The default, 32, halves the reads of a peer with 64 calls in flight (h2load's and
  // ferry's own benchmark client), so that the two halves overlap, for one write and a fraction
  // of a recv more per 64 calls; 24 overlaps as well but pays a third write, and 16 (four parts)
  // gained less. Under 2x this many calls in flight a read does not split evenly and the overlap
  // is small.
  std::uint32_t calls_per_write = 32;

  // Bytes of answers after which the calls a read woke stop sharing one write: once the
  // handlers (or client coroutines) that ran so far have queued this much, it is written before
  // the next one runs, so the peer reads large answers while this end still builds the others.
  // A peer that sends several large requests at once (h2load, 8 x 64 KiB) otherwise gets all
  // answers in one write after the last is built and both ends take turns. Small answers never
  // reach it (64 x 16 B calls stay one write); 0 turns it off.
  std::size_t bytes_per_write = std::size_t{64} << 10;
};

}  // namespace ferry
