// FecSender: the sender's side of forward error correction.
//
// Data packets are dealt onto blocks by an interleaver (depth D); each packet carries a
// FEC_SOURCE tag and its shard (the 8-byte packet number followed by the frames after
// the tag) is folded into its block's parity as the packet is built. A block closes when
// it holds k shards, or early (shortened, never padded) when the sender runs out of data
// to send or the group has been open for fec_flush, so small messages never wait for a
// full block. The parity of closing blocks is queued and sent round-robin across blocks
// (repair r of every block before repair r + 1 of any), so a burst hits each block once.
//
// Mode auto: the receiver's loss reports (packets received / missing / loss bursts,
// cumulative) are turned into a loss rate and mean burst, and the FEC policy
// (fec/fec_policy.h) picks k, m and D, or off, for the recent message size, aiming for
// (1 - fec_tail) / 4 repair rounds per message within fec_max_overhead. Two windows: the
// last 1-8 RTTs (follows a rise at once) and a long one of at least 4 Mi packets (losses
// in bursts are rare events: a few RTTs may hold none, or one long burst; at most 4096
// RTTs are remembered). The policy gets the larger of the two loss rates, the long
// window's taken at the upper end of what its count of loss events allows (a clean
// window of n packets says only p < 3/n), the recent one's at the lower end (one burst
// in a few hundred packets is not a rise, several are), so FEC switches off on a clean
// link only after enough clean packets to show it; and the larger mean burst. Between the
// first and the 8th loss event (losses exist, their length is not known yet) a decision
// that needs FEC keeps at least the starting configuration (fec_k, fec_m,
// fec_interleave: the profile's); before the first, bursts are assumed as long as the
// starting interleave spreads. Changes apply at the next group boundary.
//
// Not thread-safe; owned by the Connection.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "transport/base/units.h"
#include "transport/core/config.h"
#include "transport/core/stats.h"
#include "transport/fec/block_encoder.h"
#include "transport/fec/fec_codec.h"
#include "transport/fec/fec_policy.h"
#include "transport/fec/interleaver.h"
#include "transport/fec/shard_pool.h"
#include "transport/wire/packet.h"

namespace longhaul {

// What the sender's workload looks like to the auto policy.
struct FecWorkload {
  uint64_t message_packets = 0;  // recent message size, packets
  // Packets a group of D blocks (D x (k + m)) may span: the window, and what one RTT
  // carries at the current rate.
  uint64_t window_packets = 0;
  // Messages the application submits per round trip: delivery is in order, so a message
  // waiting for a repair round holds back those submitted behind it, and the per-message
  // target is divided by how many that are.
  double messages_per_rtt = 0;
  // A message's ideal completion time at the current rate (half an RTT plus its
  // serialisation); zero if unknown. A repair round costs up to about an RTT against it.
  Duration message_time;
  // Packets one round trip carries at the current rate (zero if unknown): without FEC, a
  // loss earlier in a message than this is resent while the message is still being sent.
  double rtt_packets = 0;
};

class FecSender {
 public:
  FecSender(const TransportConfig& config, ByteCount max_shard);

  // FEC protects the next data packet.
  bool active() const { return enabled_; }
  uint32_t k() const { return enabled_ ? k_ : 0; }
  uint32_t m() const { return enabled_ ? m_ : 0; }
  uint32_t interleave() const { return enabled_ ? depth_ : 0; }
  // Packets a block's data shards and parity span on the wire, for loss detection.
  uint32_t block_span() const { return enabled_ ? (k_ + m_) * depth_ : 0; }

  // Assigns the next data packet to a block; returns its FEC_SOURCE tag.
  wire::FecSourceFrame NextSource(Time now);
  // Folds the packet's shard (packet number + frames after the tag) into its block.
  // `elided` is the payload the frames stand for but do not carry
  // (TransportConfig::elide_payload): the block's repairs stand for the longest shard.
  void AddShard(PacketNumber pn, std::span<const uint8_t> frames_after_tag, uint64_t elided = 0);
  // Closes the open group early (shortened blocks); their parity is queued.
  void Flush();
  // When the open group must be flushed: fec_flush after its last data packet (Infinite if
  // none is open). While data flows the blocks fill; a sender that stalls (window,
  // receive credit) closes them after fec_flush.
  Time flush_deadline() const { return group_open_ ? last_source_ + flush_after_ : Time::Infinite(); }

