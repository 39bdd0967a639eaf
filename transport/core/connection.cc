// The Connection state machine. See connection.h for the contract; this file says why.
//
// Sending: PollTransmit builds at most one datagram per call. Order of preference: a
// CLOSE, probe packets after a probe timeout (they ignore pacing and the window),
// data (repairs before new data) when the pacer and the window allow, then a pure ACK
// when one is due. A pending ACK rides on data packets for free. A pending driver state
// (SetDriverState) rides in front of the data of a plain data packet, or goes in a small
// packet of its own, unpaced like a PING, ahead of an FEC packet or a padded probe.
//
// Receiving: a datagram is parsed and checked (CRC32C), then its frames are applied.
// Corrupt datagrams are dropped and so look like loss; malformed frames from a packet
// with a valid checksum close the connection (protocol violation).
//
// Components: the pacer (send/pacer.h) spaces paced packets at the controller's rate;
// the loss detector (loss/loss_detector.h) declares packets lost (RACK time and reorder
// thresholds) and runs the probe timer; the rate sampler (cc/rate_sampler.h) turns ACKs
// into delivery-rate samples for the controller; the data writer (send/data_writer.h)
// fills packets with DATA frames; the tail protector (send/tail_protector.h) picks what
// idle slots re-send. The connection keeps the packet bookkeeping around them (bytes in
// flight, what to resend, what the controller is told) and the frames' dispatch.
//
// This file: the receive path (ConnectionImpl's state and helpers are in
// connection_impl.h, PollTransmit in connection_send.cc) and Connection's forwarders.

#include "transport/core/connection.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/core/connection_impl.h"
#include "transport/wire/crc32c.h"

