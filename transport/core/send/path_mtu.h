// PathMtu: the largest datagram a connection sends, kept right when the path's MTU
// changes under it (a reroute to a path with a smaller MTU, typically with the ICMP
// "too big" messages filtered: a black hole for large packets).
//
// Black-hole detection: the connection's probe timeouts count while no datagram larger
// than kBaseDatagram has been acknowledged. From the first such timeout on, the second
// probe of each timeout is a small one (a PING padded to kBaseDatagram), sent right after
// a large one. When the ACK of the small probe does not cover the large probe sent just
// before it, large packets are being dropped while small ones pass: the size falls to
// kBaseDatagram (the minimum every IPv4/IPv6 path carries with UDP; QUIC's too), and a
// search starts. A blackout loses the small probes too, so it is not mistaken for a
// black hole; a random loss of that one large probe is (rarely: a timeout and a loss),
// which costs one search.
//
// Search (RFC 8899 style, packetization layer): probes are PINGs padded to a candidate
// size, one outstanding at a time, sent with the data (they are paced and counted in
// flight, but their loss is not congestion). Binary search between the largest size
// acknowledged and the smallest lost, to kSearchPrecision bytes; every acknowledged
// probe raises the size at once. After a search ends below the configured maximum, the
// maximum is tried again every kRaiseInterval (a path back from a reroute).
//
// Sizes are wire datagram sizes (UDP payload, sealing included). Pure state machine:
// every call takes `now`. Not thread-safe; owned by the Connection.
#pragma once

#include <cstdint>

#include "transport/base/units.h"

namespace longhaul {

struct PathMtuDebugState {
  ByteCount current = 0;         // datagram size in use
  ByteCount search_low = 0;      // largest size known to pass
  ByteCount search_high = 0;     // smallest size known to be lost (max + 1 if none)
  uint32_t timeouts_without_large_ack = 0;
  uint64_t black_holes = 0;      // falls to kBaseDatagram
  uint64_t probes_sent = 0;
  uint64_t probes_acked = 0;
  uint64_t probes_lost = 0;
};

class PathMtu {
 public:
  static constexpr ByteCount kBaseDatagram = 1200;
  static constexpr ByteCount kSearchPrecision = 64;
  static constexpr Duration kRaiseInterval = Duration::Seconds(30);

  // `max_datagram`: the configured size (the connection's largest datagram).
  explicit PathMtu(ByteCount max_datagram);

  ByteCount current() const { return current_; }
  // The largest size the search may reach: the configured size, or the driver's limit.
  ByteCount max() const { return max_; }

  // ---- black-hole detection ----
  // A probe timeout fired.
  void OnProbeTimeout();
  // Whether the next timeout probe should be a small one (kBaseDatagram).
  bool WantSmallProbe() const { return timeouts_ >= 1 && current_ > kBaseDatagram; }
  // A timeout probe was sent (`bytes` its size).
  void OnTimeoutProbeSent(PacketNumber pn, ByteCount bytes);
  // One packet newly acknowledged by an ACK (call for each), then OnAckDone. OnAckDone
  // returns true if the size fell (a black hole): the caller re-derives its segment.
  void OnPacketAcked(PacketNumber pn, ByteCount bytes);
  bool OnAckDone(Time now);

  // ---- search ----
  // The size of a search probe to send now; 0 if none is due.
  ByteCount ProbeSize(Time now) const;
  void OnProbeSent(Time now, PacketNumber pn, ByteCount size);
  // The probe `pn` was acknowledged / declared lost. OnProbeAcked returns true if the
  // size rose. Other packet numbers are ignored.
  bool OnProbeAcked(Time now, PacketNumber pn);
  void OnProbeLost(Time now, PacketNumber pn);

  // A limit learned outside (the driver's EMSGSIZE or IP_MTU): the size drops to it at
  // once (never below kBaseDatagram) and the search stays under it.
  void OnExternalLimit(Time now, ByteCount datagram);
  // What the driver's datapath carries now (a verbs driver whose queue pairs came up or
  // went away): the size becomes `datagram` at once, raised or lowered (at most the
  // configured size, never under 1 byte; the caller keeps it above its own floor), and so
  // does the maximum the search may reach. Any search or probe in flight stops; a later
  // one (after a black hole, or OnExternalLimit) stays at or under the limit, until the
  // next SetLimit.
  void SetLimit(Time now, ByteCount datagram);

  PathMtuDebugState debug_state() const;

 private:
  void FinishIfNarrow(Time now);

  ByteCount configured_max_;
  ByteCount max_;  // configured_max_, or less after SetLimit
  ByteCount current_;
  ByteCount low_;   // largest size known to pass
  ByteCount high_;  // smallest size known to fail; max_ + 1 when none
  uint32_t timeouts_ = 0;
  // The latest timeout's probes: the large one, the small one after it.
  bool has_large_probe_ = false, has_small_probe_ = false;
  PacketNumber large_probe_pn_ = 0, small_probe_pn_ = 0;
  bool large_probe_acked_ = false;
  bool small_probe_acked_now_ = false;  // in the ACK being processed
  bool searching_ = false;
  Time next_search_ = Time::Infinite();
  bool probe_outstanding_ = false;
  PacketNumber probe_pn_ = 0;
  ByteCount probe_size_ = 0;
  uint64_t black_holes_ = 0;
  uint64_t probes_sent_ = 0;
  uint64_t probes_acked_ = 0;
  uint64_t probes_lost_ = 0;
};

}  // namespace longhaul
