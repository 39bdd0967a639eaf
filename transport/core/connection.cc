// The Connection state machine. See connection.h for the contract; this file says why.
//
// Sending: PollTransmit builds at most one datagram per call. Order of preference: a
// CLOSE, probe packets after a probe timeout (they ignore pacing and the window),
// data (repairs before new data) when the pacer and the window allow, then a pure ACK
// when one is due. A pending ACK rides on data packets for free.
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
// idle slots re-send. This file keeps the packet bookkeeping around them (bytes in
// flight, what to resend, what the controller is told) and the frames' dispatch.

#include "transport/core/connection.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/core/cc/congestion_controller.h"
#include "transport/core/cc/rate_sampler.h"
#include "transport/core/loss/loss_detector.h"
#include "transport/core/loss/rtt_estimator.h"
#include "transport/core/recv/ack_tracker.h"
#include "transport/core/recv/fec_receiver.h"
#include "transport/core/recv/receive_stream.h"
#include "transport/core/send/data_writer.h"
#include "transport/core/send/fec_sender.h"
#include "transport/core/send/pacer.h"
#include "transport/core/send/path_mtu.h"
#include "transport/core/send/send_stream.h"
#include "transport/core/send/sent_packet_table.h"
#include "transport/core/send/tail_protector.h"
#include "transport/core/send/workload_meter.h"
#include "transport/wire/packet.h"

namespace longhaul {
namespace {


}  // namespace

class ConnectionImpl {
 public:
  ConnectionImpl(const TransportConfig& config, ConnectionIds ids, uint64_t seed, Time now)
      : cfg_(config),
        ids_(ids),
        rtt_(config.initial_rtt),
        cc_(MakeCongestionController(config, seed)),
        acks_(config.ack_every, config.max_ack_delay, config.max_ack_ranges),
        recv_(config.recv_window, config.max_inflight_messages),
        fec_tx_(config, config.MaxDatagramSize()),
        fec_rx_(config.MaxDatagramSize()),
        loss_(config),
        pacer_(config.pacing_burst),
        last_receive_time_(now),
        last_eliciting_sent_(now),
        pmtu_(config.MaxDatagramSize()),
        rate_(now) {
    absl::Status valid = config.Validate();
    CHECK(valid.ok()) << "invalid TransportConfig: " << valid;
    peer_max_stream_ = ids.peer_recv_window ? ids.peer_recv_window : config.recv_window;
    max_datagram_ = config.MaxDatagramSize();
    segment_ = config.segment;
    if (ids.sealed) {
      integrity_ = wire::Integrity::kSealed;
      seal_extra_ = wire::kSealExpansion;
    }
  }

  void OnPathMtu(ByteCount mtu) {
    // A limit the driver learned: the packet size that fits it (sealing excluded).
    const ByteCount fit = std::max<ByteCount>(64, TransportConfig::SegmentForMtu(mtu) - seal_extra_);
    pmtu_.OnExternalLimit(Time::Zero(), fit + PacketOverhead());
    ApplyPacketSize(pmtu_.current());
  }
  // Packet and frame headers of a full data packet.
  ByteCount PacketOverhead() const { return cfg_.MaxDatagramSize() - cfg_.segment; }
  // Segments follow the path MTU search (never above the configured segment). Data
  // already in flight is resent in pieces that fit; FEC parity sized for larger packets
  // is dropped.
  void ApplyPacketSize(ByteCount packet) {
    const ByteCount before = max_datagram_;
    const ByteCount overhead = PacketOverhead();
    segment_ = std::clamp<ByteCount>(packet > overhead ? packet - overhead : 0, 64, cfg_.segment);
    max_datagram_ = segment_ + overhead;
    if (max_datagram_ < before) {
      fec_tx_.Flush();
      fec_tx_.DiscardRepairs();
    }
  }
  ByteCount segment() const { return segment_; }

  // ---- application side ----

  absl::StatusOr<uint64_t> Send(SendBuffer b, uint64_t tag) {
    if (state_ != State::kOpen) {
      return absl::FailedPreconditionError("connection is closed; cannot send");
    }
    if (b.data == nullptr && b.size > 0) {
      return absl::InvalidArgumentError("Send: null data with non-zero size");
    }
    workload_.OnSend(b.size, cfg_.segment);
    return send_.Push(b.data, b.size, std::move(b.owner), tag, b.unordered);
  }