namespace longhaul {

bool ConnectionImpl::CheckWhilePlacing(std::span<const uint8_t> d) {
  if (d.size() < wire::kPacketOverhead + wire::kMinPlacedPayload || d[0] != wire::kVersion ||
      d[1] != static_cast<uint8_t>(wire::PacketType::kOneRtt)) {
    return false;
  }
  const uint8_t* frames = d.data() + wire::kHeaderSize;
  const uint8_t* end = d.data() + d.size() - wire::kChecksumSize;
  wire::DataFrame f;
  if (!wire::FindDataPayload(frames, end, end, &f) || f.length < wire::kMinPlacedPayload) {
    return false;
  }
  uint8_t* to = PlaceData(f);
  if (to == nullptr) return false;
  // One pass: the payload's bytes are checksummed as they are copied into place. Until
  // the checksum matches they count for nothing (the range stays unreceived).
  uint32_t crc = wire::Crc32cUpdate(wire::kCrc32cStart, d.data(), f.payload - d.data());
  crc = wire::Crc32cCopy(crc, to, f.payload, f.length);
  crc = wire::Crc32cUpdate(crc, f.payload + f.length, end - (f.payload + f.length));
  const uint32_t want = (uint32_t{end[0]} << 24) | (uint32_t{end[1]} << 16) |
                        (uint32_t{end[2]} << 8) | uint32_t{end[3]};
  if (wire::Crc32cFinish(crc) != want) return false;  // ParsePacket counts the mismatch
  placed_at_ = f.payload;
  placed_to_ = to;
  return true;
}

Connection::Placed ConnectionImpl::CheckPlaced(std::span<uint8_t> d, size_t payload_offset,
                                               const uint8_t* payload, size_t length,
                                               bool* lies) {
  using Placed = Connection::Placed;
  if (integrity_ != wire::Integrity::kCrc32c || d.size() < wire::kPacketOverhead ||
      payload_offset < wire::kHeaderSize || payload_offset > d.size() - wire::kChecksumSize ||
      length > d.size() - wire::kChecksumSize - payload_offset ||
      (payload == nullptr && length > 0)) {
    ++stats_.malformed_packets;
    return Placed::kRefused;
  }
  uint8_t* const at = d.data() + payload_offset;
  const uint8_t* end = d.data() + d.size() - wire::kChecksumSize;
  wire::DataFrame f;
  const bool found = d[0] == wire::kVersion &&
                     d[1] == static_cast<uint8_t>(wire::PacketType::kOneRtt) && length > 0 &&
                     wire::FindDataPayload(d.data() + wire::kHeaderSize, end, end, &f) &&
                     f.payload == at && f.length == length;
  uint8_t* to = found ? PlaceData(f) : nullptr;
  // Where the message lands overlaps the placed bytes without being them (a sender that
  // placed at the wrong offset): copying between them would change what the checksum read.
  const bool overlaps =
      to != nullptr && to != payload && to < payload + length && payload < to + length;
  if (!found || overlaps) {
    // Not the frame the payload was placed for: the datagram gets its payload back and is
    // taken as any other, its checksum included.
    if (length > 0) std::memcpy(at, payload, length);
    return Placed::kCopied;
  }
  uint32_t crc = wire::Crc32cUpdate(wire::kCrc32cStart, d.data(), payload_offset);
  crc = to == nullptr || to == payload ? wire::Crc32cUpdate(crc, payload, length)
                                       : wire::Crc32cCopy(crc, to, payload, length);
  crc = wire::Crc32cUpdate(crc, at + length, end - (at + length));
  const uint32_t want = (uint32_t{end[0]} << 24) | (uint32_t{end[1]} << 16) |
                        (uint32_t{end[2]} << 8) | uint32_t{end[3]};
  if (wire::Crc32cFinish(crc) != want) {
    ++stats_.checksum_failures;
    return Placed::kRefused;
  }
  placed_at_ = at;
  checked_ = true;
  if (to == nullptr) {
    // No memory to check into (a duplicate, or a message with no buffer yet): the bytes
    // stay where they lie and OnData copies what it keeps (counted by the caller).
    placed_to_ = const_cast<uint8_t*>(payload);
    *lies = true;
    return Placed::kInPlace;
  }
  placed_to_ = to;
  if (to == payload) {
    stats_.placed_payload_bytes += length;
    return Placed::kInPlace;
  }
  stats_.placed_payload_bytes_copied += length;
  return Placed::kCopied;
}

Connection::Placed ConnectionImpl::OnPlacedDatagram(Time now, std::span<uint8_t> d, Ecn ecn,
                                                    size_t payload_offset,
                                                    const uint8_t* payload, size_t length) {
  using Placed = Connection::Placed;
  if (state_ == State::kClosed) return Placed::kRefused;
  bool lies = false;  // checked where it lies, with nowhere to go yet
  Placed p = CheckPlaced(d, payload_offset, payload, length, &lies);
  if (p == Placed::kRefused) return p;
  const bool checked = checked_;
  const uint64_t failures = stats_.checksum_failures + stats_.malformed_packets;
  const uint64_t fresh = stats_.data_bytes_received;
  OnDatagram(now, d, ecn);
  if (!checked) {
    // Copied back into the datagram: it counts once the datagram's own checksum matched.
    if (stats_.checksum_failures + stats_.malformed_packets != failures) return Placed::kRefused;
    stats_.placed_payload_bytes_copied += length;
  } else if (lies) {
    // OnData copied what was new into the message's memory (nothing, for a duplicate).
    const uint64_t copied = std::min<uint64_t>(stats_.data_bytes_received - fresh, length);
    if (copied > 0) {
      stats_.placed_payload_bytes_copied += copied;
      p = Placed::kCopied;
    }
  }
  return p;
}

void ConnectionImpl::OnDatagram(Time now, std::span<const uint8_t> d, Ecn ecn) {
  if (state_ == State::kClosed) return;
  // Checksummed packets: the DATA payload goes into place while it is checked (one pass),
  // unless OnPlacedDatagram checked it already.
  const bool checked = integrity_ == wire::Integrity::kCrc32c &&
                       (checked_ || (placed_at_ == nullptr && CheckWhilePlacing(d)));
  struct Unplace {
    ConnectionImpl* c;
    bool on;
    ~Unplace() {
      if (on) c->placed_at_ = nullptr, c->placed_to_ = nullptr;
      c->checked_ = false;
    }
  } unplace{this, checked};
  absl::StatusOr<wire::PacketView> v =
      checked ? wire::ParseOpenedPacket(d.first(d.size() - wire::kChecksumSize))
      : integrity_ == wire::Integrity::kSealed ? wire::ParseOpenedPacket(d)
                                               : wire::ParsePacket(d);
  if (!v.ok()) {
    if (absl::IsDataLoss(v.status())) {
      ++stats_.checksum_failures;
    } else {
      ++stats_.malformed_packets;
    }
    return;
  }
  if (v->header.connection_id != ids_.local || v->header.type != wire::PacketType::kOneRtt) {
    ++stats_.malformed_packets;
    return;
  }
  const PacketNumber pn = v->header.packet_number;
  if (acks_.IsDuplicate(pn)) return;
  last_receive_time_ = now;
  ++stats_.packets_received;
  stats_.bytes_received += d.size();

  bool ack_eliciting = false;
  wire::FecSourceFrame tag;
  const uint8_t* tag_end = nullptr;
  if (!ProcessFrames(now, v->frames, v->frames_end, /*recovered=*/false, &ack_eliciting, &tag,
                     &tag_end)) {
    return;
  }
  if (tag_end != nullptr) {
    absl::Status s = fec_rx_.OnSource(
        now, tag, pn, std::span<const uint8_t>(tag_end, v->frames_end - tag_end));
    if (!s.ok()) {
      ProtocolViolation(std::string(s.message()));
      return;
    }
    if (!ProcessRecovered(now)) return;
  }
  if (ecn == Ecn::kCe) ++stats_.ecn_ce_received;
  acks_.OnPacket(now, pn, ack_eliciting, ecn == Ecn::kCe, ecn == Ecn::kEct0);
  // Blocks older than a few RTTs will get no more shards: retire their decoders.
  fec_rx_.Expire(now - (rtt_.srtt() * 4 + cfg_.fec_flush + cfg_.max_ack_delay));
  stats_.fec_blocks_unrecoverable = fec_rx_.stats().blocks_unrecoverable;
  DeliverReceived();
}

bool ConnectionImpl::ProcessFrames(Time now, const uint8_t* p, const uint8_t* end, bool recovered,
                   bool* ack_eliciting, wire::FecSourceFrame* tag, const uint8_t** tag_end) {
  wire::FrameReader reader(p, end);
  wire::Frame f;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&f);
    if (!more.ok()) {
      ProtocolViolation(std::string(more.status().message()));
      return false;
    }
    if (!*more) break;
    switch (f.type) {
      case wire::FrameType::kData: {
        *ack_eliciting = true;
        if (f.data.elided()) {
          if (!cfg_.elide_payload) {
            ProtocolViolation(
                "DATA frame with an elided payload: elision is a simulator mode "
                "(TransportConfig::elide_payload) this endpoint does not run");
            return false;
          }
          if (!recovered) {
            stats_.bytes_received += f.data.length - wire::StampBytes(f.data.offset, f.data.length,
                                                                      f.data.message_length);
          }
        }
        // Opened into place already (Connection::PlaceData): the payload is there.
        if (!recovered && placed_at_ != nullptr && f.data.payload == placed_at_) {
          f.data.payload = placed_to_;
        }
        absl::StatusOr<uint64_t> fresh = recv_.OnData(f.data);
        if (!fresh.ok()) {
          const bool resources = absl::IsFailedPrecondition(fresh.status()) ||
                                 absl::IsResourceExhausted(fresh.status());
          ProtocolViolation(std::string(fresh.status().message()),
                            resources ? CloseCode::kFlowControl : CloseCode::kProtocolViolation);
          return false;
        }
        stats_.data_bytes_received += *fresh;
        stats_.duplicate_data_bytes += f.data.length - std::min(f.data.length, *fresh);
        break;
      }
      case wire::FrameType::kAck:
        if (recovered) break;
        if (!OnAck(now, f.ack)) return false;
        break;
      case wire::FrameType::kClose:
        OnPeerClose(f.close.error_code, std::string(f.close.reason));
        return false;
      case wire::FrameType::kPing:
        *ack_eliciting = true;
        break;
      case wire::FrameType::kLossReport:
        if (!recovered) OnLossReport(now, f.loss_report);
        break;
      case wire::FrameType::kFecSource:
        *ack_eliciting = true;
        if (!recovered && tag != nullptr) {
          *tag = f.fec_source;
          *tag_end = reader.position();
        }
        break;
      case wire::FrameType::kFecRepair: {
        *ack_eliciting = true;
        if (recovered) break;
        absl::Status st = fec_rx_.OnRepair(now, f.fec_repair);
        if (!st.ok()) {
          ProtocolViolation(std::string(st.message()));
          return false;
        }
        if (!ProcessRecovered(now)) return false;
        break;
      }
      case wire::FrameType::kDriverState:
        *ack_eliciting = true;
        OnPeerDriverState(f.driver_state);
        break;
      case wire::FrameType::kPadding:
      case wire::FrameType::kHandshake:
        break;
    }
  }
  return true;
}

