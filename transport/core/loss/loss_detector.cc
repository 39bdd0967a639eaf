#include "transport/core/loss/loss_detector.h"

#include <algorithm>

namespace longhaul {

LossDetector::LossDetector(const TransportConfig& config)
    : base_reorder_fraction_(config.reorder_rtt_fraction),
      min_pto_(config.min_pto),
      max_pto_(config.max_pto),
      max_ack_delay_(config.max_ack_delay),
      fec_flush_(config.fec_flush),
      reorder_packets_(config.reorder_packets),
      reorder_fraction_(config.reorder_rtt_fraction) {}

void LossDetector::OnAckReceived(PacketNumber largest, bool newly_acked) {
  if (!has_largest_acked_ || largest > largest_acked_) {
    largest_acked_ = largest;
    has_largest_acked_ = true;
  }
  if (newly_acked) pto_backoff_ = 0;
}

void LossDetector::OnSpuriousLoss() {
  reorder_packets_ = std::min(kMaxReorderPackets, reorder_packets_ * 2);
  reorder_fraction_ = std::min(1.0, reorder_fraction_ + base_reorder_fraction_);
}

Duration LossDetector::LossDelay(const RttEstimator& rtt) const {
  // The larger of srtt and the latest sample: a rising RTT must not make packets that
  // are merely delayed look lost.
  Duration r = std::max(rtt.srtt(), rtt.latest());
  return std::max(r.Scaled(1.0 + reorder_fraction_), kGranularity);
}

void LossDetector::DetectLosses(Time now, const RttEstimator& rtt, const FecSpan& fec,
                                SentPacketTable* sent,
                                absl::FunctionRef<void(PacketNumber, SentPacket&)> on_lost) {
  loss_time_ = Time::Infinite();
  if (!has_largest_acked_) return;
  const Duration delay = LossDelay(rtt);
  // FEC-protected packets get the time their block needs to be decoded: the block's
  // span on the wire plus the flush deadline, in packets and in time.
  const Duration fec_delay = delay + fec.wire_time + fec_flush_;
  PacketNumber x = sent->FindOutstanding(sent->base());
  while (x < largest_acked_) {
    SentPacket& p = sent->Get(x);
    const uint64_t threshold = reorder_packets_ + (p.fec_member ? fec.packets : 0);
    const Duration d = p.fec_member ? fec_delay : delay;
    if (largest_acked_ - x >= threshold || p.sent_time + d <= now) {
      p.lost = true;
      sent->Finish(x);
      on_lost(x, p);
      x = sent->FindOutstanding(x + 1);
    } else {
      loss_time_ = p.sent_time + d;
      break;
    }
  }
}

Duration LossDetector::PtoPeriod(const RttEstimator& rtt) const {
  Duration base = rtt.srtt() + std::max(rtt.rttvar() * 4, kGranularity) + max_ack_delay_;
  base = std::max(base, min_pto_);
  return std::min(base, max_pto_);
}

void LossDetector::OnPtoFired() {
  ++pto_backoff_;
  probes_pending_ = kProbesPerTimeout;
}

LossDetectorDebugState LossDetector::debug_state() const {
  LossDetectorDebugState s;
  s.reorder_packets = reorder_packets_;
  s.reorder_rtt_fraction = reorder_fraction_;
  s.pto_backoff = pto_backoff_;
  s.probes_pending = probes_pending_;
  s.has_largest_acked = has_largest_acked_;
  s.largest_acked = largest_acked_;
  s.loss_time = loss_time_;
  return s;
}

}  // namespace longhaul
