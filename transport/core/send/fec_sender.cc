#include "transport/core/send/fec_sender.h"

#include <algorithm>
#include <cmath>

#include "glog/logging.h"

namespace longhaul {
namespace {

void PutPacketNumber(uint8_t* p, PacketNumber pn) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(pn >> (56 - 8 * i));
}

// Loss estimates need this many packets (and at least two RTTs) before the auto policy
// trusts them; the window then slides over the most recent reports.
constexpr uint64_t kMinEstimatePackets = 20000;
constexpr size_t kMaxSnapshots = 64;
// The long window: at least this many packets (a clean window of n packets bounds the
// loss rate only by ~3/n), from snapshots 4 RTTs apart, at most 1024 of them.
constexpr uint64_t kLongWindowPackets = uint64_t{1} << 22;
constexpr size_t kMaxLongSnapshots = 1024;
// What a repair round costs a message, in RTTs, at most: a loss is seen when the
// packets after it are acknowledged (a round trip after it was sent) and its resend
// arrives half a round trip later, against a message that ends half a round trip after
// its last packet is sent; the last packets' losses are covered by the tail's copies
// (measured without FEC: the slowest of 1000 messages 0.5-0.8 RTT late at loss 1e-3,
// 1.2-1.5 RTT at 1e-2 where resends are lost too, which the policy counts as rounds).
// The same span, in packets at the pacing rate, is what a message exposes: an earlier
// loss is repaired while the message is still being sent.
constexpr double kRepairRtts = 1.0;
// Loss events the long window needs before their mean length is trusted.
constexpr uint64_t kMinShapeBursts = 8;

}  // namespace

FecSender::FecSender(const TransportConfig& config, ByteCount max_shard)
    : auto_mode_(config.fec == FecMode::kAuto),
      max_k_(config.fec_k),
      flush_after_(config.fec_flush),
      enabled_(config.fec != FecMode::kOff),
      k_(config.fec_k),
      m_(config.fec_m),
      depth_(config.fec_interleave),
      pool_(fec::RoundUpToShardAlignment(max_shard)),
      interleaver_(config.fec_k, config.fec_interleave),
      target_repairs_((1.0 - config.fec_tail) / 4),
      max_overhead_(config.fec_max_overhead),
      start_k_(config.fec_k),
      start_m_(config.fec_m),
      start_depth_(config.fec_interleave) {
  decided_enabled_ = enabled_;
  decided_k_ = k_;
  decided_m_ = m_;
  decided_depth_ = depth_;
}

void FecSender::OnStartWorkload(uint64_t message_packets, uint64_t rtt_packets) {
  // Until the first decision nothing is known of the link, and what the first round trip
  // carries is sent before any loss report can say. Where that round trip holds whole
  // messages (they are shorter than a round trip of packets at the pacing rate), they go
  // out with the most parity fec_max_overhead allows on the configured k and interleave
  // for messages of their size (a message closes its blocks at its end: D shortened
  // blocks pay m each), never less than the configured m. On a fast, long link that round
  // trip holds tens of messages, and one that loses a block holds back every message
  // behind it (measured: 16 MiB messages at 100 Gbit/s over 58 ms, loss 1e-2 in bursts
  // of 8: p99.9 2.8 x the ideal from the configured 32, 4, 8; 1.01 x from 32, 7, 8). A
  // message longer than a round trip is mostly sent after the first decision, which
  // chooses for it; the start's parity would only lengthen it (64 MiB at 1 Gbit/s over
  // 58 ms: p99.9 1.13 -> 1.15 x). A backlogged sender pauses FEC all the same.
  if (!auto_mode_ || decided_ || message_packets == 0) return;
  uint32_t m = start_m_;
  if (start_m_ > 0 && message_packets < rtt_packets) {
    const uint64_t group = uint64_t{start_k_} * start_depth_;
    const uint64_t blocks = message_packets / group * start_depth_ +
                            std::min<uint64_t>(start_depth_, message_packets % group);
    const double per_block = max_overhead_ * static_cast<double>(message_packets) / blocks;
    m = std::max(start_m_, static_cast<uint32_t>(std::min(
                               {max_overhead_ * start_k_, per_block, 255.0 - start_k_})));
  }
  if (m == decided_m_) return;
  decided_m_ = m;
  UpdatePending();
}