  bool PollEvent(Event* e) {
    if (events_.empty()) return false;
    *e = std::move(events_.front());
    events_.pop_front();
    return true;
  }

  void Close(CloseCode code, std::string reason) {
    if (state_ != State::kOpen) return;
    StartClose(code, std::move(reason), /*local_error=*/code != CloseCode::kNoError);
  }

  // ---- receive path ----

  void OnDatagram(Time now, std::span<const uint8_t> d, Ecn ecn) {
    if (state_ == State::kClosed) return;
    absl::StatusOr<wire::PacketView> v = integrity_ == wire::Integrity::kSealed
                                              ? wire::ParseOpenedPacket(d)
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

  // ---- timers ----

  Time NextTimeout() const {
    if (state_ == State::kClosed) return Time::Infinite();
    if (state_ == State::kClosing) return Time::Zero();
    Time t = std::min(acks_.ack_deadline(), loss_.loss_time());
    if (loss_.probes_pending() > 0) return Time::Zero();
    if (recv_.CreditUpdateDue() && acks_.has_packets()) return Time::Zero();
    if (fc_blocked_ && bytes_in_flight_ == 0) t = std::min(t, FcProbeTime());
    if (bytes_in_flight_ > 0) t = std::min(t, PtoTime());
    t = std::min(t, last_receive_time_ + cfg_.idle_timeout);
    t = std::min(t, last_eliciting_sent_ + cfg_.keepalive);
    t = std::min(t, fec_tx_.flush_deadline());
    if ((HasDataToSend() || fec_tx_.has_repair() ||
         (TailProtectionOn() && tail_.has_candidates())) &&
        WindowAllows()) {
      t = std::min(t, pacer_.ReleaseTime());
    }
    return t;
  }

  void OnTimeout(Time now) {
    if (state_ != State::kOpen) return;
    if (now >= last_receive_time_ + cfg_.idle_timeout) {
      StartClose(CloseCode::kIdleTimeout,
                 absl::StrCat("peer unreachable: no packet received for ",
                              cfg_.idle_timeout.ToString()),
                 /*local_error=*/true);
      return;
    }
    if (now >= loss_.loss_time()) DetectLosses(now);
    if (bytes_in_flight_ > 0 && now >= PtoTime()) OnPto(now);
    if (now >= last_eliciting_sent_ + cfg_.keepalive) ping_pending_ = true;
    if (fc_blocked_ && bytes_in_flight_ == 0 && now >= FcProbeTime()) {
      ping_pending_ = true;
      ++fc_probes_;
    }
    if (now >= fec_tx_.flush_deadline()) fec_tx_.Flush();
  }

  // ---- send path ----

  size_t PollTransmit(Time now, uint8_t* buf, size_t cap, TransmitInfo* info) {
    if (state_ == State::kClosed) return 0;
    CHECK_GE(cap, max_datagram_ + seal_extra_)
        << "PollTransmit buffer smaller than MaxDatagramSize()";
    if (state_ == State::kClosing) return BuildClose(now, buf, info);
    if (now >= last_eliciting_sent_ + cfg_.keepalive) ping_pending_ = true;

    const bool probe = loss_.probes_pending() > 0;
    // The second probe of a timeout is small once large packets may be vanishing.
    const bool small_probe = probe && loss_.probes_pending() == 1 && pmtu_.WantSmallProbe();
    const bool data_ready = HasDataToSend();
    const bool paced_ok = WindowAllows() && pacer_.CanSend(now);
    // A path MTU search probe goes before data (one at a time, paced like data).
    ByteCount search = !probe && paced_ok && data_ready ? pmtu_.ProbeSize(now) : 0;
    if (search + seal_extra_ > cap) search = 0;
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
    if (!send_data && !send_repair && !ack_due && !ping_pending_ && !small_probe && search == 0) {
      return 0;
    }

    const ByteCount padded_to = small_probe ? PathMtu::kBaseDatagram : search;
    wire::PacketWriter w(buf, (padded_to > 0 ? padded_to : max_datagram_) + seal_extra_, integrity_);
    w.set_elide_payload(cfg_.elide_payload);
    const PacketNumber pn = sent_.next_packet_number();
    wire::PacketHeader h;
    h.connection_id = ids_.peer;
    h.packet_number = pn;
    h.flow = static_cast<uint16_t>(next_flow_);
    w.WriteHeader(h);

    SentPacket rec;
    bool ack_eliciting = false;
    if (send_repair) {
      // The repair shard first (it is sized to fill a packet); an ACK only if room remains.
      ack_eliciting = fec_tx_.WriteRepair(&w);
      CHECK(ack_eliciting) << "FEC repair frame does not fit an empty packet";
      rec.fec_repair = true;
    }
    if ((acks_.ack_pending() || credit_due) && acks_.has_packets()) WriteAck(now, &w);

    if (send_data) {
      if (copy_units > 0) {
        ack_eliciting = WriteDataCopy(send_, copy_start, copy_units, &w, &rec);
        if (ack_eliciting) ++stats_.data_packets_sent;
        rec.tail_copied = true;  // a copy is not copied again
        ++stats_.tail_protect_packets;
      } else {
        const DataLimits limits{segment_, max_datagram_, peer_max_stream_,
                                cfg_.max_inflight_messages};
        ack_eliciting = WriteDataPacket(now, pn, limits, &send_, &fec_tx_, &w, &rec);
        if (ack_eliciting) CountDataPacket(rec);
      }
      if (probe) {
        loss_.OnProbeSent();
        silence_mark_ = now;
      }
    }
    if (!ack_eliciting && (ping_pending_ || probe || padded_to > 0)) {
      if (w.WritePing()) ack_eliciting = true;
    }
    if (padded_to > 0) {
      // A PING padded to the size under test (a path MTU probe or a small timeout probe).
      w.WritePadding(w.remaining());
      rec.mtu_probe = search > 0;
      if (small_probe) {
        loss_.OnProbeSent();
        silence_mark_ = now;
      }
    }
    if (ack_eliciting) ping_pending_ = false;
    if (w.size() == wire::kHeaderSize) return 0;  // nothing fitted (cannot happen)

    const size_t len = w.Finish();
    // What the packet counts as everywhere (in flight, pacing, congestion control): its
    // length plus the payload it stands for when elided.
    const size_t n = len + w.elided();
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
      if (probe || p.mtu_probe) p.is_app_limited = true;
      bytes_in_flight_ += n;
      last_eliciting_sent_ = now;
      cc_->OnPacketSent(now, n, bytes_in_flight_, p.is_app_limited);
      if (p.stream_units > 0 || probe || p.fec_repair || p.mtu_probe) {
        pacer_.OnPacketSent(now, n, cc_->PacingRate());
      }
      if (p.mtu_probe) pmtu_.OnProbeSent(now, pn, n);
      if (probe) pmtu_.OnTimeoutProbeSent(pn, n);
      if (p.fec_repair) {
        ++stats_.fec_repair_packets_sent;
        stats_.fec_overhead_bytes += n;
      }
      // A new original or repair data packet is the newest tail-protection candidate.
      if (p.stream_units > 0 && copy_units == 0 && TailProtectionOn()) {
        tail_.OnDataPacketSent(now, pn, rtt_.srtt(), &sent_);
      }
    } else {
      sent_.Finish(pn);
      sent_.MarkAcked(pn);  // never acknowledged, never lost: out of both walks
    }
    ++stats_.packets_sent;
    stats_.bytes_sent += n;
    if (info != nullptr) {
      info->flow = static_cast<uint16_t>(next_flow_);
      info->ecn = cfg_.ecn ? Ecn::kEct0 : Ecn::kNotEct;
      info->elided_bytes = static_cast<uint32_t>(w.elided());
    }
    if (++next_flow_ >= cfg_.flows) next_flow_ = 0;
    return len;
  }