  bool has_repair() const { return !repairs_.empty(); }
  // Drops the queued repairs (the datagram size fell below their shards' size: the
  // blocks' losses are resent instead).
  void DiscardRepairs() { repairs_.clear(); }
  // Writes the next queued repair frame; false if none (or it does not fit).
  bool WriteRepair(wire::PacketWriter* w);

  // Mode auto: the receiver's cumulative loss report. `srtt` scales the estimate window;
  // `message_packets` is the recent message size in packets.
  void OnLossReport(Time now, const wire::LossReportFrame& report, Duration srtt,
                    const FecWorkload& workload);

  // Mode auto: whether the sender has a backlog (far more queued than it can send in a
  // round trip). A backlogged sender optimises goodput: parity always costs more than
  // the loss it repairs, so FEC pauses and selective repeat (with tail protection) does
  // the repairs; an unbacklogged one optimises message completion time with FEC.
  void SetBacklogged(bool backlogged);
  // Mode auto, before the first loss report: the application submits messages of about
  // `message_packets` packets, and a round trip carries `rtt_packets` at the pacing rate.
  // Messages shorter than a round trip start with the most parity fec_max_overhead
  // allows (see fec_sender.cc).
  void OnStartWorkload(uint64_t message_packets, uint64_t rtt_packets);

  // The receiver's loss since the start (any mode); mode auto: the policy's last
  // decision and what it decided on.
  void FillDebugState(ConnectionDebugState* d) const;

 private:
  // A closed block's parity and the bytes its repairs stand for beyond their length.
  struct ClosedParity {
    std::shared_ptr<fec::ParityShards> parity;
    uint64_t elided = 0;
  };
  struct Repair {
    std::shared_ptr<fec::ParityShards> parity;
    int index;
    uint64_t elided;
  };
  void QueueParity(std::vector<ClosedParity> blocks);
  ClosedParity Close(int block_in_group, int data_shards);
  void ApplyPending();

  const bool auto_mode_;
  const uint32_t max_k_;
  Duration flush_after_;
  bool enabled_;
  uint32_t k_, m_, depth_;
  // Latest auto-policy decision and backlog state; their combination becomes the pending
  // configuration, applied at a group boundary.
  bool decided_enabled_ = true;
  uint32_t decided_k_ = 0, decided_m_ = 0, decided_depth_ = 0;
  bool backlogged_ = false;
  void UpdatePending();
  // Pending configuration (applied at a group boundary).
  bool pending_ = false;
  bool pending_enabled_ = false;
  uint32_t pending_k_ = 0, pending_m_ = 0, pending_depth_ = 0;

  fec::FecCodec codec_;
  fec::ShardPool pool_;
  fec::Interleaver interleaver_;
  std::vector<std::unique_ptr<fec::BlockEncoder>> encoders_;  // one per block in a group
  fec::InterleaveSlot slot_;
  // Per block in the group: its longest shard counting elided payload.
  std::vector<uint64_t> virtual_max_;
  std::vector<ClosedParity> closing_;  // full blocks of the group
  bool group_open_ = false;
  Time group_opened_;
  Time last_source_;  // when the newest data packet joined the open group
  std::deque<Repair> repairs_;

  // Loss estimate (auto).
  struct Snapshot {
    Time time;
    uint64_t received = 0, missing = 0, bursts = 0;
  };
  std::deque<Snapshot> history_;       // one per quarter RTT, 16 RTTs
  std::deque<Snapshot> long_history_;  // one per 4 RTTs (the first: the start)
  Time last_decision_;
  double loss_rate_ = 0;
  double mean_burst_ = 1;
  double peer_loss_rate_ = 0;   // cumulative, from the newest report
  double peer_mean_burst_ = 0;
  double target_repairs_;
  double max_overhead_;
  bool decided_ = false;
  bool starting_ = false;  // the decision was held at the starting configuration
  fec::FecPolicyDecision decision_;
  const uint32_t start_k_, start_m_, start_depth_;
};

}  // namespace longhaul
