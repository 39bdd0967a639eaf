// TailProtector: picks which data packets the sender re-sends in its idle pacing slots
// (TransportConfig::tail_protect), so that a loss in the last round trip of a transfer is
// repaired without waiting for loss detection or a probe timeout.
//
// Candidates are the data packets (originals and repairs, never copies) in send order.
// NextCopy takes the newest first; a packet is copied at most once, only while it is
// outstanding and some of its units are unacknowledged, and only if it was sent within
// the last smoothed RTT (older ones are either acknowledged soon or found lost by the
// usual means). Each candidate is examined once and those older than an RTT are trimmed
// from the bottom as packets are sent, so the cost is O(1) amortised per data packet.
//
// The connection decides when copies may go (only in slots the pacer and the window
// allow and nothing else is ready; not while FEC protects the tail) and sends them; a
// copy is an ordinary packet with a new packet number, marked tail_copied.
// Not thread-safe; owned by the Connection.
#pragma once

#include <cstdint>
#include <deque>

#include "transport/base/units.h"
#include "transport/core/send/send_stream.h"
#include "transport/core/send/sent_packet_table.h"

namespace longhaul {

class TailProtector {
 public:
  // Data packet `pn` (in `sent`) was sent at `now`: it becomes the newest candidate, and
  // candidates sent before now - srtt (or already released from `sent`) are dropped.
  void OnDataPacketSent(Time now, PacketNumber pn, Duration srtt, SentPacketTable* sent);

  // The newest candidate worth a copy at `now`: marks it tail_copied and returns its
  // unit range; false when none is left.
  bool NextCopy(Time now, Duration srtt, const SendStream& stream, SentPacketTable* sent,
                uint64_t* start, uint64_t* units);

  bool has_candidates() const { return !candidates_.empty(); }
  size_t candidates() const { return candidates_.size(); }

 private:
  std::deque<PacketNumber> candidates_;  // data packets, oldest first
};

}  // namespace longhaul