bool ConnectionImpl::ProcessRecovered(Time now) {
  // Copy the list: processing may not call back into the decoder, but be safe.
  recovered_scratch_ = fec_rx_.recovered();
  for (const RecoveredPacket& r : recovered_scratch_) {
    if (acks_.IsDuplicate(r.packet_number)) continue;  // the original arrived after all
    bool eliciting = false;
    if (!ProcessFrames(now, r.frames.data(), r.frames.data() + r.frames.size(),
                       /*recovered=*/true, &eliciting, nullptr, nullptr)) {
      return false;
    }
    acks_.OnPacket(now, r.packet_number, /*ack_eliciting=*/true, false, false,
                   /*recovered=*/true);
    ++stats_.fec_recovered_packets;
  }
  stats_.fec_blocks_unrecoverable = fec_rx_.stats().blocks_unrecoverable;
  return true;
}

bool ConnectionImpl::OnAck(Time now, const wire::AckFrame& ack) {
  ++stats_.acks_received;
  if (ack.largest >= sent_.next_packet_number()) {
    ProtocolViolation(absl::StrCat("ACK of packet ", ack.largest, " which was never sent"));
    return false;
  }
  if (ack.max_stream > peer_max_stream_) fc_probes_ = 0;
  peer_max_stream_ = std::max(peer_max_stream_, ack.max_stream);
  uint64_t ce_delta = ack.ecn_ce > peer_ce_ ? ack.ecn_ce - peer_ce_ : 0;
  uint64_t ect_delta = ack.ecn_ect0 > peer_ect0_ ? ack.ecn_ect0 - peer_ect0_ : 0;
  peer_ce_ = std::max(peer_ce_, ack.ecn_ce);
  peer_ect0_ = std::max(peer_ect0_, ack.ecn_ect0);

  ByteCount bytes_acked = 0;
  bool size_rose = false;
  bool largest_newly_acked = false;
  bool any_new = false;
  rate_.BeginAck();
  wire::AckRangeIterator it(ack);
  wire::AckRange r;
  while (it.Next(&r)) {
    if (r.high < sent_.base()) break;  // this and the rest are below what we track
    PacketNumber x = sent_.FindUnacked(r.low);
    while (x <= r.high && x < sent_.next_packet_number()) {
      SentPacket& p = sent_.Get(x);
      sent_.MarkAcked(x);
      any_new = true;
      pmtu_.OnPacketAcked(x, p.bytes);
      if (p.mtu_probe && pmtu_.OnProbeAcked(now, x)) size_rose = true;
      if (x == ack.largest) largest_newly_acked = p.ack_eliciting;
      bool delivered = false;
      if (p.lost) {
        // Declared lost earlier but it arrived: the reorder thresholds were too tight.
        ++stats_.spurious_losses;
        loss_.OnSpuriousLoss();
      } else if (!p.finished) {
        sent_.Finish(x);
        if (p.in_flight) {
          bytes_in_flight_ -= p.bytes;
          bytes_acked += p.bytes;
          delivered = true;
        }
      }
      if (p.stream_units > 0) send_.Ack(p.stream_start, p.stream_units);
      if (p.in_flight) rate_.OnPacketAcked(p, delivered);
      x = sent_.FindUnacked(x + 1);
    }
  }
  if (largest_newly_acked) {
    const SentPacket& lp = sent_.Get(ack.largest);
    rtt_.OnSample(now - lp.sent_time, Duration::Microseconds(static_cast<int64_t>(
                                          std::min<uint64_t>(ack.ack_delay_us, 1u << 30))));
  }
  loss_.OnAckReceived(ack.largest, any_new);
  rate_.EndAck(now, any_new);
  if (pmtu_.OnAckDone(now) || size_rose) ApplyPacketSize(pmtu_.current());

  DetectLosses(now);

  if (bytes_acked > 0 || ce_delta > 0) {
    AckEvent ev;
    ev.now = now;
    ev.bytes_acked = bytes_acked;
    ev.bytes_in_flight = bytes_in_flight_;
    ev.total_delivered = rate_.delivered();
    ev.ce_delta = ce_delta;
    ev.ect_delta = ect_delta;
    ev.largest_acked = loss_.largest_acked();
    ev.sample = rate_.GenerateSample(now, rtt_.min_rtt());
    cc_->OnAck(ev, rtt_);
  }
  CompleteSends();
  ReleaseOld(now);
  return true;
}

