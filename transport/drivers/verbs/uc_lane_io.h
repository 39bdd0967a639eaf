// The two ends of one UC lane on a device (docs/rdma.md section 7): UcReceiveLane (its
// protection domain, ring and queue pair; keeps the receive queue stocked and the ring's
// windows rebound as uc_lane.h's UcLaneReceiver decides) and UcSendLane (its domain, a
// registered arena of chunk buffers and a queue pair; writes each chunk where
// UcLaneSender places it). What the bytes mean is the caller's.
//
// Work request ids on a lane's send queue: kBindWr for binds, kReplayWr for the sender's
// test-mode replays, the arena slot for writes.
// Thread-compatible: one engine thread uses a lane.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/drivers/verbs/uc_lane.h"
#include "transport/drivers/verbs/uc_link_state.h"
#include "transport/drivers/verbs/uc_queue_pair.h"
#include "transport/drivers/verbs/verbs_device.h"

namespace longhaul::verbs {

inline constexpr uint64_t kBindWr = ~uint64_t{0};
inline constexpr uint64_t kReplayWr = ~uint64_t{0} - 1;

// What a receiving end tells its sender (in the set-up exchange).
struct UcAdvert {
  Gid gid{};
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint64_t ring = 0;
  UcRingGeometry geometry;
  std::vector<uint32_t> keys;  // lap 0, one per window
};

class UcReceiveLane {
 public:
  struct Stats {
    UcLaneReceiver::Stats lane;
    uint64_t receives_posted = 0;
    uint64_t bind_errors = 0;
  };

  // Its receives carry `recv_wr_id` (the driver's, to tell lanes apart on a shared CQ).
  static absl::StatusOr<std::unique_ptr<UcReceiveLane>> Create(const VerbsDevice& dev,
                                                               ibv_cq* send_cq, ibv_cq* recv_cq,
                                                               UcRingGeometry g,
                                                               uint64_t recv_wr_id = 0);
  // Connects to the sending end's queue pair and binds every window for lap 0.
  absl::Status Connect(const VerbsDevice& dev, const UcPeer& sender);
  // The sending end's writer was replaced: the queue pair is reset, its receives posted
  // again and connected to `sender`; the windows stay bound (they belong to the lane's
  // domain) and the ring's bookkeeping goes on.
  absl::Status Reconnect(const VerbsDevice& dev, const UcPeer& sender);
  // Valid after Connect.
  UcAdvert advert(const VerbsDevice& dev) const;
  uint32_t qpn() const { return qp_->qpn(); }
  uint32_t psn() const { return qp_->send_psn(); }

  // The sender writes chunks of several pieces of `bytes` each (the last piece may be
  // shorter; the completion's byte_len is the last piece's): see uc_link.h. 0 (the
  // default): every chunk is one write.
  void set_piece(uint32_t bytes) { piece_ = bytes; }
  // A receive completion of this lane's queue pair: the chunk to process now (valid until
  // the next Maintain), or nullopt for a completion that is not a chunk (counted).
  // `chunk` receives the sender's chunk number; `direct` (when not null) the descriptor of
  // a direct chunk (docs/rdma.md 7.15; a direct chunk is not a chunk without it).
  std::optional<std::span<const uint8_t>> OnReceive(
      const ibv_wc& wc, uint64_t* chunk, std::optional<UcDirectDescriptor>* direct = nullptr);
  // Its domain and queue pair (receive-side placement binds its windows there).
  ibv_pd* pd() const { return pd_->pd(); }
  UcQueuePair& qp() { return *qp_; }
  // Send queue room kept for placement binds (one advertising and one revoking bind for
  // each of UcLinkState::kMaxPlacements buffers).
  static constexpr uint32_t kPlacementBinds = 2 * UcLinkState::kMaxPlacements;
  // After a batch: repost the receives used, rebind the windows retired.
  absl::Status Maintain();
  // A completion of this lane's send queue (binds): errors counted.
  void OnSendCompletion(const ibv_wc& wc);
  // The lane has been quiet (no chunk for a few round trips): retire the oldest window;
  // Maintain rebinds it.
  void OnIdle() { rx_.OnIdle(); }
  // What the sending end may write (send it on the control channel when grant_version
  // changed).
  std::vector<uint64_t> Grants() const { return rx_.Grants(); }
  uint64_t grant_version() const { return rx_.grant_version(); }

  Stats stats() const;

 private:
  UcReceiveLane(UcRingGeometry g) : rx_(g) {}
  std::unique_ptr<LanePd> pd_;
  std::unique_ptr<UcRing> ring_;
  std::unique_ptr<UcQueuePair> qp_;
  UcLaneReceiver rx_;
  uint64_t recv_wr_id_ = 0;
  uint32_t piece_ = 0;
  uint32_t used_receives_ = 0;
  Stats stats_;
};

class UcSendLane {
 public:
  struct Stats {
    uint64_t chunks = 0;
    uint64_t bytes = 0;
    uint64_t send_errors = 0;
    uint64_t replays = 0;
    uint64_t grant_waits = 0;  // Posts refused for want of a grant
  };

  // `buffers` chunk buffers of `slot_bytes` each (and one for replays), registered in the
  // lane's domain.
  static absl::StatusOr<std::unique_ptr<UcSendLane>> Create(const VerbsDevice& dev,
                                                            ibv_cq* send_cq, ibv_cq* recv_cq,
                                                            uint32_t buffers, uint32_t slot_bytes);
  ~UcSendLane();
  UcSendLane(const UcSendLane&) = delete;
  UcSendLane& operator=(const UcSendLane&) = delete;
  absl::Status Connect(const VerbsDevice& dev, const UcAdvert& receiver);
  uint32_t qpn() const { return qp_->qpn(); }
  uint32_t psn() const { return qp_->send_psn(); }

  // A free chunk buffer to fill (slot_bytes long), or nullptr while all are in flight.
  uint8_t* Buffer();
  // Writes the first `len` bytes of the buffer Buffer() returned as the next chunk the
  // receiver's grants allow; returns its placement. Unavailable "waiting for a window
  // grant" while they allow none (the buffer stays the caller's to post later).
  absl::StatusOr<UcLaneSender::Write> Post(uint32_t len);
  // The number the next Post's chunk will have, or nullopt while no grant allows one.
  std::optional<uint64_t> NextChunk();
  // The receiving end's grants (UcLaneReceiver::Grants), as they arrive.
  void Grant(const std::vector<uint64_t>& laps);
  // A completion of this lane's send queue: frees the buffers up to it.
  void OnSendCompletion(const ibv_wc& wc);
  // Test mode of the sender (a late duplicate): writes `data` as `old`, an earlier
  // placement, with its old key and immediate, from a buffer of its own. One at a time:
  // FailedPrecondition while the last one is in flight.
  absl::Status Replay(const UcLaneSender::Write& old, std::span<const uint8_t> data);
  bool replay_in_flight() const { return replay_busy_; }

  Stats stats() const { return stats_; }

 private:
  UcSendLane() = default;
  std::unique_ptr<LanePd> pd_;
  std::unique_ptr<UcQueuePair> qp_;
  std::unique_ptr<uint8_t[]> arena_;
  ibv_mr* mr_ = nullptr;
  uint32_t buffers_ = 0;
  uint32_t slot_bytes_ = 0;
  uint64_t ring_ = 0;
  std::optional<UcLaneSender> tx_;
  std::deque<uint32_t> free_;
  std::deque<uint32_t> posted_;  // in order; a signalled completion frees up to its slot
  uint32_t unsignalled_ = 0;
  bool replay_busy_ = false;
  Stats stats_;
};

}  // namespace longhaul::verbs