  // ---- introspection ----

  const TransportConfig& config() const { return cfg_; }
  const ConnectionStats& stats() const { return stats_; }
  ConnectionDebugState debug_state() const {
    ConnectionDebugState d;
    d.srtt = rtt_.srtt();
    d.min_rtt = rtt_.min_rtt();
    d.rttvar = rtt_.rttvar();
    d.latest_rtt = rtt_.latest();
    d.pacing_rate = cc_->PacingRate();
    d.bytes_in_flight = bytes_in_flight_;
    d.congestion_window = cc_->CongestionWindow();
    const LossDetectorDebugState l = loss_.debug_state();
    d.reorder_packets = l.reorder_packets;
    d.reorder_rtt_fraction = l.reorder_rtt_fraction;
    d.pto_backoff = l.pto_backoff;
    CcDebugState c = cc_->DebugState();
    d.cc_mode = c.mode;
    d.cc_bandwidth_estimate = c.bandwidth_estimate;
    d.cc_pacing_gain = c.pacing_gain;
    d.fec_k = fec_tx_.k();
    d.fec_m = fec_tx_.m();
    d.fec_interleave = fec_tx_.interleave();
    fec_tx_.FillDebugState(&d);
    d.datagram_size = max_datagram_ + seal_extra_;
    const PathMtuDebugState pm = pmtu_.debug_state();
    d.pmtu_black_holes = pm.black_holes;
    d.pmtu_probes_sent = pm.probes_sent;
    return d;
  }
  bool closed() const { return state_ == State::kClosed; }
  uint64_t pending_send_messages() const { return send_.pending_messages(); }
  ByteCount pending_send_bytes() const { return send_.pending_bytes(); }
  uint64_t stream_units_submitted() const { return send_.stream_end(); }
  uint64_t stream_units_sent() const { return send_.next_unsent(); }
  ReceiveStream& recv() { return recv_; }
  void set_track_consumption(bool on) { track_consumption_ = on; }
  int64_t largest_acked_packet() const {
    return loss_.has_largest_acked() ? static_cast<int64_t>(loss_.largest_acked()) : -1;
  }