void ConnectionImpl::DetectLosses(Time now) {
  LossEvent ev;
  ev.now = now;
  const uint32_t span = fec_tx_.block_span();
  const LossDetector::FecSpan fec{
      span, cc_->PacingRate().TransferTime(static_cast<ByteCount>(span) * max_datagram_)};
  loss_.DetectLosses(now, rtt_, fec, &sent_, [&](PacketNumber pn, SentPacket& p) {
    ++stats_.packets_lost;
    if (p.in_flight) bytes_in_flight_ -= p.bytes;
    if (p.mtu_probe) pmtu_.OnProbeLost(now, pn);
    if (p.sent_time > silence_mark_ && !p.mtu_probe) {
      if (p.in_flight) ev.bytes_lost += p.bytes;
      ++ev.packets_lost;
      ev.largest_lost_sent_time = p.sent_time;
    }
    if (p.stream_units > 0) send_.QueueRetransmission(p.stream_start, p.stream_units);
    if (p.driver_state) OnDriverStateLost(pn);
  });
  if (ev.packets_lost > 0) {
    ev.bytes_in_flight = bytes_in_flight_;
    cc_->OnLoss(ev, rtt_);
  }
}

void ConnectionImpl::OnPto(Time now) {
  ++stats_.pto_count;
  loss_.OnPtoFired();
  pmtu_.OnProbeTimeout();
  silence_mark_ = now;
  // Resend the oldest outstanding data without declaring it lost: if the tail of a
  // flight was lost, nothing later will be acknowledged to reveal it.
  PacketNumber x = sent_.FindOutstanding(sent_.base());
  if (x < sent_.next_packet_number()) {
    SentPacket& p = sent_.Get(x);
    if (p.stream_units > 0) send_.QueueRetransmission(p.stream_start, p.stream_units);
  }
  LossEvent ev;
  ev.now = now;
  ev.persistent = true;
  ev.bytes_in_flight = bytes_in_flight_;
  cc_->OnLoss(ev, rtt_);
  // Keep the timer from re-firing at once: the probes re-arm it when sent.
  last_eliciting_sent_ = now;
}

