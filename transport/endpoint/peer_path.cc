// The amplification limit on a client flow's new address. A NAT rebinding moves the flow
// at once (the old mapping is usually dead, so waiting would stall the connection); the
// limit bounds what a replayed packet from a spoofed source can make the server send to
// a victim while the address is not yet proven.

#include "transport/endpoint/peer_path.h"

#include <algorithm>

namespace longhaul::endpoint {

PeerPath::Change PeerPath::OnPacket(const PeerAddress& from, size_t bytes,
                                    std::span<const wire::AckRange> acked) {
  if (from == current_) {
    if (validated()) return Change::kNone;
    received_ += bytes;
    if (!Covers(acked)) return Change::kNone;
    validated_ = current_;
    candidate_ = PeerAddress();
    received_ = sent_ = 0;
    sent_pn_count_ = 0;
    return Change::kValidated;
  }
  if (from == validated_) {
    current_ = validated_;  // the candidate's state stays, should it come back
    return Change::kReturned;
  }
  if (from != candidate_) {
    // A new candidate: its budget starts from this packet.
    candidate_ = from;
    received_ = 0;
    sent_ = 0;
    sent_pn_count_ = 0;
    next_probe_ = Time::Zero();
  }
  current_ = from;
  received_ += bytes;
  // An acknowledgement in this very packet can already prove the address only if packets
  // went there before (a candidate coming back).
  if (Covers(acked)) {
    validated_ = current_;
    candidate_ = PeerAddress();
    received_ = sent_ = 0;
    sent_pn_count_ = 0;
    return Change::kValidated;
  }
  return Change::kMoved;
}

bool PeerPath::CanSend(Time now, size_t bytes) const {
  if (validated()) return true;
  if (sent_ + bytes <= kAmplificationFactor * received_) return true;
  return now >= next_probe_;
}

void PeerPath::OnSent(Time now, size_t bytes, PacketNumber pn) {
  if (validated()) return;
  if (sent_ + bytes > kAmplificationFactor * received_) {
    // Beyond the budget: this was the probe of its interval.
    next_probe_ = now + kProbeInterval;
    ++probes_;
  }
  sent_ += bytes;
  sent_pns_[sent_pn_count_ % kTrackedPackets] = pn;
  ++sent_pn_count_;
}

bool PeerPath::Covers(std::span<const wire::AckRange> acked) const {
  const size_t n = std::min(sent_pn_count_, kTrackedPackets);
  for (size_t i = 0; i < n; ++i) {
    for (const wire::AckRange& r : acked) {
      if (sent_pns_[i] >= r.low && sent_pns_[i] <= r.high) return true;
    }
  }
  return false;
}

}  // namespace longhaul::endpoint
