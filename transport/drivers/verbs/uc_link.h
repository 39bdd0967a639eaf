// One connection's UC datapath (docs/rdma.md section 7): the lane this side receives on
// (UcReceiveLane: its own protection domain, ring and queue pair) and the UC queue pair
// it writes the peer's lane through, with the set-up and grant state both sides exchange
// as the connection's driver state (Connection::SetDriverState, carried reliably inside
// the protected connection; latest wins).
//
// Set-up, from either side's connection_up: each side creates its two queue pairs and
// sends its state (its GID, active MTU, both QPNs and PSNs). On the peer's state it
// connects both queue pairs (its receive lane to the peer's sending QP, its sending QP to
// the peer's lane), binds its ring's windows for lap 0 and sends its state again, now with
// the ring (address, geometry, lap-0 keys) and the grants. On the peer's ring it may
// write: ready(). About one round trip after the handshake; until then, and for good if
// the peer never offers a lane (a UD-only peer), the connection stays on UD.
//
// A chunk is written as single-packet RDMA WRITEs of the piece size (the smaller active
// MTU of the two sides), the last one WITH IMMEDIATE (which carries the lap, the piece
// count and the slot): every packet is a whole UC message, so a lost packet can leave
// no message half done at the responder (rxe never recovers from one: 7.11), and a
// chunk with a lost or stale piece fails its AEAD tag or CRC32C and counts as lost.
//
// Thread-compatible: the driver thread owns it.
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
#include "transport/base/clock.h"
#include "transport/drivers/verbs/uc_lane.h"
#include "transport/drivers/verbs/uc_lane_io.h"
#include "transport/drivers/verbs/uc_link_state.h"
#include "transport/drivers/verbs/uc_queue_pair.h"
#include "transport/drivers/verbs/verbs_device.h"

namespace longhaul::verbs {

class UcLink {
 public:
  struct Counters {
    uint64_t chunks_sent = 0;
    uint64_t chunk_bytes_sent = 0;
    uint64_t chunks_received = 0;
    uint64_t grant_waits = 0;       // chunks that waited for a window grant
    uint64_t idle_retirements = 0;  // OnIdle calls (the peer waited through a quiet spell)
    uint64_t send_errors = 0;
    uint64_t bad_peer_states = 0;
    uint64_t replays = 0;  // test mode (VerbsOptions::uc_replay_every)
  };

  // `id`: the link's work request id space (WrId(id, .)); its receive completions carry
  // WrId(id, 0). The sending QP lives in `send_pd` (the driver's, where its send arena is
  // registered: that domain holds no remotely writable memory).
  static absl::StatusOr<std::unique_ptr<UcLink>> Create(const VerbsDevice& dev, ibv_pd* send_pd,
                                                        ibv_cq* send_cq, ibv_cq* recv_cq,
                                                        uint32_t id, UcRingGeometry g,
                                                        uint32_t send_depth);
  ~UcLink();
  UcLink(const UcLink&) = delete;
  UcLink& operator=(const UcLink&) = delete;

  uint32_t id() const { return id_; }
  // Test mode: VerbsOptions::uc_replay_every.
  void set_replay_every(uint32_t n) { replay_every_ = n; }
  // The state to send the peer (after Create, and whenever changed() says so).
  UcLinkState LocalState(const VerbsDevice& dev) const;
  bool changed() const { return changed_; }
  void ClearChanged() { changed_ = false; }

  // The peer's latest state. Errors (a malformed or inconsistent state, a refused
  // transition) leave the link not ready; the connection goes on over UD.
  absl::Status OnPeerState(const VerbsDevice& dev, std::span<const uint8_t> bytes);

  // Chunks may be written (the peer's ring is known).
  bool ready() const { return tx_.has_value() && !failed_; }
  uint32_t piece() const { return piece_; }
  // Posts the `len` bytes at `buf` (registered under `lkey`, the driver's arena slot
  // `slot`) as the next chunk. false: no grant allows one now (nothing posted; the
  // caller keeps the buffer and calls again after the next grant). Errors: the post was
  // refused (the link is then failed: ready() is false).
  absl::StatusOr<bool> Post(const uint8_t* buf, uint32_t len, uint32_t lkey, uint32_t slot);
  // Send completions of the sending QP: the arena slots up to the signalled one are free
  // again (appended to `freed`).
  void OnSendCompletion(const ibv_wc& wc, std::vector<uint32_t>* freed);
  // Every arena slot still posted (the link is going).
  void ReleaseSlots(std::vector<uint32_t>* freed);
  bool has_inflight() const { return !posted_.empty(); }

  // A receive completion of the lane: the chunk to hand to the endpoint now, or nullopt.
  std::optional<std::span<const uint8_t>> OnReceive(const ibv_wc& wc, Time now);
  // After a batch: receives reposted, windows rebound (changed() then says to send the
  // grants); after a quiet spell while the peer waits, the oldest window retired.
  absl::Status Maintain(Time now);

  // The sender's view of waiting, sent to the peer in the state (set by Post).
  bool waiting() const { return waiting_.has_value(); }
  // The peer says its sender waits for one of this side's grants.
  bool peer_waiting() const { return peer_waiting_; }
  const Counters& counters() const { return counters_; }
  const UcReceiveLane& lane() const { return *rx_; }

 private:
  UcLink() = default;
  uint32_t id_ = 0;
  std::unique_ptr<UcReceiveLane> rx_;
  std::unique_ptr<UcQueuePair> tx_qp_;
  std::optional<UcLaneSender> tx_;
  uint64_t peer_ring_ = 0;
  uint32_t peer_slots_ = 0;
  uint32_t piece_ = 0;
  bool connected_ = false;
  bool failed_ = false;
  bool changed_ = true;
  uint64_t sent_grant_version_ = 0;
  std::optional<uint64_t> waiting_;
  bool peer_waiting_ = false;
  Time last_chunk_ = Time::Zero();
  Time last_idle_ = Time::Zero();
  std::deque<uint32_t> posted_;  // arena slots, in order
  uint32_t unsignalled_ = 0;
  uint32_t replay_every_ = 0;
  uint32_t send_depth_ = 0;
  uint32_t send_wrs_ = 0;  // work requests outstanding (pieces)
  std::deque<uint32_t> slot_wrs_;  // work requests of each posted slot
  Counters counters_;
};

}  // namespace longhaul::verbs
