// ConnectionImpl: the state behind Connection (connection.h), private to the core.
// Its receive path (datagrams, frames, ACKs, losses) is in connection.cc, its send path
// (PollTransmit) in connection_send.cc; this header holds the state, the application
// side, the timers, closing and the small helpers both paths share. connection.cc says
// why it works the way it does.
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/parse.h"
#include "transport/core/cc/congestion_controller.h"
#include "transport/core/cc/rate_sampler.h"
#include "transport/core/connection.h"
#include "transport/core/loss/loss_detector.h"
#include "transport/core/loss/rtt_estimator.h"
#include "transport/core/recv/ack_tracker.h"
#include "transport/core/recv/fec_receiver.h"
#include "transport/core/recv/receive_stream.h"
#include "transport/core/send/fec_sender.h"
#include "transport/core/send/pacer.h"
#include "transport/core/send/path_mtu.h"
#include "transport/core/send/send_stream.h"
#include "transport/core/send/sent_packet_table.h"
#include "transport/core/send/tail_protector.h"
#include "transport/core/send/workload_meter.h"
#include "transport/wire/packet.h"

namespace longhaul {

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
  void SetDatagramLimit(ByteCount datagram) {
    // The driver's limit includes the seal; the path MTU state counts packets before it.
    const ByteCount packet = datagram > seal_extra_ ? datagram - seal_extra_ : 0;
    pmtu_.SetLimit(Time::Zero(), std::clamp<ByteCount>(packet, 64 + PacketOverhead(),
                                                       cfg_.MaxDatagramSize()));
    ApplyPacketSize(pmtu_.current());
  }
  void SetPayloadByReference(bool on) { by_reference_ = on; }
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
    if (b.placement_key >> 63 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Send: placement_key ", b.placement_key, " is outside [0, 2^63 - 1]"));
    }
    workload_.OnSend(b.size, cfg_.segment);
    fec_tx_.OnStartWorkload(workload_.message_packets(),
                            cc_->PacingRate().BytesIn(rtt_.srtt()) / max_datagram_);
    return send_.Push(b.data, b.size, std::move(b.owner), tag, b.unordered, b.region,
                      b.placement_key);
  }

  absl::Status SetDriverState(std::span<const uint8_t> state) {
    if (state.size() > wire::kMaxDriverState) {
      return absl::InvalidArgumentError(absl::StrCat("driver state of ", state.size(),
                                                     " bytes is longer than the limit of ",
                                                     wire::kMaxDriverState, " bytes"));
    }
    if (state_ != State::kOpen) {
      return absl::FailedPreconditionError("connection is closed; cannot send driver state");
    }
    driver_state_.assign(state.begin(), state.end());
    ++driver_state_seq_;
    driver_state_pending_ = true;
    driver_state_resend_ = false;
    return absl::OkStatus();
  }
  bool TakePeerDriverState(std::vector<uint8_t>* out) {
    if (!peer_driver_state_new_) return false;
    *out = peer_driver_state_;
    peer_driver_state_new_ = false;
    return true;
  }
  bool has_new_peer_driver_state() const { return peer_driver_state_new_; }

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

  void OnDatagram(Time now, std::span<const uint8_t> d, Ecn ecn);
  Connection::Placed OnPlacedDatagram(Time now, std::span<uint8_t> d, Ecn ecn,
                                      size_t payload_offset, const uint8_t* payload,
                                      size_t length);
  uint8_t* PlaceData(const wire::DataFrame& f) const {
    if (state_ != State::kOpen || cfg_.elide_payload) return nullptr;
    return recv_.Place(f);
  }
  // A checksummed datagram whose DATA payload has a place (PlaceData): copies it there
  // while checking the CRC32C; true when it matched (placed_at_ / placed_to_ set).
  bool CheckWhilePlacing(std::span<const uint8_t> d);
  // OnPlacedDatagram's check (Connection::OnPlacedDatagram); on a match placed_at_ /
  // placed_to_ are set and checked_ tells OnDatagram the checksum was verified; `lies`:
  // the payload had no place to go and stays where it lies for OnData.
  Connection::Placed CheckPlaced(std::span<uint8_t> d, size_t payload_offset,
                                 const uint8_t* payload, size_t length, bool* lies);
  bool checked_ = false;
  // During OnDatagram: the DATA payload opened (or checked) into place.
  const uint8_t* placed_at_ = nullptr;
  uint8_t* placed_to_ = nullptr;

  // ---- timers ----

  Time NextTimeout() const {
    Time timeout, wake;
    Deadlines(0, &timeout, &wake);
    return timeout;
  }
  // NextTimeout, except that a pacing release is taken `quantum` bytes late at the pacing
  // rate (at most half of pacing_burst, the catch-up the pacer grants a late sender): a
  // driver that sleeps until then finds that many bytes due at once and sends them as one
  // batch. Every other deadline is kept.
  Time NextWake(ByteCount quantum) const {
    Time timeout, wake;
    Deadlines(quantum, &timeout, &wake);
    return wake;
  }
  // Both at once (the endpoint refreshes both after every datagram).
  void Deadlines(ByteCount quantum, Time* timeout, Time* wake) const {
    if (state_ == State::kClosed) {
      *timeout = *wake = Time::Infinite();
      return;
    }
    if (state_ == State::kClosing || loss_.probes_pending() > 0 || DriverStateDue() ||
        (recv_.CreditUpdateDue() && acks_.has_packets())) {
      *timeout = *wake = Time::Zero();
      return;
    }
    Time t = std::min(acks_.ack_deadline(), loss_.loss_time());
    if (fc_blocked_ && bytes_in_flight_ == 0) t = std::min(t, FcProbeTime());
    if (bytes_in_flight_ > 0) t = std::min(t, PtoTime());
    t = std::min(t, last_receive_time_ + cfg_.idle_timeout);
    t = std::min(t, last_eliciting_sent_ + cfg_.keepalive);
    t = std::min(t, fec_tx_.flush_deadline());
    *timeout = *wake = t;
    if ((HasDataToSend() || fec_tx_.has_repair() ||
         (TailProtectionOn() && tail_.has_candidates())) &&
        WindowAllows()) {
      const Time release = pacer_.ReleaseTime();
      *timeout = std::min(t, release);
      *wake = std::min(t, release + SendQuantumTime(quantum));
    }
  }

  Duration SendQuantumTime(ByteCount quantum) const {
    if (quantum == 0) return Duration::Zero();
    const Duration cap = cfg_.pacing_burst / 2;
    const double bps = cc_->PacingRate().bps();
    if (bps <= 0) return cap;
    const double ns = static_cast<double>(quantum) * 8e9 / bps;
    return ns >= static_cast<double>(cap.ns()) ? cap
                                               : Duration::Nanoseconds(static_cast<int64_t>(ns));
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

  size_t PollTransmit(Time now, uint8_t* buf, size_t cap, TransmitInfo* info);

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
    d.cc_competed = c.competed;
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
  // A held message (ReceiveStream::Hold) may be delivered now.
  void DeliverWithdrawn() {
    if (state_ == State::kClosed) return;  // FinishClose ended every offer
    Event e;
    while (recv_.PopWithdrawn(absl::OkStatus(), &e)) events_.push_back(std::move(e));
  }

  void ReleaseDelivery(uint64_t id) {
    recv_.Release(id);
    DeliverReceived();
  }
  void set_track_consumption(bool on) { track_consumption_ = on; }
  int64_t largest_acked_packet() const {
    return loss_.has_largest_acked() ? static_cast<int64_t>(loss_.largest_acked()) : -1;
  }

 private:
  enum class State { kOpen, kClosing, kClosed };

  // Applies the frames in [p, end). Returns false if the connection closed. For a packet
  // rebuilt by FEC (`recovered`), FEC frames are ignored (a shard holds none).
  bool ProcessFrames(Time now, const uint8_t* p, const uint8_t* end, bool recovered,
                     bool* ack_eliciting, wire::FecSourceFrame* tag, const uint8_t** tag_end);

  // Processes the packets the FEC decoder just rebuilt, as if they had arrived.
  bool ProcessRecovered(Time now);

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

  // The pending driver state goes out now: the connection is open and the frame fits an
  // empty packet of the current size (a longer state waits for a larger size).
  bool DriverStateDue() const {
    return driver_state_pending_ && state_ == State::kOpen &&
           wire::DriverStateFrameSize(driver_state_seq_, driver_state_.size()) <=
               max_datagram_ - wire::kPacketOverhead;
  }
  // Writes the pending driver state into packet `pn`; false (still pending) if it does
  // not fit behind what the packet holds.
  bool WriteDriverState(PacketNumber pn, wire::PacketWriter* w, SentPacket* rec) {
    if (!w->WriteDriverState(driver_state_seq_, driver_state_)) return false;
    rec->driver_state = true;
    driver_state_pending_ = false;
    driver_state_pn_ = pn;
    ++stats_.driver_state_sent;
    if (driver_state_resend_) ++stats_.driver_state_resent;
    driver_state_resend_ = false;
    return true;
  }
  // The packet `pn` that carried a driver state was declared lost.
  void OnDriverStateLost(PacketNumber pn) {
    // Only the newest state's latest copy is worth sending again: an older state was
    // replaced, and an earlier copy of this one has a later copy still on its way.
    if (pn != driver_state_pn_ || driver_state_pending_) return;
    driver_state_pending_ = true;
    driver_state_resend_ = true;
  }
  void OnPeerDriverState(const wire::DriverStateFrame& f) {
    ++stats_.driver_state_received;
    if (f.sequence <= peer_driver_state_seq_) return;  // an older state, or a copy
    peer_driver_state_seq_ = f.sequence;
    peer_driver_state_.assign(f.bytes.begin(), f.bytes.end());
    peer_driver_state_new_ = true;
  }

  // Tail protection runs when enabled and FEC is not protecting (parity covers tails).
  bool TailProtectionOn() const { return cfg_.tail_protect && !fec_tx_.active(); }

  // What one PollTransmit datagram carries (PlanTransmit decides it).
  struct TransmitPlan {
    bool probe = false;        // a timeout probe is due
    bool small_probe = false;  // the probe is a small one (a PING padded to kBaseDatagram)
    ByteCount search = 0;      // a path MTU search probe of this size (0: none)
    bool driver_state = false;  // the pending driver state
    bool send_data = false;    // data: new, retransmitted, or a tail-protection copy
    bool send_repair = false;  // an FEC repair shard
    uint64_t copy_start = 0;   // the tail-protection copy (copy_units 0: none)
    uint64_t copy_units = 0;
    bool credit_due = false;   // a flow-control credit update is due
    // The size the datagram is padded to (0: not padded).
    ByteCount padded_to() const { return small_probe ? PathMtu::kBaseDatagram : search; }
  };
  // The send path's steps (connection_send.cc). PlanTransmit returns false when nothing
  // is to be sent now; it also books the flow-control and app-limited state and flushes an
  // idle FEC group. WriteTransmitFrames returns whether the packet is ack-eliciting.
  bool PlanTransmit(Time now, size_t cap, TransmitPlan* plan);
  bool WriteTransmitFrames(Time now, PacketNumber pn, const TransmitPlan& plan,
                           wire::PacketWriter* w, SentPacket* rec);
  void RecordSentPacket(Time now, PacketNumber pn, const TransmitPlan& plan,
                        const SentPacket& rec, size_t n, bool ack_eliciting);
  void FillTransmitInfo(const wire::PacketWriter& w, TransmitInfo* info) const;

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
  bool OnAck(Time now, const wire::AckFrame& ack);

  void DetectLosses(Time now);

  void OnPto(Time now);

  void OnLossReport(Time now, const wire::LossReportFrame& lr);

  void ReleaseOld(Time now) {
    // Keep lost packets a little while so a late ACK is recognised as spurious.
    const Time horizon = now - (rtt_.srtt() + loss_.LossDelay(rtt_));
    sent_.ReleaseFront([&](const SentPacket& p) {
      return p.acked || (p.lost && p.sent_time < horizon);
    });
  }

  // A kSendComplete event for `m` (its tag and size, so the application can release its
  // buffers); `status` says why when it did not complete.
  void PushSendComplete(const SendMessage& m, absl::Status status = absl::OkStatus()) {
    Event e;
    e.type = Event::Type::kSendComplete;
    e.message_id = m.id;
    e.tag = m.tag;
    e.size = m.size;
    e.status = std::move(status);
    events_.push_back(std::move(e));
  }

  void CompleteSends() {
    SendMessage m;
    while (send_.PopCompleted(&m)) {
      PushSendComplete(m);
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
    // The reason comes from the network: made printable before any log or status shows it.
    close_status_ = code == 0 ? absl::OkStatus()
                              : absl::AbortedError(absl::StrCat("peer closed the connection (code ",
                                                                code, "): ", PrintableText(reason)));
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
    while (send_.PopPending(&m)) PushSendComplete(m, cancelled);
    // Posted receive buffers that will not be filled are handed back.
    Event r;
    while (recv_.PopCancelledPost(cancelled, &r)) events_.push_back(std::move(r));
    while (recv_.PopWithdrawn(cancelled, &r)) events_.push_back(std::move(r));
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

  // Driver state (Connection::SetDriverState): the newest local state and its sequence
  // (0 before the first), whether it waits to be sent (again, after a loss: resend), and
  // the packet that carried it last; the peer's newest state, its sequence, and whether
  // the driver has yet to take it.
  std::vector<uint8_t> driver_state_;
  uint64_t driver_state_seq_ = 0;
  bool by_reference_ = false;  // SetPayloadByReference
  bool driver_state_pending_ = false;
  bool driver_state_resend_ = false;
  PacketNumber driver_state_pn_ = 0;
  std::vector<uint8_t> peer_driver_state_;
  uint64_t peer_driver_state_seq_ = 0;
  bool peer_driver_state_new_ = false;
};

}  // namespace longhaul
