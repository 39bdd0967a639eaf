// The sender's record of every packet it sent, indexed by packet number in O(1).
//
// Packet numbers are consecutive, so the table is a ring buffer from the oldest packet
// still of interest (base) to the next packet number. A packet is "outstanding" while it
// is neither acknowledged nor declared lost. FindOutstanding(x) returns the smallest
// outstanding packet number >= x using a skip pointer per record with path compression
// (a union-find over finished packets), so walking the ranges of an ACK or the loss
// candidates costs O(newly finished packets + ranges), never O(window). The ring grows
// as needed (windows of millions of packets) and the front is released as soon as the
// oldest packets are finished.
#pragma once

#include <cstdint>
#include <vector>

#include "glog/logging.h"
#include "transport/base/units.h"

namespace longhaul {

struct SentPacket {
  Time sent_time;
  // Delivery-rate state when the packet was sent.
  Time delivered_time;
  Time first_sent_time;
  ByteCount delivered = 0;
  // Stream units carried (data packets), [stream_start, stream_start + stream_units).
  uint64_t stream_start = 0;
  uint32_t stream_units = 0;
  uint32_t bytes = 0;          // datagram size
  PacketNumber skip = 0;        // union-find link over finished packets
  PacketNumber skip_unacked = 0;  // union-find link over acknowledged packets
  uint64_t fec_block = 0;      // FEC block the packet belongs to (if fec_member)
  uint8_t fec_index = 0;
  bool ack_eliciting = false;
  bool in_flight = false;      // counted in bytes_in_flight
  bool finished = false;       // acknowledged or declared lost
  bool acked = false;
  bool lost = false;
  bool retransmission = false;
  bool is_app_limited = false;
  bool tail_copied = false;    // a tail-protection copy was sent
  bool fec_member = false;     // a data or repair packet of an FEC block
  bool fec_repair = false;
  bool mtu_probe = false;      // a padded PING probing a path MTU (path_mtu.h)
  // Carried a DRIVER_STATE frame. Which state is not kept here (the record stays small):
  // the connection remembers the packet that carried its newest state last.
  bool driver_state = false;
};

class SentPacketTable {
 public:
  SentPacketTable() : ring_(1024) {}

  PacketNumber next_packet_number() const { return next_; }
  PacketNumber base() const { return base_; }
  uint64_t size() const { return next_ - base_; }

  // Appends the record for packet number next_packet_number() and returns it.
  SentPacket& Add() {
    if (next_ - base_ == ring_.size()) Grow();
    SentPacket& p = ring_[Index(next_)];
    p = SentPacket{};
    p.skip = next_ + 1;
    p.skip_unacked = next_ + 1;
    ++next_;
    return p;
  }

  bool Contains(PacketNumber pn) const { return pn >= base_ && pn < next_; }
  SentPacket& Get(PacketNumber pn) {
    DCHECK(Contains(pn));
    return ring_[Index(pn)];
  }

  // Marks a packet finished (acked or lost); the caller sets acked/lost.
  void Finish(PacketNumber pn) {
    SentPacket& p = Get(pn);
    p.finished = true;
    p.skip = pn + 1;
  }
  // Marks a packet acknowledged (it must also be, or become, finished).
  void MarkAcked(PacketNumber pn) {
    SentPacket& p = Get(pn);
    p.acked = true;
    p.skip_unacked = pn + 1;
  }

  // Smallest outstanding (not finished) packet number >= pn, or next_packet_number().
  PacketNumber FindOutstanding(PacketNumber pn) {
    return Find(pn, &SentPacket::finished, &SentPacket::skip);
  }
  // Smallest not-yet-acknowledged packet number >= pn (lost ones included), or
  // next_packet_number(). ACK processing walks this to spot late ACKs of lost packets.
  PacketNumber FindUnacked(PacketNumber pn) {
    return Find(pn, &SentPacket::acked, &SentPacket::skip_unacked);
  }

  // Drops packets from the front while `done(packet)` holds.
  template <typename Pred>
  void ReleaseFront(Pred done) {
    while (base_ < next_ && done(ring_[Index(base_)])) ++base_;
  }

 private:
  PacketNumber Find(PacketNumber pn, bool SentPacket::*done, PacketNumber SentPacket::*link) {
    if (pn < base_) pn = base_;
    PacketNumber root = pn;
    while (root < next_ && ring_[Index(root)].*done) root = ring_[Index(root)].*link;
    while (pn < next_ && pn != root && ring_[Index(pn)].*done) {  // path compression
      SentPacket& p = ring_[Index(pn)];
      PacketNumber nxt = p.*link;
      p.*link = root;
      pn = nxt;
    }
    return root;
  }
  size_t Index(PacketNumber pn) const { return static_cast<size_t>(pn) & (ring_.size() - 1); }
  void Grow() {
    std::vector<SentPacket> bigger(ring_.size() * 2);
    for (PacketNumber pn = base_; pn < next_; ++pn) {
      bigger[static_cast<size_t>(pn) & (bigger.size() - 1)] = ring_[Index(pn)];
    }
    ring_.swap(bigger);
  }

  std::vector<SentPacket> ring_;
  PacketNumber base_ = 0;
  PacketNumber next_ = 0;
};

}  // namespace longhaul