void FecSender::SetBacklogged(bool backlogged) {
  if (!auto_mode_ || backlogged == backlogged_) return;
  backlogged_ = backlogged;
  UpdatePending();
}

void FecSender::UpdatePending() {
  pending_ = true;
  pending_enabled_ = decided_enabled_ && !backlogged_;
  pending_k_ = decided_k_;
  pending_m_ = decided_m_;
  pending_depth_ = decided_depth_;
  if (!group_open_) ApplyPending();
}

void FecSender::ApplyPending() {
  if (!pending_) return;
  pending_ = false;
  enabled_ = pending_enabled_;
  if (!enabled_) return;
  k_ = pending_k_;
  m_ = pending_m_;
  depth_ = pending_depth_;
  absl::Status s = interleaver_.Reconfigure(k_, depth_);
  CHECK(s.ok()) << s;  // called only between groups
}

wire::FecSourceFrame FecSender::NextSource(Time now) {
  CHECK(enabled_);
  slot_ = interleaver_.Next();
  if (!group_open_) {
    group_open_ = true;
    group_opened_ = now;
  }
  last_source_ = now;
  if (encoders_.size() < depth_) {
    while (encoders_.size() < depth_) {
      encoders_.push_back(std::make_unique<fec::BlockEncoder>(&codec_, &pool_));
    }
    virtual_max_.resize(depth_, 0);
  }
  fec::BlockEncoder& enc = *encoders_[slot_.block_in_group];
  if (slot_.opens_block) {
    absl::Status s = enc.Begin(slot_.block_id, static_cast<int>(k_), static_cast<int>(m_));
    CHECK(s.ok()) << s;
    virtual_max_[slot_.block_in_group] = 0;
  }
  wire::FecSourceFrame tag;
  tag.block_id = slot_.block_id;
  tag.index = static_cast<uint8_t>(slot_.shard_index);
  tag.k = static_cast<uint8_t>(k_);
  tag.m = static_cast<uint8_t>(m_);
  return tag;
}

FecSender::ClosedParity FecSender::Close(int block_in_group, int data_shards) {
  fec::BlockEncoder& enc = *encoders_[block_in_group];
  absl::StatusOr<fec::ParityShards> parity = enc.Finish(data_shards);
  CHECK(parity.ok()) << parity.status();
  ClosedParity c;
  c.parity = std::make_shared<fec::ParityShards>(std::move(*parity));
  const uint64_t carried = c.parity->data_length();
  c.elided = virtual_max_[block_in_group] > carried ? virtual_max_[block_in_group] - carried : 0;
  return c;
}

void FecSender::AddShard(PacketNumber pn, std::span<const uint8_t> frames_after_tag,
                         uint64_t elided) {
  uint8_t pn_bytes[8];
  PutPacketNumber(pn_bytes, pn);
  const std::span<const uint8_t> parts[2] = {std::span<const uint8_t>(pn_bytes, 8),
                                             frames_after_tag};
  fec::BlockEncoder& enc = *encoders_[slot_.block_in_group];
  absl::Status s = enc.AddDataShardParts(static_cast<int>(slot_.shard_index), parts);
  CHECK(s.ok()) << s;
  uint64_t& vmax = virtual_max_[slot_.block_in_group];
  vmax = std::max<uint64_t>(vmax, 8 + frames_after_tag.size() + elided);
  if (slot_.closes_block) {
    closing_.push_back(Close(static_cast<int>(slot_.block_in_group), static_cast<int>(k_)));
  }
  if (slot_.closes_group) {
    group_open_ = false;
    QueueParity(std::move(closing_));
    closing_.clear();
    ApplyPending();
  }
}

void FecSender::Flush() {
  if (!group_open_) return;
  for (const fec::ClosedBlock& c : interleaver_.Flush()) {
    closing_.push_back(
        Close(static_cast<int>(c.block_in_group), static_cast<int>(c.data_shards)));
  }
  group_open_ = false;
  QueueParity(std::move(closing_));
  closing_.clear();
  ApplyPending();
}

void FecSender::QueueParity(std::vector<ClosedParity> blocks) {
  // Round-robin: repair r of every block before repair r + 1 of any.
  int max_m = 0;
  for (const auto& b : blocks) max_m = std::max(max_m, b.parity->m());
  for (int r = 0; r < max_m; ++r) {
    for (const auto& b : blocks) {
      if (r < b.parity->m()) repairs_.push_back(Repair{b.parity, r, b.elided});
    }
  }
}