void ConnectionImpl::OnLossReport(Time now, const wire::LossReportFrame& lr) {
  workload_.Update(now, rtt_.srtt());
  FecWorkload w;
  w.message_packets = workload_.message_packets();
  w.window_packets = cfg_.window / cfg_.MaxDatagramSize();
  w.messages_per_rtt = workload_.messages_per_rtt();
  const Bandwidth rate = cc_->PacingRate();
  if (!rate.IsZero()) {
    w.message_time = rtt_.srtt() / 2 + rate.TransferTime(w.message_packets * max_datagram_);
    // A group's parity follows its last data packet: a group longer than a round trip
    // of packets brings it after a retransmission would have (and after the receiver
    // gave the blocks up): groups fit in what one RTT carries.
    const double rtt_packets = rate.bps() * rtt_.srtt().seconds() / (8.0 * max_datagram_);
    w.window_packets = std::min<uint64_t>(w.window_packets, static_cast<uint64_t>(rtt_packets));
    w.rtt_packets = rtt_packets;
  }
  fec_tx_.OnLossReport(now, lr, rtt_.srtt(), w);
}

// ---- Connection: forwards to the implementation ----

Connection::Connection(const TransportConfig& config, ConnectionIds ids, uint64_t seed, Time now)
    : impl_(std::make_unique<ConnectionImpl>(config, ids, seed, now)) {}
