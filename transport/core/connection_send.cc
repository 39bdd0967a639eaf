// ConnectionImpl's send path: PollTransmit builds at most one datagram per call (the
// order of preference is in connection.cc's header). It runs in three steps: PlanTransmit
// decides what the datagram carries, WriteTransmitFrames writes it, RecordSentPacket
// books it (sent packets, flight, pacing, congestion control, statistics).

#include <algorithm>

#include "glog/logging.h"
#include "transport/core/connection_impl.h"
#include "transport/core/send/data_writer.h"

namespace longhaul {

size_t ConnectionImpl::PollTransmit(Time now, uint8_t* buf, size_t cap, TransmitInfo* info) {
  if (state_ == State::kClosed) return 0;
  CHECK_GE(cap, max_datagram_ + seal_extra_)
      << "PollTransmit buffer smaller than MaxDatagramSize()";
  if (state_ == State::kClosing) return BuildClose(now, buf, info);
  if (now >= last_eliciting_sent_ + cfg_.keepalive) ping_pending_ = true;

  TransmitPlan plan;
  if (!PlanTransmit(now, cap, &plan)) return 0;

  const ByteCount padded_to = plan.padded_to();
  wire::PacketWriter w(buf, (padded_to > 0 ? padded_to : max_datagram_) + seal_extra_, integrity_);
  w.set_elide_payload(cfg_.elide_payload);
  // One pass over the payload: checksummed while copied in Finish, or encrypted into
  // place by the caller's sealer.
  w.set_defer_payload(integrity_ == wire::Integrity::kCrc32c ||
                      (info != nullptr && info->fills_payload));
  // Zero copy: registered payloads stay in the application's memory (the driver sends
  // them from there); only where the caller takes the list.
  w.set_payload_by_reference(by_reference_ && info != nullptr &&
                             integrity_ == wire::Integrity::kCrc32c);
  const PacketNumber pn = sent_.next_packet_number();
  wire::PacketHeader h;
  h.connection_id = ids_.peer;
  h.packet_number = pn;
  h.flow = static_cast<uint16_t>(next_flow_);
  w.WriteHeader(h);

  SentPacket rec;
  const bool ack_eliciting = WriteTransmitFrames(now, pn, plan, &w, &rec);
  if (w.size() == wire::kHeaderSize) return 0;  // nothing fitted (cannot happen)

  const size_t len = w.Finish();
  // What the packet counts as everywhere (in flight, pacing, congestion control): its
  // length plus the payload it stands for when elided.
  const size_t n = len + w.elided();
  RecordSentPacket(now, pn, plan, rec, n, ack_eliciting);
  if (info != nullptr) FillTransmitInfo(w, info);
  if (++next_flow_ >= cfg_.flows) next_flow_ = 0;
  return len;
}

bool ConnectionImpl::PlanTransmit(Time now, size_t cap, TransmitPlan* plan) {
  const bool probe = loss_.probes_pending() > 0;
  // The second probe of a timeout is small once large packets may be vanishing.
  const bool small_probe = probe && loss_.probes_pending() == 1 && pmtu_.WantSmallProbe();
  const bool data_ready = HasDataToSend();
  const bool paced_ok = WindowAllows() && pacer_.CanSend(now);
  // A path MTU search probe goes before data (one at a time, paced like data).
  ByteCount search = !probe && paced_ok && data_ready ? pmtu_.ProbeSize(now) : 0;
  if (search + seal_extra_ > cap) search = 0;
  plan->driver_state = DriverStateDue();
  if (plan->driver_state && (fec_tx_.active() || small_probe || search > 0)) {
    // The state cannot ride this packet: frames outside an FEC shard are not rebuilt with
    // it (the peer would acknowledge a rebuilt packet without its state), and a padded
    // probe's size is the point. It goes alone (with a due ACK) now, the rest next call.
    plan->credit_due = recv_.CreditUpdateDue() && acks_.has_packets();
    return true;
  }
  const bool fc_blocked = send_.has_unsent() && send_.next_unsent() >= peer_max_stream_;
  if (fc_blocked && !fc_blocked_) ++stats_.flow_control_blocked;
  fc_blocked_ = fc_blocked;
  bool send_data = false;
  if (small_probe || search > 0) {
    send_data = false;
  } else if (probe) {
    send_data = true;
  } else if (data_ready && paced_ok) {
    send_data = true;
  } else if (!data_ready && send_.next_unsent() >= send_.stream_end()) {
    // Nothing to send: the delivery-rate samples are app-limited.
    rate_.OnAppLimited(bytes_in_flight_);
  }
  // A sender with far more queued than a round trip carries optimises goodput (FEC
  // pauses in auto mode); see FecSender::SetBacklogged.
  fec_tx_.SetBacklogged(send_.stream_end() - send_.next_unsent() >= cfg_.window / 2);
  // Nothing more to send right now: close the open FEC group so its parity goes out
  // now instead of waiting for the flush deadline.
  if (!data_ready) {
    fec_tx_.Flush();
    if (!fec_tx_.has_repair()) pacer_.OnIdle();
  }
  const bool send_repair = !probe && search == 0 && fec_tx_.has_repair() && paced_ok;
  if (send_repair) send_data = false;
  uint64_t copy_start = 0, copy_units = 0;
  if (!send_data && !send_repair && search == 0 && !data_ready && paced_ok && TailProtectionOn() &&
      tail_.NextCopy(now, rtt_.srtt(), send_, &sent_, &copy_start, &copy_units)) {
    send_data = true;
  }
  const bool credit_due = recv_.CreditUpdateDue() && acks_.has_packets();
  const bool ack_due = (acks_.AckDue(now) || credit_due) && acks_.has_packets();
  plan->probe = probe;
  plan->small_probe = small_probe;
  plan->search = search;
  plan->send_data = send_data;
  plan->send_repair = send_repair;
  plan->copy_start = copy_start;
  plan->copy_units = copy_units;
  plan->credit_due = credit_due;
  return send_data || send_repair || ack_due || ping_pending_ || small_probe || search != 0 ||
         plan->driver_state;
}

bool ConnectionImpl::WriteTransmitFrames(Time now, PacketNumber pn, const TransmitPlan& plan,
                                         wire::PacketWriter* w, SentPacket* rec) {
  bool ack_eliciting = false;
  if (plan.send_repair) {
    // The repair shard first (it is sized to fill a packet); an ACK only if room remains.
    ack_eliciting = fec_tx_.WriteRepair(w);
    CHECK(ack_eliciting) << "FEC repair frame does not fit an empty packet";
    rec->fec_repair = true;
  }
  if ((acks_.ack_pending() || plan.credit_due) && acks_.has_packets()) WriteAck(now, w);
  // In front of the data (which takes what room is left), so that it always fits; if a
  // large ACK left too little, the next packet takes it.
  if (plan.driver_state && WriteDriverState(pn, w, rec)) ack_eliciting = true;

  if (plan.send_data) {
    bool data = false;
    if (plan.copy_units > 0) {
      data = WriteDataCopy(send_, plan.copy_start, plan.copy_units, w, rec);
      if (data) ++stats_.data_packets_sent;
      rec->tail_copied = true;  // a copy is not copied again
      ++stats_.tail_protect_packets;
    } else {
      const DataLimits limits{segment_, max_datagram_, peer_max_stream_,
                              cfg_.max_inflight_messages};
      data = WriteDataPacket(now, pn, limits, &send_, &fec_tx_, w, rec);
      if (data) CountDataPacket(*rec);
    }
    ack_eliciting = ack_eliciting || data;
    if (plan.probe) {
      loss_.OnProbeSent();
      silence_mark_ = now;
    }
  }
  const ByteCount padded_to = plan.padded_to();
  if (!ack_eliciting && (ping_pending_ || plan.probe || padded_to > 0)) {
    if (w->WritePing()) ack_eliciting = true;
  }
  if (padded_to > 0) {
    // A PING padded to the size under test (a path MTU probe or a small timeout probe).
    w->WritePadding(w->remaining());
    rec->mtu_probe = plan.search > 0;
    if (plan.small_probe) {
      loss_.OnProbeSent();
      silence_mark_ = now;
    }
  }
  if (ack_eliciting) ping_pending_ = false;
  return ack_eliciting;
}

void ConnectionImpl::RecordSentPacket(Time now, PacketNumber pn, const TransmitPlan& plan,
                                      const SentPacket& rec, size_t n, bool ack_eliciting) {
  SentPacket& p = sent_.Add();
  p = rec;
  p.sent_time = now;
  p.bytes = static_cast<uint32_t>(n);
  p.ack_eliciting = ack_eliciting;
  p.skip = pn + 1;
  p.skip_unacked = pn + 1;
  if (ack_eliciting) {
    p.in_flight = true;
    rate_.OnPacketSent(now, bytes_in_flight_, &p);
    // Probes ignore pacing and the window (timeouts) or test a size (path MTU): what
    // their ACKs deliver says nothing about the bottleneck's rate.
    if (plan.probe || p.mtu_probe) p.is_app_limited = true;
    bytes_in_flight_ += n;
    last_eliciting_sent_ = now;
    cc_->OnPacketSent(now, n, bytes_in_flight_, p.is_app_limited);
    if (p.stream_units > 0 || plan.probe || p.fec_repair || p.mtu_probe) {
      pacer_.OnPacketSent(now, n, cc_->PacingRate());
    }
    if (p.mtu_probe) pmtu_.OnProbeSent(now, pn, n);
    if (plan.probe) pmtu_.OnTimeoutProbeSent(pn, n);
    if (p.fec_repair) {
      ++stats_.fec_repair_packets_sent;
      stats_.fec_overhead_bytes += n;
    }
    // A new original or repair data packet is the newest tail-protection candidate.
    if (p.stream_units > 0 && plan.copy_units == 0 && TailProtectionOn()) {
      tail_.OnDataPacketSent(now, pn, rtt_.srtt(), &sent_);
    }
  } else {
    sent_.Finish(pn);
    sent_.MarkAcked(pn);  // never acknowledged, never lost: out of both walks
  }
  ++stats_.packets_sent;
  stats_.bytes_sent += n;
}

void ConnectionImpl::FillTransmitInfo(const wire::PacketWriter& w, TransmitInfo* info) const {
  info->flow = static_cast<uint16_t>(next_flow_);
  info->ecn = cfg_.ecn ? Ecn::kEct0 : Ecn::kNotEct;
  info->elided_bytes = static_cast<uint32_t>(w.elided());
  const std::span<const wire::DeferredPayload> d = w.deferred();
  info->deferred_count = static_cast<uint32_t>(d.size());
  std::copy(d.begin(), d.end(), info->deferred.begin());
}

}  // namespace longhaul