bool FecSender::WriteRepair(wire::PacketWriter* w) {
  if (repairs_.empty()) return false;
  const Repair& r = repairs_.front();
  wire::FecRepairFrame f;
  f.block_id = r.parity->block_id();
  f.index = static_cast<uint8_t>(r.index);
  f.k = static_cast<uint8_t>(r.parity->k());
  f.m = static_cast<uint8_t>(r.parity->m());
  f.length = r.parity->data_length();
  f.payload = r.parity->shard(r.index);
  if (wire::FecRepairFrameHeaderSize(f) + f.length + r.elided > w->remaining()) return false;
  CHECK(w->WriteFecRepair(f) != nullptr);
  CHECK(w->AddElided(r.elided));
  repairs_.pop_front();
  return true;
}

void FecSender::FillDebugState(ConnectionDebugState* d) const {
  d->peer_loss_rate = peer_loss_rate_;
  d->peer_mean_burst = peer_mean_burst_;
  if (!auto_mode_) return;
  if (!decided_) {
    d->fec_reason = "start";  // before the first decision: see the constructor
    return;
  }
  d->fec_reason = starting_ ? "starting" : fec::FecPolicyReasonName(decision_.reason);
  d->fec_loss_estimate = loss_rate_;
  d->fec_burst_estimate = mean_burst_;
  d->fec_expected_repairs = decision_.repairs_per_message;
}