Connection::~Connection() = default;

absl::StatusOr<uint64_t> Connection::Send(SendBuffer buffer, uint64_t tag) {
  return impl_->Send(std::move(buffer), tag);
}
absl::Status Connection::PostReceive(uint8_t* data, ByteCount capacity, uint64_t tag) {
  if (closed()) return absl::FailedPreconditionError("connection is closed; cannot receive");
  return impl_->recv().Post(data, capacity, tag);
}
absl::Status Connection::OfferReceive(uint64_t key, uint8_t* data, ByteCount capacity) {
  if (closed()) return absl::FailedPreconditionError("connection is closed; cannot receive");
  return impl_->recv().AddOffer(key, data, capacity);
}
absl::Status Connection::CheckOffer(uint64_t key, const uint8_t* data, ByteCount capacity) {
  if (key == 0 || key >> 63 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("OfferReceive: key ", key, " is outside [1, 2^63 - 1]"));
  }
  if (data == nullptr || capacity == 0) {
    return absl::InvalidArgumentError("OfferReceive: null or empty buffer");
  }
  return absl::OkStatus();
}
void Connection::WithdrawOffer(uint64_t key) {
  impl_->recv().Withdraw(key);
  impl_->DeliverWithdrawn();
}
const std::vector<ReceiveOffer>& Connection::offers() const { return impl_->recv().offers(); }
void Connection::NoteOfferPlacement(uint64_t key, bool advertised) {
  impl_->recv().NotePlacement(key, advertised);
}
void Connection::OfferRevoked(uint64_t key) {
  impl_->recv().OfferRevoked(key);
  impl_->DeliverWithdrawn();
}
absl::Status Connection::AdoptOffer(uint64_t key, uint64_t id, ByteCount length) {
  return impl_->recv().Adopt(key, id, length);
}
void Connection::ReturnBuffer(OwnedBuffer buffer) { impl_->recv().ReturnBuffer(std::move(buffer)); }
bool Connection::PollEvent(Event* event) { return impl_->PollEvent(event); }
void Connection::SetConsumptionTracking(bool on) { impl_->set_track_consumption(on); }
void Connection::OnConsumed(uint64_t credit_units) { impl_->recv().Consumed(credit_units); }
void Connection::Close(CloseCode code, std::string reason) { impl_->Close(code, std::move(reason)); }
uint8_t* Connection::PlaceData(const wire::DataFrame& f) const { return impl_->PlaceData(f); }