 private:
  enum class State { kOpen, kClosing, kClosed };

  // Applies the frames in [p, end). Returns false if the connection closed. For a packet
  // rebuilt by FEC (`recovered`), FEC frames are ignored (a shard holds none).
  bool ProcessFrames(Time now, const uint8_t* p, const uint8_t* end, bool recovered,
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
        case wire::FrameType::kPadding:
        case wire::FrameType::kHandshake:
          break;
      }
    }
    return true;
  }

  // Processes the packets the FEC decoder just rebuilt, as if they had arrived.
  bool ProcessRecovered(Time now) {
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

  bool HasDataToSend() const {
    if (state_ != State::kOpen) return false;
    if (send_.has_retransmissions()) return true;
    return send_.has_unsent() && send_.next_unsent() < peer_max_stream_ &&
           send_.NextUnsentMessageAllowed(cfg_.max_inflight_messages);
  }
  bool WindowAllows() const {
    ByteCount window = std::min<ByteCount>(cfg_.window, cc_->CongestionWindow());
    return bytes_in_flight_ + max_datagram_ <= window;
  }

  Time PtoTime() const { return loss_.PtoTime(last_eliciting_sent_, rtt_); }
  Time FcProbeTime() const {
    const Duration interval = std::min(cfg_.keepalive, rtt_.srtt() * (2 << std::min(fc_probes_, 3)));
    return last_eliciting_sent_ + interval;
  }

  void WriteAck(Time now, wire::PacketWriter* w) {
    wire::AckFrame ack;
    acks_.BuildAck(now, &ack, &ack_ranges_);
    ack.max_stream = recv_.GrantCredit();
    if (w->WriteAck(ack, ack_ranges_, cfg_.max_ack_ranges) == 0) return;
    wire::LossReportFrame lr;
    lr.packets_received = acks_.packets_received();
    lr.packets_missing = acks_.packets_missing();
    lr.loss_bursts = acks_.loss_bursts();
    w->WriteLossReport(lr);
    acks_.OnAckSent();
    ++stats_.acks_sent;
  }

  void CountDataPacket(const SentPacket& rec) {
    ++stats_.data_packets_sent;
    if (rec.retransmission) {
      ++stats_.packets_retransmitted;
      stats_.data_bytes_retransmitted += rec.stream_units;
    } else {
      stats_.data_bytes_sent += rec.stream_units;
    }
  }

  // Tail protection runs when enabled and FEC is not protecting (parity covers tails).
  bool TailProtectionOn() const { return cfg_.tail_protect && !fec_tx_.active(); }

  size_t BuildClose(Time now, uint8_t* buf, TransmitInfo* info) {
    wire::PacketWriter w(buf, max_datagram_ + seal_extra_, integrity_);
    wire::PacketHeader h;
    h.connection_id = ids_.peer;
    h.packet_number = sent_.next_packet_number();
    w.WriteHeader(h);
    w.WriteClose(static_cast<uint64_t>(close_code_), close_reason_);
    size_t n = w.Finish();
    SentPacket& p = sent_.Add();
    p.sent_time = now;
    p.bytes = static_cast<uint32_t>(n);
    sent_.Finish(h.packet_number);
    sent_.MarkAcked(h.packet_number);
    ++stats_.packets_sent;
    stats_.bytes_sent += n;
    if (info != nullptr) {
      info->flow = 0;
      info->ecn = cfg_.ecn ? Ecn::kEct0 : Ecn::kNotEct;
    }
    FinishClose();
    return n;
  }

  // Processes an ACK frame. Returns false if the connection was closed by it.
  bool OnAck(Time now, const wire::AckFrame& ack) {
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

  void DetectLosses(Time now) {
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
    });
    if (ev.packets_lost > 0) {
      ev.bytes_in_flight = bytes_in_flight_;
      cc_->OnLoss(ev, rtt_);
    }
  }

  void OnPto(Time now) {
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

  void OnLossReport(Time now, const wire::LossReportFrame& lr) {
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
    }
    fec_tx_.OnLossReport(now, lr, rtt_.srtt(), w);
  }

  void ReleaseOld(Time now) {
    // Keep lost packets a little while so a late ACK is recognised as spurious.
    const Time horizon = now - (rtt_.srtt() + loss_.LossDelay(rtt_));
    sent_.ReleaseFront([&](const SentPacket& p) {
      return p.acked || (p.lost && p.sent_time < horizon);
    });
  }

  void CompleteSends() {
    SendMessage m;
    while (send_.PopCompleted(&m)) {
      Event e;
      e.type = Event::Type::kSendComplete;
      e.message_id = m.id;
      e.tag = m.tag;
      e.size = m.size;
      events_.push_back(std::move(e));
      ++stats_.messages_sent;
    }
  }

  void DeliverReceived() {
    Event e;
    while (recv_.PopDelivered(&e)) {
      ++stats_.messages_received;
      if (track_consumption_) {
        e.credit_units = (e.owned ? e.size : 0) + Connection::kEventCreditCharge;
        recv_.AddUnconsumed(e.credit_units);
      }
      events_.push_back(std::move(e));
    }
  }

  void ProtocolViolation(std::string detail, CloseCode code = CloseCode::kProtocolViolation) {
    LOG(WARNING) << "connection " << ids_.local << ": protocol violation: " << detail;
    StartClose(code, std::move(detail), /*local_error=*/true);
  }

  void StartClose(CloseCode code, std::string reason, bool local_error) {
    if (state_ != State::kOpen) return;
    close_code_ = code;
    close_reason_ = std::move(reason);
    close_status_ = local_error ? absl::AbortedError(absl::StrCat("connection closed: ", close_reason_))
                                : absl::OkStatus();
    if (code == CloseCode::kIdleTimeout) {
      close_status_ = absl::DeadlineExceededError(close_reason_);
    }
    state_ = State::kClosing;
  }

  void OnPeerClose(uint64_t code, std::string reason) {
    if (state_ == State::kClosed) return;
    close_status_ = code == 0 ? absl::OkStatus()
                              : absl::AbortedError(absl::StrCat("peer closed the connection (code ",
                                                                code, "): ", reason));
    FinishClose();
  }

  void FinishClose() {
    state_ = State::kClosed;
    // Every message still pending learns that it will not complete.
    absl::Status cancelled = absl::CancelledError(
        close_status_.ok() ? "connection closed" : std::string(close_status_.message()));
    // Complete what was fully acknowledged, then cancel the rest, each with its tag and
    // size so the application can release its buffers.
    CompleteSends();
    SendMessage m;
    while (send_.PopPending(&m)) {
      Event e;
      e.type = Event::Type::kSendComplete;
      e.message_id = m.id;
      e.tag = m.tag;
      e.size = m.size;
      e.status = cancelled;
      events_.push_back(std::move(e));
    }
    // Posted receive buffers that will not be filled are handed back.
    Event r;
    while (recv_.PopCancelledPost(cancelled, &r)) events_.push_back(std::move(r));
    Event c;
    c.type = Event::Type::kClosed;
    c.status = close_status_;
    events_.push_back(std::move(c));
  }

  TransportConfig cfg_;
  ConnectionIds ids_;
  ByteCount max_datagram_ = 0;  // for the current segment
  // Sealed mode (ConnectionIds::sealed): the endpoint seals every packet, so the writer
  // leaves the tag's room (seal_extra_ more bytes than a checksum) and nothing is checksummed.
  wire::Integrity integrity_ = wire::Integrity::kCrc32c;
  ByteCount seal_extra_ = 0;
  ByteCount segment_ = 0;       // current segment: config.segment, or less for the path MTU

  SentPacketTable sent_;
  SendStream send_;
  RttEstimator rtt_;
  std::unique_ptr<CongestionController> cc_;
  AckTracker acks_;
  ReceiveStream recv_;
  FecSender fec_tx_;
  FecReceiver fec_rx_;
  std::vector<RecoveredPacket> recovered_scratch_;
  WorkloadMeter workload_;  // message sizes and rate, for the FEC policy
  std::deque<Event> events_;
  ConnectionStats stats_;
  std::vector<wire::AckRange> ack_ranges_;

  State state_ = State::kOpen;
  CloseCode close_code_ = CloseCode::kNoError;
  std::string close_reason_;
  absl::Status close_status_;

  // Loss detection.
  LossDetector loss_;
  ByteCount bytes_in_flight_ = 0;

  // Flow control and peer reports.
  uint64_t peer_max_stream_ = 0;
  uint64_t peer_ce_ = 0;
  uint64_t peer_ect0_ = 0;

  // Pacing and liveness.
  Pacer pacer_;
  Time last_receive_time_;
  Time last_eliciting_sent_;
  // Packets sent up to this time crossed a silence: a probe timeout fired after them, or
  // they were its probes. Their loss says the path was out, not that a queue overflowed,
  // so congestion control does not count it (they are resent all the same).
  Time silence_mark_ = Time::Zero();
  PathMtu pmtu_;  // sizes are packets before sealing
  bool ping_pending_ = false;
  bool fc_blocked_ = false;
  // Blocked by the peer's credit with nothing in flight: PINGs every 2 x srtt, doubling
  // to 16 x srtt (at most the keepalive), fetch its credit in case the ACK that raised it
  // was lost (about 100 bytes a second at 58 ms while the peer's application is stopped).
  int fc_probes_ = 0;
  bool track_consumption_ = false;  // see Connection::SetConsumptionTracking
  uint32_t next_flow_ = 0;
  TailProtector tail_;

  RateSampler rate_;  // delivery-rate samples for the controller
};

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
void Connection::ReturnBuffer(OwnedBuffer buffer) { impl_->recv().ReturnBuffer(std::move(buffer)); }
bool Connection::PollEvent(Event* event) { return impl_->PollEvent(event); }
void Connection::SetConsumptionTracking(bool on) { impl_->set_track_consumption(on); }
void Connection::OnConsumed(uint64_t credit_units) { impl_->recv().Consumed(credit_units); }
void Connection::Close(CloseCode code, std::string reason) { impl_->Close(code, std::move(reason)); }
void Connection::OnDatagram(Time now, std::span<const uint8_t> d, Ecn ecn) {
  impl_->OnDatagram(now, d, ecn);
}
void Connection::OnTimeout(Time now) { impl_->OnTimeout(now); }
void Connection::OnPathMtu(ByteCount mtu) { impl_->OnPathMtu(mtu); }
ByteCount Connection::segment() const { return impl_->segment(); }
size_t Connection::PollTransmit(Time now, uint8_t* buffer, size_t capacity, TransmitInfo* info) {
  return impl_->PollTransmit(now, buffer, capacity, info);
}
Time Connection::NextTimeout() const { return impl_->NextTimeout(); }
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
