// How much data a bridge session keeps queued in its longhaul connection ahead of the
// pacer (docs/bridge.md section 4, "Send side"): TCP is read only while the connection's
// unsent bytes are below Limit().
//
// The backlog is time at the pacing rate. It is slack for the bridge's thread: the pacer
// sends on from it while that thread waits for a core, so a longer one keeps the link
// busy on a loaded host. But the connection sends in order, so a small message (a
// request, a response) read meanwhile waits behind all of it. Hence two lengths: the
// short one while the session carries small messages (a read that emptied its socket
// with at most kInteractiveRead bytes, within the last kInteractiveHold), the long one
// while only bulk data flows. No I/O; the caller gives the time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/base/units.h"

namespace longhaul::bridge {

// A read from TCP that empties the socket with at most this many bytes is a small
// message, not a slice of a bulk transfer.
inline constexpr size_t kInteractiveRead = 16 * 1024;
// How long the short backlog holds after the last small message.
inline constexpr Duration kInteractiveHold = Duration::Seconds(1);

struct SendBacklogOptions {
  Duration interactive = Duration::Milliseconds(2);  // --send_backlog
  Duration bulk = Duration::Milliseconds(20);        // --bulk_send_backlog
  uint64_t min_bytes = 256 * 1024;                   // never less, at any rate
};

class SendBacklog {
 public:
  explicit SendBacklog(SendBacklogOptions o) : o_(o) {}

  // A read from TCP returned `got` of the `wanted` bytes; got < wanted: it emptied the
  // socket.
  void OnRead(Time now, size_t got, size_t wanted) {
    if (got < wanted && got <= kInteractiveRead) interactive_until_ = now + kInteractiveHold;
  }
  bool interactive(Time now) const { return now < interactive_until_; }
  // The unsent bytes to keep at `rate`.
  uint64_t Limit(Time now, Bandwidth rate) const;

 private:
  SendBacklogOptions o_;
  Time interactive_until_ = Time::Zero();
};

}  // namespace longhaul::bridge