void Connection::OnDatagram(Time now, std::span<const uint8_t> d, Ecn ecn,
                            const uint8_t* placed_at, uint8_t* placed_to) {
  impl_->placed_at_ = placed_at;
  impl_->placed_to_ = placed_to;
  impl_->OnDatagram(now, d, ecn);
  impl_->placed_at_ = nullptr;
  impl_->placed_to_ = nullptr;
}

void Connection::OnDatagram(Time now, std::span<const uint8_t> d, Ecn ecn) {
  impl_->OnDatagram(now, d, ecn);
}

Connection::Placed Connection::OnPlacedDatagram(Time now, std::span<uint8_t> d, Ecn ecn,
                                                size_t payload_offset, const uint8_t* payload,
                                                size_t length) {
  return impl_->OnPlacedDatagram(now, d, ecn, payload_offset, payload, length);
}
bool Connection::PostedBuffer(uint64_t id, uint8_t** data, ByteCount* capacity) const {
  return impl_->recv().PostedFor(id, data, capacity);
}
uint64_t Connection::next_undelivered_id() const { return impl_->recv().next_undelivered_id(); }
uint64_t Connection::next_posted_id() const { return impl_->recv().next_posted_id(); }
absl::Status Connection::HoldDelivery(uint64_t id) { return impl_->recv().Hold(id); }
bool Connection::TakeHeldComplete(uint64_t* id) { return impl_->recv().TakeHeldComplete(id); }
void Connection::ReleaseDelivery(uint64_t id) { impl_->ReleaseDelivery(id); }
void Connection::OnTimeout(Time now) { impl_->OnTimeout(now); }
void Connection::OnPathMtu(ByteCount mtu) { impl_->OnPathMtu(mtu); }
void Connection::SetDatagramLimit(ByteCount datagram) { impl_->SetDatagramLimit(datagram); }
void Connection::SetPayloadByReference(bool on) { impl_->SetPayloadByReference(on); }
absl::Status Connection::SetDriverState(std::span<const uint8_t> state) {
  return impl_->SetDriverState(state);
}
bool Connection::TakePeerDriverState(std::vector<uint8_t>* out) {
  return impl_->TakePeerDriverState(out);
}
bool Connection::has_new_peer_driver_state() const { return impl_->has_new_peer_driver_state(); }
ByteCount Connection::segment() const { return impl_->segment(); }
size_t Connection::PollTransmit(Time now, uint8_t* buffer, size_t capacity, TransmitInfo* info) {
  return impl_->PollTransmit(now, buffer, capacity, info);
}
Time Connection::NextTimeout() const { return impl_->NextTimeout(); }
Time Connection::NextWake(ByteCount quantum) const { return impl_->NextWake(quantum); }
void Connection::Deadlines(ByteCount quantum, Time* timeout, Time* wake) const {
  impl_->Deadlines(quantum, timeout, wake);
}
const TransportConfig& Connection::config() const { return impl_->config(); }
const ConnectionStats& Connection::stats() const { return impl_->stats(); }
ConnectionDebugState Connection::debug_state() const { return impl_->debug_state(); }
bool Connection::closed() const { return impl_->closed(); }
uint64_t Connection::pending_send_messages() const { return impl_->pending_send_messages(); }
ByteCount Connection::pending_send_bytes() const { return impl_->pending_send_bytes(); }
uint64_t Connection::stream_units_submitted() const { return impl_->stream_units_submitted(); }
uint64_t Connection::stream_units_sent() const { return impl_->stream_units_sent(); }
uint64_t Connection::posted_receives() const { return impl_->recv().posted_count(); }

int64_t Connection::largest_acked_packet() const { return impl_->largest_acked_packet(); }

}  // namespace longhaul