void FecSender::OnLossReport(Time now, const wire::LossReportFrame& report, Duration srtt,
                             const FecWorkload& workload) {
  const uint64_t rx = report.packets_received, miss = report.packets_missing;
  if (rx + miss > 0) peer_loss_rate_ = static_cast<double>(miss) / static_cast<double>(rx + miss);
  peer_mean_burst_ =
      report.loss_bursts > 0 ? static_cast<double>(miss) / report.loss_bursts : 0;
  if (!auto_mode_) return;
  const Snapshot newest{now, report.packets_received, report.packets_missing, report.loss_bursts};
  if (!history_.empty() &&
      newest.received + newest.missing <= history_.back().received + history_.back().missing) {
    return;  // an older or repeated report
  }
  // Keep one snapshot per quarter RTT (64 of them: 16 RTTs of history), and one per 4 RTTs
  // (64: 256 RTTs) for the long window. The counts are cumulative from the start, so the
  // long window starts at zero until its history is full.
  if (history_.empty() || now - history_.back().time >= srtt / 4) {
    history_.push_back(newest);
    while (history_.size() > kMaxSnapshots) history_.pop_front();
  }
  if (long_history_.empty()) long_history_.push_back(Snapshot{});  // the start
  if (now - long_history_.back().time >= srtt * 4) {
    long_history_.push_back(newest);
    // Forget the oldest only while what remains still holds kLongWindowPackets.
    auto packets_since = [&](const Snapshot& s) {
      return (newest.received + newest.missing) - (s.received + s.missing);
    };
    while (long_history_.size() > kMaxLongSnapshots ||
           (long_history_.size() > 2 && packets_since(long_history_[1]) >= kLongWindowPackets)) {
      long_history_.pop_front();
    }
  }
  // Decide at most once per RTT.
  if (now < last_decision_ + srtt) return;
  // The recent window: from the newest report back to the oldest snapshot within 8 RTTs,
  // shrunk to the most recent 4 RTTs when they already hold enough packets.
  const Snapshot* base = nullptr;
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    if (newest.time - it->time > srtt * 8) break;
    base = &*it;
    uint64_t n = (newest.received + newest.missing) - (it->received + it->missing);
    if (newest.time - it->time >= srtt * 4 && n >= kMinEstimatePackets) break;
  }
  if (base == nullptr || base->time == newest.time) return;
  const uint64_t total = (newest.received + newest.missing) - (base->received + base->missing);
  if (total < kMinEstimatePackets && newest.time - base->time < srtt) return;
  const uint64_t missing = newest.missing >= base->missing ? newest.missing - base->missing : 0;
  const uint64_t bursts = newest.bursts >= base->bursts ? newest.bursts - base->bursts : 0;
  // The recent window at the lower end of what its count of loss events allows: one
  // burst in a few hundred packets is not a rise, several are.
  const double recent_burst =
      bursts > 0 ? std::max(1.0, static_cast<double>(missing) / bursts) : 1.0;
  const double recent_events =
      std::max(0.0, static_cast<double>(bursts) - 2 * std::sqrt(static_cast<double>(bursts)));
  const double recent_loss =
      total > 0 ? std::min(1.0, recent_events * recent_burst / static_cast<double>(total)) : 0;
  // The long window: from the oldest long snapshot (the start, at first).
  const Snapshot origin = long_history_.front();
  const uint64_t long_total =
      (newest.received + newest.missing) - (origin.received + origin.missing);
  const uint64_t long_missing = newest.missing - std::min(newest.missing, origin.missing);
  const uint64_t long_bursts = newest.bursts - std::min(newest.bursts, origin.bursts);
  // Upper end of the rate its count allows: (bursts + 3) loss events of the mean length.
  const double long_burst =
      long_bursts > 0 ? std::max(1.0, static_cast<double>(long_missing) / long_bursts) : 1.0;
  const double long_loss =
      long_total > 0 ? std::min(1.0, (static_cast<double>(long_bursts) + 3) * long_burst /
                                          static_cast<double>(long_total))
                     : 0;
  loss_rate_ = std::max(recent_loss, long_loss);
  mean_burst_ = bursts >= kMinShapeBursts / 2 ? std::max(recent_burst, long_burst) : long_burst;
  // No loss seen yet: nothing says how long losses run; assume bursts as long as the
  // starting configuration's interleave spreads (one shard per block each).
  if (long_bursts == 0) mean_burst_ = std::max<double>(mean_burst_, start_depth_);
  last_decision_ = now;

  fec::FecPolicyInput in;
  in.loss_rate = std::min(loss_rate_, 0.5);
  in.mean_burst = mean_burst_;
  in.packets_per_message = workload.message_packets;
  in.window_packets = workload.window_packets;
  in.max_k = max_k_;
  in.max_overhead = max_overhead_;
  in.loss_is_bound = long_bursts < kMinShapeBursts;
  // A repair round (about 1.5 RTTs: detection, resend, delivery) delays the messages
  // submitted behind the one it repairs as well.
  in.messages_behind = 1.5 * std::max(0.0, workload.messages_per_rtt);
  in.target_repairs_per_message = target_repairs_ / (1 + in.messages_behind);
  if (workload.message_time > Duration::Zero()) {
    in.repair_cost = kRepairRtts * srtt.seconds() / workload.message_time.seconds();
    in.exposed_packets = kRepairRtts * workload.rtt_packets;
    in.serialisation_share =
        std::max(0.0, 1.0 - srtt.seconds() / 2 / workload.message_time.seconds());
  }
  fec::FecPolicyDecision d = fec::ChooseFecParameters(in);
  decided_ = true;
  decision_ = d;
  // Once losses show but too few to say how long they run, where FEC is needed keep at
  // least the starting configuration (the profile's fec_k, fec_m, fec_interleave). With
  // none seen, the policy's choice for the bound 3/n stands (a little parity).
  starting_ = false;
  if (d.enabled && long_bursts > 0 && long_bursts < kMinShapeBursts && start_m_ > 0 &&
      static_cast<double>(d.m) / d.k < static_cast<double>(start_m_) / start_k_) {
    d.k = start_k_;
    d.m = start_m_;
    d.interleave = start_depth_;
    starting_ = true;
  }
  if (VLOG_IS_ON(1) &&
      (d.enabled != decided_enabled_ ||
       (d.enabled && (d.k != decided_k_ || d.m != decided_m_ || d.interleave != decided_depth_)))) {
    // The policy's choice changed: say what it saw and why it chose what it did.
    if (d.enabled) {
      VLOG(1) << "FEC auto: loss " << loss_rate_ << ", mean burst " << mean_burst_ << " over "
              << total << " packets: k=" << d.k << " m=" << d.m << " D=" << d.interleave << " ("
              << fec::FecPolicyReasonName(d.reason) << ")";
    } else {
      VLOG(1) << "FEC auto: loss " << loss_rate_ << ", mean burst " << mean_burst_ << " over "
              << total << " packets: off (" << fec::FecPolicyReasonName(d.reason) << ")";
    }
  }
  decided_enabled_ = d.enabled;
  if (d.enabled) {
    decided_k_ = d.k;
    decided_m_ = d.m;
    decided_depth_ = d.interleave;
  }
  UpdatePending();
}

}  // namespace longhaul
